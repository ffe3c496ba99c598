"""``loopx verify``: prove the log is what was written, record by record, across segments.

Checks every stored line equals its canonical serialization, the hash chain and sequence are
unbroken, batches are whole, timestamps never go back, each record matches its schema, record
ids are unique, and the workspace rules hold (the genesis record first and only first, one goal);
and that every repair record's quarantine file holds exactly the torn bytes it describes.
It cannot see a tail cut off at a record boundary unless given an anchor (``--expect SEQ:HASH``).

The log is read as a stream, a chunk at a time: what verify keeps of the records it has passed
(their ids, batch-end hashes) lives on disk (:mod:`loopx.kernel.verify_index`), so its memory
does not grow with the log's length; only the folded state the write checks read does, as for
any reader of the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol, runtime_checkable

from loopx.kernel.canonical import (
    GENESIS_HASH,
    JSONInputError,
    dumps,
    loads_strict,
    record_hash,
)
from loopx.kernel.errors import LoopxError
from loopx.kernel.kinds import KINDS, stored_problems
from loopx.kernel.store.base import Store
from loopx.kernel.verify_index import SeenIndex

# (name, first seq or None, the bytes whole or in chunks), as a store gives them to verify.
Segment = tuple[str, int | None, bytes | Iterable[bytes]]


@dataclass(frozen=True)
class Anchor:
    """A (seq, hash) pair known from outside the log, e.g. quoted in a published story."""

    seq: int
    hash: str

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """Parse ``SEQ:HASH``; raises ValueError naming the problem."""
        seq, sep, digest = text.partition(":")
        if not sep or not seq.isdigit() or int(seq) < 1:
            raise ValueError("expected SEQ:HASH with SEQ a positive integer")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("HASH must be 64 lowercase hex digits")
        return cls(int(seq), digest)


@dataclass
class VerifyReport:
    """The outcome of a verification; ``first_bad_seq`` is set whenever ``ok`` is false."""

    ok: bool = True
    records: int = 0
    segments: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    first_bad_seq: int | None = None
    problem: str | None = None
    where: str | None = None
    notes: list[str] = field(default_factory=list)
    anchor: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """Stable JSON for ``loopx verify --json``."""
        return {
            "ok": self.ok, "records": self.records, "segments": self.segments,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            "first_bad_seq": self.first_bad_seq, "problem": self.problem, "where": self.where,
            "notes": self.notes, "anchor": self.anchor,
        }


@runtime_checkable
class Quarantine(Protocol):
    """Where a store keeps torn tails (the file store's ``quarantine/``)."""

    def read_quarantine(self, name: str) -> bytes | None:
        """The bytes of quarantine file ``name``, or None if there is none."""

    def quarantine_names(self) -> list[str]:
        """The names of the quarantine files there are."""


class _Bad(Exception):
    def __init__(self, seq: int, where: str, problem: str) -> None:
        self.seq, self.where, self.problem = seq, where, problem


def verify_store(store: Store, anchor: Anchor | None = None, *,
                 workspace_rules: bool = True) -> VerifyReport:
    """Verify a store's whole log; never raises for a bad log, reports it instead.

    ``workspace_rules=False`` checks only the chain and schemas (for a bare store). A store
    that keeps torn tails has each quarantine file checked against its repair record.

    Raises:
        StorageError: a segment could not be read (permissions, a disk error), or verify's
            temporary index of record ids could not be written (loopx.kernel.verify_index).
    """
    kept = store if isinstance(store, Quarantine) else None
    return verify_segments(store.raw_chunks(), anchor, workspace_rules=workspace_rules,
                           quarantine=kept)


def verify_segments(segments: Iterable[Segment], anchor: Anchor | None = None, *,
                    workspace_rules: bool = True,
                    quarantine: Quarantine | None = None) -> VerifyReport:
    """Verify segments given as (name, first seq or None, bytes or an iterable of chunks of
    them), in log order, reading each once as it comes; with ``quarantine``, also that every
    repair record's quarantine file holds the bytes it names."""
    report = VerifyReport()
    checker = _Checker(anchor.seq if anchor else None, workspace_rules, quarantine)
    try:
        for name, first, data in segments:
            # An unfinished write is allowed only at the end of the log: another segment
            # after it means it is in the middle.
            if checker.unfinished is not None:
                raise _Bad(checker.head_seq + 1, checker.unfinished[0],
                           "incomplete write in the middle of the log")
            report.segments += 1
            chunks = _chunks(data)
            head = next((c for c in chunks if c), b"")
            if first is not None and first != checker.expected and head:
                raise _Bad(checker.expected, name,
                           f"segment starts at seq {first} but seq {checker.expected} is next:"
                           " records are missing or reordered")
            checker.segment(name, chain((head,), chunks))
        checker.flush()
        if checker.unfinished is not None:
            _, pending, fragment = checker.unfinished
            report.notes.append(
                f"{pending} record(s) of an unfinished batch and {fragment} byte(s) of an "
                f"incomplete line after seq {checker.head_seq}: a write in progress, or a torn "
                "tail the next writer will move to quarantine")
        if checker.writes is not None and checker.writes.newer is not None:
            report.notes.append(
                f"this log is written under write rules version {checker.writes.newer}, newer "
                f"than this loopx knows ({checker.writes.domains.rules}): records from its "
                "upgrade on were checked under the older rules only; verify again with the "
                "loopx that wrote them")
        if quarantine is not None:
            for kept_name in sorted(set(quarantine.quarantine_names()) - checker.repaired):
                report.notes.append(
                    f"quarantine/{kept_name} has no store_repair_v0 record: a writer moved a torn "
                    "tail aside and stopped (or failed) before committing its record; those "
                    "bytes were never committed")
        if anchor is not None:
            report.anchor = {"seq": anchor.seq, "hash": anchor.hash, "ok": False}
            if checker.head_seq < anchor.seq:
                raise _Bad(checker.head_seq + 1, "end of log",
                           f"log ends at seq {checker.head_seq} but the anchor names seq "
                           f"{anchor.seq}: the tail was truncated")
            if checker.anchor_hash != anchor.hash:
                raise _Bad(anchor.seq, "anchor", "the record at the anchor's seq has another hash")
            report.anchor["ok"] = True
    except _Bad as found:
        bad = found
        try:  # a duplicate id still pending was found before this problem: it comes first
            checker.flush()
        except _Bad as earlier:
            bad = earlier
        report.ok, report.first_bad_seq, report.where, report.problem = (
            False, bad.seq, bad.where, bad.problem)
    finally:
        checker.seen.close()
    report.records = checker.head_seq
    report.head_seq, report.head_hash = checker.head_seq, checker.head_hash
    return report


def _chunks(data: bytes | Iterable[bytes]) -> Iterator[bytes]:
    """A segment's bytes as an iterator of chunks, whether given whole or in chunks."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return iter((bytes(data),))
    return iter(data)


# Ids and heads written to the index together: a bunch per SQLite call, not a record.
_BUNCH = 1024


class _Checker:
    """Carries the chain state from line to line and segment to segment."""

    def __init__(self, anchor_seq: int | None, workspace_rules: bool,
                 quarantine: Quarantine | None = None) -> None:
        self.workspace_rules = workspace_rules
        self.quarantine = quarantine
        self.repaired: set[str] = set()  # quarantine files a repair record vouches for
        self.expected = 1
        self.prev = GENESIS_HASH
        self.head_seq, self.head_hash = 0, GENESIS_HASH
        self.last_ts = ""
        # Record ids and batch-end hashes (publications pin one): on disk, not in memory,
        # written in bunches; the ids wait with the seq and place to report a duplicate at.
        self.seen = SeenIndex()
        self.pending_ids: list[tuple[str, int, str]] = []
        self.pending_heads: list[tuple[int, str]] = []
        self.goal: str | None = None
        self.open_batch: int | None = None
        self.anchor_seq = anchor_seq
        self.anchor_hash: str | None = None
        self.batch: list[dict[str, Any]] = []
        self.writes = _WriteChecks() if workspace_rules else None
        # (segment, records of an unfinished batch, bytes of an incomplete line) when a
        # segment ended inside a write: fine at the end of the log, bad anywhere else.
        self.unfinished: tuple[str, int, int] | None = None

    def segment(self, name: str, chunks: Iterable[bytes]) -> None:
        """Check a segment's lines as its chunks come, holding one chunk (and a line that
        straddles two) at a time."""
        number = 0
        rest = b""
        for chunk in chunks:
            buf = rest + chunk if rest else chunk
            start = 0
            while (end := buf.find(b"\n", start)) >= 0:
                number += 1
                self.line(buf[start:end], f"{name} line {number}")
                start = end + 1
            rest = buf[start:]
        if rest or self.open_batch is not None:
            self.unfinished = (name, self.expected - 1 - self.head_seq, len(rest))

    def line(self, line: bytes, where: str) -> None:
        seq = self.expected
        try:
            record = loads_strict(line)
        except JSONInputError as exc:
            raise _Bad(seq, where, f"not valid JSON ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
            raise _Bad(seq, where, "not a sealed record")
        found = record["seq"]
        if found > seq:
            raise _Bad(seq, where, f"found seq {found} where seq {seq} belongs:"
                                   " records were removed or reordered")
        if found < seq:
            raise _Bad(seq, where, f"found seq {found} again where seq {seq} belongs:"
                                   " records were duplicated or reordered")
        if dumps(record) != line:
            raise _Bad(seq, where, "stored line is not its canonical serialization"
                                   " (re-serialized or edited)")
        if record.get("prev_hash") != self.prev:
            raise _Bad(seq, where, "prev_hash does not match the previous record's hash:"
                                   " the chain is broken")
        if record_hash(record) != record.get("hash"):
            raise _Bad(seq, where, "hash does not match the record's content: edited in place")
        problems = stored_problems(record)
        if problems:
            raise _Bad(seq, where, "does not match its schema: "
                       + "; ".join(str(p) for p in problems))
        self._rules(record, seq, where)
        if self.quarantine is not None and record["schema_version"] == "store_repair_v0":
            self._kept(record["payload"], seq)
        self.prev = record["hash"]
        if seq == self.anchor_seq:
            self.anchor_hash = record["hash"]
        self.expected += 1
        self.batch.append(record)
        if seq == record["batch_end"]:
            if self.writes is not None:
                self.writes.batch(self.batch, where)
            self.batch = []
            self.open_batch = None
            self.head_seq, self.head_hash = seq, record["hash"]
            self.pending_heads.append((seq, record["hash"]))
            if len(self.pending_heads) >= _BUNCH:
                self.flush()

    def flush(self) -> None:
        """Write the pending ids and heads; a pending id seen before is the problem found."""
        ids, self.pending_ids = self.pending_ids, []
        heads, self.pending_heads = self.pending_heads, []
        if heads:
            self.seen.add_heads(heads)
        if ids:
            twice = self.seen.add_ids([(record_id, seq) for record_id, seq, _ in ids])
            if twice is not None:
                record_id, seq, where = ids[twice]
                raise _Bad(seq, where, f"record_id {record_id} is used twice")

    def _kept(self, payload: dict[str, Any], seq: int) -> None:
        """A repair record vouches that its quarantine file holds exactly the torn bytes."""
        from loopx.kernel.store.quarantine import mismatch

        assert self.quarantine is not None
        problem = mismatch(payload, self.quarantine.read_quarantine)
        if problem is not None:
            raise _Bad(seq, payload["quarantine_file"], f"store_repair_v0 {problem}")
        self.repaired.add(payload["quarantine_file"].removeprefix("quarantine/"))

    def _rules(self, record: dict[str, Any], seq: int, where: str) -> None:
        end = record["batch_end"]
        if self.open_batch is not None and end != self.open_batch:
            raise _Bad(seq, where, "batch_end differs from the rest of its batch")
        if end < seq:
            raise _Bad(seq, where, "batch_end is before the record itself")
        self.open_batch = end
        if record["ts"] < self.last_ts:
            raise _Bad(seq, where, "timestamp is earlier than the previous record's")
        self.last_ts = record["ts"]
        # Checked when the bunch is written (flush), before any later problem is reported.
        self.pending_ids.append((record["record_id"], seq, where))
        if len(self.pending_ids) >= _BUNCH:
            self.flush()
        if self.workspace_rules:
            self._workspace_rules(record, seq, where)

    def _workspace_rules(self, record: dict[str, Any], seq: int, where: str) -> None:
        kind = record["schema_version"]
        if (seq == 1) != (kind == "workspace_v0"):
            raise _Bad(seq, where, "the workspace record must be the first record, and only it")
        if seq == 1:
            self.goal = record["payload"]["goal_id"]
        if (spec := KINDS.get(kind)) is not None and spec.pins_head:
            self._pin(record, seq, where)
        if record["goal_id"] != self.goal:
            raise _Bad(seq, where, f"goal {record['goal_id']!r} is not this workspace's"
                                   f" goal {self.goal!r}")


    def _pin(self, record: dict[str, Any], seq: int, where: str) -> None:
        """A publication or preview must pin a head this log really had, before it."""
        pinned, digest = record["payload"]["head_seq"], record["payload"]["head_hash"]
        self.flush()
        if self.seen.head(pinned) != bytes.fromhex(digest):
            raise _Bad(seq, where, f"{record['schema_version']} pins seq {pinned} with a hash "
                                   "this log did not have at that seq (a rendered snapshot "
                                   "that is not this log's)")


# Kinds loopx itself writes outside the checked path: the genesis record and torn-tail repairs.
_UNCHECKED = frozenset({"workspace_v0", "store_repair_v0", "store_clock_v0",
                        "rules_upgrade_v0"})


class _WriteChecks:
    """Re-runs the append path's write checks batch by batch over a fold of the log, so a
    record appended around the library (no grant, out of scope, stale epoch) is reported."""

    def __init__(self) -> None:
        from loopx.kernel.domains import installed
        from loopx.kernel.fold import State, default_reducers

        self.domains = installed()
        self.reducers = default_reducers()
        self.state = State.initial(self.reducers)
        self.newer: int | None = None  # the log's rules version, when this loopx's is older

    def batch(self, records: list[dict[str, Any]], where: str) -> None:
        from loopx.kernel.checks import check_batch

        checked = [r for r in records if r["schema_version"] not in _UNCHECKED]
        # Each batch is judged by the rules it was written under: the log's, or those of the
        # upgrade in front of it (loopx.kernel.rules).
        rules = max([self.state["kernel"]["rules"]]
                    + [r["payload"]["to_version"] for r in records
                       if r["schema_version"] == "rules_upgrade_v0"])
        if rules > self.domains.rules:
            self.newer = rules
        if checked:
            try:
                check_batch(self.domains.overlay(self.state["lanes"], rules=rules), checked,
                            checked[0]["ts"], checked[0]["seq"], self.domains)
            except LoopxError as exc:
                raise _Bad(checked[0]["seq"], where,
                           f"fails the write checks: {exc.message}") from None
        for record in records:
            for reducer in self.reducers:
                reducer.apply(self.state.parts[reducer.name], record)
