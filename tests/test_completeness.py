"""``completeness`` (002's PROPOSAL_COMPLETENESS): which fields a well-formed hypothesis carries
are present, a pure function of the folded state, shown in the frontier and on the graph's
hypothesis nodes. It is not a novelty, quality, safety or performance score, and it never
gates anything: incomplete hypotheses are judged and promoted like complete ones, and a
contradicted hypothesis can be complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_support import invoke
from lanes_support import lanes, research_loop, workspace_loop

from loopx.kernel.ledger import Ledger
from loopx.research.completeness import FIELDS, completeness
from loopx.research.graph import graph_json
from loopx.research.projections import candidates, frontier, row

GOOD, HELDOUT, WORSE = [0.95, 0.96, 0.97], [0.93, 0.94, 0.95], [0.80, 0.81, 0.82]
FULL: dict[str, Any] = {
    "parameters": {"width": 128}, "expected_effect": "dev accuracy rises by about 0.05",
    "grounding_refs": [{"kind": "url", "ref": "https://example.org/wide-nets"}],
    "no_grounding_reason": None,
}


def test_each_field_is_counted_present_or_missing() -> None:
    r = research_loop()
    r.propose("bare", parameters={})
    r.propose("full", mechanism="width", **FULL)
    bare = row(lanes(r), "bare").completeness
    assert bare == {"present": 5, "total": 7, "score": 0.714,
                    "missing": ["parameters", "expected_effect"],
                    "fields": {**dict.fromkeys(FIELDS, True), "parameters": False,
                               "expected_effect": False}}
    full = row(lanes(r), "full").completeness
    assert (full["present"], full["total"], full["score"], full["missing"]) == (7, 7, 1.0, [])
    # Whitespace is no statement of an expected effect; a no-grounding reason is grounding.
    r.propose("blank", parameters={"depth": 2}, expected_effect="   ")
    assert row(lanes(r), "blank").completeness["missing"] == ["expected_effect"]
    assert list(FIELDS) == ["statement", "mechanism_family", "parameters", "grounding",
                            "expected_effect", "todo", "analysis_plan"]


def test_it_never_gates_and_does_not_measure_quality() -> None:
    r = research_loop()
    r.supported("bare", GOOD, HELDOUT)
    r.supported("full", GOOD, HELDOUT, mechanism="depth", **FULL)
    r.supported("wrong", GOOD, WORSE, mechanism="lr", **{**FULL, "parameters": {"lr": 9}})
    rows = {x.hypothesis_id: x for x in frontier(lanes(r))}
    # The incomplete hypothesis is a promotion candidate exactly like the complete one ...
    assert rows["bare"].completeness["score"] < 1.0 == rows["full"].completeness["score"]
    assert (rows["bare"].state, rows["full"].state) == ("at_promotion_gate",) * 2
    assert [c["hypothesis_id"] for c in candidates(lanes(r))["promotion"]] == ["bare", "full"]
    # ... and a hypothesis the evidence contradicts is no less complete for it.
    assert rows["wrong"].completeness["score"] == 1.0
    assert rows["wrong"].retirement is not None


def test_it_is_a_pure_function_of_the_log_and_on_the_graph(tmp_path: Path) -> None:
    ws, r = workspace_loop(tmp_path, "complete")
    ledger = r.ledger
    r.propose("bare")
    r.propose("full", **FULL)
    state = ledger.state()
    first = {h: completeness(state["lanes"], e) for h, e in state["lanes"]["hypotheses"].items()}
    ledger.store.close()
    # A fresh fold of the same log (no checkpoint) gives the same answer.
    fresh = Ledger(ws.store(), checkpoint_path=None).state()["lanes"]
    assert {h: completeness(fresh, e) for h, e in fresh["hypotheses"].items()} == first
    graph = json.loads(invoke(tmp_path, "graph", "--json").stdout)
    nodes = {n["id"]: n for n in graph["nodes"] if n["kind"] == "hypothesis"}
    assert nodes["hypothesis:bare"]["completeness"] == first["bare"]
    assert nodes["hypothesis:full"]["completeness"]["score"] == 1.0
    rows = json.loads(invoke(tmp_path, "frontier", "--json").stdout)["hypotheses"]
    assert {x["hypothesis_id"]: x["completeness"] for x in rows} == first
    assert graph_json(fresh, graph["head_seq"]) == graph
