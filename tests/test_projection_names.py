"""The flow's schema names (004 Source And Projection Flow): the evidence graph export is a
``research_evidence_graph_v0`` and the frontier a ``decentralized_research_frontier_v0``, in
the library and in every command's JSON, filtered or not."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import invoke
from lanes_support import workspace_loop

from loopx.research.graph import SCHEMA, build, graph_json
from loopx.workspace import find_workspace

GRAPH = "research_evidence_graph_v0"
FRONTIER = "decentralized_research_frontier_v0"


def workspace(tmp_path: Path) -> Path:
    """A file workspace with a contract and one hypothesis judged on dev."""
    _, r = workspace_loop(tmp_path, "names")
    r.supported("h1", [0.95, 0.96, 0.97], None)
    r.ledger.store.close()
    return tmp_path


def test_the_graph_export_names_its_schema(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    out = invoke(root, "graph", "--json")
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema_version"] == GRAPH == SCHEMA
    assert [n["id"] for n in doc["nodes"] if n["kind"] == "hypothesis"] == ["hypothesis:h1"]
    opened = find_workspace(root).ledger()
    try:
        state = opened.state()
        assert graph_json(state["lanes"], state.seq)["schema_version"] == GRAPH
        assert build(state["lanes"]).graph["schema_version"] == GRAPH
    finally:
        opened.store.close()


def test_the_frontier_names_its_schema_filtered_or_not(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    for extra in ((), ("--agent-id", "ex"), ("--agent-id", "ev"), ("--agent-id", "owner")):
        out = invoke(root, "frontier", *extra, "--json")
        assert out.exit_code == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["schema_version"] == FRONTIER, extra
        assert set(doc) == {"schema_version", "head_seq", "agent_id", "role", "hypotheses"}
    everyone = json.loads(invoke(root, "frontier", "--json").stdout)
    assert [h["hypothesis_id"] for h in everyone["hypotheses"]] == ["h1"]
