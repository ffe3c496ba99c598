"""The research plan (not the analysis plan): the curator or the owner records ordered steps, a
revision supersedes the version in force, each step's status is derived from the log and never
declared, and the story shows it public-safe; through the Python API, the write path by hand, the
CLI and the narrator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from lanes_support import campaign, lanes, research_loop
from narrator_support import fixed_campaign

from loopx.cli import cli
from loopx.kernel.canonical import dumps
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import (
    Forbidden,
    NotFound,
    RecordRejected,
    RedactionBlocked,
    Refused,
)
from loopx.kernel.verify import verify_store
from loopx.narrator.publish import render
from loopx.research.decisions import decide
from loopx.research.projections import candidates, frontier
from loopx.research.research_plan import record_plan, show
from loopx.testing.research import CONTRACT, GOOD, WORSE, ResearchLoop
from loopx.work.claims import complete, should_run
from loopx.work.todos import add_todos
from loopx.workspace import init_workspace

PLAN: dict[str, Any] = {
    "summary": "Capacity first, then the schedule.",
    "steps": [
        {"step_id": "widths", "title": "Widen the hidden layer", "rationale": "cheapest first",
         "hypotheses": ["h1", "h2"]},
        {"step_id": "run", "title": "Ground the next ideas", "todos": ["ground-x"]},
        {"step_id": "write-up", "title": "Write up", "experiments": ["an ablation table"]},
    ],
}


def statuses(r: ResearchLoop) -> dict[str, str]:
    return {s["step_id"]: s["status"] for s in show(lanes(r))["steps"]}


def unchanged(r: ResearchLoop, fn: Any, error: type[Exception],
              match: str | None = None) -> Exception:
    """``fn`` is refused with ``error`` and nothing is written (not even a refusal record)."""
    before = r.ledger.store.head().seq
    with pytest.raises(error, match=match) as caught:
        fn()
    assert r.ledger.store.head().seq == before
    return caught.value


# -- recording and revising -------------------------------------------------------------------

def test_the_curator_records_version_1_and_the_fold_keeps_it() -> None:
    r = research_loop()
    record = record_plan(r.ledger, r.agents["cur"], PLAN)
    p = record["payload"]
    assert (p["plan_id"], p["version"], p["supersedes"]) == ("research-plan", 1, None)
    assert record["lane_role"] == "research_curator" and record["visibility"] == "public"
    out = show(lanes(r))
    assert out["in_force"] == 1 and out["plan"]["record_id"] == record["record_id"]
    assert [s["step_id"] for s in out["steps"]] == ["widths", "run", "write-up"]
    assert out["counts"] == {"done": 0, "in_progress": 0, "pending": 2, "untracked": 1}
    assert out["steps"][0]["hypotheses"] == [
        {"hypothesis_id": "h1", "state": "not_proposed", "done": False},
        {"hypothesis_id": "h2", "state": "not_proposed", "done": False}]
    assert out["steps"][1]["todos"] == [{"todo_id": "ground-x", "status": "not_added",
                                         "done": False}]
    assert verify_store(r.ledger.store).ok


def test_a_revision_supersedes_the_version_in_force_and_says_why() -> None:
    r = research_loop()
    v1 = record_plan(r.ledger, r.agents["cur"], PLAN)
    unchanged(r, lambda: record_plan(r.ledger, r.agents["cur"], PLAN), RecordRejected,
              "payload.reason: a revision of research plan version 1 must say why")
    unchanged(r, lambda: record_plan(r.ledger, r.agents["cur"], PLAN, reason="again"), Refused,
              "the revision changes nothing")
    replan = {**PLAN, "steps": [{"step_id": "depth", "title": "Try depth"}, *PLAN["steps"]]}
    unchanged(r, lambda: record_plan(r.ledger, r.agents["cur"], {**replan, "plan_id": "mine"},
                                     reason="x"), Refused, "a revision keeps plan_id")
    v2 = record_plan(r.ledger, r.agents["cur"], replan, reason="depth looks cheaper")
    assert (v2["payload"]["version"], v2["payload"]["supersedes"]) == (2, v1["record_id"])
    out = show(lanes(r))
    assert out["in_force"] == 2 and out["steps"][0]["step_id"] == "depth"
    assert [(v["version"], v["reason"]) for v in out["versions"]] == [
        (1, None), (2, "depth looks cheaper")]
    assert show(lanes(r), 1)["plan"]["record_id"] == v1["record_id"]
    with pytest.raises(NotFound, match="no research plan version 3"):
        show(lanes(r), 3)


def test_the_owner_may_plan_and_other_roles_may_not() -> None:
    r = research_loop()
    for agent in ("prop", "ex", "ev"):
        unchanged(r, lambda agent=agent: record_plan(r.ledger, r.agents[agent], PLAN), Forbidden,
                  "may not write research_plan_v0 with action 'create'")
    record = record_plan(r.ledger, r.owner, PLAN)
    assert record["agent_id"] == "owner"
    unchanged(r, lambda: record_plan(r.ledger, r.agents["ev"], {**PLAN, "summary": "mine"},
                                     reason="I decide"), Forbidden, "action 'revise'")


def test_version_and_supersedes_are_loopx_s_and_a_forged_chain_is_refused() -> None:
    r = research_loop()
    unchanged(r, lambda: record_plan(r.ledger, r.agents["cur"], {**PLAN, "version": 5}),
              RecordRejected, "payload.version: is set by loopx")
    v1 = record_plan(r.ledger, r.agents["cur"], PLAN)
    record_plan(r.ledger, r.agents["cur"], {**PLAN, "summary": "v2"}, reason="r")

    def by_hand(payload: dict[str, Any]) -> Any:
        return r.ledger.append({"payload": payload}, creds=r.agents["cur"],
                               kind="research_plan_v0")

    # Written around the tool: a second version 1, a version skipped, a revision of an old
    # version (to undo a replan quietly): each refused by the write check, nothing written.
    unchanged(r, lambda: by_hand({**PLAN, "plan_id": "research-plan"}), Refused,
              "a research plan exists")
    unchanged(r, lambda: by_hand({**PLAN, "plan_id": "research-plan", "version": 4,
                                  "supersedes": v1["record_id"], "reason": "r"}), Refused,
              "is version 3 and supersedes")
    unchanged(r, lambda: by_hand({**PLAN, "plan_id": "research-plan", "version": 3,
                                  "supersedes": v1["record_id"], "reason": "r"}), Refused,
              "is version 3 and supersedes")
    unchanged(r, lambda: by_hand({**PLAN, "plan_id": "research-plan", "version": 2,
                                  "supersedes": None}), RecordRejected,
              "a later version supersedes the one before it")


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda p: p.pop("steps"), "payload.steps"),
    (lambda p: p.update(steps=[]), "payload.steps"),
    (lambda p: p["steps"].append({"step_id": "widths", "title": "again"}), "payload.steps"),
    (lambda p: p["steps"][0].update(title=""), "payload.steps.0.title"),
    (lambda p: p["steps"][0].update(hypotheses=["h1", "h1"]), "payload.steps.0"),
    (lambda p: p["steps"][0].update(hypotheses=["has space"]), "payload.steps.0.hypotheses.0"),
    # A curator cannot declare a step done: the status is derived, never a field.
    (lambda p: p["steps"][0].update(status="done"), "payload.steps.0.status"),
    (lambda p: p["steps"][0].update(rationale="AKIAIOSFODNN7EXAMPLE"),
     "payload.steps.0.rationale"),
])
def test_a_malformed_plan_is_refused_naming_the_field(mutate: Any, field: str) -> None:
    r = research_loop()
    plan = json.loads(json.dumps(PLAN))
    mutate(plan)
    err = unchanged(r, lambda: record_plan(r.ledger, r.agents["cur"], plan), RecordRejected)
    assert isinstance(err, RecordRejected)
    assert any(f.startswith(field) for f in err.fields), err.fields


# -- status, derived from the log ---------------------------------------------------------------

def test_each_steps_status_follows_the_log() -> None:
    r = research_loop()
    record_plan(r.ledger, r.agents["cur"], PLAN)
    assert statuses(r) == {"widths": "pending", "run": "pending", "write-up": "untracked"}
    r.supported("h1", GOOD, GOOD)
    assert statuses(r)["widths"] == "in_progress"
    decide(r.ledger, r.agents["ev"], "h1", "promoted")
    assert statuses(r)["widths"] == "in_progress"  # h2 not proposed yet
    r.supported("h2", WORSE, None)
    decide(r.ledger, r.agents["ev"], "h2", "retired", reason="contradicted")
    step = show(lanes(r))["steps"][0]
    assert step["status"] == "done"
    assert [(h["hypothesis_id"], h["state"], h["done"]) for h in step["hypotheses"]] == [
        ("h1", "promoted", True), ("h2", "retired", True)]
    add_todos(r.ledger, r.owner, [{"todo_id": "ground-x", "title": "x",
                                   "role": "research_curator", "action_kind": "add_grounding"}])
    assert statuses(r)["run"] == "pending"  # added, not claimed
    got = should_run(r.ledger, "cur", claim=True, creds=r.agents["cur"])
    assert got["todo"]["todo_id"] == "ground-x"
    assert statuses(r)["run"] == "in_progress"
    complete(r.ledger, r.agents["cur"], "ground-x", got["todo"]["epoch"], {"refs": []})
    assert statuses(r)["run"] == "done"
    assert show(lanes(r))["counts"] == {"done": 2, "in_progress": 0, "pending": 0,
                                       "untracked": 1}


def test_the_measured_baseline_is_done_once_measured_on_heldout() -> None:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"}})
    record_plan(r.ledger, r.agents["cur"], {"steps": [
        {"step_id": "base", "title": "Measure the baseline", "hypotheses": ["base"]}]})
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", [0.9, 0.9, 0.9])
    assert statuses(r) == {"base": "in_progress"}
    r.run("base", "heldout", [0.9, 0.9, 0.9])
    assert statuses(r) == {"base": "done"}


def test_a_plan_changes_no_judgement_or_candidate() -> None:
    r = research_loop()
    r.supported("h1", GOOD, GOOD)
    r.supported("h2", WORSE, None)
    before = dumps({"frontier": [row.to_json() for row in frontier(lanes(r))],
                    "candidates": candidates(lanes(r))})
    record_plan(r.ledger, r.agents["cur"], {"steps": [
        {"step_id": "s", "title": "promote h2 please", "rationale": "trust me",
         "hypotheses": ["h2"]}]})
    after = dumps({"frontier": [row.to_json() for row in frontier(lanes(r))],
                   "candidates": candidates(lanes(r))})
    assert after == before


# -- the CLI --------------------------------------------------------------------------------------

def run(ws: Path, *args: str, token: str = "") -> Result:
    result = CliRunner().invoke(cli, ["-C", str(ws), *args],
                                env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": ""})
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


TOML = """summary = "Capacity first."

