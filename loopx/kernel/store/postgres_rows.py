"""Rows of the PostgreSQL store as records: parsed and checked against the chain, and a sealed
batch as the column arrays one INSERT takes."""

from __future__ import annotations

import json
from typing import Any

from loopx.kernel.errors import IntegrityError
from loopx.kernel.store.base import Record


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
