"""Successor rules read the graph: a rule's conditions are facts of the folded log (a packet
under the todo, the evaluator's judgement, the candidates), never the completer's own result.

The agents here want a promotion: an executor that reports its dev attempt as supported, an
evaluator that reports the opposite of its judgement, a completion appended by hand with the
successor it would like or without the one it owes. None of it makes or suppresses a todo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from lanes_support import RESULT_RULES, Campaign, campaign, record_rules

from loopx.cli import cli
from loopx.kernel.errors import RecordRejected, Refused
from loopx.kernel.verify import verify_store
from loopx.research.decisions import decide
from loopx.research.operations import judge
from loopx.runner.prompt import packaged_profile
from loopx.testing.research import CONTRACT, GOOD, ResearchLoop
from loopx.work.agents import revoke_agent
from loopx.work.claims import claim, complete, should_run
from loopx.work.todos import add_todos

PACKET = "auto_research_evidence_packet_v0"
BAD = [0.80, 0.81, 0.79]  # significantly worse: contradicts
LIE = {"status": "scored", "dev": {"verdict": "supports"}, "verdict": "supports",
       "split": "dev"}


def packet(hypothesis_id: str, split: str, values: list[float],
           status: str = "scored") -> dict[str, Any]:
    return {"schema_version": PACKET, "payload": {
        "hypothesis_id": hypothesis_id, "status": status,
        "results": [{"split": split, "metric": "acc", "seed": s, "value": v}
                    for s, v in zip((0, 1, 2), values, strict=True)]}}


def loop(contract: dict[str, Any] | None = None) -> tuple[Campaign, ResearchLoop]:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract(contract or CONTRACT)
    return c, r


def claim_next(r: ResearchLoop, agent: str) -> tuple[str, int]:
    got = should_run(r.ledger, agent, claim=True, creds=r.agents[agent])
    assert got["claimed"], got
    return got["todo"]["todo_id"], got["todo"]["epoch"]


def run_dev(r: ResearchLoop, todo_id: str, hypothesis_id: str, values: list[float],
            result: dict[str, Any], **todo: Any) -> dict[str, Any]:
    """The evaluator adds a dev todo; the executor runs it and completes it with its packet
    in the same batch, reporting ``result``."""
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": todo_id, "title": f"dev run of {hypothesis_id}", "role": "research_executor",
        "action_kind": "run_dev_eval", "hypothesis_id": hypothesis_id, **todo}])
    held, epoch = claim_next(r, "ex")
    assert held == todo_id
    return complete(r.ledger, r.agents["ex"], todo_id, epoch, result,
                    before=[packet(hypothesis_id, "dev", values)])


def judge_turn(r: ResearchLoop, hypothesis_id: str, split: str,
               result: dict[str, Any]) -> dict[str, Any]:
    """The evaluator takes its next todo (a judging one), judges and completes with ``result``."""
    todo_id, epoch = claim_next(r, "ev")
    assert r.ledger.state()["lanes"]["todos"][todo_id]["action_kind"] == "judge_evidence"
    judge(r.ledger, r.agents["ev"], hypothesis_id, split)
    return complete(r.ledger, r.agents["ev"], todo_id, epoch, result)


def todos_of(c: Campaign, action: str) -> list[str]:
    return [t for t, todo in c.lanes["todos"].items() if todo["action_kind"] == action]


# -- the completer's word makes nothing ----------------------------------------------------------

def test_an_executor_claiming_support_gets_no_heldout_todo_when_the_judgement_contradicts() -> None:
    c, r = loop()
    r.propose("h1")
    first = run_dev(r, "dev-1", "h1", BAD, LIE)
    assert first["successors"] == ["dev-1.judge_dev_attempt"]  # the packet is in the log
    judged = judge_turn(r, "h1", "dev", LIE)
    assert c.lanes["hypotheses"]["h1"]["judgements"]["dev"]["verdict"] == "contradicts"
    # The evaluator reported "supports" too: the log says contradicted, so the decision is next.
    assert judged["successors"] == ["dev-1.judge_dev_attempt.decide_after_judgement"]
    # The executor runs again and claims support: its attempt is judged, nothing more.
    again = run_dev(r, "dev-2", "h1", BAD, LIE)
    assert again["successors"] == ["dev-2.judge_dev_attempt"]
    assert todos_of(c, "run_holdout_eval") == [] and todos_of(c, "refine_hypothesis") == []
    assert verify_store(c.ledger.store).ok


def test_a_result_without_a_packet_makes_no_judging_todo_and_a_failed_word_hides_none() -> None:
    c, r = loop()
    r.propose("h1")
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "dev-1", "title": "dev", "hypothesis_id":
                                          "h1", "role": "research_executor",
                                          "action_kind": "run_dev_eval"}])
    todo_id, epoch = claim_next(r, "ex")
    assert complete(r.ledger, r.agents["ex"], todo_id, epoch, LIE)["successors"] == []
    # A scored packet reported as a failure still goes to the evaluator.
    out = run_dev(r, "dev-2", "h1", GOOD, {"status": "failed"})
    assert out["successors"] == ["dev-2.judge_dev_attempt"]
    # A failed packet (an unscored attempt) makes no judging todo, whatever the result says.
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "dev-3", "title": "dev", "hypothesis_id":
                                          "h1", "role": "research_executor",
                                          "action_kind": "run_dev_eval"}])
    held, epoch = claim_next(r, "ex")
    failed = {"schema_version": PACKET, "payload": {"hypothesis_id": "h1", "status": "failed",
                                                    "results": []}}
    out = complete(r.ledger, r.agents["ex"], held, epoch, {"status": "scored"}, before=[failed])
    assert out["successors"] == []
    assert verify_store(c.ledger.store).ok


def test_an_evaluator_cannot_suppress_the_heldout_todo_its_judgement_owes() -> None:
    c, r = loop()
    r.propose("h2")
    run_dev(r, "dev-h2", "h2", GOOD, {"status": "failed"})
    out = judge_turn(r, "h2", "dev", {"split": "dev", "verdict": "contradicts"})
    assert out["successors"] == ["dev-h2.judge_dev_attempt.heldout_after_supported_dev",
                                 "dev-h2.judge_dev_attempt.refine_after_supported_dev"]
    heldout = c.lanes["todos"]["dev-h2.judge_dev_attempt.heldout_after_supported_dev"]
    assert (heldout["role"], heldout["action_kind"], heldout["hypothesis_id"]) == (
        "research_executor", "run_holdout_eval", "h2")
    assert verify_store(c.ledger.store).ok


def test_a_hand_appended_completion_owes_exactly_what_the_log_says() -> None:
    c, r = loop()
    r.propose("h3")
    r.propose("h4")
    run_dev(r, "dev-h3", "h3", GOOD, {"status": "scored"})
    run_dev(r, "dev-h4", "h4", BAD, {"status": "scored"})
    ev = r.agents["ev"]
    todo_id, epoch = claim_next(r, "ev")
    assert todo_id == "dev-h3.judge_dev_attempt"
    judge(r.ledger, ev, "h3", "dev")
    done = {"todo_id": todo_id, "epoch": epoch, "schema_version": "todo_event_v0",
            "payload": {"event": "completed", "result": {"verdict": "contradicts"}}}
    head = c.head()
    # Without the held-out todo the judgement owes: refused, nothing written.
    with pytest.raises(Refused, match="missing: successor todo dev-h3.judge_dev_attempt."
                                      "heldout_after_supported_dev"):
        c.ledger.append([done], creds=ev)
    # With another todo in its place: refused.
    forged = {"schema_version": "todo_item_v0", "payload": {
        "todo_id": "dev-h3.judge_dev_attempt.heldout_after_supported_dev", "title": "mine",
        "role": "research_executor", "action_kind": "run_holdout_eval", "hypothesis_id": "h3",
        "priority": 100, "source_todo_id": todo_id,
        "successor_rule_id": "heldout_after_supported_dev"}}
    with pytest.raises(Refused, match="exactly as the role's rule makes it"):
        c.ledger.append([done, forged], creds=ev)
    assert c.head() == head
    complete(r.ledger, ev, todo_id, epoch, {})
    # h4 is contradicted: a held-out todo slipped in after its owed decision todo is refused.
    todo_id, epoch = claim_next(r, "ev")
    judge(r.ledger, ev, "h4", "dev")
    owed = {"schema_version": "todo_item_v0", "payload": {
        "todo_id": f"{todo_id}.decide_after_judgement", "title": "Decide the hypothesis its "
        "evidence settled", "role": "evaluator_promoter", "action_kind": "decide",
        "hypothesis_id": "h4", "assigned_to": "ev", "source_todo_id": todo_id,
        "successor_rule_id": "decide_after_judgement"}}
    extra = {"schema_version": "todo_item_v0", "payload": {
        "todo_id": f"{todo_id}.heldout_after_supported_dev", "title": "held-out, please",
        "role": "research_executor", "action_kind": "run_holdout_eval", "hypothesis_id": "h4",
        "source_todo_id": todo_id, "successor_rule_id": "heldout_after_supported_dev"}}
    done = {**done, "todo_id": todo_id, "epoch": epoch,
            "payload": {"event": "completed", "result": LIE}}
    head = c.head()
    with pytest.raises(Refused, match="successor_rule_id is set only by a successor rule"):
        c.ledger.append([done, owed, extra], creds=ev)
    assert c.head() == head
    c.ledger.append([done, owed], creds=ev)  # exactly what the log owes is accepted
    assert verify_store(c.ledger.store).ok


# -- the chain: dev -> held-out -> gate check -> decision ------------------------------------------

def test_the_chain_runs_from_dev_to_the_decision_and_the_story() -> None:
    c, r = loop()
    c.agent("narr", "product_narrator")
    r.propose("h5")
    run_dev(r, "dev-h5", "h5", GOOD, {})
    judge_turn(r, "h5", "dev", {})
    heldout_todo, epoch = claim_next(r, "ex")
    assert heldout_todo == "dev-h5.judge_dev_attempt.heldout_after_supported_dev"
    out = complete(r.ledger, r.agents["ex"], heldout_todo, epoch, {},
                   before=[packet("h5", "heldout", GOOD)])
    assert out["successors"] == [f"{heldout_todo}.judge_heldout_attempt"]
    # The held-out gate passed and the contract requires no boundary check: decide next.
    judged = judge_turn(r, "h5", "heldout", {"verdict": "contradicts"})
    decide_todo = f"{heldout_todo}.judge_heldout_attempt.decide_after_judgement"
    assert judged["successors"] == [decide_todo]
    assert c.lanes["todos"][decide_todo]["assigned_to"] == "ev"  # the completer: routed to it
    todo_id, epoch = claim_next(r, "ev")
    assert todo_id == decide_todo
    decide(r.ledger, r.agents["ev"], "h5", "promoted", decision_id="d-h5")
    out = complete(r.ledger, r.agents["ev"], todo_id, epoch, {})
    assert out["successors"] == [f"{decide_todo}.narrate_after_decision"]
    assert should_run(r.ledger, "narr")["todo"]["todo_id"] == f"{decide_todo}.narrate_after_decision"
    assert verify_store(c.ledger.store).ok


def test_a_required_boundary_puts_the_gate_check_before_the_decision() -> None:
    c, r = loop({**CONTRACT, "promotion_policy": {
        "required_gates": ["protected_boundary", "heldout"]}})
    r.propose("h6")
    run_dev(r, "dev-h6", "h6", GOOD, {})
    judge_turn(r, "h6", "dev", {})
    heldout_todo, epoch = claim_next(r, "ex")
    complete(r.ledger, r.agents["ex"], heldout_todo, epoch, {},
             before=[packet("h6", "heldout", GOOD)])
    judged = judge_turn(r, "h6", "heldout", {})
    gate_todo = f"{heldout_todo}.judge_heldout_attempt.gate_check_after_supported_heldout"
    assert judged["successors"] == [gate_todo]
    gate = c.lanes["todos"][gate_todo]
    assert (gate["action_kind"], gate["assigned_to"], gate["role"]) == (
        "review_gate", "ev", "evaluator_promoter")
    # Another evaluator is not handed it: should-run routes it to the one that judged.
    ev2 = c.agent("ev-2", "evaluator_promoter")
    assert should_run(c.ledger, "ev-2")["reason"] == "no_eligible_todo"
    with pytest.raises(Refused, match="assigned to 'ev'"):
        claim(c.ledger, ev2, gate_todo)
    assert should_run(c.ledger, "ev")["todo"]["todo_id"] == gate_todo
    # Completing the gate todo with no gate result in the log leaves nothing to decide.
    todo_id, epoch = claim_next(r, "ev")
    assert complete(r.ledger, r.agents["ev"], todo_id, epoch,
                    {"gate": "passed"})["successors"] == []
    assert verify_store(c.ledger.store).ok


def test_a_successor_carries_claimed_by_action_kind_and_unblocks_todo_id() -> None:
    c, r = loop()
    c.agent("ex-2", "research_executor")
    rules = packaged_profile("evaluator_promoter")["successor_todos"]
    [heldout_rule] = [rule for rule in rules if rule["rule_id"] == "heldout_after_supported_dev"]
    heldout_rule["claimed_by"] = "ex-2"
    record_rules(c, "evaluator_promoter", rules)
    c.agent("prop-2", "hypothesis_proposer")
    c.todo("report", role="hypothesis_proposer", action_kind="refine_hypothesis")
    r.propose("h7")
    run_dev(r, "dev-h7", "h7", GOOD, {}, unblocks_todo_id="report")
    judge_turn(r, "h7", "dev", {})
    heldout_id = "dev-h7.judge_dev_attempt.heldout_after_supported_dev"
    [record] = [x for x in c.records("todo_item_v0") if x["payload"]["todo_id"] == heldout_id]
    assert {k: record["payload"][k] for k in ("assigned_to", "action_kind", "unblocks_todo_id",
                                              "source_todo_id", "successor_rule_id")} == {
        "assigned_to": "ex-2", "action_kind": "run_holdout_eval", "unblocks_todo_id": "report",
        "source_todo_id": "dev-h7.judge_dev_attempt",
        "successor_rule_id": "heldout_after_supported_dev"}
    assert heldout_id in c.lanes["todos"]["report"]["blocked_by"]
    # should-run routes it to ex-2 only; ex may not take it by name either.
    assert should_run(c.ledger, "ex")["reason"] == "no_eligible_todo"
    with pytest.raises(Refused, match="assigned to 'ex-2'"):
        claim(c.ledger, r.agents["ex"], heldout_id)
    assert should_run(c.ledger, "ex-2")["todo"]["todo_id"] == heldout_id
    # A named agent that is gone leaves the next such todo to any executor.
    revoke_agent(c.ledger, c.owner, "ex-2", "left")
    r.propose("h8")
    run_dev(r, "dev-h8", "h8", GOOD, {})
    judge_turn(r, "h8", "dev", {})
    assert c.lanes["todos"]["dev-h8.judge_dev_attempt.heldout_after_supported_dev"][
        "assigned_to"] is None
    assert verify_store(c.ledger.store).ok


def test_claimed_by_is_the_lane_contracts_name_for_assigned_to() -> None:
    c = campaign()
    c.agent("ex-1", "research_executor")
    c.todo("t1", claimed_by="ex-1")
    assert c.lanes["todos"]["t1"]["assigned_to"] == "ex-1"
    [record] = [x for x in c.records("todo_item_v0") if x["payload"]["todo_id"] == "t1"]
    assert record["payload"]["assigned_to"] == "ex-1" and "claimed_by" not in record["payload"]
    c.agent("ex-2", "research_executor")
    with pytest.raises(RecordRejected, match="claimed_by and assigned_to name different"):
        c.todo("t2", claimed_by="ex-1", assigned_to="ex-2")


# -- the profile names known facts ---------------------------------------------------------------

def test_a_rule_naming_an_unknown_condition_is_refused_naming_the_field() -> None:
    c = campaign()
    rules = packaged_profile("evaluator_promoter")["successor_todos"]
    rules[0]["conditions"] = ["dev_supports", "not heldout_recorded"]
    with pytest.raises(RecordRejected) as caught:
        record_rules(c, "evaluator_promoter", rules)
    [problem] = caught.value.problems
    assert problem.field == "evaluator_promoter.toml.successor_todos.0.conditions.1"
    assert "unknown condition 'heldout_recorded'" in problem.problem
    # Appended by hand, around `lanes apply`: the write check refuses it too.
    profile = {**packaged_profile("evaluator_promoter"), "successor_todos": rules}
    with pytest.raises(Refused, match="unknown condition.s. not heldout_recorded"):
        c.ledger.append({"payload": profile}, creds=c.owner, kind="lane_profile_v0")
    # One assignee at a time, and the completer only for its own role's todos.
    rules = packaged_profile("evaluator_promoter")["successor_todos"]
    with pytest.raises(RecordRejected, match="assign_to_completer"):
        record_rules(c, "evaluator_promoter", [{**rules[0], "assign_to_completer": True}])
    with pytest.raises(RecordRejected, match="claimed_by and assign_to_completer"):
        record_rules(c, "evaluator_promoter", [{**rules[4], "claimed_by": "ev-1"}])


# -- the same through the CLI ----------------------------------------------------------------------

def run(ws: Path, *args: str, token: str = "", agent: str = "") -> Result:
    result = CliRunner().invoke(cli, ["-C", str(ws), *args],
                                env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": agent})
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def ok(ws: Path, *args: str, token: str = "", agent: str = "") -> Any:
    result = run(ws, *args, "--json", token=token, agent=agent)
    assert result.exit_code == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def ws(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    run(tmp_path, "init", "--goal-id", "graph", "--owner-token-file", str(tmp_path / "owner"))
    tokens = {"owner": (tmp_path / "owner").read_text().strip()}
    for agent, role in (("cur", "research_curator"), ("prop", "hypothesis_proposer"),
                        ("ex", "research_executor"), ("ev", "evaluator_promoter"),
                        ("ev-2", "evaluator_promoter")):
        tokens[agent] = ok(tmp_path, "agent", "register", "--agent-id", agent, "--role", role,
                           token=tokens["owner"])["token"]
    ok(tmp_path, "contract", "init", "--prompt", "Does width help?", "--domain", "vision",
       "--metric", "acc", "--direction", "maximize", "--baseline", "0.9", "--seeds", "0,1,2",
       "--protected", "eval/", token=tokens["cur"], agent="cur")
    ok(tmp_path, "todo", "add", "--todo-id", "propose", "--title", "propose",
       "--role", "hypothesis_proposer", "--action", "propose_hypothesis",
       token=tokens["owner"], agent="owner")
    ok(tmp_path, "quota", "should-run", "--claim", token=tokens["prop"], agent="prop")
    for hypothesis, width in (("h-bad", "8"), ("h-good", "256")):
        ok(tmp_path, "hypothesis", "propose", "--under", "propose:1", "--hypothesis-id",
           hypothesis, "--title", hypothesis, "--statement", f"width {width} helps",
           "--mechanism", "width", "--param", f"width={width}", "--no-grounding-reason",
           "a test", "--dev-todo", f"dev-{hypothesis}", token=tokens["prop"], agent="prop")
    return tmp_path, tokens


def cli_attempt(ws: Path, tokens: dict[str, str], hypothesis: str, values: list[float],
                result: dict[str, Any]) -> list[str]:
    got = ok(ws, "quota", "should-run", "--claim", token=tokens["ex"], agent="ex")
    todo_id, epoch = got["todo"]["todo_id"], got["todo"]["epoch"]
    path = ws / f"{todo_id}.json"
    path.write_text(json.dumps(packet(hypothesis, "dev", values)["payload"]))
    ok(ws, "evidence", "append-packet", str(path), "--under", f"{todo_id}:{epoch}",
       token=tokens["ex"], agent="ex")
    done = ok(ws, "todo", "complete", todo_id, "--epoch", str(epoch), "--result",
              json.dumps(result), token=tokens["ex"], agent="ex")
    return list(done["successors"])


def cli_judge(ws: Path, tokens: dict[str, str], hypothesis: str,
              result: dict[str, Any]) -> list[str]:
    got = ok(ws, "quota", "should-run", "--claim", token=tokens["ev"], agent="ev")
    todo_id, epoch = got["todo"]["todo_id"], got["todo"]["epoch"]
    assert got["todo"]["action_kind"] == "judge_evidence" and todo_id == \
        f"dev-{hypothesis}.judge_dev_attempt"
    ok(ws, "evidence", "judge", hypothesis, "--split", "dev", token=tokens["ev"], agent="ev")
    done = ok(ws, "todo", "complete", todo_id, "--epoch", str(epoch), "--result",
              json.dumps(result), token=tokens["ev"], agent="ev")
    return list(done["successors"])


def test_through_the_cli_the_graph_decides_and_should_run_routes(
        ws: tuple[Path, dict[str, str]]) -> None:
    root, tokens = ws
    assert cli_attempt(root, tokens, "h-bad", BAD, LIE) == ["dev-h-bad.judge_dev_attempt"]
    # Judged contradicted; the evaluator says otherwise; the log decides: a decision todo.
    assert cli_judge(root, tokens, "h-bad", LIE) == [
        "dev-h-bad.judge_dev_attempt.decide_after_judgement"]
    shown = ok(root, "todo", "show", "dev-h-bad.judge_dev_attempt.decide_after_judgement")
    assert (shown["action_kind"], shown["assigned_to"], shown["state"]) == ("decide", "ev", "open")
    assert ok(root, "quota", "should-run", "--agent-id", "ev-2")["reason"] == "no_eligible_todo"
    taken = run(root, "todo", "claim", "dev-h-bad.judge_dev_attempt.decide_after_judgement",
                "--json", token=tokens["ev-2"], agent="ev-2")
    assert taken.exit_code == 8 and "assigned to 'ev'" in json.loads(taken.stdout)["message"]
    # The supported one: the evaluator reports a contradiction, and still owes the held-out run.
    assert cli_attempt(root, tokens, "h-good", GOOD, {"status": "failed"}) == [
        "dev-h-good.judge_dev_attempt"]
    run(root, "quota", "should-run", "--claim", token=tokens["ev"], agent="ev")  # the decide todo
    ok(root, "decide", "retire", "h-bad", "--reason", "contradicted", token=tokens["ev"],
       agent="ev")
    ok(root, "todo", "complete", "dev-h-bad.judge_dev_attempt.decide_after_judgement", "--epoch",
       "1", token=tokens["ev"], agent="ev")
    assert cli_judge(root, tokens, "h-good", {"verdict": "contradicts"}) == [
        "dev-h-good.judge_dev_attempt.heldout_after_supported_dev",
        "dev-h-good.judge_dev_attempt.refine_after_supported_dev"]
    heldout = ok(root, "todo", "show", "dev-h-good.judge_dev_attempt.heldout_after_supported_dev")
    assert (heldout["action_kind"], heldout["role"], heldout["successor_rule_id"]) == (
        "run_holdout_eval", "research_executor", "heldout_after_supported_dev")
    claimed = ok(root, "todo", "claim", "dev-h-good.judge_dev_attempt.heldout_after_supported_dev",
                 token=tokens["ex"], agent="ex")
    assert claimed["claim"]["via"] == "explicit" and claimed["claim"]["data"]["split"] == "heldout"
    assert ok(root, "verify")["ok"] is True


def test_lanes_apply_refuses_an_unknown_condition_and_show_lists_the_known(
        ws: tuple[Path, dict[str, str]]) -> None:
    root, tokens = ws
    known = ok(root, "lanes", "show")["conditions"]
    assert {"attempt_scored", "dev_supports", "heldout_packet", "decidable"} <= set(known)
    assert known["attempt_scored"].startswith("a scored evidence packet")
    path = root / ".loopx" / "lanes" / "evaluator_promoter.toml"
    path.write_text(path.read_text().replace('"not heldout_packet"', '"not heldout_seen"'))
    before = b"".join(p.read_bytes() for p in sorted((root / ".loopx" / "log").iterdir()))
    out = run(root, "lanes", "apply", "--json", token=tokens["owner"])
    assert out.exit_code == 2
    error = json.loads(out.stdout)
    assert error["error"] == "invalid_record"
    assert "evaluator_promoter.toml.successor_todos.0.conditions.1" in out.stdout
    assert "unknown condition 'heldout_seen'" in out.stdout
    after = b"".join(p.read_bytes() for p in sorted((root / ".loopx" / "log").iterdir()))
    assert after == before
    human = run(root, "lanes", "apply", token=tokens["owner"])
    assert human.exit_code == 2 and "successor_todos.0.conditions.1" in human.stderr


def test_a_profile_recorded_before_conditions_compares_equal_to_its_file() -> None:
    """`loopx status` and `lanes apply` compare the profile in force with the file: one
    recorded before rules had ``conditions`` and ``claimed_by`` is no drift for that."""
    from loopx.work.profiles import normal_profile

    parsed = normal_profile({**packaged_profile("research_executor"),
                             "successor_todos": RESULT_RULES})
    old = {**parsed, "seq": 4, "successor_todos": [
        {k: v for k, v in rule.items() if k not in ("conditions", "claimed_by")}
        for rule in parsed["successor_todos"]]}
    assert old != parsed and normal_profile(old) == parsed
