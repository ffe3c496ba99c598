"""Projections and gates through the checked write path: each gate passes and fails for the right
reason, candidates rest on their records, decisions bind to revisions, and research-rule
refusals are clear, change nothing they refuse, and are recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import git
from lanes_support import campaign, own_packets_checked

from loopx.governance.actions import decide_approval, pending_approvals
from loopx.governance.contract import amend_contract
from loopx.governance.state import current_contract
from loopx.kernel.canonical import dumps, sha256_hex
from loopx.kernel.errors import Forbidden, LoopxError, Refused, ResearchRefused
from loopx.kernel.verify import verify_store
from loopx.research.decisions import decide
from loopx.research.evidence import judgement_payload
from loopx.research.graph import graph_json
from loopx.research.operations import (
    append_packet,
    audit_novelty,
    check_gate,
    judge,
    propose_hypothesis,
)
from loopx.research.projections import candidates, frontier, row
from loopx.research.state import campaign_base
from loopx.testing.research import CONTRACT, GOOD, HELDOUT, WORSE, ResearchLoop
from loopx.work.claims import fail, should_run
from loopx.work.todos import add_todos


def loop(**policy: Any) -> ResearchLoop:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "promotion_policy": {**CONTRACT["promotion_policy"], **policy}})
    return r


def view(r: ResearchLoop) -> dict[str, Any]:
    return r.ledger.state()["lanes"]


def head(r: ResearchLoop) -> int:
    return r.ledger.store.head().seq


def refusals(r: ResearchLoop) -> list[dict[str, Any]]:
    return [rec for rec, _ in r.ledger.store.read()
            if rec["schema_version"] == "research_refusal_v0"]


def refused_and_recorded(r: ResearchLoop, fn: Any, rule: str, match: str) -> dict[str, Any]:
    """``fn`` raises ResearchRefused(rule); exactly one refusal record was written, nothing else."""
    before = head(r)
    with pytest.raises(ResearchRefused, match=match) as caught:
        fn()
    assert caught.value.rule == rule
    assert head(r) == before + 1 and caught.value.recorded_seq == before + 1
    record = refusals(r)[-1]
    assert record["seq"] == before + 1 and record["payload"]["rule"] == rule
    return record


def run_refused(r: ResearchLoop, run: Any, rule: str, match: str) -> dict[str, Any]:
    """``run`` (an executor's claim, then its packet) ends in ResearchRefused(rule): the
    refusal is the head, and the packet is not in the log."""
    with pytest.raises(ResearchRefused, match=match) as caught:
        run()
    record = refusals(r)[-1]
    assert caught.value.rule == record["payload"]["rule"] == rule
    assert caught.value.recorded_seq == record["seq"] == head(r)
    [(todo_id, held)] = [(t, v) for t, v in view(r)["todos"].items() if v["holder"] == "ex"]
    fail(r.ledger, r.agents["ex"], todo_id, held["epoch"], "its packet was refused")
    return record


def unchanged(r: ResearchLoop, fn: Any, error: type[Exception], match: str) -> None:
    before = head(r)
    with pytest.raises(error, match=match):
        fn()
    assert head(r) == before


# -- the held-out gate and honest promotion ------------------------------------------------------

def test_dev_only_lift_is_refused_and_the_refusal_recorded() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    current = row(view(r), "h1")
    assert (current.state, current.gates["heldout"].status) == ("supported", "pending")
    assert current.promotion is None and candidates(view(r))["promotion"] == []
    record = refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                                  "dev_only_lift", "dev-only lift is never a promotion")
    assert record["payload"]["requested_kind"] == "research_decision_v0"
    assert record["payload"]["requested_action"] == "promote"
    assert record["agent_id"] == "ev" and record["payload"]["hypothesis_id"] == "h1"
    assert view(r)["hypothesis_decisions"] == {}
    assert verify_store(r.ledger.store).ok


def test_heldout_gate_passes_and_fails_for_the_right_reason() -> None:
    r = loop()
    r.supported("good", GOOD, HELDOUT)
    r.supported("flat", GOOD, [0.89, 0.90, 0.91], mechanism="depth")
    r.supported("worse", GOOD, WORSE, mechanism="lr")
    gates = {h: row(view(r), h).gates["heldout"] for h in ("good", "flat", "worse")}
    assert gates["good"].status == "passed"
    assert gates["flat"].status == "failed"
    assert gates["flat"].reasons[0].startswith("held-out verdict inconclusive (p 0.5, adjusted 1 "
                                               "under lond at 0.05, test 2 of the campaign")
    assert gates["worse"].status == "failed"
    assert gates["worse"].reasons[0].startswith("held-out verdict contradicts (p 0.998")
    assert [c["hypothesis_id"] for c in candidates(view(r))["promotion"]] == ["good"]
    retire = {c["hypothesis_id"]: c["reasons"] for c in candidates(view(r))["retirement"]}
    assert retire == {"flat": ["no_effect_found"], "worse": ["contradicted"]}
    out = decide(r.ledger, r.agents["ev"], "good", "promoted")
    promotion = row(view(r), "good")
    assert promotion.state == "promoted"
    # The decision cites exactly what the candidate rested on: hypothesis, packets, judgements.
    entry = view(r)["hypotheses"]["good"]
    events = {e["event_id"] for e in entry["events"]}
    assert set(out["evidence_ids"]) == {entry["record_id"], *entry["packets"], *events}


def test_even_a_contract_without_the_heldout_gate_never_promotes_dev_only_lift() -> None:
    r = loop(required_gates=[], require_heldout=False)
    r.supported("h1", GOOD, None)
    assert row(view(r), "h1").gates["heldout"].required is True
    assert row(view(r), "h1").promotion is None


def test_judgements_are_what_the_rule_computes_from_their_packets() -> None:
    r = loop()
    r.propose("h1")
    r.run("h1", "dev", WORSE)
    forged = {**judgement_payload(view(r), "h1", "dev"), "verdict": "supports"}
    unchanged(r, lambda: r.ledger.append({"payload": forged}, creds=r.agents["ev"],
                                         kind="research_evidence_event_v0"),
              Refused, "not what the contract's rule gives .* expected verdict contradicts")
    r.run("h1", "dev", None, status="failed")  # a failed attempt adds no values
    assert judge(r.ledger, r.agents["ev"], "h1", "dev")["verdict"] == "contradicts"


def test_a_missing_seed_needs_a_retry_not_a_verdict() -> None:
    r = loop()
    r.propose("h1")
    partial = r.run("h1", "dev", [0.99, 0.99])  # seeds 0 and 1 only
    out = judge(r.ledger, r.agents["ev"], "h1", "dev")
    assert (out["verdict"], out["seeds"], out["notes"]) == (
        "needs_retry", [], "no packet has acc for every seed (0, 1, 2): a measurement is "
                           "every seed at once")
    # The partial packet stays an attempt, cited, but gives no values beside a whole one.
    whole = r.run("h1", "dev", [0.91, 0.92, 0.93])
    out = judge(r.ledger, r.agents["ev"], "h1", "dev")
    assert out["packet_ids"] == [partial, whole]
    assert (out["seeds"], out["values"], out["notes"]) == ([0, 1, 2], [0.91, 0.92, 0.93], None)


def test_claimed_evidence_never_counts() -> None:
    r = loop()
    r.propose("h1")
    todo = "claimed-dev"
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": todo, "title": "t", "role":
                                          "research_executor", "action_kind": "run_dev_eval",
                                          "assigned_to": "ex", "hypothesis_id": "h1"}])
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    under = (got["todo"]["todo_id"], got["todo"]["epoch"])
    claimed = r.ledger.append({"todo_id": under[0], "epoch": under[1], "provenance": "claimed",
                               "payload": {"hypothesis_id": "h1", "status": "scored",
                                           "results": [{"split": "dev", "metric": "acc",
                                                        "seed": s, "value": 0.99}
                                                       for s in (0, 1, 2)]}},
                              creds=r.agents["ex"], kind="auto_research_evidence_packet_v0")
    assert claimed[0]["provenance"] == "claimed"
    unchanged(r, lambda: judge(r.ledger, r.agents["ev"], "h1", "dev"), Refused,
              "no scored packet with dev results")


def test_heldout_results_come_only_from_a_heldout_todo() -> None:
    r = loop()
    r.propose("h1")
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "d", "title": "t", "role":
                                          "research_executor", "action_kind": "run_dev_eval",
                                          "assigned_to": "ex", "hypothesis_id": "h1"}])
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    assert got["claim"]["data"] == {"split": "dev", "name": "dev", "location": None,
                                    "base_commit": None}
    packet = {"hypothesis_id": "h1", "status": "scored",
              "results": [{"split": "heldout", "metric": "acc", "seed": 0, "value": 0.9}]}
    unchanged(r, lambda: append_packet(r.ledger, r.agents["ex"], packet, under=("d", 1)),
              Refused, "held-out results come only from a held-out todo")


# -- the held-out read budget --------------------------------------------------------------------

def test_a_refusal_keeps_the_refused_payload_unless_private_or_too_large() -> None:
    """The refusal takes a refused packet's place, so it keeps its payload (what an attempt
    measured is never lost), except a private packet's or one too large to fit beside the
    reason, and keeps no other kind's (a contract's would hold the held-out location the
    refusal leaves out); the digest names it either way."""
    from loopx.kernel.checks import Identity
    from loopx.research.domain import KEPT_REQUEST_BYTES, refusal

    who = Identity("ex", "research_executor", "research_executor")
    small = {"hypothesis_id": "h1", "status": "scored", "notes": "x"}
    large = {**small, "notes": "x" * (KEPT_REQUEST_BYTES + 1)}
    packet = "auto_research_evidence_packet_v0"
    for kind, payload, visibility, kept in ((packet, small, "public", True),
                                            (packet, small, "private", False),
                                            (packet, large, "public", False),
                                            ("research_contract_v0", small, "public", False)):
        exc = ResearchRefused("other_base", "refused")
        exc.request = {"schema_version": kind, "visibility": visibility, "todo_id": "t1",
                       "payload": payload}
        _, out = refusal(who, exc)
        assert out["request"] == (payload if kept else None)
        assert out["request_sha256"] == sha256_hex(dumps(payload))
    _, out = refusal(who, ResearchRefused("no_candidate", "refused"))
    assert (out["request"], out["request_sha256"]) == (None, None)


def test_a_second_heldout_read_is_refused_and_recorded() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    r.run("h1", "heldout", HELDOUT)  # measured, not judged yet
    assert view(r)["hypotheses"]["h1"]["heldout_reads"] == 1
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "again", "title": "peek again",
                                          "role": "research_executor",
                                          "action_kind": "run_holdout_eval",
                                          "hypothesis_id": "h1"}])
    # should-run does not hand it out...
    answer = should_run(r.ledger, "ex")
    assert (answer["reason"], answer["detail"]) == (
        "no_eligible_todo", {"heldout_budget_spent": ["again"]})
    # ...and a claim of it, through the write path, is refused and the refusal kept.
    claim = {"todo_id": "again", "epoch": 1, "payload": {
        "hypothesis_id": "h1", "capability_token": "research_executor",
        "lease_ttl_seconds": 900.0, "via": "explicit"}}
    record = refused_and_recorded(
        r, lambda: r.ledger.append(claim, creds=r.agents["ex"],
                                   kind="auto_research_lane_claim_v1"),
        "heldout_budget", "used its held-out read budget .1 of 1.")
    assert record["payload"]["todo_id"] == "again"
    assert record["payload"]["detail"] == {"reads": 1, "budget": 1}
    assert view(r)["todos"]["again"]["status"] == "open"


def test_the_heldout_location_is_only_in_a_heldout_claim_packet() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "ho", "title": "held-out",
                                          "role": "research_executor",
                                          "action_kind": "run_holdout_eval", "assigned_to": "ex",
                                          "hypothesis_id": "h1"}])
    asked = should_run(r.ledger, "ex")  # no claim, no token: no location
    assert asked["claim"]["data"] == {"split": "heldout", "name": "heldout", "location": None,
                                      "base_commit": None}
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    assert got["claim"]["data"] == {"split": "heldout", "name": "heldout",
                                    "location": "/data/heldout", "base_commit": None}
    from loopx.governance.contract import contract_version
    from loopx.tools.governance import WITHHELD, withhold_heldout

    shown = withhold_heldout(contract_version(view(r)))
    assert shown["evaluation"]["heldout"]["location"] == WITHHELD


# -- duplicates, retirement, retry ---------------------------------------------------------------

def test_a_duplicate_of_a_retired_hypothesis_is_refused_citing_it() -> None:
    r = loop()
    r.supported("h1", WORSE, None, parameters={"width": 64})
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="contradicted")
    earlier = view(r)["hypotheses"]["h1"]["record_id"]
    # Case and whitespace do not make a new idea; the same parameters in another order neither.
    under = r.proposer_todo("h2")
    again = {"hypothesis_id": "h2", "title": "t", "statement": "  WIDTH   change h1 lifts "
             "accuracy ", "mechanism_family": "Width", "parameters": {"width": 64},
             "no_grounding_reason": "r"}
    record = refused_and_recorded(
        r, lambda: propose_hypothesis(r.ledger, r.agents["prop"], again, under=under),
        "duplicate", f"duplicates 'h1' .retired, contradicted; record {earlier}.")
    assert record["payload"]["cites"] == [earlier]
    assert "h2" not in view(r)["hypotheses"]
    # 64.0 is the parameter 64 written otherwise: still a duplicate.
    refused_and_recorded(
        r, lambda: propose_hypothesis(r.ledger, r.agents["prop"],
                                      {**again, "parameters": {"width": 64.0}}, under=under),
        "duplicate", "duplicates 'h1'")
    # Other parameters are another idea, under the same held todo.
    propose_hypothesis(r.ledger, r.agents["prop"],
                       {**again, "hypothesis_id": "h3", "parameters": {"width": 128}}, under=under)


def test_retry_then_retry_exhaustion() -> None:
    r = loop(max_attempts=2)
    r.propose("h1")
    r.run("h1", "dev", None, status="failed")
    current = row(view(r), "h1")
    assert current.state == "needs_retry" and current.retry is not None
    assert current.retry["attempts_left"] == 1
    r.run("h1", "dev", None, status="timeout")
    current = row(view(r), "h1")
    assert current.retry is None
    assert current.retirement is not None and current.retirement["reasons"] == ["retry_exhausted"]
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="retry_exhausted")
    assert row(view(r), "h1").state == "retired"


def test_a_superseded_hypothesis_is_a_retirement_candidate() -> None:
    r = loop()
    r.propose("h1")
    r.propose("h2", mechanism="depth", supersedes="h1")
    assert row(view(r), "h1").retirement == {
        "reasons": ["superseded"], "rests_on": [view(r)["hypotheses"]["h2"]["record_id"]],
        "why": {"superseded": "superseded by h2"}}
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "retired",
                                           reason="contradicted"),
                         "no_candidate", "not a retirement candidate for contradicted .it is "
                                         "for: superseded.")


# -- decisions -----------------------------------------------------------------------------------

def test_a_decision_by_the_wrong_role_is_forbidden() -> None:
    r = loop()
    r.supported("h1", GOOD, HELDOUT)
    for agent in ("ex", "prop", "cur"):
        unchanged(r, lambda agent=agent: decide(r.ledger, r.agents[agent], "h1", "promoted"),
                  Forbidden, "may not write research_decision_v0 with action 'promote'")


def test_a_conflicting_decision_on_the_same_revision_is_refused() -> None:
    r = loop()
    r.supported("h1", GOOD, HELDOUT)
    current = row(view(r), "h1")
    assert current.promotion is not None
    payload = {"hypothesis_id": "h1", "outcome": "promoted", "reason": "gates_passed",
               "revision": current.revision, "evidence_ids": current.promotion["rests_on"]}
    r.ledger.append({"payload": {**payload, "decision_id": "d1"}}, creds=r.agents["ev"],
                    kind="research_decision_v0")
    # A second evaluator decided on the same revision at the same time: it lost the race.
    unchanged(r, lambda: r.ledger.append({"payload": {**payload, "decision_id": "d2",
                                                      "supersedes": "d1"}},
                                         creds=r.agents["ev"], kind="research_decision_v0"),
              Refused, f"at revision {current.revision + 1}, not {current.revision}")


def test_owner_gate_the_decision_waits_for_the_owner() -> None:
    r = loop(require_owner_approval=True)
    r.supported("h1", GOOD, HELDOUT)
    out = decide(r.ledger, r.agents["ev"], "h1", "promoted")
    waiting = row(view(r), "h1")
    assert (waiting.state, waiting.next_action, waiting.next_role) == (
        "at_promotion_gate", "approve", "owner")
    assert [p["subject"] for p in pending_approvals(view(r))] == [
        {"kind": "decision", "id": out["decision_id"]}]
    assert [h.hypothesis_id for h in frontier(view(r), role="owner")] == ["h1"]
    decide_approval(r.ledger, r.owner, out["decision_id"], approved=True, note="merge it")
    assert row(view(r), "h1").state == "promoted"
    assert row(view(r), "h1").gates["owner"].status == "passed"


# -- novelty -------------------------------------------------------------------------------------

def test_novelty_gate_needs_an_independent_audit() -> None:
    r = loop()
    r.supported("h1", GOOD, HELDOUT, claims_novelty=True)
    current = row(view(r), "h1")
    assert (current.gates["novelty"].status, current.next_action) == ("pending", "audit_novelty")
    assert current.promotion is None
    checked = [{"kind": "paper", "ref": "arXiv:1608.03983"}]
    unchanged(r, lambda: audit_novelty(r.ledger, r.agents["prop"], "h1", "novel", refs=checked),
              Forbidden, "may not write novelty_audit_v0")
    audit_novelty(r.ledger, r.agents["ev"], "h1", "not_novel", note="seen in 2019")
    assert row(view(r), "h1").gates["novelty"].status == "failed"
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=checked,
                  note="on a closer reading, new")
    assert row(view(r), "h1").gates["novelty"].status == "passed"
    assert row(view(r), "h1").promotion is not None


def test_an_evaluator_never_audits_a_hypothesis_it_proposed() -> None:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract()
    # An evaluator-promoter that also wrote the hypothesis (the owner can grant both roles to
    # one person's agents, but one agent id is one role): the proposer id here is "prop".
    r.propose("h1", claims_novelty=True)
    entry = view(r)["hypotheses"]["h1"]
    assert entry["proposer"] == "prop"
    rows = frontier(view(r), role="evaluator_promoter", agent_id="prop")
    assert all(x.next_action != "audit_novelty" for x in rows)


# -- the protected boundary, from git ------------------------------------------------------------


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "eval/score.py", "def score(): ...\n", "evaluator")
    return tmp_path


def protected_loop(base_commit: str | None = None, rules: int | None = None) -> ResearchLoop:
    c = campaign(rules=rules)
    r = ResearchLoop(c.ledger, c.owner)
    pin = {} if base_commit is None else {"base_commit": base_commit}
    r.contract({**CONTRACT, "protected_scope": ["eval/"], **pin,
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    return r


def run_both(r: ResearchLoop, hid: str, dev: tuple[str, str], heldout: tuple[str, str]) -> None:
    r.propose(hid)
    r.run(hid, "dev", GOOD, commits=dev)
    r.judge(hid, "dev")
    r.run(hid, "heldout", HELDOUT, commits=heldout)
    r.judge(hid, "heldout")


def test_protected_boundary_passes_for_a_clean_change(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "model.py", "width = 128\n", "wider")
    r = protected_loop(base)
    run_both(r, "h1", (base, evaluated), (base, evaluated))
    assert row(view(r), "h1").gates["protected_boundary"].status == "pending"
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate protected_boundary pending: not checked")
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert out["passed"] and len(out["packets"]) == 2
    assert row(view(r), "h1").promotion is not None
    decide(r.ledger, r.agents["ev"], "h1", "promoted")


def test_a_protected_edit_blocks_promotion_even_when_the_packet_claims_clean(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    base = git(repo, "rev-parse", "HEAD")
    # The executor works in its own worktree, on a branch per (todo, epoch).
    tree = tmp_path_factory.mktemp("worktrees") / "h1-dev-1"
    git(repo, "worktree", "add", "-q", "-b", "loopx/h1-dev/1", str(tree), base)
    evaluated = commit(tree, "eval/score.py", "def score(): return 1.0\n", "make it easy")
    assert git(repo, "rev-parse", "HEAD") == base  # main untouched; the branch holds it
    r = protected_loop(base)
    r.propose("h1")
    # The executor says the scope is clean; the gate never reads that flag.
    r.run("h1", "dev", GOOD, commits=(base, evaluated), claims_clean=True)
    r.judge("h1", "dev")
    r.run("h1", "heldout", HELDOUT, commits=(base, evaluated), claims_clean=True)
    claims = [rec["payload"]["protected_scope_clean"] for rec, _ in r.ledger.store.read()
              if rec["schema_version"] == "auto_research_evidence_packet_v0"]
    assert claims == [True, True]
    r.judge("h1", "heldout")
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert not out["passed"]
    assert [(v["path"], v["change"]) for v in out["violations"]] == [("eval/score.py",
                                                                      "modified")]
    current = row(view(r), "h1")
    assert current.gates["protected_boundary"].status == "failed"
    assert current.promotion is None and current.state == "contradicted"
    assert current.retirement is not None and current.retirement["reasons"] == [
        "guardrail_failed"]
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate protected_boundary failed")
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="guardrail_failed")


def test_a_change_made_and_reverted_between_evaluations_is_caught(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    tampered = commit(repo, "eval/score.py", "def score(): return 1.0\n", "tamper")
    reverted = commit(repo, "eval/score.py", "def score(): ...\n", "put it back")
    assert git(repo, "diff", base, reverted) == ""  # the net diff is clean
    r = protected_loop(base)
    run_both(r, "h1", (base, tampered), (base, reverted))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert not out["passed"]
    assert {v["commit"] for v in out["violations"]} == {tampered, reverted}


def test_a_pinned_protected_commit_catches_a_base_cited_after_the_tampering(
        repo: Path) -> None:
    pinned = git(repo, "rev-parse", "HEAD")
    tampered = commit(repo, "eval/score.py", "def score(): return 1.0\n", "make it easy")
    evaluated = commit(repo, "model.py", "width = 128\n", "wider")
    # The packets cite the tampered commit as their base: the range itself is clean.
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "protected_commit": pinned,
                "base_commit": tampered,  # the curator pinned it too: a curator's slip
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    run_both(r, "h1", (tampered, evaluated), (tampered, evaluated))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert not out["passed"]
    [violation] = out["violations"]
    assert (violation["path"], violation["change"], violation["commit"]) == (
        "eval/score.py", "modified", evaluated)
    assert "against the contract's protected_commit" in violation["detail"]
    # Without the pin, the same packets pass: the range is all the gate can see.
    unpinned = protected_loop(tampered)
    run_both(unpinned, "h1", (tampered, evaluated), (tampered, evaluated))
    assert check_gate(unpinned.ledger, unpinned.agents["ev"], "h1", repo=repo)["passed"]


def test_a_guardrail_that_stopped_a_hypothesis_is_not_moved_to_promote_it(repo: Path) -> None:
    """The executor edits the evaluator and the boundary gate catches it. A curator who then
    drops the gate, narrows the protected scope (and checks again), moves the pinned commit or
    widens the editable scope would have it promoted (each did, before rules version 4): once
    evidence exists, each is refused and recorded, and the hypothesis stays stopped."""
    base = git(repo, "rev-parse", "HEAD")
    tampered = commit(repo, "eval/score.py", "def score(): return 1.0\n", "make it easy")
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "protected_commit": base,
                "base_commit": base, "editable_scope": ["model.py", "eval/"],
                "novelty_boundary": {"prior_art": [{"kind": "paper",
                                                     "ref": "doi:10.1000/survey"}]},
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"],
                                     "require_owner_approval": True}})
    run_both(r, "h1", (base, tampered), (base, tampered))
    assert not check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)["passed"]
    since = view(r)["campaign"]["plans"][0]["frozen_seq"]
    cur = r.agents["cur"]
    for settings, says in (
            ([("promotion_policy.required_gates", ["heldout"])],
             "drops the required gate protected_boundary"),
            ([("protected_scope", ["data/"])], "removes eval/ from the protected scope"),
            ([("protected_commit", tampered)], f"moves the pinned protected commit {base[:12]}"),
            ([("protected_commit", None)], "moves the pinned protected commit"),
            ([("editable_scope", [])], "widens the editable scope to everything"),
            ([("editable_scope", ["model.py", "eval/", "src/"])], "widens the editable scope"),
            ([("promotion_policy.require_owner_approval", False)],
             "no longer requires the owner's approval"),
            ([("novelty_boundary", "anything goes")], "drops 1 prior-art entry")):
        record = refused_and_recorded(r, lambda s=settings: amend_contract(
            r.ledger, cur, "the guardrail was misconfigured", settings=s),
            "guardrail_loosened", says)
        assert record["payload"]["detail"]["evidence_since"] == since
        [change] = record["payload"]["detail"]["changes"]
        assert change["field"] == settings[0][0].replace("novelty_boundary",
                                                          "novelty_boundary.prior_art")
    assert row(view(r), "h1").gates["protected_boundary"].status == "failed"
    assert row(view(r), "h1").promotion is None
    # Tightening is an amendment like any other.
    amend_contract(r.ledger, cur, "protect the data too", settings=[
        ("protected_scope", ["eval/", "data/"]), ("editable_scope", ["model.py"]),
        ("promotion_policy.required_gates", ["protected_boundary", "heldout", "novelty"])])
    # Before any evidence, a guardrail may still move: nothing was stopped by it yet.
    early = protected_loop()
    amend_contract(early.ledger, early.agents["cur"], "no boundary here",
                   settings=[("protected_scope", ["data/"])])
    assert current_contract(view(early))["protected_scope"] == ["data/"]


def test_a_workspace_outside_git_fails_the_boundary_closed() -> None:
    r = protected_loop("a" * 40)
    run_both(r, "h1", ("a" * 40, "b" * 40), ("a" * 40, "b" * 40))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=None)
    assert not out["passed"] and "not inside a git repository" in out["reasons"][0]
    # Fail closed: promotion stays blocked, but nothing says the scope was touched, so this is
    # no guardrail failure (no retirement candidate, no invalid iteration).
    current = row(view(r), "h1")
    gate = current.gates["protected_boundary"]
    assert (gate.status, gate.reasons) == (
        "pending", ["could not be verified: " + out["reasons"][0]])
    assert current.promotion is None and current.retirement is None


def test_gate_results_are_written_only_by_loopx_and_bound_to_the_revision(repo: Path) -> None:
    r = protected_loop()
    r.propose("h1")
    forged = {"hypothesis_id": "h1", "gate": "protected_boundary", "passed": True,
              "revision": view(r)["hypotheses"]["h1"]["revision"]}
    from loopx.kernel.errors import RecordRejected

    unchanged(r, lambda: r.ledger.append({"payload": forged}, creds=r.agents["ev"],
                                         kind="gate_result_v0"),
              RecordRejected, "written only by loopx")
    stale = {**forged, "revision": forged["revision"] - 1}
    unchanged(r, lambda: r.ledger.write(r.agents["ev"], lambda v, who, now: r.ledger.prepare(
        {"payload": stale}, who, kind="gate_result_v0", by_loopx=True)),
        Refused, "check it again")


# -- projections ---------------------------------------------------------------------------------

def test_frontier_states_and_who_acts_next() -> None:
    r = loop()
    r.propose("proposed")
    r.propose("selected", mechanism="depth")
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "sel", "title": "t",
                                          "role": "research_executor",
                                          "action_kind": "run_dev_eval",
                                          "hypothesis_id": "selected"}])
    r.supported("supported", GOOD, None, mechanism="lr")
    r.supported("gate", GOOD, HELDOUT, mechanism="dropout")
    r.propose("recorded", mechanism="batch")
    r.run("recorded", "dev", GOOD)
    states = {x.hypothesis_id: (x.state, x.next_action, x.next_role) for x in frontier(view(r))}
    assert states == {
        "proposed": ("proposed", "add_todo", "hypothesis_proposer"),
        "selected": ("selected", "run_dev_eval", "research_executor"),
        "supported": ("supported", "run_holdout_eval", "research_executor"),
        "gate": ("at_promotion_gate", "decide", "evaluator_promoter"),
        "recorded": ("evidence_recorded", "judge_evidence", "evaluator_promoter"),
    }
    mine = [x.hypothesis_id for x in frontier(view(r), role="evaluator_promoter", agent_id="ev")]
    assert mine == ["gate", "recorded"]


def test_projections_are_pure_and_the_graph_is_deterministic() -> None:
    r = loop()
    r.supported("h1", GOOD, HELDOUT)
    decide(r.ledger, r.agents["ev"], "h1", "promoted")
    r.supported("h2", WORSE, None, mechanism="depth")
    state = view(r)
    before = dumps(dict(state["hypotheses"]))
    first = dumps(graph_json(state, head(r)))
    assert dumps(graph_json(state, head(r))) == first
    assert dumps(dict(state["hypotheses"])) == before
    fresh = type(r.ledger)(r.ledger.store)  # a new fold of the same log
    assert dumps(graph_json(fresh.state()["lanes"], head(r))) == first
    graph = graph_json(state, head(r))
    kinds = {e["type"] for e in graph["edges"]}
    assert {"attempt_of", "judges", "judgement_of", "decides", "rests_on", "works_on",
            "under_contract", "under"} <= kinds
    assert [n["id"] for n in graph["nodes"]] == sorted(n["id"] for n in graph["nodes"])


def test_every_refusal_kind_reads_back_through_verify() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    with pytest.raises(LoopxError):
        decide(r.ledger, r.agents["ev"], "h1", "promoted")
    assert len(refusals(r)) == 1
    assert verify_store(r.ledger.store).ok


def test_evaluations_of_a_decided_hypothesis_are_not_handed_out() -> None:
    r = loop()
    r.supported("h1", WORSE, None)
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="contradicted")
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "late", "title": "late held-out",
                                          "role": "research_executor",
                                          "action_kind": "run_holdout_eval",
                                          "hypothesis_id": "h1"}])
    assert should_run(r.ledger, "ex")["reason"] == "no_eligible_todo"
    claim = {"todo_id": "late", "epoch": 1, "payload": {
        "hypothesis_id": "h1", "capability_token": "research_executor",
        "lease_ttl_seconds": 900.0, "via": "explicit"}}
    unchanged(r, lambda: r.ledger.append(claim, creds=r.agents["ex"],
                                         kind="auto_research_lane_claim_v1"),
              Refused, "evaluates 'h1', which is already decided")


def measured_protected_loop(rules: int | None = None,
                            base_commit: str | None = None) -> ResearchLoop:
    c = campaign(rules=rules)
    r = ResearchLoop(c.ledger, c.owner)
    pin = {} if base_commit is None else {"base_commit": base_commit}
    r.contract({**CONTRACT, "protected_scope": ["eval/"], **pin,
                "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    return r


def test_a_baseline_measured_with_a_tampered_evaluator_blocks_every_comparison(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The hypothesis' own runs are clean; the measured baseline was run from a branch whose
    evaluator scores harder, so every hypothesis compared with it looks better. Before rules
    version 7 the gate checked only the hypothesis' packets, passed, and it was promoted. (From
    version 8 the baseline's packets are refused: it runs its base unchanged.)"""
    base = git(repo, "rev-parse", "HEAD")
    tree = tmp_path_factory.mktemp("worktrees") / "base"
    git(repo, "worktree", "add", "-q", "-b", "loopx/base/1", str(tree), base)
    harder = commit(tree, "eval/score.py", "def score(): return 0.5\n", "score the baseline")
    clean = commit(repo, "model.py", "width = 128\n", "wider")
    r = measured_protected_loop(rules=7)
    r.propose("base", mechanism="baseline")
    base_dev = r.run("base", "dev", [0.85, 0.86, 0.84], commits=(base, harder))
    base_heldout = r.run("base", "heldout", [0.85, 0.86, 0.84], commits=(base, harder))
    run_both(r, "h1", (base, clean), (base, clean))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert out["packets"][-2:] == [base_dev, base_heldout]
    assert not out["passed"]
    assert [(v["path"], v["change"], v["commit"]) for v in out["violations"]] == [
        ("eval/score.py", "modified", harder)]
    current = row(view(r), "h1")
    gate = current.gates["protected_boundary"]
    assert gate.status == "failed" and current.promotion is None
    assert any(reason.startswith(f"the measured baseline's packet {base_dev} ({base}..{harder})"
                                 " changes the protected scope") for reason in gate.reasons)
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate protected_boundary failed")


