"""Verify reads the log as a stream and keeps what it has passed on disk, yet reports exactly
what it reported holding the whole log: the same report however the bytes come in chunks, and
a reused record id found at the record that reuses it, before any later problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_verify import all_lines, build, edit_byte, remove, rewrite

from loopx.kernel.errors import StorageError
from loopx.kernel.kinds import new_record_id
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import FileStore
from loopx.kernel.verify import VerifyReport, verify_segments, verify_store
from loopx.testing.lanes import executor_writer
from loopx.workspace import init_workspace


def whole(store: FileStore) -> list[tuple[str, int | None, bytes]]:
    return [(store.segment_path(first).name, first, store.segment_path(first).read_bytes())
            for first in store.segments()]


def chunked(store: FileStore, size: int) -> list[tuple[str, int | None, list[bytes]]]:
    return [(name, first, [data[i:i + size] for i in range(0, len(data), size)])
            for name, first, data in whole(store)]


def same(a: VerifyReport, b: VerifyReport) -> bool:
    return a.to_json() == b.to_json()


@pytest.mark.parametrize("damage", ["none", "edit", "remove", "torn tail", "torn middle"])
def test_the_report_is_the_same_however_the_bytes_are_chunked(tmp_path: Path,
                                                              damage: str) -> None:
    store = build(tmp_path)
    segments = store.segments()
    if damage == "edit":
        rewrite(store, 20, edit_byte)
    elif damage == "remove":
        rewrite(store, 30, remove)
    elif damage in ("torn tail", "torn middle"):
        at = segments[-1] if damage == "torn tail" else segments[1]
        with open(store.segment_path(at), "ab") as f:
            f.write(b'{"half a rec')
    fresh = FileStore(store.dir)
    streamed = verify_store(fresh)
    assert streamed.ok == (damage in ("none", "torn tail"))
    assert same(streamed, verify_segments(whole(fresh)))
    for size in (1, 7, 500, 10**6):
        assert same(streamed, verify_segments(chunked(fresh, size))), size
    if damage == "torn middle":
        assert streamed.problem == "incomplete write in the middle of the log"
        assert streamed.segments == 2


def reusing(tmp_path: Path, ids: list[str]) -> FileStore:
    """A workspace whose log ends with one rollout event per id in ``ids``, each in a batch of
    its own, written under the checks (a writer that bypassed the library could do this)."""
    ws, owner_token = init_workspace(tmp_path, "ids")
    with ws.store() as setup:
        ledger = Ledger(setup)
        writer = executor_writer(ledger, owner_token, "w")
        [template] = ledger.prepare(
            writer.tie({"payload": {"event": "note", "detail": {"i": 1}}}),
            ledger.identify(writer.creds), kind="rollout_event_v0")
    store = FileStore(ws.dir, durable=False)
    for record_id in ids:
        store.append([dict(template, record_id=record_id)])
    store.close()
    return FileStore(ws.dir)


def seq_of(store: FileStore, index: int, count: int) -> int:
    """The seq of the ``index``-th of the ``count`` records appended last."""
    return store.head().seq - count + 1 + index


def test_a_reused_record_id_is_caught_at_the_record_that_reuses_it(tmp_path: Path) -> None:
    first = new_record_id()
    # Far apart: the first use is in the index on disk long before the second comes.
    ids = [first] + [new_record_id() for _ in range(2500)] + [first]
    store = reusing(tmp_path, ids)
    report = verify_store(store)
    assert not report.ok and report.first_bad_seq == seq_of(store, len(ids) - 1, len(ids))
    assert report.problem == f"record_id {first} is used twice"
    [(path, number, _)] = [(p, i, line) for p, i, line in all_lines(store)
                           if json.loads(line)["seq"] == report.first_bad_seq]
    assert report.where == f"{path.name} line {number + 1}"


@pytest.mark.parametrize("ids", [
    ["note-1", "note-2", "note-1"],  # ids of another form than loopx's own
    ["rec_" + "ab" * 16, "x", "rec_" + "ab" * 16],
])
def test_reused_ids_of_any_form_are_caught(tmp_path: Path, ids: list[str]) -> None:
    store = reusing(tmp_path, ids)
    report = verify_store(store)
    assert not report.ok and report.first_bad_seq == seq_of(store, 2, 3)
    assert report.problem == f"record_id {ids[0]} is used twice"


def test_ids_that_differ_only_in_form_are_different_ids(tmp_path: Path) -> None:
    digits = "ab" * 16
    store = reusing(tmp_path, [f"rec_{digits}", f"rec_{digits.upper()}", f"rec_{digits}x",
                               digits])
    assert verify_store(store).ok


def test_a_reused_id_comes_before_a_later_problem_found_first(tmp_path: Path) -> None:
    # The id check of a bunch of records is written to disk later than the other checks of
    # the records after it run: the earlier problem must still be the one reported.
    first = new_record_id()
    ids = [first, new_record_id(), first] + [new_record_id() for _ in range(5)]
    store = reusing(tmp_path, ids)
    reused = seq_of(store, 2, len(ids))
    rewrite(store, reused + 3, edit_byte)  # a later record edited in place
    report = verify_store(FileStore(store.dir))
    assert not report.ok and report.first_bad_seq == reused
    assert report.problem == f"record_id {first} is used twice"


def test_a_failing_temporary_index_is_a_storage_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from loopx.kernel import verify_index

    store = build(tmp_path)

    def refuse(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(verify_index.sqlite3, "connect", refuse)
    with pytest.raises(StorageError, match="temporary index of record ids failed"):
        verify_store(store)
