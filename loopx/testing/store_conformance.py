"""The store conformance suite: every backend must pass these tests unchanged.

Use it from a test module by importing the tests and providing a ``backend`` fixture that yields
a :class:`Backend`::

    from loopx.testing.store_conformance import *  # noqa: F403

    @pytest.fixture(params=["file", "memory", "postgres"])
    def backend(request, tmp_path): ...
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from loopx.kernel.canonical import GENESIS_HASH, dumps, parse_ts, record_hash
from loopx.kernel.errors import ConflictError, NotFound, RecordRejected
from loopx.kernel.store.base import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    Cursor,
    Record,
    Store,
)

__all__ = [
    "Backend",
    "unsealed",
    "test_empty_store",
    "test_append_assigns_store_fields",
    "test_store_fields_a_writer_sets_are_the_stores",
    "test_batch_is_contiguous_and_chained",
    "test_ts_never_goes_back",
    "test_expect_seq",
    "test_builder_runs_against_current_head",
    "test_builder_failure_writes_nothing",
    "test_size_limits_write_nothing",
    "test_read_resumes_from_cursor",
    "test_cursor_matches",
    "test_seek_get_find",
    "test_reopened_store_sees_same_log",
    "test_stored_records_are_canonical",
]


@dataclass
class Backend:
    """How the suite makes a store (optionally with a clock) and opens a second handle on it."""

    name: str
    make: Callable[..., Store]
    reopen: Callable[[Store], Store]


_ids = itertools.count()


def unsealed(event: str = "note", *, pad: int = 0, **detail: Any) -> Record:
    """A minimal unsealed record, as the registry would prepare it."""
    if pad:
        detail["pad"] = "x" * pad
    return {
        "schema_version": "rollout_event_v0",
        "record_id": f"rec_conformance_{next(_ids)}",
        "goal_id": "conformance",
        "agent_id": "tester",
        "lane_role": "owner",
        "capability": None,
        "todo_id": None,
        "epoch": None,
        "visibility": "public",
        "provenance": "observed",
        "payload": {"event": event, "hypothesis_id": None, "branch": None, "commit": None,
                    "detail": detail},
    }


def _all(store: Store) -> list[Record]:
    return [record for record, _ in store.read()]


def test_empty_store(backend: Backend) -> None:
    store = backend.make()
    assert store.head() == Cursor()
    assert _all(store) == []


def test_append_assigns_store_fields(backend: Backend) -> None:
    store = backend.make()
    draft = unsealed(n=1)
    [record] = store.append([draft])
    assert record["seq"] == 1 and record["batch_end"] == 1
    assert record["prev_hash"] == GENESIS_HASH
    assert record["hash"] == record_hash(record)
    parse_ts(record["ts"])
    assert {k: v for k, v in record.items()
            if k not in ("seq", "ts", "batch_end", "prev_hash", "hash")} == draft
    assert _all(store) == [record]
    head = store.head()
    assert (head.seq, head.hash, head.ts) == (1, record["hash"], record["ts"])


def test_store_fields_a_writer_sets_are_the_stores(backend: Backend) -> None:
    """A writer that fills in store fields itself (a backdated ts, a seq and hashes of its
    choosing) gets the store's: the batch is sealed as any other and the chain holds."""
    store = backend.make()
    [first] = store.append([unsealed(n=0)])
    forged = {**unsealed(n=1), "seq": 99, "batch_end": 99, "ts": "2000-01-01T00:00:00.000000Z",
              "prev_hash": "0" * 64, "hash": "f" * 64}
    [record] = store.append([forged])
    assert (record["seq"], record["batch_end"], record["prev_hash"]) == (2, 2, first["hash"])
    assert record["ts"] >= first["ts"] and record["hash"] == record_hash(record)
    assert _all(store) == [first, record]


def test_batch_is_contiguous_and_chained(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed()])
    batch = store.append([unsealed(n=i) for i in range(5)])
    assert [r["seq"] for r in batch] == [2, 3, 4, 5, 6]
    assert {r["batch_end"] for r in batch} == {6}
    assert len({r["ts"] for r in batch}) == 1
    records = _all(store)
    for before, after in zip(records, records[1:], strict=False):
        assert after["prev_hash"] == before["hash"]
        assert after["seq"] == before["seq"] + 1