def test_a_clean_baseline_passes_and_an_old_check_does_not_cover_it(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    clean = commit(repo, "model.py", "width = 128\n", "wider")
    r = measured_protected_loop(base_commit=base)
    r.propose("base", mechanism="baseline")
    compared = [r.run("base", split, [0.85, 0.86, 0.84], commits=(base, base))
                for split in ("dev", "heldout")]
    run_both(r, "h1", (base, clean), (base, clean))
    # A gate result that covers only the hypothesis' own packets (what checks recorded before
    # rules version 7) leaves the gate pending on the baseline's.
    own_packets_checked(r.ledger, r.agents["ev"], "h1")
    gate = row(view(r), "h1").gates["protected_boundary"]
    assert gate.status == "pending" and gate.reasons == [
        f"packets not covered by the last check: {', '.join(compared)}"]
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert out["passed"] and out["packets"][-2:] == compared
    assert row(view(r), "h1").promotion is not None
    decide(r.ledger, r.agents["ev"], "h1", "promoted")


def smaller_model(repo: Path, factory: pytest.TempPathFactory, hid: str) -> tuple[str, Path, str]:
    """HEAD, and a worktree of ``hid``'s branch from it with a smaller model committed: (HEAD,
    the worktree, that commit)."""
    head = git(repo, "rev-parse", "HEAD")
    tree = factory.mktemp("worktrees") / hid
    git(repo, "worktree", "add", "-q", "-b", f"loopx/{hid}/1", str(tree), head)
    return head, tree, commit(tree, "model.py", "width = 8\n", "a smaller model")


def test_a_baseline_weakened_in_the_editable_scope_is_refused(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The baseline's executor commits a smaller model on its branch (an edit the protected
    scope allows) and measures that: every hypothesis compared with it gains the difference.
    Before rules version 8 the gate passed and a hypothesis no better than the base code was
    promoted; now the baseline runs its base unchanged."""
    base, _, weaker = smaller_model(repo, tmp_path_factory, "base")
    same = commit(repo, "notes.txt", "nothing that changes the model\n", "a no-op")
    weak = [0.70, 0.71, 0.69]
    # What version 7 let through: the gate passes and the hypothesis is promoted.
    old = measured_protected_loop(rules=7)
    old.propose("base", mechanism="baseline")
    old.run("base", "dev", weak, commits=(base, weaker))
    old.run("base", "heldout", weak, commits=(base, weaker))
    run_both(old, "h1", (base, same), (base, same))
    assert check_gate(old.ledger, old.agents["ev"], "h1", repo=repo)["passed"]
    decide(old.ledger, old.agents["ev"], "h1", "promoted")
    # Now: refused and recorded, nothing of the run kept; the base itself is accepted.
    r = measured_protected_loop(base_commit=base)
    r.propose("base", mechanism="baseline")
    refused = run_refused(r, lambda: r.run("base", "dev", weak, commits=(base, weaker)),
                          "baseline_changed", f"evaluated {weaker}, not its base_commit {base}")
    assert refused["payload"]["hypothesis_id"] == "base"
    assert view(r)["hypotheses"]["base"]["packets"] == []
    r.run("base", "dev", [0.85, 0.86, 0.84], commits=(base, base))


def test_every_scored_packet_starts_from_the_campaign_base(repo: Path) -> None:
    """The first scored packet fixes the base commit; a scored result from another base (main
    moved on, or an older, weaker commit) is refused and recorded, a failed attempt from one is
    kept, and the same experiment run from the campaign's base is accepted."""
    first = git(repo, "rev-parse", "HEAD")
    older = first
    base = commit(repo, "model.py", "width = 64\n", "the model")
    change = commit(repo, "model.py", "width = 128\n", "wider")
    git(repo, "checkout", "-q", "-b", "later", base)
    moved = commit(repo, "model.py", "width = 64\nlayers = 4\n", "main moves on")
    r = protected_loop(rules=8)  # a packet fixes the base only before rules version 9
    r.propose("h1")
    r.propose("h2", mechanism="other")
    r.run("h1", "dev", None, status="failed", commits=(older, older))  # fixes nothing
    assert campaign_base(view(r)) is None
    fixing = r.run("h1", "dev", GOOD, commits=(base, change))
    assert campaign_base(view(r)) == {
        "packet_id": fixing, "record_id": fixing, "base_commit": base,
        "seq": view(r)["packets"][fixing]["seq"], "contract_version": None}
    for other in (moved, older):
        refused = run_refused(r, lambda other=other: r.run(
            "h2", "dev", GOOD, commits=(other, other)), "other_base",
            f"starts from base_commit {other}, but the campaign's experiments start from {base}")
        assert refused["payload"]["detail"] == {"base_commit": other, "campaign_base": base}
        assert refused["payload"]["cites"] == [fixing]
        # What the refused attempt measured stays in the log, with the digest that names it.
        kept = refused["payload"]["request"]
        assert [x["value"] for x in kept["results"]] == GOOD
        assert kept["evaluated_commit"] == other
        assert refused["payload"]["request_sha256"] == sha256_hex(dumps(kept))
    r.run("h2", "dev", None, status="failed", commits=(moved, moved))  # kept: it counts
    r.run("h2", "dev", GOOD, commits=(base, change))
    assert [view(r)["packets"][p]["status"] for p in view(r)["hypotheses"]["h2"]["packets"]] == [
        "failed", "scored"]


def test_a_racing_executor_cannot_fix_a_weakened_base(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Before rules version 9, with no base pinned, whoever wrote the first scored packet chose
    the base. An eager executor commits a smaller model on a branch, writes the first scored
    packet from there, and its hypothesis undoes the change: the honest baseline then measures
    the weakened code, and a hypothesis no better than main is promoted. Now the contract pins
    the base (``base_commit``) before any scored packet may cite one."""
    main, tree, weakened = smaller_model(repo, tmp_path_factory, "h1")
    undone = commit(tree, "model.py", "", "the hypothesis: back to main's model")
    weak = [0.70, 0.71, 0.69]

    def race(r: ResearchLoop) -> None:
        r.propose("h1")
        r.run("h1", "dev", GOOD, commits=(weakened, undone))
        r.propose("base", mechanism="baseline")
        for split in ("dev", "heldout"):  # the honest baseline measures the base it is handed
            r.run("base", split, weak, commits=(weakened, weakened))
        r.judge("h1", "dev")
        r.run("h1", "heldout", HELDOUT, commits=(weakened, undone))
        r.judge("h1", "heldout")

    unpinned = measured_protected_loop(rules=8)
    race(unpinned)
    assert check_gate(unpinned.ledger, unpinned.agents["ev"], "h1", repo=repo)["passed"]
    decide(unpinned.ledger, unpinned.agents["ev"], "h1", "promoted")
    # Unpinned now: no packet fixes the base; a run citing no commits is still kept.
    r = measured_protected_loop()
    r.propose("h1")
    refused = run_refused(r, lambda: r.run("h1", "dev", GOOD, commits=(weakened, undone)),
                          "base_unpinned", f"starts from base_commit {weakened}, but the "
                          "contract pins no base commit")
    assert refused["payload"]["detail"] == {"base_commit": weakened}
    assert campaign_base(view(r)) is None and view(r)["hypotheses"]["h1"]["packets"] == []
    r.run("h1", "dev", GOOD)
    # Pinned: the race's first packet is refused and recorded; the same run from main counts.
    r = measured_protected_loop(base_commit=main)
    r.propose("h1")
    refused = run_refused(r, lambda: r.run("h1", "dev", GOOD, commits=(weakened, undone)),
                          "other_base", f"starts from base_commit {weakened}, but the "
                          f"campaign's experiments start from {main} \\(pinned by the "
                          "contract, version 1")
    contract = current_contract(view(r))
    assert contract is not None and refused["payload"]["cites"] == [contract["record_id"]]
    assert view(r)["hypotheses"]["h1"]["packets"] == []
    r.run("h1", "dev", GOOD, commits=(main, undone))


def test_a_pinned_base_moves_with_the_contract_only_until_evidence() -> None:
    """Before any evidence the curator may move or drop the pin; after, a version that moves
    or drops it is refused and recorded, and one that keeps it is written. A scored packet
    citing no commits is kept, as without a pin: the protected boundary gate leaves every
    comparison with it pending."""
    first, second, other = "a" * 40, "b" * 40, "c" * 40
    r = measured_protected_loop(base_commit=first)
    pinned = campaign_base(view(r))
    assert pinned is not None and (pinned["base_commit"], pinned["contract_version"]) == (
        first, 1)
    amend_contract(r.ledger, r.agents["cur"], "pin the release", settings=[
        ("base_commit", second)])
    assert campaign_base(view(r))["base_commit"] == second
    amend_contract(r.ledger, r.agents["cur"], "unpin", settings=[("base_commit", None)])
    assert campaign_base(view(r)) is None
    amend_contract(r.ledger, r.agents["cur"], "pin again", settings=[("base_commit", second)])
    r.propose("h1")
    r.run("h1", "dev", GOOD)
    assert row(view(r), "h1").gates["protected_boundary"].status == "pending"
    r.run("h1", "dev", GOOD, commits=(second, other))
    for settings, what in (([("base_commit", first)], f"pins base_commit {first}"),
                           ([("base_commit", None)], "drops the pinned base_commit")):
        refused_and_recorded(r, lambda settings=settings: amend_contract(
            r.ledger, r.agents["cur"], "move it", settings=settings), "other_base", what)
    amend_contract(r.ledger, r.agents["cur"], "more seeds later",
                   settings=[("stop_policy.max_iterations", 9)])
    assert campaign_base(view(r))["base_commit"] == second


def test_a_contract_cannot_move_a_base_a_packet_fixed() -> None:
    base = "a" * 40
    r = measured_protected_loop(rules=8)  # a packet fixed it: before rules version 9
    r.propose("h1")
    fixing = r.run("h1", "dev", GOOD, commits=(base, "b" * 40))
    refused_and_recorded(r, lambda: amend_contract(
        r.ledger, r.agents["cur"], "pin another", settings=[("base_commit", "c" * 40)]),
        "other_base", f"fixed by its first scored packet, {fixing}")
    amend_contract(r.ledger, r.agents["cur"], "pin the same", settings=[("base_commit", base)])
    assert campaign_base(view(r))["packet_id"] == fixing


def test_a_heldout_run_of_code_no_dev_run_screened_fails_the_gate(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The held-out claim hands the executor the held-out data's location; it fits a threshold
    to that data, commits it, and evaluates: a confirmation of code no dev run screened, shaped
    by the data that was to confirm it. Before write rules version 10 the gate passed and the
    hypothesis was promoted; now the gate checks that the held-out run's code (its tree) is a
    dev run's, and fails naming what differs. The same code committed again passes."""
    base = git(repo, "rev-parse", "HEAD")
    tree = tmp_path_factory.mktemp("worktrees") / "h1"
    git(repo, "worktree", "add", "-q", "-b", "loopx/h1/1", str(tree), base)
    screened = commit(tree, "model.py", "width = 128\n", "wider")
    tuned = commit(tree, "threshold.txt", "0.4137\n", "fit to the held-out data")
    again_tree = tmp_path_factory.mktemp("worktrees") / "h1-again"
    git(repo, "worktree", "add", "-q", "-b", "loopx/h1/2", str(again_tree), base)
    same = commit(again_tree, "model.py", "width = 128\n", "wider, in a fresh worktree")
    assert same != screened

    def run(rules: int | None, heldout: str) -> ResearchLoop:
        r = protected_loop(base, rules=rules)
        run_both(r, "h1", (base, screened), (base, heldout))
        return r

    old = run(9, tuned)
    assert check_gate(old.ledger, old.agents["ev"], "h1", repo=repo)["passed"]
    decide(old.ledger, old.agents["ev"], "h1", "promoted")
    r = run(None, tuned)
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    assert not out["passed"]
    assert [(v["path"], v["change"], v["rule"], v["commit"]) for v in out["violations"]] == [
        ("threshold.txt", "added", "unscreened", tuned)]
    current = row(view(r), "h1")
    assert current.gates["protected_boundary"].status == "failed"
    assert current.promotion is None and current.retirement is not None
    assert any(f"evaluated {tuned}, code no dev run screened: 1 path(s) differ from the dev "
               f"run's {screened} (threshold.txt)" in reason for reason in out["reasons"])
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate protected_boundary failed")
    honest = run(None, same)
    assert check_gate(honest.ledger, honest.agents["ev"], "h1", repo=repo)["passed"]
    decide(honest.ledger, honest.agents["ev"], "h1", "promoted")
    # Dev runs that cite no commits leave nothing to compare with: pending, not failed.
    blind = protected_loop(base)
    blind.propose("h1")
    blind.run("h1", "dev", GOOD)
    blind.judge("h1", "dev")
    blind.run("h1", "heldout", HELDOUT, commits=(base, tuned))
    blind.judge("h1", "heldout")
    out = check_gate(blind.ledger, blind.agents["ev"], "h1", repo=repo)
    assert not out["passed"] and out["violations"] == []
    assert any("no dev packet its judgements rest on cites an evaluated commit" in reason
               for reason in out["reasons"])
    assert row(view(blind), "h1").gates["protected_boundary"].status == "pending"


def workspace_loop(repo: Path, name: str, base: str) -> ResearchLoop:
    """A campaign in a workspace at ``repo`` (so the CLI finds it), pinned to ``base``, with
    both the protected boundary and the held-out gate required."""
    from loopx.kernel.checks import Credentials
    from loopx.workspace import init_workspace

    workspace, owner = init_workspace(repo, name)
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner))
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "base_commit": base,
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    return r


