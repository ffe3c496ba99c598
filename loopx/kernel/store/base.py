"""The store interface every backend implements, and the sealing step they all share.

A store holds one append-only sequence of records. It reads from a cursor without locking and
appends a batch atomically, assigning ``seq``, ``ts``, ``batch_end``, ``prev_hash`` and ``hash``
under its lock. Backends differ only in where the bytes live.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from loopx.kernel.canonical import GENESIS_HASH, dumps, dumps_value, sha256_hex
from loopx.kernel.errors import FieldProblem, NotFound, RecordRejected
from loopx.kernel.plain import Frozen, Value
from loopx.kernel.store.moved import Moved

MAX_RECORD_BYTES = 64 * 1024
MAX_BATCH_BYTES = 1024 * 1024

Record = dict[str, Any]
BatchBuilder = Callable[["Cursor", str], Sequence["Record | Encoded"]]
Clock = Callable[[], str]


class Cursor(Frozen):
    """A committed position: the last record's seq, hash and ts, plus a backend-specific place.

    ``position`` is opaque outside the backend that made it (the file store keeps segment,
    byte offset after the record, and the offset where the record's line starts).
    """

    _fields = ("seq", "hash", "ts", "position")
    seq: int
    hash: str
    ts: str | None
    position: tuple[int, ...]

    def __init__(self, seq: int = 0, hash: str = GENESIS_HASH, ts: str | None = None,
                 position: tuple[int, ...] = ()) -> None:
        self.__dict__.update(seq=seq, hash=hash, ts=ts, position=position)

    def to_json(self) -> dict[str, Any]:
        """Plain data for checkpoints and ``--json`` output."""
        return {"seq": self.seq, "hash": self.hash, "ts": self.ts, "position": list(self.position)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cursor:
        """Inverse of :meth:`to_json`; raises KeyError or TypeError on malformed data."""
        position = tuple(int(p) for p in data["position"])
        ts = data["ts"]
        if ts is not None and not isinstance(ts, str):
            raise TypeError("ts must be a string")
        return cls(seq=int(data["seq"]), hash=str(data["hash"]), ts=ts, position=position)


STORE_SLOTS = frozenset({"batch_end", "hash", "prev_hash", "seq", "ts"})


class Encoded(Value):
    """A record serialized ahead of the lock: its canonical ``"key":value`` items in key order,
    with empty slots where the store fields go. Sealing under the lock fills the slots, hashes
    and joins; the result is byte for byte ``canonical.dumps`` of the sealed record."""

    __slots__ = ("items", "record", "slots")
    _fields = ("record", "items", "slots")
    record: Record
    items: tuple[bytes, ...]
    slots: dict[str, int]

    def __init__(self, record: Record, items: tuple[bytes, ...], slots: dict[str, int]) -> None:
        self.record = record
        self.items = items
        self.slots = slots


def encode(record: Record | Encoded) -> Encoded:
    """Serialize a record's values once, ahead of the lock.

    Raises:
        RecordRejected: a value is not canonical JSON (NaN, a non-JSON type).
    """
    if isinstance(record, Encoded):
        return record
    shape = tuple(record)
    layout = _LAYOUTS.get(shape)
    if layout is None:
        layout = _LAYOUTS.setdefault(shape, _layout(shape))
    keys, prefixes, slots = layout
    items: list[bytes] = []
    try:
        for key, prefix in zip(keys, prefixes, strict=True):
            items.append(b"" if key is None else prefix + dumps_value(record[key]))
    except (TypeError, ValueError) as exc:
        raise RecordRejected([FieldProblem("record", f"not canonical JSON: {exc}")]) from None
    return Encoded(record, tuple(items), slots)


# Records of one kind share their key set, so the sorted order and slot positions are computed
# once per set of keys rather than once per record.
_LAYOUTS: dict[tuple[str, ...], tuple[list[str | None], list[bytes], dict[str, int]]] = {}


def _layout(shape: tuple[str, ...]) -> tuple[list[str | None], list[bytes], dict[str, int]]:
    keys: list[str | None] = []
    prefixes: list[bytes] = []
    slots: dict[str, int] = {}
    for key in sorted(STORE_SLOTS.union(shape)):
        if key in STORE_SLOTS:
            slots[key] = len(keys)
            keys.append(None)
            prefixes.append(b"")
        else:
            keys.append(key)
            prefixes.append(dumps(key) + b":")
    return keys, prefixes, slots


class Sealed(Frozen):
    """Records sealed for one commit: the dicts, their stored lines, and the head after them."""

    _fields = ("records", "data", "last_line_length", "head_seq", "head_hash", "head_ts")
    records: list[Record]
    data: bytes
    last_line_length: int
    head_seq: int
    head_hash: str
    head_ts: str

    def __init__(self, records: list[Record], data: bytes, last_line_length: int,
                 head_seq: int, head_hash: str, head_ts: str) -> None:
        self.__dict__.update(records=records, data=data, last_line_length=last_line_length,
                             head_seq=head_seq, head_hash=head_hash, head_ts=head_ts)


def batch_ts(head: Cursor, now: str) -> str:
    """The ``ts`` a batch committed after ``head`` gets: the clock, never earlier than the head."""
    return now if head.ts is None or now > head.ts else head.ts


def seal(batches: Sequence[Sequence[Record | Encoded]], head: Cursor, now: str) -> Sealed:
    """Assign store fields to one or more batches committed together; check the size limits.

    Raises:
        RecordRejected: a record over 64 KiB or a batch over 1 MiB; nothing is written.
    """
    ts = batch_ts(head, now)
    ts_item = b'"ts":' + dumps(ts)
    seq, prev = head.seq, head.hash
    out: list[Record] = []
    chunks: list[bytes] = []
    line = b""
    for batch in batches:
        end = seq + len(batch)
        end_item = b'"batch_end":%d' % end
        size = 0
        for i, item in enumerate(batch):
            encoded = encode(item)
            seq += 1
            items = list(encoded.items)
            slots = encoded.slots
            items[slots["seq"]] = b'"seq":%d' % seq
            items[slots["ts"]] = ts_item
            items[slots["batch_end"]] = end_item
            items[slots["prev_hash"]] = b'"prev_hash":"' + prev.encode() + b'"'
            at = slots["hash"]
            digest = sha256_hex(b"{" + b",".join(items[:at] + items[at + 1:]) + b"}")
            items[at] = b'"hash":"' + digest.encode() + b'"'
            line = b"{" + b",".join(items) + b"}\n"
            if len(line) - 1 > MAX_RECORD_BYTES:
                raise RecordRejected([FieldProblem(
                    f"[{i}]", f"record is {len(line) - 1} bytes; the limit is {MAX_RECORD_BYTES}"
                    " (reference large artifacts by path and sha256)")])
            size += len(line)
            record = dict(encoded.record)
            record.update(seq=seq, ts=ts, batch_end=end, prev_hash=prev, hash=digest)
            prev = digest
            out.append(record)
            chunks.append(line)
        if size > MAX_BATCH_BYTES:
            raise RecordRejected([FieldProblem(
                "batch", f"batch is {size} bytes; the limit is {MAX_BATCH_BYTES}")])
    return Sealed(out, b"".join(chunks), len(line), seq, prev, ts)


class Store(ABC):
    """One append-only, hash-chained sequence of records."""

    @abstractmethod
    def read(self, after: Cursor | None = None) -> Iterator[tuple[Record, Cursor]]:
        """Yield committed records after ``after`` (from the start when None), each with the
        cursor just past it. Takes no lock; stops at the last complete batch.

        Raises:
            IntegrityError: the log is corrupt between ``after`` and its committed end.
        """

    @abstractmethod
    def append(self, batch: Sequence[Record | Encoded] | BatchBuilder, *,
               expect_seq: int | None = None) -> list[Record]:
        """Commit one batch atomically and durably; return the sealed records.

        ``batch`` is either unsealed records or a function of the committed head and the ``ts``
        the batch will carry, called under the lock, that returns them (so checks against
        current state and the store's time, and the write, are one step). With ``expect_seq``, commit only if the head is still at that sequence number.

        Raises:
            ConflictError: the head moved past ``expect_seq``.
            RecordRejected: a size limit was exceeded.
            LockTimeout: the lock could not be taken in time.
        """

    @abstractmethod
    def head(self) -> Cursor:
        """The last committed position, found from the end of the log (no lock taken)."""

    @abstractmethod
    def seek(self, seq: int) -> Cursor:
        """The cursor just past record ``seq`` (``Cursor()`` for 0), for reading from there.

        Raises:
            NotFound: the log has no record ``seq``.
        """

    @abstractmethod
    def cursor_matches(self, cursor: Cursor) -> bool:
        """Whether ``cursor`` names a record that is in this log with that seq and hash."""

    @abstractmethod
    def raw_segments(self) -> Iterator[tuple[str, int | None, bytes]]:
        """The stored bytes as (name, first seq or None, bytes) per segment, in log order,
        unparsed, for ``verify``."""

    def raw_chunks(self) -> Iterator[tuple[str, int | None, Iterator[bytes]]]:
        """As :meth:`raw_segments`, each segment's bytes as an iterator of chunks, consumed
        before the next segment is asked for: ``verify`` streams them. This default gives each
        segment as one chunk; a store that can read a segment piecewise overrides it."""
        for name, first, data in self.raw_segments():
            yield name, first, iter((data,))

    def now(self) -> str:
        """The store's clock reading (what an append made now would be stamped with, before
        the never-go-back rule); queries use it so tests and writes share one clock."""
        from loopx.kernel.canonical import now_ts

        clock = getattr(self, "_clock", None)
        return clock() if clock is not None else now_ts()

    def get(self, seq: int) -> Record:
        """The committed record with ``seq``.

        Raises:
            NotFound: there is none.
        """
        if seq < 1:
            raise NotFound(f"the log has no record with seq {seq}")
        try:
            start = self.seek(seq - 1) if seq > 1 else None
        except NotFound:
            pass
        else:
            for record, _ in self.read(start):
                return record
        raise NotFound(f"the log has no record with seq {seq}")

    def find(self, record_id: str) -> Record:
        """The committed record with ``record_id``.

        Raises:
            NotFound: there is none.
        """
        for record, _ in self.read():
            if record["record_id"] == record_id:
                return record
        raise NotFound(f"no record with id {record_id!r}")

    def wait(self, after_seq: int, timeout: float, *,
             stop: Callable[[], bool] | None = None) -> bool:
        """Block until the head is past ``after_seq`` (True), ``timeout`` seconds pass, the log
        is marked moved (its head will never pass) or ``stop()`` says so (False). This default
        polls the head every 50 ms; the PostgreSQL store waits on NOTIFY instead, sending
        nothing while idle."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            if self.head().seq > after_seq:
                return True
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop()) or self.moved() is not None:
                return False
            time.sleep(min(0.05, left))

    def moved(self) -> Moved | None:
        """Where this log moved (``loopx store copy --use``), if it did: every append to it is
        then refused, and a waiter for its records would wait forever. None here: a store
        that cannot be moved from."""
        return None

    def close(self) -> None:
        """Release file handles; the store may not be used afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
