"""Reading the segmented JSONL log in ``.loopx/log/``: its segments on disk, the committed
head, scans from a cursor, seeks and look-ups; the file store writes on top of it."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from loopx.kernel.errors import IntegrityError, NotFound, StorageError
from loopx.kernel.store.base import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    Cursor,
    Record,
    Store,
)
from loopx.kernel.store.lines import (
    batch_is_whole,
    checked_line,
    last_batch_end,
    parsed_line,
    segment_name,
)
from loopx.kernel.store.quarantine import kept, kept_names

READ_CHUNK = 1024 * 1024
TAIL_WINDOW = 2 * MAX_BATCH_BYTES + 2 * MAX_RECORD_BYTES


class SegmentReader(Store):
    """The read side of the segmented log, with the committed head it last found."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.dir = Path(path)
        self.log_dir = self.dir / "log"
        self._log_str = str(self.log_dir)  # the per-append stat calls skip pathlib
        self.quarantine_dir = self.dir / "quarantine"
        self._mutex = threading.Lock()
        self._cursor = Cursor()
        # The (segment, offset) a read last ended at after listing the segments (see _scan).
        self._end_listed: tuple[int, int] | None = None

    # -- layout ---------------------------------------------------------------------------

    def segments(self) -> list[int]:
        """First sequence numbers of the segments on disk, in order."""
        try:
            names = os.listdir(self._log_str)
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

    def raw_chunks(self) -> Iterator[tuple[str, int | None, Iterator[bytes]]]:
        # Piecewise, so verify holds one chunk of a segment at a time, never the log.
        try:
            firsts = self.segments()
        except OSError as exc:
            raise StorageError.from_os(exc, "read", path=self.log_dir) from None
        for first in firsts:
            yield segment_name(first), first, self._segment_chunks(first)

    def _segment_chunks(self, first: int) -> Iterator[bytes]:
        path = self.segment_path(first)
        try:
            with open(path, "rb") as f:
                while chunk := f.read(READ_CHUNK):
                    yield chunk
        except OSError as exc:
            raise StorageError.from_os(exc, "read", path=path) from None

    def segment_path(self, first_seq: int) -> Path:
        """Path of a segment by its first sequence number."""
        return self.log_dir / segment_name(first_seq)

    def _segment_file(self, first_seq: int) -> str:
        # A plain string: the reads on every write's path skip pathlib.
        return f"{self._log_str}/{segment_name(first_seq)}"

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
        last: Cursor | None = None
        while True:
            path = self._segment_file(seg)
            pending: list[tuple[Record, int, int]] = []
            buf, pos = b"", offset
            try:
                # The segment as far as it reaches now (a follower that is caught up finds
                # nothing new with this one stat); what is appended later, the next read reads.
                size = os.stat(path).st_size
                fd = os.open(path, os.O_RDONLY) if size > offset else -1
            except FileNotFoundError:
                raise IntegrityError(f"segment {segment_name(seg)} is missing", seq=seq + 1,
                                     hint="run `loopx verify`") from None
            if fd >= 0:
                try:
                    while (want := min(READ_CHUNK, size - pos - len(buf))) > 0 and (
                            chunk := os.pread(fd, want, pos + len(buf))):
                        buf += chunk
                        start = 0
                        while (nl := buf.find(b"\n", start)) >= 0:
                            record = checked_line(buf[start:nl], seq + 1, prev, pending, seg,
                                                  pos + start)
                            seq, prev = record["seq"], record["hash"]
                            if seq != record["batch_end"]:
                                pending.append((record, pos + start, pos + nl + 1))
                            elif not pending:  # a batch of one, the common case
                                last = Cursor(seq, prev, record["ts"],
                                              (seg, pos + nl + 1, pos + start))
                                yield record, last
                            else:
                                pending.append((record, pos + start, pos + nl + 1))
                                for rec, line_start, line_end in pending:
                                    last = Cursor(rec["seq"], rec["hash"], rec["ts"],
                                                  (seg, line_end, line_start))
                                    yield rec, last
                                pending = []
                            start = nl + 1
                        pos += start
                        buf = buf[start:]
                finally:
                    os.close(fd)
            if pending or buf:
                return  # a write in progress, or a torn tail awaiting the next lock holder
            if seq + 1 == seg:
                return
            if not os.path.exists(self._segment_file(seq + 1)):
                # Segments are named by their first seq, so a later one without seq + 1 means
                # one is missing. Listed once per end reached: where a previous read found the
                # same end, or where this store's last head check or append left the head, the
                # log has not moved since (only seq + 1 may appear next).
                end = (seg, pos)
                if end != self._end_listed and end != self._cursor.position[:2] and any(
                        first > seq + 1 for first in self.segments()):
                    raise IntegrityError(f"segment {segment_name(seq + 1)} is missing: later "
                                         "segments exist", seq=seq + 1,
                                         hint="run `loopx verify`")
                self._end_listed = end
                if last is not None and last.seq > self._cursor.seq:
                    # The committed head as this read found it: the next append's head check
                    # then reads nothing when no other writer came in between.
                    self._cursor = last
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
            seg, end = known.position[0], known.position[1]
            log = self._log_str
            size = self._segment_size(seg)
            if size == end:
                # Nothing new if our segment has not grown and no segment follows it.
                if not os.path.exists(f"{log}/{segment_name(known.seq + 1)}"):
                    return known, seg, end
            elif end < size <= end + TAIL_WINDOW:
                # Other writers appended since: read just their bytes (no listing, no window
                # search). The head is the last batch end in them, or still ours if they hold
                # only an unfinished write; either way, only if no segment follows it.
                found = last_batch_end(self._pread(seg, end, size), end, seg,
                                       starts_at_line=True) or known
                if not os.path.exists(f"{log}/{segment_name(found.seq + 1)}"):
                    self._cursor = found
                    return found, seg, found.position[1]
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

    def _segment_size(self, seg: int) -> int:
        """The size of segment ``seg`` now, -1 if it is gone."""
        try:
            return os.stat(f"{self._log_str}/{segment_name(seg)}").st_size
        except FileNotFoundError:
            return -1

    def _pread(self, seg: int, start: int, end: int) -> bytes:
        """Bytes ``start:end`` of segment ``seg``."""
        with open(self.segment_path(seg), "rb", buffering=0) as f:
            return os.pread(f.fileno(), end - start, start)

    def _last_committed(self, seg: int) -> Cursor | None:
        """The last record of ``seg`` that ends a batch, reading backwards from its end."""
        fd = os.open(self._segment_file(seg), os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            window = min(size, 16 * 1024)
            while True:
                base = size - window
                found = last_batch_end(os.pread(fd, window, base), base, seg)
                if found is not None or base == 0:
                    return found
                if window >= TAIL_WINDOW:
                    raise IntegrityError(
                        f"segment {segment_name(seg)}: no committed record in its last "
                        f"{TAIL_WINDOW} bytes", hint="run `loopx verify`")
                window = min(size, window * 4)
        finally:
            os.close(fd)

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

    def read_quarantine(self, name: str) -> bytes | None:
        """The bytes of quarantine file ``name``, or None if there is none (for verify)."""
        return kept(self.quarantine_dir, name)

    def quarantine_names(self) -> list[str]:
        """The names of the files in ``quarantine/`` that hold torn tails."""
        return kept_names(self.quarantine_dir)