def gate_check_text(r: ResearchLoop, repo: Path, hypothesis_id: str) -> str:
    """What `loopx gate check HYPOTHESIS` prints for the evaluator."""
    from click.testing import CliRunner

    from loopx.cli import cli

    r.ledger.store.close()
    env = {"LOOPX_TOKEN": r.agents["ev"].token or "", "LOOPX_AGENT_ID": "ev"}
    out = CliRunner().invoke(cli, ["-C", str(repo), "gate", "check", hypothesis_id], env=env)
    assert out.exit_code == 0, out.stdout + out.stderr
    return out.stdout


def test_gate_check_on_the_command_line_says_held_out_ran_unscreened_code(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    base, tree, _ = smaller_model(repo, tmp_path_factory, "h1")
    screened = commit(tree, "model.py", "width = 128\n", "wider")
    tuned = commit(tree, "threshold.txt", "0.4137\n", "fit to the held-out data")
    r = workspace_loop(repo, "screened", base)
    run_both(r, "h1", (base, screened), (base, tuned))
    text = gate_check_text(r, repo, "h1")
    assert "protected boundary of h1: FAILED (2 packet(s)" in text
    assert (f"  threshold.txt: added in {tuned[:12]} (after the dev runs: held-out ran code no "
            "dev run screened)") in text


def worktree(repo: Path, factory: pytest.TempPathFactory, hid: str, start: str) -> Path:
    """A worktree of ``hid``'s branch, started at ``start``, as the lane runner makes one."""
    tree = factory.mktemp("worktrees") / hid
    git(repo, "worktree", "add", "-q", "-b", f"loopx/{hid}/1", str(tree), start)
    return tree


def test_a_hypothesis_holding_another_ones_change_fails_the_gate(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """h1 is a real improvement. h2's executor wants its own idea promoted: it merges h1's
    branch, adds its own (null) change and evaluates. Its lift over the base is h1's. Before
    write rules version 11 the gate passed and h2 was promoted on h1's effect; now the gate
    fails naming h1's commit. A cherry-pick (a new commit, the same change) and a squash of
    h1's branch fail it too. h1, whose change it was first, passes; so does a refinement of h1
    built on h1's branch."""
    base = git(repo, "rev-parse", "HEAD")
    h1_tree = worktree(repo, tmp_path_factory, "h1", base)
    wider = commit(h1_tree, "model.py", "width = 128\n", "wider")
    deeper = commit(h1_tree, "depth.txt", "4\n", "deeper too")
    merged_tree = worktree(repo, tmp_path_factory, "h2", base)
    git(merged_tree, "merge", "-q", "--no-ff", "-m", "take h1's branch", "loopx/h1/1")
    merged = commit(merged_tree, "notes.md", "h2's idea\n", "h2: its own idea")
    picked_tree = worktree(repo, tmp_path_factory, "h3", base)
    git(picked_tree, "cherry-pick", "-x", wider)
    picked_copy = git(picked_tree, "rev-parse", "HEAD")
    assert picked_copy != wider
    picked = commit(picked_tree, "notes.md", "h3's idea\n", "h3: its own idea")
    refined = commit(worktree(repo, tmp_path_factory, "h4", deeper), "model.py",
                     "width = 160\n", "h4: wider still")
    squashed_tree = worktree(repo, tmp_path_factory, "h5", base)
    git(squashed_tree, "merge", "-q", "--squash", "loopx/h1/1")
    git(squashed_tree, "commit", "-qm", "h5: its own idea, all at once")
    squashed = commit(squashed_tree, "notes.md", "h5's idea\n", "h5: and a note")

    def run(rules: int | None) -> ResearchLoop:
        r = protected_loop(base, rules=rules)
        run_both(r, "h1", (base, deeper), (base, deeper))
        r.propose("h2")
        # A failed attempt citing h1's commit as its base: the bases the check reads from are
        # the campaign's, not what any packet says it started from.
        r.run("h2", "dev", None, status="failed", commits=(deeper, merged))
        for split, values in (("dev", GOOD), ("heldout", HELDOUT)):
            r.run("h2", split, values, commits=(base, merged))
            r.judge("h2", split)
        return r

    old = run(10)
    assert check_gate(old.ledger, old.agents["ev"], "h2", repo=repo)["passed"]
    decide(old.ledger, old.agents["ev"], "h2", "promoted")

    r = run(None)
    r.propose("h3")
    for split, values in (("dev", GOOD), ("heldout", HELDOUT)):
        r.run("h3", split, values, commits=(base, picked))
        r.judge("h3", split)
    r.propose("h4", parent_id="h1")
    for split, values in (("dev", GOOD), ("heldout", HELDOUT)):
        r.run("h4", split, values, commits=(base, refined))
        r.judge("h4", split)
    r.propose("h5")
    for split, values in (("dev", GOOD), ("heldout", HELDOUT)):
        r.run("h5", split, values, commits=(base, squashed))
        r.judge("h5", split)
    # A packet citing a commit this repository does not hold holds no other gate up.
    r.propose("h6")
    r.run("h6", "dev", None, status="failed", commits=(base, "f" * 40))
    assert check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)["passed"]
    packets = [p["packet_id"] for p in view(r)["packets"].values() if p["hypothesis_id"] == "h1"]
    first = view(r)["packets"][packets[0]]
    out = check_gate(r.ledger, r.agents["ev"], "h2", repo=repo)
    assert not out["passed"]
    assert sorted((v["path"], v["change"], v["rule"], v["commit"])
                  for v in out["violations"]) == [("depth.txt", "added", "borrowed", deeper),
                                                  ("model.py", "added", "borrowed", wider)]
    assert out["violations"][-1]["detail"] == (
        f"the same commit, which hypothesis h1's packet {first['packet_id']} (seq "
        f"{first['seq']}) evaluated first")
    assert any(f"evaluated code holding commit {wider}, the same commit, which hypothesis h1's"
               in why and "a hypothesis is measured on its own change (model.py)" in why
               for why in out["reasons"])
    assert f"model.py (added; another hypothesis' change: {out['violations'][-1]['detail']})" in (
        view(r)["hypotheses"]["h2"]["boundary"]["violations"])
    current = row(view(r), "h2")
    assert current.gates["protected_boundary"].status == "failed"
    assert current.promotion is None and current.retirement is not None
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h2", "promoted"),
                         "no_candidate", "gate protected_boundary failed")
    cherry = check_gate(r.ledger, r.agents["ev"], "h3", repo=repo)
    assert not cherry["passed"]
    assert [(v["path"], v["rule"], v["commit"]) for v in cherry["violations"]] == [
        ("model.py", "borrowed", picked_copy)]
    assert cherry["violations"][0]["detail"].startswith(f"the same change as {wider}, which ")
    squash = check_gate(r.ledger, r.agents["ev"], "h5", repo=repo)
    assert not squash["passed"]
    assert sorted(v["path"] for v in squash["violations"]) == ["depth.txt", "model.py"]
    assert squash["violations"][0]["detail"].startswith(
        f"the same change as all of {deeper} from its base, which hypothesis h1's packet ")
    refinement = check_gate(r.ledger, r.agents["ev"], "h4", repo=repo)
    assert refinement["passed"], (refinement["reasons"], refinement["violations"])
    decide(r.ledger, r.agents["ev"], "h1", "promoted")


