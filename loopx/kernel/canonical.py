"""Canonical JSON: the one serialization used for stored lines and for hashing.

Keys sorted, separators ``,`` and ``:``, UTF-8 (not ASCII-escaped), no NaN or Infinity, integers
within the signed 64-bit range, floats in Python's shortest round-trip form. The stored line of a
record is exactly ``dumps(record) + b"\\n"``; its hash is the sha256 of ``dumps`` of the record
without its ``hash`` key.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

from loopx.kernel.errors import FieldProblem

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
GENESIS_HASH = "0" * 64
TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def add_seconds(ts: str, seconds: float) -> str:
    """The store timestamp ``seconds`` after ``ts``."""
    if ts[-1:] == "Z":
        # Every fold of a claim computes its lease's end: isoformat is twice as fast as
        # strftime and gives the same text for four-digit years.
        moment = datetime.fromisoformat(ts[:-1]) + timedelta(seconds=seconds)
        if moment.tzinfo is None and moment.year >= 1000:
            return moment.isoformat(timespec="microseconds") + "Z"
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return moment.strftime(TS_FORMAT)


def seconds_between(earlier: str, later: str) -> float:
    """``later - earlier`` in seconds (negative when ``later`` is before ``earlier``)."""
    a = datetime.fromisoformat(earlier.replace("Z", "+00:00"))
    b = datetime.fromisoformat(later.replace("Z", "+00:00"))
    return (b - a).total_seconds()


# One encoder instance: json.dumps with options would build a new encoder on every call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)


def dumps(value: Any) -> bytes:
    """Serialize a JSON value canonically; raises ValueError for values outside canonical JSON."""
    return _ENCODER.encode(value).encode("utf-8")


def dumps_value(value: Any) -> bytes:
    """:func:`dumps` with fast paths for the scalars that fill most of an envelope."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value).encode("utf-8")
    if value is None:
        return b"null"
    if kind is int:
        return b"%d" % value
    return _ENCODER.encode(value).encode("utf-8")


def record_hash(record: dict[str, Any]) -> str:
    """The chain hash of a record: sha256 over its canonical form without the ``hash`` key."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return sha256_hex(dumps(body))


def sha256_hex(data: bytes) -> str:
    """Hex sha256 digest of raw bytes."""
    # Imported here: loading OpenSSL's hashlib costs a cold read (which hashes nothing) ~4 ms.
    import hashlib

    return hashlib.sha256(data).hexdigest()


class JSONInputError(ValueError):
    """Raised by :func:`loads_strict` for text that is not strict JSON."""


def _no_constants(name: str) -> Any:
    raise JSONInputError(f"{name} is not allowed in loopx JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONInputError(f"duplicate key {key!r}")
        out[key] = value
    return out


def loads_strict(data: str | bytes) -> Any:
    """Parse UTF-8 JSON, refusing NaN/Infinity and duplicate keys (``json`` accepts both)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONInputError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(
            data, parse_constant=_no_constants, object_pairs_hook=_no_duplicate_keys
        )
    except JSONInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JSONInputError("nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python will convert
        raise JSONInputError(str(exc).split(";")[0]) from None


def json_problems(value: Any, path: str, *, depth: int = 0) -> list[FieldProblem]:
    """Every reason ``value`` is not canonical JSON, each with the dotted path where it occurs."""
    if depth > 64:
        return [FieldProblem(path, "nested more than 64 levels deep")]
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            return [FieldProblem(path, "integer outside the signed 64-bit range")]
        return []
    if isinstance(value, float):
        if not math.isfinite(value):
            return [FieldProblem(path, "NaN and Infinity are not allowed")]
        return []
    if isinstance(value, str):
        return _string_problems(value, path)
    if isinstance(value, list):
        problems: list[FieldProblem] = []
        for i, item in enumerate(value):
            problems.extend(json_problems(item, join_path(path, i), depth=depth + 1))
        return problems
    if isinstance(value, dict):
        problems = []
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append(FieldProblem(path, f"object key {key!r} is not a string"))
                continue
            key_problems = _string_problems(key, join_path(path, repr(key)))
            if key_problems:
                problems.extend(key_problems)
                continue
            problems.extend(json_problems(item, join_path(path, key), depth=depth + 1))
        return problems
    return [FieldProblem(path, f"{type(value).__name__} is not a JSON value")]


def join_path(path: str, part: str | int) -> str:
    """Dotted field path: ``join_path("payload", "metric")`` is ``payload.metric``.

    An empty key is shown as ``""`` so that the path still names something.
    """
    name = str(part) if part != "" else '""'
    return f"{path}.{name}" if path else name


def _string_problems(value: str, path: str) -> list[FieldProblem]:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return [FieldProblem(path, "string is not valid Unicode (lone surrogate)")]
    return []


def format_ts(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds, e.g. ``2026-12-02T16:09:31.123456Z``."""
    utc = moment.astimezone(UTC)
    if utc.year >= 1000:  # every append stamps its batch: isoformat is strftime's text, faster
        return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    return utc.strftime(TS_FORMAT)


def parse_ts(text: str) -> datetime:
    """Inverse of :func:`format_ts`; raises ValueError for any other shape."""
    return datetime.strptime(text, TS_FORMAT).replace(tzinfo=UTC)


def now_ts() -> str:
    """The current wall-clock time as a store timestamp."""
    return format_ts(datetime.now(UTC))
