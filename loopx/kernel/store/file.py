"""The embedded default backend: a segmented JSONL log in ``.loopx/log/`` guarded by a file lock.

Layout: ``log/<first seq, 12 digits>.jsonl`` segments, ``lock`` for writers, ``quarantine/`` for
torn tails. An append holds the lock only to catch up, seal and write; the fsync that makes it
durable runs after the release, so concurrent writers' syncs commit together. The caller is told
the records are stored only once that fsync has returned.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from filelock import FileLock, Timeout

from loopx.kernel.canonical import now_ts, sha256_hex
from loopx.kernel.errors import (
    ConflictError,
    IntegrityError,
    LockTimeout,
    NotFound,
    StorageError,
)
from loopx.kernel.store.base import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    BatchBuilder,
    Clock,
    Cursor,
    Encoded,
    Record,
    Store,
    encode,
    seal,
)
from loopx.kernel.store.clock import (
    AnchorFile,
    clock_record,
    host_monotonic,
    skew_setting,
    stamp,
)
from loopx.kernel.store.fs import fault, fsync_dir, write_all
from loopx.kernel.store.lines import (
    batch_is_whole,
    checked_line,
    last_batch_end,
    parsed_line,
    segment_name,
)
from loopx.kernel.store.quarantine import (
    keep,
    kept,
    kept_names,
    quarantine_name,
    repair_record,
)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
READ_CHUNK = 1024 * 1024
TAIL_WINDOW = 2 * MAX_BATCH_BYTES + 2 * MAX_RECORD_BYTES


class FileStore(Store):
    """Segmented JSONL log. One instance per thread of use; any number of processes."""

    def __init__(self, path: str | os.PathLike[str], *,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES, lock_timeout: float = 60.0,
                 poll_interval: float = 0.001, clock: Clock = now_ts, durable: bool = True) -> None:
        self.dir = Path(path)
        self.log_dir = self.dir / "log"
        self._log_str = str(self.log_dir)  # the per-append stat calls skip pathlib
        self.quarantine_dir = self.dir / "quarantine"
        self.segment_bytes = segment_bytes
        self.durable = durable
        self._clock = clock
        # A 1 ms poll keeps waiters fair under contention; filelock's 50 ms default does not.
        self._lock = FileLock(self.dir / "lock", timeout=lock_timeout, poll_interval=poll_interval,
                              thread_local=False, preserve_lock_file=True)
        self._mutex = threading.Lock()
        self._cursor = Cursor()
        self._fd: int | None = None
        self._fd_segment: int | None = None
        self._anchor = AnchorFile(self.dir / "clock")
        self._skew_bound: float | None = None

    def now(self) -> str:
        """The time an append made now would get, before the never-go-back rule: the wall
        clock, held inside the host's monotonic envelope (:mod:`loopx.kernel.store.clock`)."""
        return stamp(self._anchor.read(), None, self._clock(), host_monotonic(),
                     self.skew_bound()).ts

    def skew_bound(self) -> float:
        """The workspace's ``max_clock_skew_seconds`` (``.loopx/workspace.json``), else 60.

        Raises:
            WorkspaceError: the setting is there but not a positive number.
        """
        if self._skew_bound is None:
            self._skew_bound = skew_setting(self.dir / "workspace.json")
        return self._skew_bound

    # -- layout ---------------------------------------------------------------------------

    def create(self) -> None:
        """Create the directories and the first segment (idempotent), durably."""
        for d in (self.dir, self.log_dir, self.quarantine_dir):
            d.mkdir(parents=True, exist_ok=True)
        first = self.log_dir / segment_name(1)
        if not first.exists() and not self.segments():
            os.close(os.open(first, os.O_CREAT | os.O_WRONLY, 0o644))
        fsync_dir(self.log_dir)
        fsync_dir(self.dir)
        fsync_dir(self.dir.parent)

    def segments(self) -> list[int]:
        """First sequence numbers of the segments on disk, in order."""
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        return sorted(int(n[:-6]) for n in names if n.endswith(".jsonl") and n[:-6].isdigit())

    def raw_segments(self) -> Iterator[tuple[str, int | None, bytes]]:
        try:
            firsts = self.segments()
        except OSError as exc:
            raise StorageError.from_os(exc, "read", path=self.log_dir) from None
        for first in firsts:
            path = self.segment_path(first)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise StorageError.from_os(exc, "read", path=path) from None
            yield segment_name(first), first, data

    def segment_path(self, first_seq: int) -> Path:
        """Path of a segment by its first sequence number."""
        return self.log_dir / segment_name(first_seq)

    # -- reading --------------------------------------------------------------------------

    def read(self, after: Cursor | None = None) -> Iterator[tuple[Record, Cursor]]:
        resume = after or Cursor()
        for attempt in range(3):
            try:
                for record, cursor in self._scan(resume):
                    yield record, cursor
                    resume = cursor
                return
            except IntegrityError:
                # A lock holder may have just replaced a torn tail this reader was reading;
                # rescan from the last committed record before calling it corruption.
                if attempt == 2:
                    raise
                time.sleep(0.01)
            except OSError as exc:
                raise StorageError.from_os(exc, "read", path=exc.filename or self.log_dir) \
                    from None

    def _scan(self, cursor: Cursor) -> Iterator[tuple[Record, Cursor]]:
        if cursor.position:
            seg, offset = cursor.position[0], cursor.position[1]
        else:
            segs = self.segments()
            if not segs:
                return
            seg, offset = segs[0], 0
        seq, prev = cursor.seq, cursor.hash
        while True:
            try:
                f = open(self.segment_path(seg), "rb")
            except FileNotFoundError:
                raise IntegrityError(f"segment {segment_name(seg)} is missing", seq=seq + 1,
                                     hint="run `loopx verify`") from None
            with f:
                f.seek(offset)
                pending: list[tuple[Record, int, int]] = []
                buf, pos = b"", offset
                while chunk := f.read(READ_CHUNK):
                    buf += chunk
                    start = 0
                    while (nl := buf.find(b"\n", start)) >= 0:
                        record = checked_line(buf[start:nl], seq + 1, prev, pending, seg, pos + start)
                        pending.append((record, pos + start, pos + nl + 1))
                        seq, prev = record["seq"], record["hash"]
                        if seq == record["batch_end"]:
                            for rec, line_start, line_end in pending:
                                yield rec, Cursor(rec["seq"], rec["hash"], rec["ts"],
                                                  (seg, line_end, line_start))
                            pending = []
                        start = nl + 1
                    pos += start
                    buf = buf[start:]
            if pending or buf:
                return  # a write in progress, or a torn tail awaiting the next lock holder
            if seq + 1 == seg:
                return
            if not os.path.exists(self.segment_path(seq + 1)):
                if any(first > seq + 1 for first in self.segments()):
                    raise IntegrityError(f"segment {segment_name(seq + 1)} is missing: later "
                                         "segments exist", seq=seq + 1,
                                         hint="run `loopx verify`")
                return
            seg, offset = seq + 1, 0

    def head(self) -> Cursor:
        with self._mutex:
            for attempt in range(3):
                try:
                    return self._find_head()[0]
                except IntegrityError:
                    if attempt == 2:  # see read(): a repair may have raced this look
                        raise
                    time.sleep(0.01)
                except OSError as exc:
                    raise StorageError.from_os(exc, "read", path=exc.filename or self.log_dir) \
                        from None
            raise AssertionError("unreachable")

    def _find_head(self) -> tuple[Cursor, int | None, int]:
        """The committed head, the segment appends go to, and where its committed bytes end.

        Reads only the end of the log: the bytes after the committed head are at most one
        unfinished write, so a window of two batch limits always reaches the head's line.
        """
        known = self._cursor
        if known.position:
            # Nothing new if our segment has not grown and no segment follows it.
            seg, end = known.position[0], known.position[1]
            log = self._log_str
            try:
                unchanged = os.stat(f"{log}/{segment_name(seg)}").st_size == end
            except FileNotFoundError:
                unchanged = False
            if unchanged and not os.path.exists(f"{log}/{segment_name(known.seq + 1)}"):
                return known, seg, end
        segs = self.segments()
        if not segs:
            return Cursor(), None, 0
        last = segs[-1]
        for index in range(len(segs) - 1, -1, -1):
            head = self._last_committed(segs[index])
            if head is None:
                continue
            if index == len(segs) - 1:
                self._cursor = head
                return head, last, head.position[1]
            # Later segments hold no committed record: a writer died just after rolling over.
            if index != len(segs) - 2 or last != head.seq + 1:
                raise IntegrityError(f"segment {segment_name(last)} does not follow seq "
                                     f"{head.seq}", seq=head.seq + 1, hint="run `loopx verify`")
            self._cursor = head
            return head, last, 0
        if len(segs) > 1:
            raise IntegrityError("no committed record in any segment but there are several",
                                 seq=1, hint="run `loopx verify`")
        return Cursor(), last, 0

    def _last_committed(self, seg: int) -> Cursor | None:
        """The last record of ``seg`` that ends a batch, reading backwards from its end."""
        with open(self.segment_path(seg), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            window = min(size, 16 * 1024)
            while True:
                base = size - window
                f.seek(base)
                found = last_batch_end(f.read(window), base, seg)
                if found is not None or base == 0:
                    return found
                if window >= TAIL_WINDOW:
                    raise IntegrityError(
                        f"segment {segment_name(seg)}: no committed record in its last "
                        f"{TAIL_WINDOW} bytes", hint="run `loopx verify`")
                window = min(size, window * 4)

    def seek(self, seq: int) -> Cursor:
        if seq == 0:
            return Cursor()
        candidates = [first for first in self.segments() if first <= seq]
        if seq < 1 or not candidates:
            raise NotFound(f"the log has no record with seq {seq}")
        seg = candidates[-1]
        data = self.segment_path(seg).read_bytes()
        offset = 0
        while (end := data.find(b"\n", offset)) >= 0:
            record = parsed_line(data[offset:end], seg, offset)
            if record["seq"] == seq and batch_is_whole(data, end + 1, record):
                return Cursor(seq, record["hash"], record["ts"], (seg, end + 1, offset))
            offset = end + 1
        raise NotFound(f"the log has no committed record with seq {seq}")

    def find(self, record_id: str) -> Record:
        # A byte search per segment instead of parsing every line: quotes inside JSON strings
        # are escaped, so the needle only matches a real key (checked after parsing anyway).
        needle = b'"record_id":' + json.dumps(record_id).encode()
        for first in self.segments():
            data = self.segment_path(first).read_bytes()
            at = data.find(needle)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                if end < 0:
                    break
                record = parsed_line(data[start:end], first, start)
                if record.get("record_id") == record_id and batch_is_whole(data, end + 1, record):
                    return record
                at = data.find(needle, end)
        raise NotFound(f"no record with id {record_id!r}")

    def cursor_matches(self, cursor: Cursor) -> bool:
        if cursor.seq == 0:
            return not cursor.position
        if len(cursor.position) != 3:
            return False
        seg, end, start = cursor.position
        try:
            with open(self.segment_path(seg), "rb") as f:
                f.seek(start)
                line = f.read(end - start)
        except (FileNotFoundError, ValueError, OSError):
            return False
        if not line.endswith(b"\n"):
            return False
        try:
            record = json.loads(line)
        except ValueError:
            return False
        return (isinstance(record, dict) and record.get("seq") == cursor.seq
                and record.get("hash") == cursor.hash)

    # -- writing --------------------------------------------------------------------------

    def append(self, batch: Sequence[Record | Encoded] | BatchBuilder, *,
               expect_seq: int | None = None) -> list[Record]:
        """See :meth:`Store.append`; also raises StorageError when the filesystem refuses
        (read-only, full, not permitted), with nothing acknowledged."""
        if not callable(batch):
            batch = [encode(record) for record in batch]  # serialize before taking the lock
        with self._mutex:
            try:
                self._lock.acquire()
            except Timeout:
                raise LockTimeout(
                    f"could not take the store lock {self._lock.lock_file} in time",
                    hint="another writer may be stuck; check for hung loopx processes") from None
            except OSError as exc:
                raise StorageError.from_os(exc, "take the store lock", path=self._lock.lock_file,
                                           outcome="nothing was written") from None
            try:
                fd, records, sealed = self._append_locked(batch, expect_seq)
            except OSError as exc:
                raise StorageError.from_os(exc, "write the log at", path=exc.filename or self.dir,
                                           outcome="nothing was written") from None
            finally:
                self._lock.release()
            if records and self.durable:
                try:
                    os.fdatasync(fd)
                except OSError as exc:
                    raise StorageError.from_os(
                        exc, "sync", path=self.segment_path(self._cursor.position[0]),
                        outcome="the batch was written but the disk did not confirm it, so it "
                                "may be lost in a crash: check with `loopx log`") from None
            return sealed[: len(records)]

    def _append_locked(self, batch: Sequence[Record | Encoded] | BatchBuilder,
                       expect_seq: int | None
                       ) -> tuple[int, Sequence[Record | Encoded], list[Record]]:
        head, seg, committed_end = self._find_head()
        if expect_seq is not None and head.seq != expect_seq:
            raise ConflictError(f"log is at seq {head.seq}, not the expected {expect_seq}",
                                hint="re-read the log and retry")
        stamped = stamp(self._anchor.read(), head.ts, self._clock(), host_monotonic(),
                        self.skew_bound())
        now = stamped.ts
        records = batch(head, now) if callable(batch) else batch
        if not records:
            return -1, records, []
        if seg is None:
            self.create()
            seg = 1
        fd = self._open_segment(seg)
        size = os.fstat(fd).st_size
        batches: list[Sequence[Record | Encoded]] = [records]
        torn = b""
        if size > committed_end:
            torn = self._read_range(seg, committed_end, size)
            first = records[0]
            goal_id = (first.record if isinstance(first, Encoded) else first)["goal_id"]
            batches.append([repair_record(segment_name(seg), committed_end, torn, goal_id)])
        if stamped.flag is not None:
            batches.append([clock_record(stamped.flag, records[0])])
        sealed = seal(batches, head, now)  # may refuse the batch: nothing touched yet
        if torn:
            self._quarantine(seg, fd, committed_end, torn)
            size = committed_end
        if size > 0 and size + len(sealed.data) > self.segment_bytes:
            os.fsync(fd)  # the old segment is whole on disk before the next one exists
            seg, size = head.seq + 1, 0
            fd = self._open_segment(seg, create=True)
        try:
            write_all(fd, sealed.data, "segment")
        except OSError as exc:
            self._take_back(fd, size)
            raise StorageError.from_os(exc, "write to", path=self.segment_path(seg),
                                       outcome="nothing was written") from None
        if stamped.anchor is not None:
            try:
                self._anchor.write(stamped.anchor)
            except OSError:
                pass  # the anchor only guards the next append's clock; the batch is written
        end = size + len(sealed.data)
        self._cursor = Cursor(sealed.head_seq, sealed.head_hash, sealed.head_ts,
                              (seg, end, end - sealed.last_line_length))
        return fd, records, sealed.records

    def _open_segment(self, seg: int, *, create: bool = False) -> int:
        if self._fd_segment == seg and self._fd is not None:
            return self._fd
        flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(self.segment_path(seg), flags, 0o644)
        if create:
            fsync_dir(self.log_dir)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._fd_segment = fd, seg
        return fd

    def _read_range(self, seg: int, start: int, end: int) -> bytes:
        with open(self.segment_path(seg), "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def _quarantine(self, seg: int, fd: int, start: int, torn: bytes) -> None:
        """Keep a torn tail in quarantine, whole and durable, and only then cut it off."""
        name = quarantine_name(segment_name(seg), start, sha256_hex(torn))
        try:
            keep(self.quarantine_dir, name, torn)
        except OSError as exc:
            raise StorageError.from_os(exc, "keep a torn tail in",
                                       path=self.quarantine_dir / name,
                                       outcome="nothing was written") from None
        os.ftruncate(fd, start)
        os.fsync(fd)
        fault("repair-truncated")

    @staticmethod
    def _take_back(fd: int, size: int) -> None:
        """Cut off what part of a failed write reached the segment (it was never committed)."""
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass  # left as a torn tail: invisible to readers, quarantined by the next writer

    def read_quarantine(self, name: str) -> bytes | None:
        """The bytes of quarantine file ``name``, or None if there is none (for verify)."""
        return kept(self.quarantine_dir, name)

    def quarantine_names(self) -> list[str]:
        """The names of the files in ``quarantine/`` that hold torn tails."""
        return kept_names(self.quarantine_dir)

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None:
                os.close(self._fd)
                self._fd, self._fd_segment = None, None
            self._anchor.close()
