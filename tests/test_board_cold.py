"""A cold ``loopx board`` loads only what it renders: no record models (pydantic) and no networkx
(the evidence graph is listed from plain dicts, the same nodes and edges networkx gives). A
long campaign's board cuts each long list to ``board.LIMIT`` items and says so on the page, with
the command that lists them all, while it still shows the campaign's state, the next actions and
a chart per shown hypothesis, and every card still links to evidence on the page. Behaviour,
not timing: bench/cold_should_run.py measures the time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest
from helpers import research_workspace
from narrator_support import fixed_campaign
from test_cold_imports import PROBE

from loopx.narrator import board
from loopx.narrator.publish import render
from loopx.research.graph import build, graph_json
from loopx.testing.research import CONTRACT
from loopx.workspace import init_workspace


def test_a_cold_board_loads_no_record_models_and_no_networkx(tmp_path: Path) -> None:
    init_workspace(tmp_path, "cold-board")
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["-C", str(tmp_path),
                                                                     "board"])],
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    assert result["code"] == 0 and result["out"].lstrip().lower().startswith("<!doctype html")
    needless = [m for m in result["modules"] if m.split(".")[0] in ("pydantic", "networkx")
                or (m.startswith("loopx.") and m.endswith(".records"))]
    assert needless == []


def test_the_plain_graph_lists_what_networkx_lists() -> None:
    view = fixed_campaign().view()
    g = build(view)  # a networkx.MultiDiGraph
    nodes = [{"id": node, **data} for node, data in sorted(g.nodes(data=True))]
    edges = sorted(({"source": s, "target": t, "type": data["type"]}
                    for s, t, data in g.edges(data=True)),
                   key=lambda e: (e["source"], e["target"], e["type"]))
    listed = graph_json(view, 1)
    assert listed["nodes"] == nodes and listed["edges"] == edges and nodes


def _cut_board(monkeypatch: pytest.MonkeyPatch, limit: int) -> str:
    monkeypatch.setattr(board, "LIMIT", limit)
    f = fixed_campaign()
    return render(f.c.ledger, "board", "html").text


def test_a_long_board_cuts_its_lists_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    full = _cut_board(monkeypatch, 1000)
    assert 'class="more"' not in full  # nothing is cut below the limit
    text = _cut_board(monkeypatch, 1)
    notes = re.findall(r'<p class="more" data-list="(\w+)" data-shown="(\d+)" '
                       r'data-total="(\d+)">(.*?)</p>', text)
    cut = {name: (int(shown), int(total)) for name, shown, total, _ in notes}
    assert {"graph", "evidence", "charts", "next"} <= set(cut)
    for _name, shown, total, words in notes:
        assert int(shown) < int(total)
        assert f"Showing {shown} of {total}" in words and "<code>loopx " in words
    # At most one card per column; each card's evidence is on the page.
    for column in re.findall(r'data-column="\w+">(.*?)</div>', text):
        assert column.count('class="card"') <= 1
    anchors = set(re.findall(r'<h3 id="([^"]+)"', text))
    assert set(re.findall(r'class="card" href="#([^"]+)"', text)) <= anchors
    assert text.count('<figure class="chart"') == 1
    # What the board always shows: the campaign's state, the next actions, the frontier.
    assert 'id="status"' in text and 'id="next-candidates"' in text
    assert unescape(full).count("<tr><td>") == unescape(text).count("<tr><td>")


# The entry point on real streams, writing the modules it loaded to the file argv[1] at exit.
MODULES_AT_EXIT = """
import atexit, json, sys
listed = sys.argv.pop(1)
atexit.register(lambda: open(listed, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "loopx"
from loopx.cli import main
main()
"""
CLICK_ONLY = ("import sys; sys.argv[0] = 'loopx'; from loopx.cli.app import main; main()")


def _both(root: Path, *args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """``loopx -C root ARGS`` through the entry point (the direct path) and through click."""
    out = []
    for lead in (["-m", "loopx.cli"], ["-c", CLICK_ONLY]):
        done = subprocess.run([sys.executable, *lead, "-C", str(root), *args],
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "PYTHONIOENCODING": "utf-8"})
        out.append((done.returncode, done.stdout, done.stderr))
    return out[0], out[1]


def test_a_plain_board_runs_without_click_and_prints_what_click_prints(tmp_path: Path) -> None:
    from loopx.cli.direct import parse

    ws, _ = init_workspace(tmp_path / "ws", "direct-board")
    r = research_workspace(tmp_path / "lab", "direct-board")
    r.contract(CONTRACT)
    r.propose("h-leak", title="reuse AKIAIOSFODNN7EXAMPLE from the lab")
    r.ledger.store.close()
    listed = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", MODULES_AT_EXIT, str(listed), "-C",
                           str(ws.root), "board"], capture_output=True, text=True, timeout=120,
                          check=False,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0 and done.stdout.lstrip().lower().startswith("<!doctype html")
    assert "click" not in json.loads(listed.read_text())
    for root in (ws.root, tmp_path / "lab", tmp_path / "nowhere"):
        direct, clicked = _both(root, "board")
        assert direct == clicked
    assert _both(tmp_path / "lab", "board")[0][0] == 10  # blocked by the redaction gate
    assert parse(["-C", str(ws.root), "board"]) is not None
    for other in (["board", "--json"], ["board", "--out", "b.html"], ["board", "--serve"],
                  ["board", "--help"]):
        assert parse(other) is None, other


def test_the_board_draws_the_same_picture_from_the_evidence_alone() -> None:
    from loopx.narrator.html import render_board
    from loopx.narrator.story import build as story

    f = fixed_campaign()
    state = f.c.ledger.state()
    view = state["lanes"]
    doc = story(view, state.seq, state.cursor.hash).doc
    full, marks = graph_json(view, state.seq), graph_json(view, state.seq, evidence_only=True)
    assert {n["kind"] for n in full["nodes"]} - {n["kind"] for n in marks["nodes"]} >= {
        "todo", "contract"}
    assert render_board(doc, marks) == render_board(doc, full)
