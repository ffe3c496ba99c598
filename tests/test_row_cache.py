"""The frontier rows kept with the checkpoint (loopx.research.row_cache): ``frontier --json`` and
``candidates --json`` print from them what a full rebuild prints, recomputing only the rows a
new record touched; a cache that does not name its checkpoint's state is never read; and the
direct command path answers what the click command answers, without click or the record models.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_cold_imports import cold

from loopx.cli import cli
from loopx.kernel.checkpoint_changes import changes_since_load, loaded_db
from loopx.kernel.checkpoint_delta import delta_path
from loopx.kernel.checks import Credentials
from loopx.kernel.fold import State
from loopx.kernel.ledger import Ledger
from loopx.research import row_cache
from loopx.research.decisions import decide
from loopx.research.projections import candidates, frontier
from loopx.research.tracked_view import WHOLE, TrackedView
from loopx.testing.research import ResearchLoop
from loopx.workspace import Workspace, init_workspace


@pytest.fixture
def research(tmp_path: Path) -> Iterator[tuple[Workspace, ResearchLoop]]:
    """A workspace with a few hypotheses, and the checkpoint a ledger leaves at its head."""
    ws, token = init_workspace(tmp_path, "rows")
    loop = ResearchLoop(Ledger(ws.store(durable=False)), Credentials("owner", token))
    loop.contract()
    loop.supported("h-a", [0.95, 0.96, 0.97], [0.95, 0.96, 0.97])
    loop.supported("h-b", [0.85, 0.86, 0.85], None, mechanism="depth")
    loop.propose("h-c", mechanism="lr")
    loop.run("h-c", "dev", None, status="failed")
    loop.propose("h-d", mechanism="width", parameters={"k": 3})
    loop.run("h-d", "dev", [0.9, 0.91, 0.89])
    checkpoint(ws)
    try:
        yield ws, loop
    finally:
        loop.ledger.store.close()


def checkpoint(ws: Workspace) -> None:
    """Save the checkpoint at the head as a workspace's ledger does after a command."""
    ledger = ws.ledger()
    ledger.checkpoint_every = 1
    ledger.state()
    ledger.store.close()


def rebuilt(ws: Workspace) -> tuple[str, str]:
    """The two commands' JSON as the tools give it, from the whole log folded anew."""
    ledger = Ledger(ws.store(durable=False))
    state = ledger.state()
    view = state["lanes"]
    ledger.store.close()
    rows = [r.to_json() for r in frontier(view)]
    return (row_cache.dumps({"schema_version": "decentralized_research_frontier_v0",
                             "head_seq": state.seq, "agent_id": None, "role": None,
                             "hypotheses": rows}),
            row_cache.dumps({"head_seq": state.seq, **candidates(view)}))


def printed(state: State) -> tuple[str, str]:
    """What ``frontier --json`` and ``candidates --json`` print for ``state`` (no newline)."""
    return (b"".join(row_cache.frontier_chunks(state)).decode(),
            b"".join(row_cache.candidates_chunks(state)).decode())


def run_and_promote_then_save(ws: Workspace, loop: ResearchLoop) -> None:
    """A dev run of h-d and h-a's promotion after the checkpoint, then a save: the ledger loads
    the whole file, folds the tail and saves a delta beside it."""
    loop.judge("h-d", "dev")
    decide(loop.ledger, loop.agents["ev"], "h-a", "promoted")
    checkpoint(ws)


def loaded(ws: Workspace) -> tuple[Ledger, State]:
    ledger = ws.ledger()
    state = ledger.state()
    assert ledger.checkpoint_status == "checkpoint used"
    return ledger, state


def dirty(state: State) -> set[str] | None:
    db = loaded_db(state)
    changes = changes_since_load(state)
    assert db is not None and changes is not None
    return row_cache._dirty(db, changes)


def test_after_new_records_only_the_touched_rows_are_recomputed(
        research: tuple[Workspace, ResearchLoop]) -> None:
    ws, loop = research
    ledger, state = loaded(ws)
    assert dirty(state) == set()  # at the head: every row as stored
    assert printed(state) == rebuilt(ws)
    ledger.store.close()

    loop.judge("h-d", "dev")  # one new record, about one hypothesis
    ledger, state = loaded(ws)
    assert dirty(state) == {"h-d"}
    assert printed(state) == rebuilt(ws)
    ledger.store.close()

    # A decision, a new hypothesis and another run, all after the checkpoint.
    decide(loop.ledger, loop.agents["ev"], "h-b", "retired", reason="contradicted")
    loop.propose("h-e", mechanism="augment")
    loop.run("h-e", "dev", [0.95, 0.95, 0.96])
    ledger, state = loaded(ws)
    assert {"h-b", "h-d", "h-e"} <= (dirty(state) or set())
    frontier_text, candidates_text = printed(state)
    assert (frontier_text, candidates_text) == rebuilt(ws)
    assert [h["hypothesis_id"] for h in json.loads(frontier_text)["hypotheses"]] == [
        "h-a", "h-b", "h-c", "h-d", "h-e"]
    ledger.store.close()