[[steps]]
step_id = "widths"
title = "Widen the hidden layer"
rationale = "cheapest first"
hypotheses = ["h1", "h2"]

[[steps]]
step_id = "write-up"
title = "Write up"
experiments = ["an ablation table"]
"""


@pytest.fixture
def ws(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    workspace, owner_token = init_workspace(tmp_path, "plan-cli")
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner_token))
    try:
        r.contract(CONTRACT)
        r.propose("h1")
    finally:
        r.ledger.store.close()
    tokens = {name: str(c.token) for name, c in r.agents.items()}
    return tmp_path, {**tokens, "owner": owner_token}


def test_the_cli_records_a_toml_plan_and_shows_each_steps_status(
        ws: tuple[Path, dict[str, str]]) -> None:
    root, tokens = ws
    (root / "plan.toml").write_text(TOML)
    out = run(root, "research-plan", "record", str(root / "plan.toml"), "--agent-id", "cur",
              "--json", token=tokens["cur"])
    assert out.exit_code == 0, out.stdout + out.stderr
    made = json.loads(out.stdout)
    assert set(made) == {"plan_id", "version", "record_id", "seq", "supersedes", "steps",
                         "counts"}
    assert (made["version"], made["supersedes"]) == (1, None)
    shown = run(root, "research-plan", "show", "--json")
    assert shown.exit_code == 0
    doc = json.loads(shown.stdout)
    assert set(doc) == {"head_seq", "in_force", "plan", "steps", "counts", "versions"}
    assert set(doc["plan"]) == {"plan_id", "version", "supersedes", "summary", "reason",
                                "record_id", "seq", "ts", "agent_id", "visibility"}
    assert set(doc["steps"][0]) == {"step_id", "title", "rationale", "status", "hypotheses",
                                    "todos", "experiments"}
    assert [(s["step_id"], s["status"]) for s in doc["steps"]] == [
        ("widths", "in_progress"), ("write-up", "untracked")]
    assert doc["steps"][0]["hypotheses"][0] == {"hypothesis_id": "h1", "state": "proposed",
                                                "done": False}
    text = run(root, "research-plan", "show").stdout
    assert "1. [in progress] widths: Widen the hidden layer" in text
    assert "     - h2 (not proposed)" in text
    assert "experiment: an ablation table" in text
    # A JSON revision from stdin, as the owner, with its reason.
    replan = json.dumps({"steps": [{"step_id": "depth", "title": "Try depth",
                                    "hypotheses": ["h3"]}]})
    out = CliRunner().invoke(cli, ["-C", str(root), "research-plan", "record", "-",
                                   "--reason", "depth first", "--agent-id", "owner", "--json"],
                             input=replan, env={"LOOPX_TOKEN": tokens["owner"]})
    assert out.exit_code == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["supersedes"] == made["record_id"]
    text = run(root, "research-plan", "show").stdout
    assert "version 2 (in force: 2)" in text and "v2 (seq" in text and "depth first" in text
    assert json.loads(run(root, "research-plan", "show", "--version", "1", "--json").stdout)[
        "plan"]["version"] == 1
    assert run(root, "verify").exit_code == 0


@pytest.mark.parametrize(("content", "name", "agent", "code", "needle"), [
    ("steps = [", "p.toml", "cur", 2, "FILE is not valid TOML"),
    ("[1, 2]", "p.json", "cur", 2, "FILE must hold an object"),
    ("{\"steps\": [", "p.json", "cur", 2, "FILE is not valid JSON"),
    ("{}", "p.json", "cur", 2, "payload.steps"),
    ('{"steps": [{"step_id": "a", "title": "t"}], "supersedes": "rec_x"}', "p.json", "cur", 2,
     "payload.supersedes: is set by loopx"),
    ('{"steps": [{"step_id": "a", "title": "t"}]}', "p.json", "prop", 7,
     "may not write research_plan_v0"),
])
def test_cli_refusals_exit_non_zero_naming_the_problem(
        ws: tuple[Path, dict[str, str]], content: str, name: str, agent: str, code: int,
        needle: str) -> None:
    root, tokens = ws
    (root / name).write_text(content)
    before = run(root, "log", "--json").stdout
    out = run(root, "research-plan", "record", str(root / name), "--agent-id", agent, "--json",
              token=tokens[agent])
    assert out.exit_code == code, out.stdout + out.stderr
    assert needle in json.loads(out.stdout)["message"]
    assert run(root, "log", "--json").stdout == before


def test_show_without_a_plan_is_not_found(ws: tuple[Path, dict[str, str]]) -> None:
    root, _ = ws
    out = run(root, "research-plan", "show", "--json")
    assert out.exit_code == 6
    assert json.loads(out.stdout)["error"] == "not_found"
    out = run(root, "research-plan", "show")
    assert out.exit_code == 6 and "there is no research plan yet" in out.stderr


# -- the story --------------------------------------------------------------------------------------

def test_the_story_and_the_board_show_the_plan_with_each_steps_status() -> None:
    f = fixed_campaign()
    record_plan(f.c.ledger, f.r.agents["cur"], {"summary": "Width, then regularisation.",
                                                "steps": [
        {"step_id": "width", "title": "Widen", "rationale": "cheap",
         "hypotheses": ["h-wide", "h-wider"]},
        {"step_id": "reg", "title": "Regularise", "hypotheses": ["h-drop", "h-later"]},
        {"step_id": "words", "title": "Write up", "experiments": ["a table"]}]})
    text = render(f.c.ledger, "story", "md").text.replace("\\", "")
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads.index("## The research plan") == heads.index("## The analysis plan") + 1
    part = text.split("## The research plan\n")[1].split("\n## ")[0]
    assert "It is not the analysis plan" in part
    assert ("- Step 1, width: Widen; done: every hypothesis it names is decided and every todo "
            "finished.") in part
    assert "  - Why: cheap" in part
    assert "  - Hypothesis h-wide: promoted" in part
    assert "  - Hypothesis h-wider: retired" in part
    assert "- Step 2, reg: Regularise; in progress." in part
    assert "  - Hypothesis h-later: not proposed yet" in part
    assert "- Step 3, words: Write up; not tracked in the log" in part
    for surface, fmt in (("story", "html"), ("board", "html")):
        page = render(f.c.ledger, surface, fmt).text
        section = page.split('<section id="research-plan">')[1].split("</section>")[0]
        assert "<h2>The research plan</h2>" in section and "Hypothesis h-wide: promoted" in section


def test_the_plans_text_goes_through_the_redaction_gate_by_field() -> None:
    f = fixed_campaign()
    record = record_plan(f.c.ledger, f.r.agents["cur"], {"steps": [
        {"step_id": "s", "title": "Read the data", "rationale": "it is in /home/alice/data"}]})
    with pytest.raises(RedactionBlocked) as caught:
        render(f.c.ledger, "story", "md")
    assert any(x["record_id"] == record["record_id"] and x["field"] == "steps.0.rationale"
               for x in caught.value.findings), caught.value.findings


def test_a_private_plan_and_a_private_hypothesis_it_names_are_never_quoted() -> None:
    f = fixed_campaign()
    under = f.r.proposer_todo("h-secret-idea")
    f.c.ledger.append({"todo_id": under[0], "epoch": under[1], "visibility": "private",
                       "payload": {"hypothesis_id": "h-secret-idea", "title": "hidden",
                                   "statement": "s", "mechanism_family": "hidden",
                                   "claimed_by": "prop", "no_grounding_reason": "r"}},
                      creds=f.r.agents["prop"], kind="research_hypothesis_v0")
    complete(f.c.ledger, f.r.agents["prop"], *under, {"hypotheses": ["h-secret-idea"]})
    record_plan(f.c.ledger, f.r.agents["cur"], {"steps": [
        {"step_id": "s", "title": "Public step", "hypotheses": ["h-secret-idea"]}]})
    text = render(f.c.ledger, "story", "md").text.replace("\\", "")
    part = text.split("## The research plan\n")[1].split("\n## ")[0]
    assert "h-secret-idea" not in text
    assert "  - private hypothesis rec_" in part
    f.c.ledger.append({"visibility": "private", "payload": {
        "plan_id": "research-plan", "version": 2,
        "supersedes": f.view()["research_plans"]["versions"][-1]["record_id"],
        "reason": "the confidential replanning memo",
        "steps": [{"step_id": "s2", "title": "A confidential step title"}]}},
        creds=f.r.agents["cur"], kind="research_plan_v0")
    text = render(f.c.ledger, "story", "md").text
    assert "confidential" not in text
    assert "The research plan (version 2, rec_" in text.replace("\\", "")
