"""The embedded default backend: a segmented JSONL log in ``.loopx/log/`` guarded by a file lock.

Layout: ``log/<first seq, 12 digits>.jsonl`` segments, ``lock`` for writers, ``quarantine/`` for
torn tails. An append holds the lock only to catch up, seal and write; the fsync that makes it
durable runs after the release, so concurrent writers' syncs commit together. The caller is told
the records are stored only once that fsync has returned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from loopx.kernel.canonical import now_ts, sha256_hex
from loopx.kernel.errors import ConflictError, LockTimeout, StorageError
from loopx.kernel.store.base import (
    BatchBuilder,
    Clock,
    Cursor,
    Encoded,
    Record,
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
from loopx.kernel.store.fs import fault, fsync_dir, replace_file, write_all
from loopx.kernel.store.lines import segment_name
from loopx.kernel.store.lock import FileLockPath, LockTimeoutExpired
from loopx.kernel.store.moved import Moved, moved_refusal
from loopx.kernel.store.quarantine import keep, quarantine_name, repair_record
from loopx.kernel.store.segment_reader import SegmentReader

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
# In the log directory once the log has moved to another store (``loopx store copy --use``):
# where to, and the head both sides shared. Every append looks for it under the lock, so a
# process that opened the log before the move cannot go on writing where nobody reads.
MOVED = "moved.json"


class FileStore(SegmentReader):
    """Segmented JSONL log. One instance per thread of use; any number of processes."""

    def __init__(self, path: str | os.PathLike[str], *,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES, lock_timeout: float = 60.0,
                 clock: Clock = now_ts, durable: bool = True) -> None:
        super().__init__(path)
        self.segment_bytes = segment_bytes
        self.durable = durable
        self._clock = clock
        # Waiters queue in the kernel (a blocking flock), not in a poll loop: loopx.kernel.store.lock.
        self._lock = FileLockPath(self.dir / "lock", lock_timeout)
        self._fd: int | None = None
        self._fd_segment: int | None = None
        self._anchor = AnchorFile(self.dir / "clock")
        self._skew_bound: float | None = None
        self._seen: tuple[int, int] | None = None  # (segment, size) the head search saw
        self._moved = f"{self.log_dir}/{MOVED}"

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


    # -- writing --------------------------------------------------------------------------

    def append(self, batch: Sequence[Record | Encoded] | BatchBuilder, *,
               expect_seq: int | None = None) -> list[Record]:
        """See :meth:`Store.append`; also raises StorageError when the filesystem refuses
        (read-only, full, not permitted), with nothing acknowledged."""
        if not callable(batch):
            batch = [encode(record) for record in batch]  # serialize before taking the lock
        with self._mutex:
            self._take_lock()
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

    def _take_lock(self) -> None:
        """Take the writer lock (the caller holds the in-process mutex and releases it)."""
        try:
            self._lock.acquire()
        except LockTimeoutExpired:
            raise LockTimeout(
                f"could not take the store lock {self._lock.path} within "
                f"{self._lock.timeout:g} s",
                hint="another writer may be stuck; check for hung loopx processes") from None
        except OSError as exc:
            raise StorageError.from_os(exc, "take the store lock", path=self._lock.path,
                                       outcome="nothing was written") from None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the writer lock, for a bulk load that writes whole sealed batches itself."""
        with self._mutex:
            self._take_lock()
            try:
                yield
            finally:
                self._lock.release()

    def mark_moved(self, to: str, head: Cursor) -> None:
        """Refuse every later append: the log now lives at ``to`` (shown to writers, so no
        password), from ``head`` on. Call it holding :meth:`locked`."""
        data = json.dumps({"to": to, "seq": head.seq, "hash": head.hash}, sort_keys=True)
        replace_file(Path(self._moved), (data + "\n").encode())

    def moved(self) -> Moved | None:
        """The mark :meth:`mark_moved` left, if any (its fields None where unreadable)."""
        try:
            fd = os.open(self._moved, os.O_RDONLY)  # one failing open: the common case
        except FileNotFoundError:
            return None
        except OSError:
            return Moved(None, None, None)
        try:
            mark = json.loads(os.read(fd, 65536))
        except (OSError, ValueError):
            mark = {}
        finally:
            os.close(fd)
        if not isinstance(mark, dict):
            mark = {}
        return Moved(mark.get("to"), mark.get("seq"), mark.get("hash"))

    def _append_locked(self, batch: Sequence[Record | Encoded] | BatchBuilder,
                       expect_seq: int | None
                       ) -> tuple[int, Sequence[Record | Encoded], list[Record]]:
        self._seen = None
        moved = self.moved()
        if moved is not None:
            raise moved_refusal(moved)
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
        # Under the lock nobody writes: the size the head search found is still the size.
        size = self._seen[1] if self._seen is not None and self._seen[0] == seg \
            else os.fstat(fd).st_size
        batches: list[Sequence[Record | Encoded]] = [records]
        torn = b""
        if size > committed_end:
            torn = self._pread(seg, committed_end, size)
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
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(self.segment_path(seg), flags, 0o644)
        if create:
            fsync_dir(self.log_dir)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._fd_segment = fd, seg
        return fd

    def _segment_size(self, seg: int) -> int:
        if self._fd_segment == seg and self._fd is not None:
            size = os.fstat(self._fd).st_size  # the segment this store appends to, held open
            self._seen = (seg, size)
            return size
        return super()._segment_size(seg)

    def _pread(self, seg: int, start: int, end: int) -> bytes:
        if self._fd_segment == seg and self._fd is not None:
            return os.pread(self._fd, end - start, start)  # the append descriptor reads too
        return super()._pread(seg, start, end)

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

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None:
                os.close(self._fd)
                self._fd, self._fd_segment = None, None
            self._anchor.close()
            self._lock.close()