def test_ts_never_goes_back(backend: Backend) -> None:
    times = iter(["2026-01-01T00:00:02.000000Z", "2026-01-01T00:00:01.000000Z",
                  "2026-01-01T00:00:03.000000Z"])
    store = backend.make(clock=lambda: next(times))
    stamps = [store.append([unsealed()])[0]["ts"] for _ in range(3)]
    assert stamps == ["2026-01-01T00:00:02.000000Z", "2026-01-01T00:00:02.000000Z",
                      "2026-01-01T00:00:03.000000Z"]


def test_expect_seq(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed()], expect_seq=0)
    with pytest.raises(ConflictError):
        store.append([unsealed()], expect_seq=0)
    assert store.head().seq == 1
    store.append([unsealed()], expect_seq=1)
    assert store.head().seq == 2


def test_builder_runs_against_current_head(backend: Backend) -> None:
    store = backend.make()
    other = backend.reopen(store)
    other.append([unsealed(), unsealed()])
    seen: list[tuple[int, str]] = []

    def build(head: Cursor, now: str) -> list[Record]:
        seen.append((head.seq, now))
        return [unsealed(after=head.seq)]

    [record] = store.append(build)
    assert [s for s, _ in seen] == [2]
    # the builder is told the ts the batch will carry, so it can check leases against it
    assert record["seq"] == 3 and record["payload"]["detail"] == {"after": 2}
    assert record["ts"] == seen[0][1]
    assert store.append(lambda head, now: []) == []
    assert store.head().seq == 3


def test_builder_failure_writes_nothing(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed()])

    def refuse(head: Cursor, now: str) -> list[Record]:
        raise RecordRejected([])

    with pytest.raises(RecordRejected):
        store.append(refuse)
    assert [r["seq"] for r in _all(store)] == [1]


def test_size_limits_write_nothing(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed()])
    with pytest.raises(RecordRejected, match="limit"):
        store.append([unsealed(pad=MAX_RECORD_BYTES)])
    with pytest.raises(RecordRejected, match="limit"):
        store.append([unsealed(pad=MAX_RECORD_BYTES // 2) for _ in range(MAX_BATCH_BYTES // (MAX_RECORD_BYTES // 2) + 1)])
    assert [r["seq"] for r in _all(store)] == [1]
    [record] = store.append([unsealed(pad=MAX_RECORD_BYTES - 600)])
    assert len(dumps(record)) <= MAX_RECORD_BYTES


def test_read_resumes_from_cursor(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed(n=i) for i in range(3)])
    entries = list(store.read())
    _, middle = entries[1]
    store.append([unsealed(n=9)])
    assert [r["seq"] for r, _ in store.read(middle)] == [3, 4]
    _, last = list(store.read())[-1]
    assert list(store.read(last)) == []


def test_cursor_matches(backend: Backend) -> None:
    store = backend.make()
    assert store.cursor_matches(Cursor())
    store.append([unsealed(), unsealed()])
    for _, cursor in store.read():
        assert store.cursor_matches(cursor)
    _, last = list(store.read())[-1]
    assert not store.cursor_matches(Cursor(last.seq, "f" * 64, last.ts, last.position))
    assert not store.cursor_matches(Cursor(last.seq + 5, last.hash, last.ts, last.position))


def test_seek_get_find(backend: Backend) -> None:
    store = backend.make()
    records = store.append([unsealed(n=i) for i in range(4)])
    assert [r["seq"] for r, _ in store.read(store.seek(2))] == [3, 4]
    assert store.seek(0) == Cursor()
    assert store.get(3) == records[2]
    assert store.find(records[1]["record_id"]) == records[1]
    with pytest.raises(NotFound):
        store.seek(9)
    with pytest.raises(NotFound):
        store.get(9)
    with pytest.raises(NotFound):
        store.find("rec_missing")


def test_reopened_store_sees_same_log(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed(n=1)])
    other = backend.reopen(store)
    other.append([unsealed(n=2), unsealed(n=3)])
    assert [r["seq"] for r in _all(store)] == [1, 2, 3]
    store.append([unsealed(n=4)])
    assert _all(other) == _all(store)
    assert other.head() == store.head()


def test_stored_records_are_canonical(backend: Backend) -> None:
    store = backend.make()
    store.append([unsealed(text="ünïcødé ✓", number=1.5, big=2**62)])
    [record] = _all(store)
    assert record["payload"]["detail"]["text"] == "ünïcødé ✓"
    assert record["hash"] == record_hash(record)
    assert dumps(record).decode("utf-8").count(": ") == 0