def test_a_checkpoint_save_brings_the_rows_to_its_state(
        research: tuple[Workspace, ResearchLoop]) -> None:
    ws, loop = research
    run_and_promote_then_save(ws, loop)
    ledger, state = loaded(ws)
    # A save that writes the file anew recomputes the touched rows into it: none left to a
    # reader. One that keeps the old file and saves only the changed state rows beside it
    # leaves the reader the rows those rows touched, and no others.
    assert dirty(state) <= {"h-a", "h-d"}
    assert printed(state) == rebuilt(ws)
    ledger.store.close()


def test_rows_that_do_not_name_the_checkpoints_state_are_not_read(
        research: tuple[Workspace, ResearchLoop]) -> None:
    ws, loop = research
    loop.judge("h-d", "dev")
    path = ws.ledger().checkpoint_path
    assert path is not None
    # Rows computed for another state than the file's (as a save without the research hook
    # would leave them, copied from an older file), or by other code: never read.
    for key, value in (("cursor", '{"seq": 1}'), ("stamp", "0/0")):
        db = sqlite3.connect(path)
        (before,) = db.execute("SELECT value FROM research_rows_meta WHERE key = ?",
                               (key,)).fetchone()
        with db:
            db.execute("UPDATE research_rows_meta SET value = ? WHERE key = ?", (value, key))
        db.close()
        ledger, state = loaded(ws)
        db = loaded_db(state)
        assert db is not None and not row_cache._valid(db)
        assert row_cache._rows(state, row_cache.ROWS) is None
        assert printed(state) == rebuilt(ws)
        ledger.store.close()
        db = sqlite3.connect(path)
        with db:
            db.execute("UPDATE research_rows_meta SET value = ? WHERE key = ?", (before, key))
        db.close()
    ledger, state = loaded(ws)
    assert row_cache._rows(state, row_cache.ROWS) is not None  # as saved: read
    ledger.store.close()


def test_a_tracked_view_records_what_was_read() -> None:
    view: dict[str, Any] = {"todos": {"t1": {"status": "open"}}, "hypotheses": {"h": {}}}
    tracked = TrackedView(view)
    assert tracked["todos"]["t1"] == {"status": "open"}
    assert tracked["hypotheses"].get("missing") is None
    assert "x" not in tracked["todos"]
    assert list(tracked["hypotheses"].values()) == [{}]
    assert tracked.deps == {("lanes/todos", "t1"), ("lanes/hypotheses", "missing"),
                            ("lanes/todos", "x"), ("lanes/hypotheses", WHOLE),
                            ("lanes/hypotheses", "h")}
    with pytest.raises(TypeError):
        json.dumps(tracked["todos"])  # never read as an empty dict behind the tracking


@pytest.mark.parametrize("command", ["frontier", "candidates"])
def test_the_direct_command_prints_what_click_prints(research: tuple[Workspace, ResearchLoop],
                                                     command: str) -> None:
    ws, loop = research
    loop.judge("h-d", "dev")
    direct = cold(ws.root, command, "--json")  # a fresh interpreter, through loopx.cli.main
    clicked = CliRunner().invoke(cli, ["-C", str(ws.root), command, "--json"])
    assert direct["code"] == clicked.exit_code == 0
    assert direct["out"] == clicked.stdout
    never = ("click", "pydantic", "networkx", "loopx.cli.app", "loopx.tools")
    assert [m for m in direct["modules"]
            if any(m == n or m.startswith(f"{n}.") for n in never)] == []