def test_gate_check_on_the_command_line_names_whose_change_a_hypothesis_holds(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    base = git(repo, "rev-parse", "HEAD")
    wider = commit(worktree(repo, tmp_path_factory, "h1", base), "model.py", "width = 128\n",
                   "wider")
    taken = worktree(repo, tmp_path_factory, "h2", base)
    git(taken, "merge", "-q", "--ff-only", "loopx/h1/1")
    own = commit(taken, "notes.md", "h2's idea\n", "h2: its own idea")
    r = workspace_loop(repo, "borrowed", base)
    run_both(r, "h1", (base, wider), (base, wider))
    run_both(r, "h2", (base, own), (base, own))
    first = min((p for p in view(r)["packets"].values() if p["hypothesis_id"] == "h1"),
                key=lambda p: p["seq"])
    text = gate_check_text(r, repo, "h2")
    assert "protected boundary of h2: FAILED" in text
    assert (f"  model.py: added in {wider[:12]} (another hypothesis' change: the same commit, "
            f"which hypothesis h1's packet {first['packet_id']} (seq {first['seq']}) evaluated "
            "first)") in text


def test_a_baseline_measured_invalid_is_no_comparator() -> None:
    """The executor that measured the baseline flagged its held-out run invalid (it read the
    wrong data): every held-out test compares with that one measurement, so none may promote
    on it. Before rules version 7 the comparison counted as if the run were sound."""
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"}})
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", [0.85, 0.86, 0.84])
    flagged = r.run("base", "heldout", [0.85, 0.86, 0.84], violations=["read the dev split"])
    r.supported("h1", GOOD, HELDOUT)
    current = row(view(r), "h1")
    assert current.promotion is None
    assert current.detail == ("the measured baseline it was compared with was measured "
                              f"invalid: {flagged} violates read the dev split")
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "the measured baseline it was compared with was measured")


