"""The novelty gate from the command line: grounding add and list, a novel verdict on the
proposer's own source (re-spelled) refused with a non-zero exit and recorded, the contract's
novelty boundary applied, and grounding refs in `loopx graph`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from loopx.cli import cli
from loopx.kernel.verify import verify_store
from loopx.workspace import find_workspace

BOUNDARY = json.dumps({"statement": "new relative to the 2020 survey",
                       "prior_art": [{"kind": "paper", "ref": "doi:10.1000/survey.2020"}]})


def run(ws: Path, *args: str, token: str | None = None, agent: str | None = None) -> Result:
    env = {"LOOPX_TOKEN": token or "", "LOOPX_AGENT_ID": agent or ""}
    result = CliRunner().invoke(cli, ["-C", str(ws), *args], env=env)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def ok(ws: Path, *args: str, token: str | None = None, agent: str | None = None) -> Any:
    result = run(ws, *args, "--json", token=token, agent=agent)
    assert result.exit_code == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def head(ws: Path) -> int:
    with find_workspace(ws).store() as store:
        return store.head().seq


@pytest.fixture
def ws(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    assert run(tmp_path, "init", "--goal-id", "novelty", "--owner-token-file",
               str(tmp_path / "owner.token")).exit_code == 0
    tokens = {"owner": (tmp_path / "owner.token").read_text().strip()}
    for agent, role in (("cur", "research_curator"), ("prop", "hypothesis_proposer"),
                        ("ev", "evaluator_promoter")):
        tokens[agent] = ok(tmp_path, "agent", "register", "--agent-id", agent, "--role", role,
                           token=tokens["owner"])["token"]
    ok(tmp_path, "contract", "init", "--prompt", "Beat the baseline.", "--metric", "acc",
       "--direction", "maximize", "--baseline", "0.9", "--seeds", "0,1",
       "--protected", "eval/", "--set", f"novelty_boundary={BOUNDARY}", token=tokens["cur"],
       agent="cur")
    ok(tmp_path, "todo", "add", "--todo-id", "p1", "--title", "propose", "--role",
       "hypothesis_proposer", "--action", "propose_hypothesis", "--assign", "prop",
       token=tokens["owner"], agent="owner")
    claim = ok(tmp_path, "quota", "should-run", "--claim", token=tokens["prop"], agent="prop")
    ok(tmp_path, "hypothesis", "propose", "--hypothesis-id", "h1", "--title", "wide",
       "--statement", "wider layers lift accuracy", "--mechanism", "width", "--claims-novelty",
       "--grounding", "url:https://example.org/papers/wide-nets",
       "--under", f"p1:{claim['todo']['epoch']}", token=tokens["prop"], agent="prop")
    return tmp_path, tokens


def test_grounding_add_and_list(ws: tuple[Path, dict[str, str]]) -> None:
    root, t = ws
    mine = ok(root, "grounding", "add", "paper:arXiv:2101.00001v2", "--hypothesis", "h1",
              "--note", "the width trick", token=t["prop"], agent="prop")
    assert (mine["hypothesis_id"], mine["normalised"]) == ("h1", "arxiv:2101.00001")
    assert set(mine) == {"grounding_id", "seq", "hypothesis_id", "ref", "normalised"}
    wide = ok(root, "grounding", "add", "url:https://example.org/tutorial", "--campaign",
              token=t["cur"], agent="cur")
    assert wide["hypothesis_id"] is None
    listed = ok(root, "grounding", "list", "--hypothesis", "h1")
    assert [(g["source"], g["normalised"]) for g in listed["refs"]] == [
        ("research_hypothesis_v0", "web:example.org/papers/wide-nets"),
        ("grounding_ref_v0", "arxiv:2101.00001"),
        ("grounding_ref_v0", "web:example.org/tutorial")]
    assert listed["novelty_boundary"]["prior_art"] == [
        {"kind": "paper", "ref": "doi:10.1000/survey.2020", "sha256": None, "note": None}]
    text = run(root, "grounding", "list").stdout
    assert "as arxiv:2101.00001" in text and "novelty boundary (contract v1)" in text
    graph = ok(root, "graph")
    assert graph["counts"]["by_kind"]["grounding_ref"] == 2
    assert {"source": f"grounding:{mine['grounding_id']}", "target": "hypothesis:h1",
            "type": "grounds"} in graph["edges"]


@pytest.mark.parametrize(("args", "code", "needle"), [
    (("grounding", "add", "paper:x"), 2, "--hypothesis ID or --campaign"),
    (("grounding", "add", "paper:x", "--hypothesis", "h1", "--campaign"), 2, "one of them"),
    (("grounding", "add", "nokind", "--hypothesis", "h1"), 2, "expected e.g."),
    (("grounding", "add", "rumour:x", "--hypothesis", "h1"), 2, "payload.ref.kind"),
    (("grounding", "add", "paper:x", "--campaign"), 7, "may not write grounding_ref_v0"),
    (("grounding", "add", "paper:x", "--hypothesis", "h9"), 8, "does not exist"),
])
def test_grounding_add_refusals_write_nothing(ws: tuple[Path, dict[str, str]],
                                              args: tuple[str, ...], code: int,
                                              needle: str) -> None:
    root, t = ws
    before = head(root)
    result = run(root, *args, "--json", token=t["prop"], agent="prop")
    assert result.exit_code == code, result.stdout + result.stderr
    assert needle in json.loads(result.stdout)["message"]
    assert head(root) == before


def test_a_novel_verdict_on_the_proposers_source_is_refused_and_recorded(
        ws: tuple[Path, dict[str, str]]) -> None:
    root, t = ws
    prior = "--ref", "paper:https://doi.org/10.1000/SURVEY.2020"
    before = head(root)
    # The proposer's own source, with the case changed and a fragment added.
    result = run(root, "novelty", "audit", "h1", "--verdict", "novel", *prior,
                 "--ref", "url:HTTPS://EXAMPLE.org/papers/wide-nets#results", "--json",
                 token=t["ev"], agent="ev")
    assert result.exit_code == 8, result.stdout + result.stderr
    error = json.loads(result.stdout)
    assert (error["error"], error["rule"], error["recorded_seq"]) == (
        "research_refused", "novelty_material", before + 1)
    assert "ideation material" in error["message"] and "grounding list" in error["hint"]
    assert head(root) == before + 1
    row = ok(root, "frontier")["hypotheses"][0]
    assert row["gates"]["novelty"]["status"] == "pending"
    # Missing the boundary's prior art.
    result = run(root, "novelty", "audit", "h1", "--verdict", "novel", "--ref",
                 "paper:arXiv:1608.03983", "--json", token=t["ev"], agent="ev")
    assert result.exit_code == 8 and json.loads(result.stdout)["rule"] == "novelty_boundary"
    # Naming nothing: refused before anything is written.
    before = head(root)
    result = run(root, "novelty", "audit", "h1", "--verdict", "novel", "--json",
                 token=t["ev"], agent="ev")
    assert result.exit_code == 2 and json.loads(result.stdout)["problems"][0]["field"] == (
        "payload.refs")
    assert head(root) == before
    out = ok(root, "novelty", "audit", "h1", "--verdict", "novel", *prior, "--ref",
             "paper:arXiv:1608.03983", token=t["ev"], agent="ev")
    assert set(out) == {"audit_id", "seq", "hypothesis_id", "verdict", "refs"}
    novelty = ok(root, "frontier")["hypotheses"][0]["gates"]["novelty"]
    assert (novelty["status"], novelty["rests_on"]) == ("passed", [out["audit_id"]])
    with find_workspace(root).store() as store:
        assert verify_store(store).ok
