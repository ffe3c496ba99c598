"""Governance through the one checked write path: contract versions, proposals and approvals,
usage, findings, decisions with the stop policy, the state machine, and should-run obeying it.
Every refusal leaves the log unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from lanes_support import Campaign, OnCampaign, campaign

from loopx.governance.actions import (
    decide_approval,
    pending_approvals,
    propose,
    record_result,
    verdict,
)
from loopx.governance.campaign import evaluate, status, transition
from loopx.governance.contract import amend_contract, contract_version, init_contract
from loopx.governance.findings import add_finding, finding_groups
from loopx.governance.usage import add_usage
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Forbidden, RecordRejected, Refused, Unauthorized
from loopx.kernel.verify import verify_store
from loopx.research.decisions import decide
from loopx.research.projections import row
from loopx.testing.research import CONTRACT as RESEARCH_CONTRACT
from loopx.testing.research import WORSE, ResearchLoop
from loopx.work.claims import claim, should_run

# The research driver's contract, with no held-out location and with limits to run into.
CONTRACT: dict[str, Any] = {
    **RESEARCH_CONTRACT,
    "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout"}},
    "budget": {"max_cpu_hours": 4.0, "max_experiments": 5},
    "stop_policy": {"max_iterations": 4, "patience_iterations": 2},
    "denied_tools": ["lab.delete_run"],
    "protected_scope": ["eval/"],
    "promotion_policy": {"required_gates": ["heldout"]},
    # The campaign's own tools and their risk classes (an undeclared one is destructive).
    "tool_risks": {"lab.inspect": "read", "lab.peek": "read", "lab.train": "compute",
                   "lab.fetch": "external"},
}


class Gov(OnCampaign):
    """A memory campaign with a curator, two executors and an evaluator, and a contract."""

    def __init__(self, contract: dict[str, Any] | None = CONTRACT) -> None:
        self.c: Campaign = campaign()
        self.curator = self.c.agent("cur", "research_curator")
        self.ex = self.c.agent("ex1", "research_executor")
        self.ex2 = self.c.agent("ex2", "research_executor")
        self.ev = self.c.agent("ev", "evaluator_promoter")
        if contract is not None:
            init_contract(self.c.ledger, self.curator, contract)

    def start(self) -> None:
        transition(self.ledger, self.curator, "ready", "prepared")
        transition(self.ledger, self.c.owner, "running", "go")


def test_contract_init_plans_the_campaign_and_versions_stay_readable() -> None:
    g = Gov()
    assert status(g.view)["state"] == "planned"
    record = amend_contract(g.ledger, g.curator, "remeasured the baseline",
                            settings=[("metric.baseline", 0.91), ("budget.max_cpu_hours", 6.0)])
    p = record["payload"]
    assert (p["version"], p["amendment"]["changed"]) == (
        2, ["budget.max_cpu_hours", "metric.baseline"])
    assert p["supersedes"] == contract_version(g.view, 1)["record_id"]
    assert contract_version(g.view)["metric"]["baseline"] == 0.91
    assert contract_version(g.view, 1)["metric"]["baseline"] == 0.9  # earlier version readable
    assert verify_store(g.ledger.store).ok


def test_contract_refusals_write_nothing() -> None:
    g = Gov(contract=None)
    both = {**CONTRACT, "allowed_tools": ["lab.train"], "denied_tools": ["lab.train"]}
    err = g.unchanged(lambda: init_contract(g.ledger, g.curator, both), RecordRejected,
                      "both allowed and denied")
    assert err.fields == ["payload.denied_tools"]  # type: ignore[attr-defined]
    g.unchanged(lambda: init_contract(g.ledger, g.curator,
                                      {**CONTRACT, "budget": {"max_gpu_hours": -1}}),
                RecordRejected, "payload.budget.max_gpu_hours")
    g.unchanged(lambda: init_contract(g.ledger, g.ex, CONTRACT), Forbidden,
                "role 'research_executor' may not write research_contract_v0 with action "
                "'create'")
    g.unchanged(lambda: init_contract(g.ledger, g.c.owner, CONTRACT), Forbidden,
                "role 'owner' may not write research_contract_v0")
    init_contract(g.ledger, g.curator, CONTRACT)
    g.unchanged(lambda: init_contract(g.ledger, g.curator, CONTRACT), Refused,
                "a contract exists")
    g.unchanged(lambda: amend_contract(g.ledger, g.ev, "mine now", settings=[("mode", "bounded")]),
                Forbidden, "role 'evaluator_promoter' may not write research_contract_v0 with "
                           "action 'amend'")
    g.unchanged(lambda: amend_contract(g.ledger, g.curator, "noop", settings=[("mode", "guided")]),
                Refused, "changes nothing")
    g.unchanged(lambda: amend_contract(g.ledger, g.curator, "x",
                                       settings=[("allowed_tools", ["lab.delete_run"])]),
                RecordRejected, "both allowed and denied")
    # An amendment that misstates what it changed is refused by the write check itself.
    v1 = contract_version(g.view)
    lie = {**CONTRACT, "mode": "bounded", "version": 2, "supersedes": v1["record_id"],
           "amendment": {"changed": ["budget.max_cpu_hours"], "reason": "r"}}
    g.unchanged(lambda: g.ledger.append({"payload": lie}, creds=g.curator,
                                        kind="research_contract_v0"),
                Refused, "must list exactly what changed: mode")
    # A curator who wants a fresh contract (and none of the old one's history) under a new id,
    # or a version that skips ahead or supersedes another record, is refused.
    amended = {**lie, "amendment": {"changed": ["mode"], "reason": "r"}}
    g.unchanged(lambda: g.ledger.append({"payload": {**amended, "contract_id": "fresh"}},
                                        creds=g.curator, kind="research_contract_v0"),
                Refused, "an amendment keeps contract_id 'digits', not 'fresh'")
    for wrong in ({"version": 3}, {"supersedes": "rec_0"}):
        g.unchanged(lambda wrong=wrong: g.ledger.append(
            {"payload": {**amended, **wrong}}, creds=g.curator, kind="research_contract_v0"),
            Refused, f"an amendment of version 1 is version 2 and supersedes {v1['record_id']}")


def test_proposal_eligibility_and_approval_are_separate() -> None:
    g = Gov()
    denied = propose(g.ledger, g.ex, name="clean up", tool="lab.delete_run", risk="destructive",
                     reason="disk is full")
    assert (denied["eligible"], denied["state"], denied["can_execute"]) == (
        False, "ineligible", False)
    assert any("denied by the contract" in r for r in denied["reasons"])
    g.unchanged(lambda: decide_approval(g.ledger, g.c.owner, denied["proposal_id"],
                                        approved=True, note="fine"),
                Refused, "approval cannot make a tool eligible")

    read = propose(g.ledger, g.ex, name="look", tool="lab.inspect", risk="read", reason="see")
    assert (read["requires_approval"], read["can_execute"]) == (False, True)

    train = propose(g.ledger, g.ex, name="train", tool="lab.train", risk="compute",
                    reason="bigger model", estimated_cost={"cpu_hours": 1.0},
                    arguments={"layers": 4})
    assert (train["requires_approval"], train["state"], train["can_execute"]) == (
        True, "pending", False)
    pid = train["proposal_id"]
    # While its action awaits approval the agent is told to wait; the other executor is not.
    assert should_run(g.ledger, "ex1")["reason"] == "awaiting_approval"
    assert should_run(g.ledger, "ex1")["detail"] == {"proposals": [pid]}
    assert should_run(g.ledger, "ex2")["reason"] == "no_eligible_todo"

    g.unchanged(lambda: decide_approval(g.ledger, g.ex, pid, approved=True, note="self"),
                Forbidden, "may not write approval_v0")
    g.unchanged(lambda: decide_approval(g.ledger, Credentials("owner", "lpx_" + "x" * 43), pid,
                                        approved=True, note="forged"),
                Unauthorized, "owner token is wrong")
    g.unchanged(lambda: record_result(g.ledger, g.ex, pid, success=True),
                Refused, "still awaiting approval")
    out = decide_approval(g.ledger, g.c.owner, pid, approved=True, note="within budget")
    assert out["can_execute"]["can_execute"] is True
    assert should_run(g.ledger, "ex1")["reason"] == "no_eligible_todo"
    g.unchanged(lambda: decide_approval(g.ledger, g.c.owner, pid, approved=False, note="again"),
                Refused, "already approved")
    g.unchanged(lambda: record_result(g.ledger, g.ex2, pid, success=True),
                Refused, "only its proposer")
    record_result(g.ledger, g.ex, pid, success=False, error="out of memory",
                  usage={"cpu_hours": 0.5})
    after = verdict(g.view, pid)
    assert (after["state"], after["can_execute"]) == ("failed", False)
    assert g.view["campaign"]["usage"]["agents"]["ex1"]["cpu_hours"] == 0.5
    assert verify_store(g.ledger.store).ok


def test_no_self_approval_even_for_the_owner() -> None:
    g = Gov()
    # The owner cannot propose what needs approval: only it could approve, and not its own.
    g.unchanged(lambda: propose(g.ledger, g.c.owner, name="x", tool="lab.train",
                                risk="compute", reason="r"),
                Refused, "no one approves their own proposal")
    mine = propose(g.ledger, g.c.owner, name="x", tool="lab.peek", risk="read", reason="r")
    assert mine["can_execute"] and mine["state"] == "not_required"
    g.unchanged(lambda: decide_approval(g.ledger, g.c.owner, mine["proposal_id"], approved=True,
                                        note="me"),
                Refused, "no one approves their own")


def test_loopx_tools_carry_their_registered_risk() -> None:
    g = Gov()
    ok = propose(g.ledger, g.ex, name="add a todo", tool="loopx.todo.add", reason="follow-up")
    assert ok["risk"] == "write"
    g.unchanged(lambda: propose(g.ledger, g.ex, name="x", tool="loopx.agent.revoke",
                                risk="read", reason="r"),
                Refused, "is a destructive tool, not read")
    g.unchanged(lambda: propose(g.ledger, g.ex, name="x", tool="loopx.nope", risk="read",
                                reason="r"),
                Refused, "not a registered loopx tool")


@pytest.mark.parametrize("field", ["arguments", "reason", "name"])
def test_secrets_in_proposals_are_refused(field: str) -> None:
    g = Gov()
    secret = "AKIAIOSFODNN7EXAMPLE"
    kwargs: dict[str, Any] = {"name": "n", "tool": "lab.fetch", "risk": "external",
                              "reason": "r", "arguments": {}}
    kwargs[field] = {"key": secret} if field == "arguments" else f"use {secret}"
    err = g.unchanged(lambda: propose(g.ledger, g.ex, **kwargs), RecordRejected,
                      "AWS access key")
    assert secret not in str(err)
    pid = propose(g.ledger, g.ex, name="n", tool="lab.fetch", risk="external",
                  reason="r")["proposal_id"]
    g.unchanged(lambda: decide_approval(g.ledger, g.c.owner, pid, approved=True,
                                        note="token ghp_" + "a1B2" * 9),
                RecordRejected, "GitHub token")


def test_usage_increments_and_refusals() -> None:
    g = Gov()
    g.unchanged(lambda: add_usage(g.ledger, g.ex, {"cpu_hours": -1.0}), RecordRejected,
                "payload.cpu_hours")
    g.unchanged(lambda: add_usage(g.ledger, g.ex, {}), RecordRejected, "at least one")
    add_usage(g.ledger, g.ex, {"cpu_hours": 1.5, "experiments": 2})
    add_usage(g.ledger, g.ex2, {"cpu_hours": 1.0})
    usage = g.view["campaign"]["usage"]
    assert usage["total"]["cpu_hours"] == 2.5 and usage["total"]["experiments"] == 2
    assert usage["agents"]["ex2"]["cpu_hours"] == 1.0


def test_float_noise_does_not_decide_whether_a_budget_is_spent() -> None:
    g = Gov({**CONTRACT, "budget": {"max_cpu_hours": 1.0}})
    for hours in (0.7, 0.2):  # 0.7 + 0.2 + 0.1 is 0.9999999999999999 in binary floats
        add_usage(g.ledger, g.ex, {"cpu_hours": hours})
    assert status(g.view)["budget"]["cpu_hours"]["remaining"] == 0.1
    g.c.todo("last", estimated_cost={"cpu_hours": 0.1})
    assert should_run(g.ledger, "ex1")["reason"] == "selected"  # 0.1 still fits
    add_usage(g.ledger, g.ex, {"cpu_hours": 0.1})
    assert status(g.view)["budget"]["cpu_hours"]["exhausted"] is True
    assert should_run(g.ledger, "ex1")["reason"] == "budget_exhausted"


def test_findings_keep_statement_kinds_apart() -> None:
    g = Gov()
    add_finding(g.ledger, g.ex, kind="computed_result", statement="dev acc 0.93",
                evidence=[{"kind": "record", "ref": "rec_1"}], finding_id="f1")
    add_finding(g.ledger, g.ex, kind="hypothesis", statement="depth helps", evidence=[],
                finding_id="f2")
    add_finding(g.ledger, g.ev, kind="interpretation", statement="noise, probably",
                evidence=[{"kind": "record", "ref": "rec_1"}], finding_id="f3")
    g.unchanged(lambda: add_finding(g.ledger, g.ex, kind="observed_fact", statement="x",
                                    evidence=[]), RecordRejected, "need at least one evidence")
    g.unchanged(lambda: add_finding(g.ledger, g.ex, kind="rumour", statement="x", evidence=[]),
                RecordRejected, "payload.kind")
    groups = finding_groups(g.view)
    assert [f["finding_id"] for f in groups["established"]] == ["f1"]
    assert [f["finding_id"] for f in groups["not_established"]] == ["f2"]
    assert [f["finding_id"] for f in groups["qualified"]] == ["f3"]
    add_finding(g.ledger, g.ex, kind="negative_result", statement="depth does not help",
                evidence=[{"kind": "record", "ref": "rec_2"}], supersedes="f2", finding_id="f4")
    groups = finding_groups(g.view)
    assert [f["finding_id"] for f in groups["established"]] == ["f1", "f4"]
    assert groups["not_established"] == []


def research(g: Gov) -> ResearchLoop:
    """A proposer and an executor beside the Gov agents, to drive hypotheses to candidates."""
    return ResearchLoop(g.ledger, g.c.owner, agents={"cur": g.curator, "ev": g.ev})


SUPPORTED = ([0.95, 0.96, 0.97], [0.92, 0.93, 0.94])  # held-out mean 0.93 beats 0.9


def test_decisions_count_iterations_and_the_stop_fires_in_the_same_batch() -> None:
    g = Gov()
    g.start()
    loop = research(g)
    loop.supported("h1", *SUPPORTED)
    assert decide(g.ledger, g.ev, "h1", "promoted")["stopped"] is False  # an improvement
    for hid, mechanism in (("h2", "depth"), ("h3", "lr")):
        loop.supported(hid, WORSE, None, mechanism=mechanism)
    assert decide(g.ledger, g.ev, "h2", "retired", reason="contradicted")["stopped"] is False
    out = decide(g.ledger, g.ev, "h3", "retired", reason="contradicted")  # stagnant 2
    assert out["stopped"] and out["stop_reasons"] == ["insufficient_improvement"]
    [decision, stop] = g.c.records()[-2:]
    assert decision["batch_end"] == stop["seq"]  # one atomic batch
    assert stop["payload"]["decision_id"] == out["decision_id"]
    s = status(g.view)
    assert (s["state"], s["stop_reasons"], s["iterations"]["count"]) == (
        "stopped", ["insufficient_improvement"], 3)
    assert s["iterations"]["best"] == pytest.approx(0.93)
    assert verify_store(g.ledger.store).ok


def test_a_decision_that_omits_the_stop_it_fires_is_refused() -> None:
    g = Gov({**CONTRACT, "stop_policy": {"max_iterations": 1}})
    g.start()
    research(g).supported("h1", WORSE, None)
    g.decision_alone_refused(g.ev, "h1", "retired", "contradicted",
                             "must follow in the same batch are missing: the stop transition "
                             "the policy fires .maximum_iterations_reached.")


def test_a_later_decision_supersedes_the_earlier_one() -> None:
    g = Gov()
    research(g).supported("h1", *SUPPORTED)
    first = decide(g.ledger, g.ev, "h1", "promoted")
    assert status(g.view)["iterations"]["best"] == pytest.approx(0.93)
    decide_approval(g.ledger, g.c.owner, first["decision_id"], approved=False, note="not yet")
    # A rejected promotion no longer holds the best: later improvements count from the baseline.
    assert (status(g.view)["iterations"]["best"],
            status(g.view)["iterations"]["best_hypothesis"]) == (None, None)
    current = row(g.view, "h1")
    assert current.retirement is not None and current.retirement["reasons"] == [
        "operator_rejected"]
    g.unchanged(lambda: g.ledger.append({"payload": {
        "decision_id": "d9", "hypothesis_id": "h1", "outcome": "retired",
        "reason": "operator_rejected", "revision": current.revision,
        "evidence_ids": current.retirement["rests_on"]}}, creds=g.ev,
        kind="research_decision_v0"), Refused, "must cite and supersede")
    second = decide(g.ledger, g.ev, "h1", "retired", reason="operator_rejected")
    assert status(g.view)["iterations"]["best"] is None
    decisions = g.view["decisions"]
    assert decisions[first["decision_id"]]["superseded_by"] == second["decision_id"]
    assert row(g.view, "h1").state == "retired"


def test_state_machine_refuses_illegal_transitions() -> None:
    g = Gov()
    g.unchanged(lambda: transition(g.ledger, g.c.owner, "running", "skip ready"),
                Refused, "cannot move from planned to running .from planned: ready, stopped, "
                         "failed.")
    g.unchanged(lambda: transition(g.ledger, g.ex, "ready", "me"), Forbidden,
                "may not write campaign_transition_v0 with action 'ready'")
    g.unchanged(lambda: transition(g.ledger, g.ev, "stopped", "bored"), Refused,
                "none apply")
    g.start()
    transition(g.ledger, g.c.owner, "completed", "objective met")
    g.unchanged(lambda: transition(g.ledger, g.c.owner, "running", "again"), Refused,
                "none: it is finished")


def test_ready_becomes_running_on_the_first_claim() -> None:
    g = Gov()
    transition(g.ledger, g.curator, "ready", "prepared")
    g.c.todo("t1")
    assert should_run(g.ledger, "ex1", claim=True, creds=g.ex)["claimed"]
    s = status(g.view)
    assert (s["state"], s["reason"]) == ("running", "first claim after ready")


def test_should_run_obeys_the_campaign() -> None:
    g = Gov()
    g.start()
    g.c.todo("t1")
    transition(g.ledger, g.c.owner, "paused", "owner away")
    paused = should_run(g.ledger, "ex1")
    assert (paused["run"], paused["reason"]) == (False, "campaign_paused")
    g.unchanged(lambda: claim(g.ledger, g.ex, "t1"), Refused, "campaign_paused")
    transition(g.ledger, g.c.owner, "running", "back")

    add_usage(g.ledger, g.ex, {"cpu_hours": 3.5})
    g.c.todo("big", estimated_cost={"cpu_hours": 1.0}, priority=5)
    picked = should_run(g.ledger, "ex1")
    assert (picked["reason"], picked["todo"]["todo_id"]) == ("selected", "t1")  # big passed over
    g.unchanged(lambda: claim(g.ledger, g.ex, "big"), Refused, "over_budget cpu_hours")
    should_run(g.ledger, "ex1", claim=True, creds=g.ex)  # takes t1
    only_big = should_run(g.ledger, "ex2")
    assert (only_big["reason"], only_big["detail"]) == (
        "budget_exhausted", {"over_budget_todos": ["big"]})

    add_usage(g.ledger, g.ex, {"cpu_hours": 0.5})
    spent = should_run(g.ledger, "ex2")
    assert (spent["run"], spent["reason"], spent["detail"]) == (
        False, "budget_exhausted", {"exhausted": ["cpu_hours"]})
    assert evaluate(g.ledger, None, dry_run=True)["reasons"] == ["budget_exhausted:cpu_hours"]
    done = evaluate(g.ledger, g.ev, dry_run=False)
    assert done["stopped"] and done["reasons"] == ["budget_exhausted:cpu_hours"]
    stopped = should_run(g.ledger, "ex2")
    assert (stopped["reason"], stopped["detail"]) == (
        "campaign_stopped", {"state": "stopped", "stop_reasons": ["budget_exhausted:cpu_hours"]})


def test_owner_stop_is_operator_requested() -> None:
    g = Gov()
    g.start()
    record = transition(g.ledger, g.c.owner, "stopped", "enough")
    assert record["payload"]["stop_reasons"] == ["operator_requested"]
    assert verify_store(g.ledger.store).ok


def test_an_amendment_can_lift_the_wait_for_approval() -> None:
    g = Gov()
    pid = propose(g.ledger, g.ex, name="train", tool="lab.train", risk="compute",
                  reason="r")["proposal_id"]
    assert should_run(g.ledger, "ex1")["reason"] == "awaiting_approval"
    amend_contract(g.ledger, g.curator, "compute is routine here",
                   settings=[("guided_auto_approve", ["compute"])])
    assert should_run(g.ledger, "ex1")["reason"] == "no_eligible_todo"
    assert verdict(g.view, pid)["can_execute"] is True
    amend_contract(g.ledger, g.curator, "no more training", settings=[
        ("guided_auto_approve", []), ("denied_tools", ["lab.delete_run", "lab.train"])])
    assert should_run(g.ledger, "ex1")["reason"] == "no_eligible_todo"  # moot, not awaited
    assert any("not eligible" in r for r in verdict(g.view, pid)["reasons"])


def test_approvals_and_waiting_follow_the_contract_in_force() -> None:
    g = Gov({**CONTRACT, "mode": "bounded"})
    pid = propose(g.ledger, g.ex, name="train", tool="lab.train", risk="compute",
                  reason="r")["proposal_id"]
    assert verdict(g.view, pid)["can_execute"] is True  # bounded: compute needs no approval
    assert pending_approvals(g.view) == []
    amend_contract(g.ledger, g.curator, "compute needs a look now",
                   settings=[("approval_required_for", ["compute"])])
    # The same proposal now waits for the owner: listed, awaited, not executable.
    assert [r["subject"]["id"] for r in pending_approvals(g.view)] == [pid]
    assert status(g.view)["awaiting_approval"] == {"ex1": [pid]}
    assert should_run(g.ledger, "ex1")["reason"] == "awaiting_approval"
    assert verdict(g.view, pid)["can_execute"] is False
    # It may have run while it needed no approval: that result is kept, not refused.
    record_result(g.ledger, g.ex, pid, success=True, result={"acc": 0.95})
    assert pending_approvals(g.view) == [] and status(g.view)["awaiting_approval"] == {}
    # A proposal that needed approval under both versions and has none cannot have run.
    late = propose(g.ledger, g.ex, name="again", tool="lab.train", risk="compute",
                   reason="r")["proposal_id"]
    g.unchanged(lambda: record_result(g.ledger, g.ex, late, success=True), Refused,
                "still awaiting approval; it cannot have run")


def test_a_result_after_an_amendment_lifted_the_approval_is_accepted() -> None:
    g = Gov()
    pid = propose(g.ledger, g.ex, name="train", tool="lab.train", risk="compute",
                  reason="r")["proposal_id"]
    amend_contract(g.ledger, g.curator, "compute is routine here",
                   settings=[("guided_auto_approve", ["compute"])])
    assert verdict(g.view, pid)["can_execute"] is True
    record_result(g.ledger, g.ex, pid, success=False, error="out of memory")
    assert g.view["proposals"][pid]["result"]["success"] is False  # a failed run stays
    rejected = propose(g.ledger, g.ex, name="x", tool="lab.fetch", risk="external",
                       reason="r")["proposal_id"]
    decide_approval(g.ledger, g.c.owner, rejected, approved=False, note="no")
    g.unchanged(lambda: record_result(g.ledger, g.ex, rejected, success=True), Refused,
                "was rejected at seq")


def test_an_agent_told_to_wait_still_sees_the_lease_it_holds() -> None:
    g = Gov()
    g.start()
    g.c.todo("t1")
    should_run(g.ledger, "ex1", claim=True, creds=g.ex)
    propose(g.ledger, g.ex, name="train", tool="lab.train", risk="compute", reason="r")
    waiting = should_run(g.ledger, "ex1")
    assert (waiting["run"], waiting["reason"], waiting["detail"]["holding"]) == (
        False, "awaiting_approval", ["t1"])
    assert "holding" not in should_run(g.ledger, "ex2").get("detail", {})


def test_evaluating_a_finished_campaign_reports_nothing_to_do() -> None:
    g = Gov()
    g.start()
    add_usage(g.ledger, g.ex, {"experiments": 5})
    assert evaluate(g.ledger, g.ev, dry_run=False)["stopped"] is True
    again = evaluate(g.ledger, g.ev, dry_run=False)
    assert (again["finished"], again["reasons"], again["stopped"], again["seq"]) == (
        True, [], False, None)


def test_a_promotion_withdrawn_by_a_later_decision_no_longer_holds_the_best() -> None:
    g = Gov()
    loop = research(g)
    loop.supported("h1", *SUPPORTED)
    loop.supported("h2", [0.95, 0.96, 0.97], [0.95, 0.96, 0.97], mechanism="depth")
    decide(g.ledger, g.ev, "h1", "promoted")
    decide(g.ledger, g.ev, "h2", "promoted")
    assert status(g.view)["iterations"]["best_hypothesis"] == "h2"
    loop.propose("h3", mechanism="lr", supersedes="h2")
    decide(g.ledger, g.ev, "h2", "retired", reason="superseded")
    it = status(g.view)["iterations"]
    assert (it["best"], it["best_hypothesis"]) == (pytest.approx(0.93), "h1")