def test_a_packet_no_judgement_can_cite_never_holds_a_hypothesis_at_judge_evidence() -> None:
    """The frontier asked the evaluator to judge every scored packet no judgement cited, but a
    claimed packet, one measured under an earlier plan version and one with train values only
    can never be cited: judging again changed nothing, and the hypothesis stayed at
    judge_evidence for good instead of going on to its held-out test."""
    from loopx.kernel.ledger import draft
    from loopx.research.operations import append_packet
    from loopx.work.claims import complete

    r = loop()
    r.propose("h1")
    r.run("h1", "dev", [0.9, 0.9, 0.9])
    r.judge("h1", "dev")
    amend_contract(r.ledger, r.agents["cur"], "one more attempt",
                   settings=[("promotion_policy.max_attempts", 4)])
    r.run("h1", "dev", GOOD)  # under plan version 2: the judgement cites this one only

    def packet(hid: str, split: str, *, claimed: bool = False) -> None:
        add_todos(r.ledger, r.agents["ev"], [{
            "todo_id": f"{hid}-{split}-{claimed}", "title": "t", "role": "research_executor",
            "action_kind": "run_dev_eval", "assigned_to": "ex", "hypothesis_id": hid}])
        todo = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])["todo"]
        under = (todo["todo_id"], todo["epoch"])
        payload = {"hypothesis_id": hid, "status": "scored", "results": [
            {"split": split, "metric": "acc", "seed": s, "value": 0.99} for s in (0, 1, 2)]}
        if claimed:
            d = draft(payload, kind="auto_research_evidence_packet_v0", under=under)
            r.ledger.append({**d, "provenance": "claimed"}, creds=r.agents["ex"])
        else:
            append_packet(r.ledger, r.agents["ex"], payload, under=under)
        complete(r.ledger, r.agents["ex"], *under, {"status": "scored"})

    packet("h1", "train")
    packet("h1", "dev", claimed=True)
    r.judge("h1", "dev")
    current = row(view(r), "h1")
    assert (current.state, current.next_action) == ("supported", "run_holdout_eval")
    # A packet a judgement can cite is still waited for.
    r.run("h1", "dev", GOOD)
    current = row(view(r), "h1")
    assert (current.state, current.next_action) == ("evidence_recorded", "judge_evidence")
    assert current.detail == f"judge packets {view(r)['hypotheses']['h1']['packets'][-1]}"


