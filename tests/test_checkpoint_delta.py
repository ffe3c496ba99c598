"""Checkpoint deltas: a state loaded from a checkpoint saves the rows it changed beside the file,
which a later load applies, and which is ignored (the file alone still holds) when it does not
belong to that file, is damaged, or names a record the log does not have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_checkpoint_lazy import VERSION, change, load, state

from loopx.kernel import checkpoint_delta
from loopx.kernel.checkpoint import load_checkpoint, save_checkpoint
from loopx.kernel.checkpoint_changes import changes_since_load, loaded_delta
from loopx.kernel.checkpoint_delta import delta_path
from loopx.kernel.fold import State
from loopx.kernel.store import MemoryStore
from loopx.kernel.store.base import Cursor


def changed(path: Path) -> tuple[State, State]:
    """A checkpoint of :func:`state`, and a state loaded from it and changed, and what it should
    equal."""
    save_checkpoint(path, state(), VERSION)
    expected = state()
    change(expected["lanes"]["todos"])
    expected["kernel"]["records"] = 51
    expected.cursor = Cursor(51, "h51", None, ())
    partly = load(path)
    change(partly["lanes"]["todos"])
    partly["kernel"]["records"] = 51
    partly.cursor = Cursor(51, "h51", None, ())
    return partly, expected


def test_a_loaded_state_saves_the_rows_it_changed_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    partly, expected = changed(path)
    base = path.read_bytes()
    partly["lanes"]["todos"]["t007"]  # only read: not part of the delta
    assert save_checkpoint(path, partly, VERSION, full=False)
    assert path.read_bytes() == base  # the file itself is never rewritten for a delta
    delta = json.loads(delta_path(path).read_bytes())
    rows = delta["tables"]["lanes/todos"]
    assert sorted(rows["rows"]) == ["t005", "t010", "t040", "t999"]
    assert rows["deleted"] == ["t020", "t030", "t040"]
    assert delta["entries"]["kernel"]["records"] == 51
    loaded = load(path)
    assert loaded.cursor == expected.cursor
    assert json.dumps(loaded.parts) == json.dumps(expected.parts)  # values and order
    # A state loaded with a delta saves one again (its rows carried over), and a whole file.
    loaded = load(path)
    loaded["lanes"]["todos"]["t011"]["status"] = "done"
    expected["lanes"]["todos"]["t011"]["status"] = "done"
    assert save_checkpoint(path, loaded, VERSION, full=False)
    assert json.dumps(load(path).parts) == json.dumps(expected.parts)
    list(loaded["lanes"]["todos"])  # read whole: only a whole save says what changed
    assert not save_checkpoint(path, loaded, VERSION, full=False)
    assert save_checkpoint(path, loaded, VERSION)
    assert not delta_path(path).exists()
    assert json.dumps(load(path).parts) == json.dumps(expected.parts)


def test_a_delta_that_does_not_belong_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    partly, expected = changed(path)
    save_checkpoint(path, partly, VERSION)
    delta = delta_path(path).read_bytes()

    def base_alone() -> None:
        loaded = load(path)
        assert loaded.cursor == Cursor() and json.dumps(loaded.parts) == json.dumps(state().parts)

    # Another file's delta (a whole save since), a damaged one, one for another fold version.
    save_checkpoint(path, state(), VERSION)
    delta_path(path).write_bytes(delta)
    base_alone()
    save_checkpoint(path, state(), VERSION)
    base_id = load(path).base_id  # type: ignore[attr-defined]
    good: dict[str, Any] = {**json.loads(delta), "base_id": base_id}
    for bad in (b"{not json", json.dumps({**good, "fold_version": "other"}).encode(),
                json.dumps({**good, "tables": {"lanes/nope": {"rows": {}, "deleted": []}}}).encode(),
                json.dumps({**good, "entries": {"lanes": {"todos": 1}}}).encode()):
        delta_path(path).write_bytes(bad)
        base_alone()
    delta_path(path).write_bytes(json.dumps(good).encode())
    assert json.dumps(load(path).parts) == json.dumps(expected.parts)


def test_a_delta_beyond_the_log_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    partly, _ = changed(path)
    save_checkpoint(path, partly, VERSION)

    class Knows(MemoryStore):
        def cursor_matches(self, cursor: Cursor) -> bool:
            return cursor.seq == 0  # the base's record, not the delta's

    loaded, status = load_checkpoint(path, Knows(), VERSION)
    assert status == "checkpoint used" and loaded is not None
    assert loaded.cursor == Cursor() and json.dumps(loaded.parts) == json.dumps(state().parts)


def test_a_big_delta_is_a_whole_save(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "cp.sqlite"
    partly, expected = changed(path)
    monkeypatch.setattr(checkpoint_delta, "DELTA_MAX_BYTES", 10)
    assert not save_checkpoint(path, partly, VERSION, full=False)
    assert not delta_path(path).exists()
    assert save_checkpoint(path, partly, VERSION)
    assert not delta_path(path).exists()
    assert json.dumps(load(path).parts) == json.dumps(expected.parts)


def test_a_table_empty_when_loaded_is_saved_whole(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state(), VERSION)
    loaded = load(path)
    loaded["lanes"]["empty"].update(a=1, b=2)
    monkeypatch.setattr(checkpoint_delta, "DELTA_MAX_BYTES", 10)
    assert save_checkpoint(path, loaded, VERSION)  # a whole file, holding a and b
    monkeypatch.undo()
    del loaded["lanes"]["empty"]["a"]  # gone since that file was written
    assert save_checkpoint(path, loaded, VERSION, full=False)
    assert load(path)["lanes"]["empty"] == {"b": 2}


def test_what_changed_since_the_delta_a_state_was_loaded_with(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    path = tmp_path / "cp.sqlite"
    partly, _ = changed(path)
    partly["lanes"]["empty"].update(a=1, b=2)  # empty in the file: the delta holds it whole
    assert save_checkpoint(path, partly, VERSION, full=False)
    loaded = load(path)
    assert changes_since_load(loaded, since_delta=True) == {}
    assert changes_since_load(loaded) == {
        "lanes/todos": {"t005", "t010", "t020", "t030", "t040", "t999"},
        "lanes/empty": {"a", "b"}, "kernel/records": None}
    todos = loaded["lanes"]["todos"]
    todos["t010"]["status"] = "open"  # back to the file's row: not the delta's
    todos["t001"]["status"] = "x"  # a row the delta did not touch
    todos["t030"] = {"n": 30, "status": "open"}  # removed by the delta, there again
    del todos["t999"]  # added by the delta, gone
    assert todos["t005"]["seen"] and todos.get("t020") is None  # read, as the delta has them
    del loaded["lanes"]["empty"]["a"]
    loaded["kernel"]["records"] = 52
    assert changes_since_load(loaded, since_delta=True) == {
        "lanes/todos": {"t001", "t010", "t030", "t999"}, "lanes/empty": {"a"},
        "kernel/records": None}
    # Saved as a delta again: what changed is measured from that one now.
    assert save_checkpoint(path, loaded, VERSION, full=False)
    assert changes_since_load(loaded, since_delta=True) == {}
    todos["t002"]["status"] = "y"
    assert changes_since_load(loaded, since_delta=True) == {"lanes/todos": {"t002"}}
    # After a whole save the file it was loaded from is no longer its base: nothing is said.
    monkeypatch.setattr(checkpoint_delta, "DELTA_MAX_BYTES", 10)
    assert save_checkpoint(path, loaded, VERSION)
    assert changes_since_load(loaded, since_delta=True) is None
    assert changes_since_load(loaded) is not None  # from the file it was loaded from, still


def test_a_delta_keeps_what_domains_derive_while_it_stays_small(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    partly, _ = changed(path)

    def derived(state: State) -> dict[str, Any]:
        return {"mine": {"at": state.seq}}

    assert save_checkpoint(path, partly, VERSION, full=False, delta_extras=[derived])
    assert json.loads(delta_path(path).read_bytes())["extras"] == {"mine": {"at": 51}}
    assert loaded_delta(load(path))["extras"] == {"mine": {"at": 51}}  # type: ignore[index]

    def too_big(state: State) -> dict[str, Any]:
        return {"mine": "x" * checkpoint_delta.DELTA_MAX_BYTES}

    assert save_checkpoint(path, partly, VERSION, full=False, delta_extras=[too_big])
    delta = json.loads(delta_path(path).read_bytes())
    assert "extras" not in delta and delta["entries"]["kernel"]["records"] == 51
