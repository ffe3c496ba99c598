"""Rows of the PostgreSQL store as records: parsed and checked against the chain; a sealed
batch as the column arrays one INSERT takes, and an unsealed record as the pieces the server
seals it from."""

from __future__ import annotations

import itertools
import json
from typing import Any, NoReturn

from loopx.kernel.errors import FieldProblem, IntegrityError, RecordRejected
from loopx.kernel.store.base import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    Cursor,
    Encoded,
    Record,
    seal,
)


def parsed(line: bytes) -> Record:
    """A stored line as its record.

    Raises:
        IntegrityError: the row does not hold a sealed record.
    """
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
        raise IntegrityError("a stored row is not a sealed record", hint="run `loopx verify`")
    return record


def checked(line: bytes, expected: int, prev: str) -> Record:
    """A stored line as its record, which must be seq ``expected`` and chain to ``prev``.

    Raises:
        IntegrityError: it is not, or does not.
    """
    record = parsed(line)
    if record["seq"] != expected:
        raise IntegrityError(f"expected seq {expected}, found {record['seq']}", seq=expected,
                             hint="run `loopx verify`")
    if record.get("prev_hash") != prev:
        raise IntegrityError(f"seq {expected} does not chain to seq {expected - 1}",
                             seq=expected, hint="run `loopx verify`")
    return record


def without_store_fields(record: Record) -> Record:
    """The record as its writer gave it: without what sealing added."""
    return {k: v for k, v in record.items()
            if k not in ("seq", "ts", "batch_end", "prev_hash", "hash")}


def columns(records: list[Record]) -> dict[str, list[Any]]:
    """The sealed records' store columns, one list each, for an ``unnest`` INSERT."""
    return {"seqs": [r["seq"] for r in records], "ends": [r["batch_end"] for r in records],
            "ids": [r["record_id"] for r in records],
            "prevs": [r["prev_hash"] for r in records], "hashes": [r["hash"] for r in records]}


def sealing_input(batch: list[Encoded]) -> tuple[bytes, str]:
    """A batch as ``loopx_append_sealed_v2`` takes it: each record's id and the six pieces of its
    canonical line (:func:`pieces`) in one bytes, and the offsets (from 1) where they start,
    plus the end, comma-separated."""
    cut = [piece for encoded in batch for piece in pieces(encoded)]
    return b"".join(cut), ",".join(map(str, itertools.accumulate(map(len, cut), initial=1)))


def pieces(encoded: Encoded) -> list[bytes]:
    """The record's id, then its canonical line cut at its store fields in the six pieces
    ``loopx_append_sealed_v2`` joins around them: before ``batch_end``, up to ``hash``, up to
    ``prev_hash``, up to ``seq``, up to ``ts``, and after it (commas included)."""
    items, slots = encoded.items, encoded.slots
    end, digest, prev, seq, ts = (slots[k]
                                  for k in ("batch_end", "hash", "prev_hash", "seq", "ts"))

    def between(a: int, b: int) -> bytes:
        return b"".join(b"," + item for item in items[a + 1:b])

    return [str(encoded.record["record_id"]).encode(),
            b"{" + b"".join(item + b"," for item in items[:end]), between(end, digest),
            between(digest, prev) + b",", between(prev, seq) + b",", between(seq, ts) + b",",
            between(ts, len(items)) + b"}"]


def refuse_size(batch: list[Encoded], head: Cursor) -> NoReturn:
    """The refusal for a batch the server found over the size limits, exactly as sealing it here
    words it (the seq it would have had moves a line's length by a digit at most).

    Raises:
        RecordRejected: always; nothing was written.
    """
    seal([batch], head, "2000-01-01T00:00:00.000000Z")
    raise RecordRejected([FieldProblem("batch", f"over the size limits once sealed: "
                                       f"{MAX_RECORD_BYTES} bytes a record, {MAX_BATCH_BYTES} "
                                       "a batch; nothing was written")])