def test_judging_only_claimed_evidence_says_it_never_counts() -> None:
    from loopx.kernel.ledger import draft
    from loopx.work.claims import complete

    r = loop()
    r.propose("h1")
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "t", "title": "t", "role": "research_executor",
        "action_kind": "run_dev_eval", "assigned_to": "ex", "hypothesis_id": "h1"}])
    todo = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])["todo"]
    under = (todo["todo_id"], todo["epoch"])
    d = draft({"hypothesis_id": "h1", "status": "scored", "results": [
        {"split": "dev", "metric": "acc", "seed": s, "value": 0.99} for s in (0, 1, 2)]},
        kind="auto_research_evidence_packet_v0", under=under)
    [claimed] = r.ledger.append({**d, "provenance": "claimed"}, creds=r.agents["ex"])
    complete(r.ledger, r.agents["ex"], *under, {"status": "scored"})
    with pytest.raises(Refused, match=rf"\(claimed packets never count: {claimed['record_id']}\)"):
        r.judge("h1", "dev")


def test_a_todo_list_says_why_an_open_todo_is_never_handed_out() -> None:
    """A held-out todo of a promoted hypothesis stays open in the log; `loopx todo list` says
    should-run passes over it, and a live todo says nothing."""
    from loopx.work.todos import todo_rows

    r = loop(required_gates=["heldout"])
    r.supported("h1", GOOD, HELDOUT)
    decide(r.ledger, r.agents["ev"], "h1", "promoted", decision_id="d-h1")
    r.propose("h2", mechanism="other")
    add_todos(r.ledger, r.agents["ev"], [
        {"todo_id": "again", "title": "h1 on held-out data, again", "role": "research_executor",
         "action_kind": "run_holdout_eval", "hypothesis_id": "h1"},
        {"todo_id": "h2-dev", "title": "h2 on dev", "role": "research_executor",
         "action_kind": "run_dev_eval", "hypothesis_id": "h2"}])
    rows = {t["todo_id"]: t for t in todo_rows(view(r), r.ledger.now())}
    assert (rows["again"]["state"], rows["again"]["passed_over"]) == (
        "open", "h1 is already decided (promoted, d-h1)")
    assert rows["h2-dev"]["passed_over"] is None
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    assert got["todo"]["todo_id"] == "h2-dev"
