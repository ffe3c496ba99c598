"""Reading the file store's lines back: the last committed batch end in a tail window, a
record looked up by seq or id, and the chain check of a scan. Anything that is not a sealed
record where one belongs is an ``integrity`` error."""

from __future__ import annotations

import json

from loopx.kernel.errors import IntegrityError
from loopx.kernel.store.base import Cursor, Record


def segment_name(first_seq: int) -> str:
    """The file name of the segment whose first record is ``first_seq``."""
    return f"{first_seq:012d}.jsonl"


def last_batch_end(data: bytes, base: int, seg: int, *,
                   starts_at_line: bool = False) -> Cursor | None:
    """Cursor after the last complete line in ``data`` that ends its batch (None if none).

    ``data`` is the file from offset ``base``; a first line cut by the window is not read,
    unless ``starts_at_line`` says ``base`` is where a line starts.
    """
    end = data.rfind(b"\n")
    while end >= 0:
        start = data.rfind(b"\n", 0, end) + 1
        if start == 0 and base > 0 and not starts_at_line:
            return None
        try:
            record = json.loads(data[start:end])
            seq, batch_end = record["seq"], record["batch_end"]
        except (ValueError, KeyError, TypeError):
            raise IntegrityError(f"segment {segment_name(seg)} byte {base + start}: not a "
                                 "sealed record", hint="run `loopx verify`") from None
        if seq == batch_end:
            return Cursor(seq, record["hash"], record["ts"], (seg, base + end + 1, base + start))
        end = start - 1
    return None


def parsed_line(line: bytes, seg: int, offset: int) -> Record:
    """One line read back by a lookup: a sealed record, or corruption."""
    try:
        record = json.loads(line)
        if isinstance(record, dict) and isinstance(record.get("seq"), int):
            return record
    except ValueError:
        pass
    raise IntegrityError(f"segment {segment_name(seg)} byte {offset}: not a sealed record",
                         hint="run `loopx verify`")


def batch_is_whole(data: bytes, offset: int, record: Record) -> bool:
    """Whether the batch of ``record`` ends in ``data`` at or after ``offset`` (committed)."""
    if record["seq"] == record["batch_end"]:
        return True
    while (end := data.find(b"\n", offset)) >= 0:
        try:
            if json.loads(data[offset:end])["seq"] == record["batch_end"]:
                return True
        except (ValueError, KeyError, TypeError):
            return False
        offset = end + 1
    return False


def checked_line(line: bytes, expected_seq: int, prev: str,
             pending: list[tuple[Record, int, int]], seg: int, offset: int) -> Record:
    """Parse one complete line and check it continues the chain; anything else is corruption."""
    # Every record a follower catches up on passes here: the checks are spelled out, and the
    # place is only formatted for an error.
    try:
        record = json.loads(line)
    except ValueError:
        raise _corrupt(seg, offset, "not valid JSON", expected_seq) from None
    if not (isinstance(record, dict) and isinstance(record.get("seq"), int)
            and isinstance(record.get("batch_end"), int) and isinstance(record.get("hash"), str)
            and isinstance(record.get("prev_hash"), str) and isinstance(record.get("ts"), str)):
        raise _corrupt(seg, offset, "not a sealed record", expected_seq)
    if record["seq"] != expected_seq:
        raise _corrupt(seg, offset, f"expected seq {expected_seq}, found {record['seq']}",
                       expected_seq)
    if record["prev_hash"] != prev:
        raise _corrupt(seg, offset, f"seq {expected_seq} does not chain to seq "
                       f"{expected_seq - 1}", expected_seq)
    batch_end = pending[0][0]["batch_end"] if pending else None
    if record["batch_end"] < expected_seq or (batch_end is not None
                                              and record["batch_end"] != batch_end):
        raise _corrupt(seg, offset, f"seq {expected_seq} has an inconsistent batch_end",
                       expected_seq)
    return record


def _corrupt(seg: int, offset: int, problem: str, seq: int) -> IntegrityError:
    return IntegrityError(f"segment {segment_name(seg)} byte {offset}: {problem}", seq=seq,
                          hint="run `loopx verify`")
