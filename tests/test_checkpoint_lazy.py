"""A checkpoint's tables load row by row, yet behave as the dicts the fold made, order included,
and a save from a partly loaded state writes what a full save would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopx.kernel.checkpoint import LazyTable, load_checkpoint, save_checkpoint
from loopx.kernel.fold import State
from loopx.kernel.store import MemoryStore
from loopx.kernel.store.base import Cursor

VERSION = "test:1"


class AnyCursor(MemoryStore):
    """A store that agrees with any checkpoint cursor: these tests are about the file."""

    def cursor_matches(self, cursor: Cursor) -> bool:
        return True


def state(rows: int = 50) -> State:
    todos = {f"t{n:03d}": {"n": n, "status": "open"} for n in reversed(range(rows))}
    return State(Cursor(), {"kernel": {"goal_id": "g", "records": rows, "kinds": {"a": 1}},
                            "lanes": {"todos": todos, "queues": {"r": [[0, 1, "t001"]]},
                                      "empty": {}}})


def load(path: Path) -> State:
    loaded, status = load_checkpoint(path, AnyCursor(), VERSION)
    assert status == "checkpoint used" and loaded is not None
    return loaded


def change(todos: Any) -> None:
    """What a fold does to a slice: read, change in place, add, remove, remove and add again."""
    todos["t010"]["status"] = "claimed"
    todos["t999"] = {"n": 999, "status": "open"}
    del todos["t020"]
    todos.pop("t030")
    del todos["t040"]
    todos["t040"] = {"n": 40, "status": "again"}
    todos.setdefault("t005", {})["seen"] = True
    assert "t020" not in todos and todos.get("t030") is None and "t041" in todos


def test_rows_load_on_demand_and_whole_table_reads_load_all(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state(), VERSION)
    loaded = load(path)
    todos = loaded["lanes"]["todos"]
    assert isinstance(todos, LazyTable) and not todos.complete
    assert todos["t007"] == {"n": 7, "status": "open"}
    assert dict.__len__(todos) == 2  # the first row (always held) and this one, not fifty
    assert list(todos) == list(state()["lanes"]["todos"])  # the fold's order
    assert todos.complete and len(todos) == 50
    assert loaded.parts == state().parts


def test_json_of_an_untouched_table_is_the_whole_table(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state(), VERSION)
    assert json.dumps(load(path).parts) == json.dumps(state().parts)
    one = state(1)
    save_checkpoint(path, one, VERSION)
    loaded = load(path)
    del loaded["lanes"]["todos"]["t000"]
    assert json.dumps(loaded["lanes"]["todos"]) == "{}"


def test_a_partly_loaded_state_saves_what_a_loaded_one_would(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state(), VERSION)
    expected = state()
    change(expected["lanes"]["todos"])
    expected["kernel"]["records"] = 51
    partly = load(path)
    change(partly["lanes"]["todos"])
    partly["kernel"]["records"] = 51
    assert not partly["lanes"]["todos"].complete
    save_checkpoint(path, partly, VERSION)
    assert json.dumps(load(path).parts) == json.dumps(expected.parts)
    # The state that saved keeps working from its own snapshot, and saves again the same.
    assert json.dumps(partly.parts) == json.dumps(expected.parts)
    save_checkpoint(path, partly, VERSION)
    assert json.dumps(load(path).parts) == json.dumps(expected.parts)


def test_a_reader_keeps_its_snapshot_when_a_save_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state(), VERSION)
    reader = load(path)
    newer = state()
    newer["lanes"]["todos"]["t003"]["status"] = "completed"
    save_checkpoint(path, newer, VERSION)
    assert reader["lanes"]["todos"]["t003"]["status"] == "open"
    assert load(path)["lanes"]["todos"]["t003"]["status"] == "completed"


def test_fields_of_a_partly_loaded_table_are_those_of_the_dict(tmp_path: Path) -> None:
    from loopx.kernel.lazy_table import fields

    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state(), VERSION)
    todos = load(path)["lanes"]["todos"]
    change(todos)  # held rows changed, added, removed and added again
    assert not todos.complete
    read = sorted(fields(todos, ("status", "n")))
    assert dict.__len__(todos) < 20 and not todos.complete  # the rest were not loaded
    assert read == sorted((key, (row["status"], row["n"])) for key, row in todos.items())
    assert sorted(fields(todos, ("n",))) == sorted(fields(dict(todos), ("n",)))
