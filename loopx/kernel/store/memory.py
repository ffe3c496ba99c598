"""In-memory backend: the same semantics as the file store, for tests and one-process use."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence

from loopx.kernel.canonical import now_ts
from loopx.kernel.errors import ConflictError, NotFound
from loopx.kernel.store.base import (
    BatchBuilder,
    Clock,
    Cursor,
    Encoded,
    Record,
    Store,
    batch_ts,
    seal,
)


class MemoryStore(Store):
    """Stored lines in a list; a thread lock stands in for the file lock."""

    def __init__(self, *, clock: Clock = now_ts) -> None:
        self._lines: list[bytes] = []
        self._lock = threading.Lock()
        self._clock = clock

    def read(self, after: Cursor | None = None) -> Iterator[tuple[Record, Cursor]]:
        start = after.seq if after else 0
        for index in range(start, len(self._lines)):
            record = json.loads(self._lines[index])
            yield record, Cursor(record["seq"], record["hash"], record["ts"], (index + 1,))

    def head(self) -> Cursor:
        if not self._lines:
            return Cursor()
        record = json.loads(self._lines[-1])
        return Cursor(record["seq"], record["hash"], record["ts"], (len(self._lines),))

    def append(self, batch: Sequence[Record | Encoded] | BatchBuilder, *,
               expect_seq: int | None = None) -> list[Record]:
        with self._lock:
            head = self.head()
            if expect_seq is not None and head.seq != expect_seq:
                raise ConflictError(
                    f"log is at seq {head.seq}, not the expected {expect_seq}",
                    hint="re-read the log and retry")
            now = batch_ts(head, self._clock())
            records = batch(head, now) if callable(batch) else batch
            if not records:
                return []
            sealed = seal([records], head, now)
            self._lines.extend(sealed.data.splitlines(keepends=True))
            return sealed.records

    def seek(self, seq: int) -> Cursor:
        if seq == 0:
            return Cursor()
        if not 0 < seq <= len(self._lines):
            raise NotFound(f"the log has no record with seq {seq}")
        record = json.loads(self._lines[seq - 1])
        return Cursor(record["seq"], record["hash"], record["ts"], (seq,))

    def cursor_matches(self, cursor: Cursor) -> bool:
        if cursor.seq == 0:
            return True
        if cursor.seq > len(self._lines):
            return False
        return json.loads(self._lines[cursor.seq - 1])["hash"] == cursor.hash

    def raw_segments(self) -> Iterator[tuple[str, int | None, bytes]]:
        yield "memory", None, b"".join(self._lines)

    def lines(self) -> list[bytes]:
        """The stored lines, as the file backend would hold them (for verify and tests)."""
        return list(self._lines)