def test_a_failing_projection_costs_the_rows_never_the_checkpoint(
        research: tuple[Workspace, ResearchLoop], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ws, loop = research
    loop.judge("h-d", "dev")

    def broken(view: Any, hypothesis_id: str) -> Any:
        raise KeyError("broken projection")

    monkeypatch.setattr(row_cache, "texts", broken)
    for old in (ws.dir / "checkpoints").iterdir():
        old.unlink()  # so the save folds from nothing and writes a whole file
    checkpoint(ws)  # saved, without rows
    assert "frontier rows not kept" in capsys.readouterr().err
    monkeypatch.undo()
    ledger, state = loaded(ws)
    db = loaded_db(state)
    assert db is not None and not row_cache._valid(db)
    saved = json.loads(db.execute("SELECT value FROM meta WHERE key = 'cursor'").fetchone()[0])
    assert saved["seq"] == loop.ledger.store.head().seq  # the checkpoint was saved at the head
    assert printed(state) == rebuilt(ws)
    ledger.store.close()


def test_the_direct_path_takes_only_the_plain_json_forms(tmp_path: Path) -> None:
    from loopx.cli.direct import parse

    assert parse(["-C", "ws", "frontier", "--json"]) == ("frontier", "ws", {"--json": True})
    assert parse(["candidates", "--json"]) is not None
    for other in (["frontier"], ["frontier", "--json", "--agent-id", "ev"],
                  ["candidates", "--json", "extra"], ["frontier", "--json", "--help"]):
        assert parse(other) is None, other  # click's
    # No workspace: the same error object and exit code as the click command.
    direct = cold(tmp_path, "frontier", "--json")
    clicked = CliRunner().invoke(cli, ["-C", str(tmp_path), "frontier", "--json"])
    assert direct["code"] == clicked.exit_code != 0
    assert json.loads(direct["out"]) == json.loads(clicked.stdout)


def kept_rows(ws: Workspace) -> dict[str, Any]:
    """The frontier rows the checkpoint's delta keeps, by hypothesis."""
    path = ws.ledger().checkpoint_path
    assert path is not None
    delta = json.loads(delta_path(path).read_bytes())
    extra = delta["extras"][row_cache.EXTRA]
    assert extra["cursor"] == delta["cursor"]
    return dict(extra["rows"])


def test_a_delta_save_keeps_the_rows_it_changed_and_none_is_served_stale(
        research: tuple[Workspace, ResearchLoop]) -> None:
    ws, loop = research
    run_and_promote_then_save(ws, loop)
    kept = kept_rows(ws)
    assert {"h-a", "h-d"} <= kept.keys()
    ledger, state = loaded(ws)
    assert row_cache._since(state) == (kept, set())  # nothing left to recompute
    assert printed(state) == rebuilt(ws)
    ledger.store.close()

    # Records after that save, one changing a kept row and one a row the file keeps: both
    # recomputed by the reader, never printed as kept.
    loop.judge("h-d", "dev")
    decide(loop.ledger, loop.agents["ev"], "h-b", "retired", reason="contradicted")
    ledger, state = loaded(ws)
    found = row_cache._since(state)
    assert found is not None and {"h-b", "h-d"} <= found[1]
    frontier_text, candidates_text = printed(state)
    assert (frontier_text, candidates_text) == rebuilt(ws)
    now = {h["hypothesis_id"]: row_cache.dumps(h)
           for h in json.loads(frontier_text)["hypotheses"]}
    assert now["h-d"] != kept["h-d"][1]  # the kept row is stale now: it must not be printed
    ledger.store.close()

    # Saved again as a delta of the same file: it keeps the rows of both saves, at its head.
    checkpoint(ws)
    assert {"h-a", "h-b", "h-d"} <= kept_rows(ws).keys()
    assert kept_rows(ws)["h-d"][1] == now["h-d"]
    ledger, state = loaded(ws)
    assert row_cache._since(state) is not None and row_cache._since(state)[1] == set()
    assert printed(state) == rebuilt(ws)
    ledger.store.close()


def test_kept_rows_that_do_not_name_the_deltas_state_are_not_read(
        research: tuple[Workspace, ResearchLoop]) -> None:
    ws, loop = research
    run_and_promote_then_save(ws, loop)
    path = delta_path(ws.ledger().checkpoint_path)  # type: ignore[arg-type]
    good = json.loads(path.read_bytes())
    extra = good["extras"][row_cache.EXTRA]
    for bad in ({**extra, "cursor": {**extra["cursor"], "seq": 1}}, {**extra, "stamp": "0/0"}):
        # Stale rows (a wrong text for h-d) under a wrong cursor or stamp: never printed.
        rows = {**extra["rows"], "h-d": [extra["rows"]["h-d"][0], '{"stale": true}',
                                         None, None, None, []]}
        path.write_text(json.dumps({**good, "extras": {row_cache.EXTRA: {**bad, "rows": rows}}}))
        ledger, state = loaded(ws)
        assert row_cache._kept(state) is None
        assert {"h-a", "h-d"} <= row_cache._since(state)[1]  # type: ignore[index]
        assert printed(state) == rebuilt(ws)
        ledger.store.close()


@pytest.mark.parametrize("command", ["frontier", "candidates"])
def test_the_installed_command_writes_to_a_pipe_what_click_prints(
        research: tuple[Workspace, ResearchLoop], command: str) -> None:
    ws, loop = research
    loop.judge("h-d", "dev")
    checkpoint(ws)  # a delta keeping rows
    loop.judge("h-d", "dev")
    done = subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(ws.root), command,
                           "--json"], capture_output=True, check=True)
    clicked = CliRunner().invoke(cli, ["-C", str(ws.root), command, "--json"])
    assert done.stdout == clicked.stdout_bytes
    assert done.stdout.decode() == rebuilt(ws)[0 if command == "frontier" else 1] + "\n"


def test_an_answer_in_pieces_goes_out_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopx.cli import direct

    pieces = [f"{n:05d}, ".encode() for n in range(3000)] + [b"", "\u00e9".encode()]
    read_end, write_end = os.pipe()
    out = open(write_end, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    calls: list[int] = []

    def short(fd: int, buffers: list[Any]) -> int:
        # As a write a signal interrupts: only part of what was asked.
        calls.append(len(buffers))
        return os.write(fd, b"".join(buffers)[:777])

    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(os, "writev", short)
    direct._print_chunks(pieces)
    monkeypatch.undo()
    out.close()
    with open(read_end, "rb") as got:
        assert got.read() == b"".join(pieces) + b"\n"
    assert len(calls) > 1 and max(calls) <= 1024
