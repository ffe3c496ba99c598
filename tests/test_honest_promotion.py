"""Honest promotion when agents are eager: each shortcut an agent that wants a promotion would
take is refused (and the refusal recorded) or neutralised. Re-measuring under one held-out
claim, judging again, choosing packets, retrying past the attempt limit, amending the plan
after the evidence, replacing a measured baseline with a number, and many hypotheses on one
held-out set (the campaign-level control)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import head_seq, run_loopx
from lanes_support import campaign

from loopx.governance.contract import amend_contract
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Refused, ResearchRefused
from loopx.kernel.verify import verify_store
from loopx.research.control import apply_control, benjamini_hochberg, gamma, threshold
from loopx.research.decisions import decide
from loopx.research.evidence import judgement_payload
from loopx.research.operations import append_packet, propose_hypothesis
from loopx.research.projections import candidates, frontier, promotion_blockers, row
from loopx.research.state import dev_attempts
from loopx.research.stats import judge as welch
from loopx.testing.research import CONTRACT, GOOD, ResearchLoop
from loopx.work.agents import register_agent
from loopx.work.claims import complete, should_run
from loopx.work.todos import add_todos
from loopx.workspace import init_workspace

FLAT = [0.899, 0.90, 0.901]
BASE = [0.899, 0.90, 0.901]


def loop(*, measured: bool = False, **policy: Any) -> ResearchLoop:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    metric = {**CONTRACT["metric"], **({"baseline_hypothesis": "base"} if measured else {})}
    r.contract({**CONTRACT, "metric": metric,
                "promotion_policy": {**CONTRACT["promotion_policy"], **policy}})
    return r


def view(r: ResearchLoop) -> dict[str, Any]:
    return r.ledger.state()["lanes"]


def head(r: ResearchLoop) -> int:
    return r.ledger.store.head().seq


def recorded(r: ResearchLoop, fn: Any, rule: str, match: str) -> dict[str, Any]:
    """``fn`` is refused by ``rule``; exactly one refusal record took its place."""
    before = head(r)
    with pytest.raises(ResearchRefused, match=match) as caught:
        fn()
    assert caught.value.rule == rule
    assert head(r) == before + 1
    record = r.ledger.store.get(before + 1)
    assert record["schema_version"] == "research_refusal_v0"
    assert record["payload"]["rule"] == rule
    return record


def claim_heldout(r: ResearchLoop, hid: str, todo_id: str) -> tuple[str, int]:
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": todo_id, "title": "held-out run", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": hid}])
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    assert got["todo"]["todo_id"] == todo_id
    return todo_id, got["todo"]["epoch"]


def claim_around_should_run(r: ResearchLoop, todo_id: str) -> None:
    """An executor appends a claim of ``todo_id`` itself, as should-run would not hand it out."""
    r.ledger.append({"todo_id": todo_id, "epoch": 1, "payload": {
        "hypothesis_id": "h1", "capability_token": "research_executor",
        "lease_ttl_seconds": 900.0, "via": "explicit"}}, creds=r.agents["ex"],
        kind="auto_research_lane_claim_v1")


def packet(hid: str, split: str, values: list[float], seeds: tuple[int, ...] = (0, 1, 2)
           ) -> dict[str, Any]:
    return {"hypothesis_id": hid, "status": "scored",
            "results": [{"split": split, "metric": "acc", "seed": s, "value": v}
                        for s, v in zip(seeds, values, strict=False)]}


# -- one held-out measurement per held-out claim ----------------------------------------------

def test_measuring_again_under_one_heldout_claim_is_recorded() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    under = claim_heldout(r, "h1", "ho")
    append_packet(r.ledger, r.agents["ex"], packet("h1", "heldout", FLAT), under=under)
    record = recorded(r, lambda: append_packet(r.ledger, r.agents["ex"],
                                               packet("h1", "heldout", GOOD), under=under),
                      "heldout_once", "one held-out claim admits one held-out packet")
    assert record["agent_id"] == "ex" and record["payload"]["todo_id"] == "ho"
    complete(r.ledger, r.agents["ex"], *under, {"status": "scored"})
    out = r.judge("h1", "heldout")
    assert out["values"] == FLAT and out["verdict"] == "inconclusive"
    assert verify_store(r.ledger.store).ok


def test_a_heldout_packet_carries_every_seed_at_once() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    under = claim_heldout(r, "h1", "ho")
    record = recorded(r, lambda: append_packet(r.ledger, r.agents["ex"],
                                               packet("h1", "heldout", GOOD[:2]), under=under),
                      "heldout_incomplete", "missing for seed.s. 2")
    assert record["payload"]["detail"] == {"missing_seeds": [2]}
    # A failed attempt (no values) is still recorded, never hidden.
    append_packet(r.ledger, r.agents["ex"], {"hypothesis_id": "h1", "status": "failed",
                                             "error": "out of memory"}, under=under)


def test_reruns_of_one_seed_are_not_more_seeds() -> None:
    """An eager executor re-runs seed 0 and reports every run. Runs of one seed agree far more
    than seeds do, so pooled as seeds they made a flat result look certain: the old code
    accepted this packet and the held-out judgement said supports (p about 1e-6)."""
    r = loop()
    r.supported("h1", GOOD, None)
    under = claim_heldout(r, "h1", "ho")
    runs = [[FLAT[0] + 0.0105 + k * 1e-4 for k in range(12)], [FLAT[1]], [FLAT[2]]]
    results = [{"split": "heldout", "metric": "acc", "seed": s, "value": v}
               for s, seed_runs in enumerate(runs) for v in seed_runs]
    results += [{"split": "train", "metric": "loss", "seed": 1, "value": 0.3}] * 2
    packets = list(view(r)["hypotheses"]["h1"]["packets"])
    record = recorded(r, lambda: append_packet(r.ledger, r.agents["ex"], {
        "hypothesis_id": "h1", "status": "scored", "results": results}, under=under),
        "repeated_seed", "reports acc on heldout for seed 0 12 times .2 seed.s. repeated.")
    assert record["payload"]["detail"] == {"repeated": [
        {"split": "heldout", "metric": "acc", "seed": 0, "times": 12},
        {"split": "train", "metric": "loss", "seed": 1, "times": 2}]}
    assert view(r)["hypotheses"]["h1"]["packets"] == packets  # nothing of it was recorded
    # The refusal took no packet's place: the claim still admits one, a value per seed.
    means = [sum(seed_runs) / len(seed_runs) for seed_runs in runs]
    append_packet(r.ledger, r.agents["ex"], packet("h1", "heldout", means), under=under)
    complete(r.ledger, r.agents["ex"], *under, {"status": "scored"})
    out = r.judge("h1", "heldout")
    assert out["seeds"] == [0, 1, 2] and out["verdict"] == "inconclusive"
    assert row(view(r), "h1").promotion is None
    # A dev packet is held to it too.
    r.propose("h2", parameters={"width": 2})
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "dev-h2", "title": "dev run", "role": "research_executor",
        "action_kind": "run_dev_eval", "assigned_to": "ex", "hypothesis_id": "h2"}])
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    recorded(r, lambda: append_packet(r.ledger, r.agents["ex"], packet(
        "h2", "dev", GOOD + GOOD, seeds=(0, 1, 2, 0, 1, 2)), under=(
        got["todo"]["todo_id"], got["todo"]["epoch"])), "repeated_seed", "3 seed.s. repeated")
    assert verify_store(r.ledger.store).ok


def test_the_first_heldout_judgement_is_final() -> None:
    r = loop()
    r.supported("h1", GOOD, FLAT)
    first = view(r)["hypotheses"]["h1"]["judgements"]["heldout"]
    recorded(r, lambda: r.judge("h1", "heldout"), "heldout_final",
             "the first held-out judgement is final")
    # A held-out judgement appended by hand is refused the same way, and recorded.
    forged = judgement_payload(view(r), "h1", "heldout")
    recorded(r, lambda: r.ledger.append({"payload": forged}, creds=r.agents["ev"],
                                        kind="research_evidence_event_v0"),
             "heldout_final", "is final")
    assert view(r)["hypotheses"]["h1"]["judgements"]["heldout"] == first
    # No further held-out measurement either: the todo is moot, its claim refused.
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "again", "title": "t",
                                          "role": "research_executor",
                                          "action_kind": "run_holdout_eval",
                                          "hypothesis_id": "h1"}])
    assert should_run(r.ledger, "ex")["reason"] == "no_eligible_todo"
    with pytest.raises(Refused, match="which is final"):
        claim_around_should_run(r, "again")


def test_a_heldout_judgement_covers_every_heldout_packet_and_pays_for_each_look() -> None:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "evaluation": {**CONTRACT["evaluation"], "heldout_read_budget": 2}})
    r.supported("h1", GOOD, None)
    first = r.run("h1", "heldout", FLAT)
    second = r.run("h1", "heldout", GOOD)
    out = r.judge("h1", "heldout")
    # Both packets count, each seed once: the mean of its two runs.
    means = [math.fsum(pair) / 2 for pair in zip(FLAT, GOOD, strict=True)]
    assert out["packet_ids"] == [first, second]
    assert out["seeds"] == [0, 1, 2] and out["values"] == means
    # Two looks allowed by the budget: the threshold is halved (Bonferroni over the looks).
    control = out["control"]
    assert control["looks"] == 2
    assert math.isclose(control["threshold"], 0.05 * gamma(1) / 2)
    p = welch(means, baseline=0.9, direction="maximize").p_value
    assert math.isclose(out["p_value"], p)
    assert control["discovery"] == (2 * p < 0.05 * gamma(1))


# -- every packet counts ----------------------------------------------------------------------

def test_choosing_which_packets_to_judge_is_recorded() -> None:
    r = loop(max_attempts=3)
    r.propose("h1")
    worse = r.run("h1", "dev", FLAT)
    best = r.run("h1", "dev", GOOD)
    honest = judgement_payload(view(r), "h1", "dev")
    assert honest["packet_ids"] == [worse, best] and honest["values"] == [
        math.fsum(pair) / 2 for pair in zip(FLAT, GOOD, strict=True)]
    chosen = welch(GOOD, baseline=0.9, direction="maximize").to_json()
    forged = {**honest, "packet_ids": [best], "values": GOOD, "seeds": [0, 1, 2],
              **{k: chosen[k] for k in ("verdict", "p_value", "mean_delta", "statistic")}}
    record = recorded(r, lambda: r.ledger.append({"payload": forged}, creds=r.agents["ev"],
                                                 kind="research_evidence_event_v0"),
                      "selective_judgement", f"cites 1 of its 2 scored packet.s.*left out: "
                                             f"{worse}")
    assert record["payload"]["cites"] == [worse]
    assert r.judge("h1", "dev")["packet_ids"] == [worse, best]


def test_the_judge_no_longer_takes_a_packet_selection() -> None:
    import inspect

    from loopx.research.operations import judge

    assert "packet_ids" not in inspect.signature(judge).parameters


# -- bounded dev retries ----------------------------------------------------------------------

def test_every_scored_attempt_counts_toward_the_limit() -> None:
    r = loop(max_attempts=2)
    r.propose("h1")
    r.run("h1", "dev", FLAT)
    r.judge("h1", "dev")
    current = row(view(r), "h1")
    # Inconclusive with an attempt left: frontier and candidates offer the same retry.
    assert (current.state, current.next_action) == ("needs_retry", "retry_attempt")
    assert [c["hypothesis_id"] for c in candidates(view(r))["retry"]] == ["h1"]
    assert current.retry is not None and current.retry["attempts_left"] == 1
    # A second executor claims a todo for h1 while the last attempt is still free ...
    r.agents["ex2"] = Credentials("ex2", register_agent(r.ledger, r.owner, "ex2",
                                                        "research_executor")[1])
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "early", "title": "t",
                                          "role": "research_executor",
                                          "action_kind": "run_dev_eval", "assigned_to": "ex2",
                                          "hypothesis_id": "h1"}])
    got = should_run(r.ledger, "ex2", claim=True, creds=r.agents["ex2"])
    early = (got["todo"]["todo_id"], got["todo"]["epoch"])
    assert early[0] == "early"
    r.run("h1", "dev", FLAT)  # ... the last attempt is used meanwhile
    r.judge("h1", "dev")
    current = row(view(r), "h1")
    assert current.retry is None and candidates(view(r))["retry"] == []
    assert current.state == "no_effect_found" and current.next_action == "decide"
    assert current.retirement is not None
    assert current.retirement["reasons"] == ["no_effect_found"]
    assert current.retirement["why"]["no_effect_found"].startswith("2 of 2 attempt(s) used")
    # ... and its third run, under the todo it still holds, is refused and recorded.
    record = recorded(r, lambda: append_packet(r.ledger, r.agents["ex2"],
                                               packet("h1", "dev", GOOD), under=early),
                      "attempts_exhausted", "used its 2 attempt.s. under plan version 1")
    assert record["payload"]["detail"] == {"attempts": 2, "limit": 2}
    # A todo for a third attempt is moot: not handed out, and its claim refused.
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "third", "title": "t",
                                          "role": "research_executor",
                                          "action_kind": "run_dev_eval", "assigned_to": "ex",
                                          "hypothesis_id": "h1"}])
    assert should_run(r.ledger, "ex")["reason"] == "no_eligible_todo"
    with pytest.raises(Refused, match="out of attempts .2 used under the plan in force."):
        claim_around_should_run(r, "third")
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="no_effect_found")
    assert row(view(r), "h1").state == "retired"


def test_attempts_with_the_same_seeds_are_averaged_not_counted_as_more_seeds() -> None:
    """Re-running an inconclusive result with the contract's seeds gives the same numbers (a
    seed fixes the run). Pooled, three identical attempts made n three times larger and the
    verdict supports (p 0.025, against 0.18 for one attempt); a seed counts once, as the mean of
    its runs, so re-running buys nothing."""
    values = [0.902, 0.899, 0.906]
    assert welch(values * 3, baseline=0.9, direction="maximize").verdict == "supports"
    r = loop(max_attempts=3)
    r.propose("h1")
    packets = [r.run("h1", "dev", values) for _ in range(3)]
    out = r.judge("h1", "dev")
    assert out["packet_ids"] == packets  # every attempt is cited and counts
    assert out["seeds"] == [0, 1, 2] and out["values"] == values
    assert out["verdict"] == "inconclusive"
    assert math.isclose(out["p_value"], welch(values, baseline=0.9,
                                              direction="maximize").p_value)


def test_rerunning_only_the_worst_seeds_buys_nothing() -> None:
    """An eager executor re-runs only its worst seeds. Averaged into those seeds, the new runs
    would lift the mean by regression alone (a simulation of null hypotheses: 14.6% of dev
    judgements supported, against 5.2%): a packet counts toward the values only if it carries
    every seed, and a partial one stays a cited attempt."""
    r = loop(max_attempts=3)
    r.propose("h1")
    first = r.run("h1", "dev", [0.86, 0.95, 0.94])
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "rerun", "title": "re-run seed 0", "role": "research_executor",
        "action_kind": "run_dev_eval", "assigned_to": "ex", "hypothesis_id": "h1"}])
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])["todo"]
    rerun = append_packet(r.ledger, r.agents["ex"], packet("h1", "dev", [0.97], seeds=(0,)),
                          under=(got["todo_id"], got["epoch"]))["packet_id"]
    out = r.judge("h1", "dev")
    assert out["packet_ids"] == [first, rerun]  # counted as an attempt, and cited
    assert out["values"] == [0.86, 0.95, 0.94]  # seed 0 is not (0.86 + 0.97) / 2
    assert out["verdict"] == "inconclusive"
    assert len(dev_attempts(view(r), view(r)["hypotheses"]["h1"])) == 2


def test_attempts_that_all_failed_are_retry_exhausted_and_say_why() -> None:
    r = loop(max_attempts=2)
    r.propose("h1")
    r.run("h1", "dev", None, status="failed")
    r.run("h1", "dev", None, status="timeout")
    current = row(view(r), "h1")
    assert current.state == "retry_exhausted"
    assert current.retirement is not None
    assert current.retirement["why"]["retry_exhausted"] == (
        "2 of 2 attempt(s) used (failed, timeout) without a judgement that supports or "
        "contradicts it")


# -- honest retirement ------------------------------------------------------------------------

def test_a_null_result_is_no_effect_found_and_the_same_idea_is_not_tested_again() -> None:
    # Before the fingerprint rule a null result closed nothing and the same idea could be
    # proposed again; now one idea is one hypothesis whatever became of it, so re-proposing a
    # null result (a fresh held-out test of the same thing) is refused. A changed idea is not.
    r = loop()
    r.supported("h1", GOOD, FLAT, parameters={"width": 64})
    assert row(view(r), "h1").retirement["reasons"] == ["no_effect_found"]  # type: ignore[index]
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="no_effect_found")
    under = r.proposer_todo("h2")
    again = {"hypothesis_id": "h2", "title": "t", "statement": "width change h1 lifts accuracy",
             "mechanism_family": "width", "parameters": {"width": 64},
             "no_grounding_reason": "r"}
    recorded(r, lambda: propose_hypothesis(r.ledger, r.agents["prop"], again, under=under),
             "duplicate", "duplicates 'h1' .retired, no_effect_found;")
    out = propose_hypothesis(r.ledger, r.agents["prop"], {
        **again, "parent_id": "h1", "parameters": {"width": 96}}, under=under)
    assert out["hypothesis_id"] == "h2"


def test_contradicted_only_when_significantly_worse_and_then_the_idea_is_closed() -> None:
    r = loop()
    r.supported("h1", [0.80, 0.81, 0.82], None, parameters={"width": 64})
    assert row(view(r), "h1").retirement["reasons"] == ["contradicted"]  # type: ignore[index]
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="contradicted")
    under = r.proposer_todo("h2")
    recorded(r, lambda: propose_hypothesis(r.ledger, r.agents["prop"], {
        "hypothesis_id": "h2", "title": "t", "statement": "width change h1 lifts accuracy",
        "mechanism_family": "width", "parameters": {"width": 64}, "no_grounding_reason": "r"},
        under=under), "duplicate", "retired, contradicted")


# -- the measured baseline --------------------------------------------------------------------

def test_judgements_compare_two_samples_against_the_measured_baseline() -> None:
    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.propose("h1")
    r.run("h1", "dev", GOOD)
    with pytest.raises(Refused, match="measured baseline 'base' has no scored dev packet"):
        r.judge("h1", "dev")
    base = r.run("base", "dev", BASE)
    out = r.judge("h1", "dev")
    assert out["baseline"] is None and out["baseline_values"] == BASE
    assert out["baseline_packet_ids"] == [base]
    expected = welch(GOOD, baseline=0.0, direction="maximize", baseline_values=BASE)
    assert math.isclose(out["p_value"], expected.p_value)
    assert out["verdict"] == expected.verdict == "supports"
    with pytest.raises(Refused, match="measured baseline: other hypotheses are judged"):
        r.judge("base", "dev")
    assert row(view(r), "base").state == "baseline"
    assert row(view(r), "base").promotion is None and row(view(r), "base").retirement is None


def test_an_assumed_baseline_is_a_number_and_is_marked_as_one() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    judgement = view(r)["hypotheses"]["h1"]["judgements"]["dev"]
    assert judgement["baseline"] == 0.9 and judgement["baseline_values"] == []


# -- pre-registration: the plan freezes at the first packet -----------------------------------

def test_the_plan_freezes_at_the_first_packet_and_an_amendment_opens_a_new_version() -> None:
    r = loop()
    r.propose("h1")
    # Before any evidence, the plan may be edited: no new version.
    amend_contract(r.ledger, r.agents["cur"], "three seeds are enough",
                   settings=[("metric.min_delta", 0.001)])
    plans = view(r)["campaign"]["plans"]
    assert len(plans) == 1 and plans[0]["edits"][0]["changes"] == [
        {"field": "metric.min_delta", "before": 0.0, "after": 0.001}]
    r.run("h1", "dev", [0.899, 0.903, 0.904])
    r.judge("h1", "dev")
    assert view(r)["hypotheses"]["h1"]["judgements"]["dev"]["verdict"] == "inconclusive"
    assert view(r)["campaign"]["plans"][0]["frozen_seq"] is not None
    # The eager curator cannot lower the baseline after the evidence is in (the comparison
    # is fixed), but may loosen the dev screening's alpha ...
    recorded(r, lambda: amend_contract(
        r.ledger, r.agents["cur"], "the baseline was too strict",
        settings=[("metric.baseline", 0.8)]), "comparison_changed",
        r"the assumed metric.baseline from 0.9 to 0.8 \(it may only rise: maximize\)")
    amend_contract(r.ledger, r.agents["cur"], "screen more widely",
                   settings=[("promotion_policy.alpha", 0.5)])
    plans = view(r)["campaign"]["plans"]
    assert [p["version"] for p in plans] == [1, 2]
    assert plans[1]["changes"] == [{"field": "promotion_policy.alpha", "before": 0.05,
                                    "after": 0.5}]
    assert plans[1]["packets_before"] == 1
    # ... and re-judging would flip the verdict, but the old packets do not count any more.
    with pytest.raises(Refused, match="no scored packet with dev results under plan version 2"):
        r.judge("h1", "dev")
    entry = view(r)["hypotheses"]["h1"]
    blockers = promotion_blockers(view(r), entry, row(view(r), "h1").gates)
    assert "the dev judgement was made under an earlier plan version" in blockers


def test_a_measured_baseline_cannot_become_an_assumed_number_after_evidence() -> None:
    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASE)
    record = recorded(r, lambda: amend_contract(
        r.ledger, r.agents["cur"], "a number is easier",
        settings=[("metric.baseline_hypothesis", None), ("metric.baseline", 0.8)]),
        "measured_baseline", "never replace it with an assumed number")
    assert record["agent_id"] == "cur"
    assert view(r)["campaign"]["versions"][-1]["version"] == 1


def test_the_comparison_is_fixed_once_anything_was_measured() -> None:
    """A curator who sees the hypotheses fall short of the measured baseline and names a weaker
    model as the baseline would have every later hypothesis "beat" it (bench/promotion_rule.py
    --behaviours weaker-baseline: 59% of null campaigns with a false promotion before rules
    version 4). Once evidence exists the metric, its direction and the baseline hypothesis are
    fixed, and the minimum change only rises; each attempt is refused and recorded. Two steps
    (any amendment opens an unfrozen plan version, then the change) do not get around it."""
    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.propose("weak", mechanism="baseline", parameters={"size": "small"})
    r.run("base", "dev", BASE)
    r.run("weak", "dev", [0.879, 0.88, 0.881])
    since = view(r)["campaign"]["plans"][0]["frozen_seq"]
    cur = r.agents["cur"]
    amend_contract(r.ledger, cur, "ten attempts", settings=[
        ("promotion_policy.max_attempts", 10)])  # plan version 2, frozen at nothing yet
    assert view(r)["campaign"]["plans"][-1]["frozen_seq"] is None
    for settings, says in (
            ([("metric.baseline_hypothesis", "weak")],
             r"metric.baseline_hypothesis from 'base' to 'weak' \(fixed\)"),
            ([("metric.baseline_hypothesis", None), ("metric.baseline", 0.5)],
             "metric.baseline_hypothesis from 'base' to None"),
            ([("metric.name", "loss")], "metric.name from 'acc' to 'loss'"),
            ([("metric.direction", "minimize")], "metric.direction from 'maximize'")):
        record = recorded(r, lambda s=settings: amend_contract(
            r.ledger, cur, "a fairer comparison", settings=s), "comparison_changed", says)
        assert record["payload"]["detail"]["evidence_since"] == since
        assert record["payload"]["detail"]["changes"][0]["field"] == settings[0][0]
    assert view(r)["campaign"]["plans"][-1]["plan"]["metric.baseline_hypothesis"] == "base"
    # The minimum change only rises; an assumed baseline only moves against the hypotheses.
    amend_contract(r.ledger, cur, "a meaningful lift", settings=[("metric.min_delta", 0.01)])
    recorded(r, lambda: amend_contract(r.ledger, cur, "too strict", settings=[
        ("metric.min_delta", 0.001)]), "comparison_changed",
        r"metric.min_delta from 0.01 to 0.001 \(it may only rise\)")
    assumed = loop()
    assumed.supported("h1", GOOD, None)
    amend_contract(assumed.ledger, assumed.agents["cur"], "stricter", settings=[
        ("metric.baseline", 0.91)])
    recorded(assumed, lambda: amend_contract(
        assumed.ledger, assumed.agents["cur"], "back", settings=[("metric.baseline", 0.9)]),
        "comparison_changed", "from 0.91 to 0.9")
    # Before any evidence the comparison may still change: nothing was measured against it.
    early = loop(measured=True)
    early.propose("weak", mechanism="baseline", parameters={"size": "small"})
    amend_contract(early.ledger, early.agents["cur"], "the small model", settings=[
        ("metric.baseline_hypothesis", "weak"), ("metric.min_delta", 0.0)])
    assert view(early)["campaign"]["plans"][-1]["plan"]["metric.baseline_hypothesis"] == "weak"


# -- the campaign-level control ----------------------------------------------------------------

NEAR = [0.904, 0.909, 0.906]  # p 0.024: short of the first test's share of 0.05 (0.019)


def test_the_campaign_control_only_tightens_once_its_heldout_family_began() -> None:
    """A curator who sees a near miss on held-out data and raises the level (or trades
    family-wise control for the laxer false discovery rate) would spend more than the campaign
    promised on every later test: refused and recorded, once the family has begun."""
    spending = {"rule": "alpha_spending", "level": 0.05}
    r = loop(campaign_control=spending)
    r.supported("h1", GOOD, NEAR)
    first = view(r)["hypotheses"]["h1"]["judgements"]["heldout"]
    assert first["verdict"] == "inconclusive" and first["control"]["index"] == 1
    for control, says in (({"rule": "alpha_spending", "level": 0.9},
                           "raises its level from 0.05 to 0.9"),
                          ({"rule": "lond", "level": 0.05}, "trades family-wise error control")):
        record = recorded(r, lambda c=control: amend_contract(
            r.ledger, r.agents["cur"], "so close", settings=[
                ("promotion_policy.campaign_control", c)]),
            "campaign_control_loosened", says)
        assert record["agent_id"] == "cur"
        assert record["payload"]["detail"] == {"before": spending, "after": control,
                                               "family_size": 1}
    assert [p["version"] for p in view(r)["campaign"]["plans"]] == [1]
    # Tightening is an amendment like any other; the next test is held to it.
    amend_contract(r.ledger, r.agents["cur"], "stricter", settings=[
        ("promotion_policy.campaign_control", {"rule": "alpha_spending", "level": 0.01})])
    r.supported("h2", GOOD, NEAR)
    second = view(r)["hypotheses"]["h2"]["judgements"]["heldout"]
    assert second["control"]["level"] == 0.01 and second["control"]["index"] == 2
    assert second["verdict"] == "inconclusive" and candidates(view(r))["promotion"] == []

    # Before any held-out test the level may still move (no held-out p-value is known yet).
    early = loop(campaign_control=spending)
    early.supported("h1", GOOD, None)
    amend_contract(early.ledger, early.agents["cur"], "planned wider", settings=[
        ("promotion_policy.campaign_control", {"rule": "lond", "level": 0.1})])
    assert [p["version"] for p in view(early)["campaign"]["plans"]] == [1, 2]


def test_a_larger_read_budget_gives_no_read_back_to_a_hypothesis_that_read_before() -> None:
    """Its looks were counted under the plan it read under; a later plan with a larger budget
    would give it more looks at the share one look already spent."""
    from loopx.work.claims import claim

    r = loop()
    r.supported("h1", GOOD, NEAR)  # its one held-out read, under plan version 1
    amend_contract(r.ledger, r.agents["cur"], "more looks", settings=[
        ("evaluation.heldout_read_budget", 2)])
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "again", "title": "held-out run", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": "h1"}])
    answer = should_run(r.ledger, "ex")
    assert answer["detail"] == {"heldout_budget_spent": ["again"]}
    record = recorded(r, lambda: claim(r.ledger, r.agents["ex"], "again"), "heldout_budget",
                      "read the held-out data under plan version 1")
    assert record["payload"]["detail"] == {"reads": 1, "budget": 2, "plan_version": 1}
    assert view(r)["hypotheses"]["h1"]["heldout_reads"] == 1
    # A hypothesis that has not read yet has the new budget: two reads.
    r.propose("h2")
    r.run("h2", "dev", GOOD)
    r.judge("h2", "dev")
    for todo_id in ("h2-first", "h2-second"):
        under = claim_heldout(r, "h2", todo_id)
        append_packet(r.ledger, r.agents["ex"], packet("h2", "heldout", NEAR), under=under)
        complete(r.ledger, r.agents["ex"], *under, {"status": "scored"})
    assert view(r)["hypotheses"]["h2"]["heldout_reads"] == 2
    assert r.judge("h2", "heldout")["control"]["looks"] == 2

def test_gamma_spends_the_level_once_over_the_whole_family() -> None:
    assert math.isclose(sum(gamma(j) for j in range(1, 2_000_001)), 1.0, abs_tol=2e-3)
    assert all(gamma(j) > gamma(j + 1) for j in range(1, 100))
    assert threshold("alpha_spending", 0.05, 3, 7) == 0.05 * gamma(3)
    assert threshold("lond", 0.05, 3, 2) == 0.05 * gamma(3) * 3
    assert threshold("lond", 0.05, 1, 10) == 0.05  # never laxer than the campaign's level
    with pytest.raises(ValueError, match="unknown campaign control rule"):
        threshold("bonferroni", 0.05, 1, 0)


def test_benjamini_hochberg_q_values() -> None:
    q = benjamini_hochberg([0.01, 0.04, 0.03, 0.5])
    assert [round(v, 6) for v in q] == [0.04, 0.053333, 0.053333, 0.5]


def test_the_family_is_numbered_by_heldout_claims_not_by_judgements() -> None:
    r = loop()
    r.supported("a", GOOD, None)
    r.supported("b", GOOD, None, mechanism="depth")
    r.run("a", "heldout", GOOD)  # a claims first: test 1
    r.run("b", "heldout", GOOD)  # b: test 2
    assert view(r)["hypotheses"]["a"]["family_index"] == 1
    late = r.judge("b", "heldout")  # judged first, still test 2
    assert (late["control"]["index"], late["control"]["discoveries_before"]) == (2, 0)
    early = r.judge("a", "heldout")
    assert (early["control"]["index"], early["control"]["discoveries_before"]) == (1, 0)
    assert view(r)["campaign"]["family_size"] == 2


def test_lond_raises_the_threshold_after_each_discovery() -> None:
    r = loop()
    for hid, mech in (("a", "x"), ("b", "y")):
        r.supported(hid, GOOD, GOOD, mechanism=mech)
    b = view(r)["hypotheses"]["b"]["judgements"]["heldout"]["control"]
    a = view(r)["hypotheses"]["a"]["judgements"]["heldout"]["control"]
    assert a["discovery"] and b["discoveries_before"] == 1
    assert math.isclose(b["threshold"], 0.05 * gamma(2) * 2)
    applied = apply_control({"rule": "alpha_spending", "level": 0.05}, 0.01, True, index=2,
                            discoveries_before=1, looks=1)
    assert applied["discoveries_before"] == 0 and math.isclose(applied["threshold"],
                                                               0.05 * gamma(2))
    assert applied["discovery"] is False and math.isclose(applied["adjusted_p"],
                                                          0.01 / gamma(2))


def test_a_promotion_candidate_shows_its_adjusted_value() -> None:
    r = loop()
    r.supported("h1", GOOD, GOOD)
    promotion = row(view(r), "h1").promotion
    assert promotion is not None
    control = promotion["heldout"]["control"]
    assert control["rule"] == "lond" and control["index"] == 1 and control["discovery"]
    assert control["adjusted_p"] == pytest.approx(
        promotion["heldout"]["p_value"] / gamma(1))
    assert frontier(view(r))[0].state == "at_promotion_gate"


# -- eager agents as real processes, through the CLI ------------------------------------------

def test_eager_agents_in_their_own_processes_are_refused_and_the_refusals_recorded(
        tmp_path: Path) -> None:
    workspace, owner_token = init_workspace(tmp_path, "eager")
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner_token))
    r.contract()
    r.supported("h1", GOOD, None)
    under = claim_heldout(r, "h1", "ho")
    r.ledger.store.close()
    ex, ev = (r.agents[a].token or "" for a in ("ex", "ev"))
    root = tmp_path

    def packet_file(name: str, values: list[float]) -> str:
        path = tmp_path / name
        path.write_text(json.dumps(packet("h1", "heldout", values)))
        return str(path)

    first = run_loopx(root, "evidence", "append-packet", packet_file("a.json", FLAT),
                      "--under", f"{under[0]}:{under[1]}", "--agent-id", "ex", "--json",
                      token=ex)
    assert first.returncode == 0, first.stderr
    # The executor does not like its own t-test, and measures again under the same claim.
    before = head_seq(root)
    again = run_loopx(root, "evidence", "append-packet", packet_file("b.json", GOOD),
                      "--under", f"{under[0]}:{under[1]}", "--agent-id", "ex", "--json",
                      token=ex)
    assert again.returncode == 8 and "Traceback" not in again.stderr
    error = json.loads(again.stdout)
    assert error["rule"] == "heldout_once" and error["recorded_seq"] == before + 1
    assert run_loopx(root, "todo", "complete", under[0], "--epoch", str(under[1]),
                     "--agent-id", "ex", token=ex).returncode == 0
    judged = run_loopx(root, "evidence", "judge", "h1", "--split", "heldout", "--agent-id", "ev",
                       "--json", token=ev)
    assert judged.returncode == 0, judged.stderr
    assert json.loads(judged.stdout)["values"] == FLAT
    # The evaluator does not like the verdict: judging again, or choosing a packet, is refused.
    rejudged = run_loopx(root, "evidence", "judge", "h1", "--split", "heldout", "--agent-id",
                         "ev", "--json", token=ev)
    assert rejudged.returncode == 8 and json.loads(rejudged.stdout)["rule"] == "heldout_final"
    chosen = run_loopx(root, "evidence", "judge", "h1", "--split", "heldout", "--packet", "x",
                       "--agent-id", "ev", token=ev)
    assert chosen.returncode == 2 and "No such option '--packet'" in chosen.stderr
    log = run_loopx(root, "log", "--kind", "research_refusal_v0", "--json")
    rules = [json.loads(line)["payload"]["rule"] for line in log.stdout.splitlines()]
    assert rules == ["heldout_once", "heldout_final"]
    assert run_loopx(root, "verify").returncode == 0


def test_a_disappointing_heldout_measurement_cannot_be_hidden_as_a_failure() -> None:
    r = loop()
    r.supported("h1", GOOD, None)
    under = claim_heldout(r, "h1", "ho")
    append_packet(r.ledger, r.agents["ex"], {"hypothesis_id": "h1", "status": "failed",
                                             "error": "it crashed, honestly"}, under=under)
    recorded(r, lambda: append_packet(r.ledger, r.agents["ex"], packet("h1", "heldout", GOOD),
                                      under=under),
             "heldout_once", "already recorded its attempt .* failed")


def test_dev_values_inside_a_heldout_packet_are_no_dev_attempt() -> None:
    r = loop(max_attempts=1)
    r.propose("h1")
    r.run("h1", "dev", GOOD)
    under = claim_heldout(r, "h1", "ho")
    both = packet("h1", "heldout", GOOD)
    both["results"] += [{"split": "dev", "metric": "acc", "seed": s, "value": 0.99}
                        for s in (0, 1, 2)]
    append_packet(r.ledger, r.agents["ex"], both, under=under)
    assert r.judge("h1", "dev")["values"] == GOOD  # the held-out packet's dev values: ignored


def test_the_measured_baseline_gets_one_heldout_attempt_per_plan_version() -> None:
    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASE)
    r.run("base", "heldout", None, status="failed")
    add_todos(r.ledger, r.agents["ev"], [{"todo_id": "base-again", "title": "t",
                                          "role": "research_executor",
                                          "action_kind": "run_holdout_eval", "assigned_to": "ex",
                                          "hypothesis_id": "base"}])
    # Re-measuring the baseline until it comes out low would bias every judgement against it.
    assert should_run(r.ledger, "ex")["reason"] == "no_eligible_todo"
    amend_contract(r.ledger, r.agents["cur"], "ten seeds", settings=[("metric.seeds",
                                                                       [0, 1, 2, 3])])
    assert should_run(r.ledger, "ex", claim=True,
                      creds=r.agents["ex"])["todo"]["todo_id"] == "base-again"


def test_the_measured_baseline_is_measured_on_heldout_data_once_per_seeds() -> None:
    """A curator who opens a new plan version (any trivial amendment) to have the baseline
    measured again, until a low draw comes up, would bias every later held-out test
    (bench/promotion_rule.py --behaviours baseline-shopping: 8.0% of null campaigns with a false
    promotion before rules version 4, against 3.0% for honest agents). Once scored on held-out
    data, the baseline's measurement stands for every later plan with the same seeds: a new
    held-out claim of it is refused and recorded, and judgements under the new plan compare with
    the first measurement; the seeds are fixed from then on."""
    from loopx.work.claims import claim

    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASE)
    first = r.run("base", "heldout", [0.905, 0.91, 0.915])  # a high draw, for this curator
    amend_contract(r.ledger, r.agents["cur"], "one more attempt", settings=[
        ("promotion_policy.max_attempts", 4)])  # plan version 2: the seeds are the same
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "base-again", "title": "t", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": "base"}])
    assert should_run(r.ledger, "ex")["detail"] == {"heldout_budget_spent": ["base-again"]}
    record = recorded(r, lambda: claim(r.ledger, r.agents["ex"], "base-again"), "heldout_budget",
                      "was measured on held-out data under plan version 1")
    assert record["payload"]["detail"] == {"reads": 1, "budget": 1, "plan_version": 1}
    # Dev is screening: the baseline is measured on dev under each plan version, as before.
    r.run("base", "dev", BASE)
    r.supported("h1", GOOD, GOOD)
    judged = view(r)["hypotheses"]["h1"]["judgements"]["heldout"]
    assert judged["plan_version"] == 2 and judged["baseline_packet_ids"] == [first]
    assert judged["baseline_values"] == [0.905, 0.91, 0.915]
    assert row(view(r), "base").detail.endswith("measured on dev, heldout")
    # Other seeds would be another measurement, so once anything was scored on held-out data
    # they are fixed too: changing them until a low draw came up is the same shopping.
    recorded(r, lambda: amend_contract(r.ledger, r.agents["cur"], "four seeds", settings=[
        ("metric.seeds", [0, 1, 2, 3])]), "comparison_changed",
        r"metric.seeds from \[0, 1, 2\] to \[0, 1, 2, 3\] \(fixed once anything was scored")


def test_improvement_is_measured_from_the_measured_baseline() -> None:
    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASE)
    r.run("base", "heldout", [0.91, 0.92, 0.93])
    r.supported("h1", GOOD, GOOD)
    decide(r.ledger, r.agents["ev"], "h1", "promoted")
    last = view(r)["campaign"]["iterations"]["last"]
    assert last["improvement"] == pytest.approx(0.96 - 0.92)


def padded_baseline(r: ResearchLoop, values: dict[int, float]) -> None:
    """The executor measures the baseline on held-out data and reports every seed in
    ``values``: the contract's and any others."""
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "base-ho", "title": "t", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": "base"}])
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])["todo"]
    under = (got["todo_id"], got["epoch"])
    append_packet(r.ledger, r.agents["ex"], {"hypothesis_id": "base", "status": "scored",
                  "results": [{"split": "heldout", "metric": "acc", "seed": s, "value": v}
                              for s, v in values.items()]}, under=under)
    complete(r.ledger, r.agents["ex"], *under, {"status": "scored"})


def test_a_baseline_value_no_judgement_read_never_moves_the_improvement() -> None:
    """Judgements read the contract's seeds only. Before rules version 6 the campaign's
    improvement pooled every value of the baseline's held-out packet, so three low values for
    seeds outside the contract turned a 4.3% improvement into 88%: the stop policy's patience
    saw progress where the promotion's own test saw 0.04, and a campaign that should have
    stopped kept running (high values would have stopped one early)."""
    r = loop(measured=True)
    amend_contract(r.ledger, r.agents["cur"], "patience", settings=[
        ("stop_policy.min_improvement_percent", 5.0), ("stop_policy.patience_iterations", 1)])
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASE)
    padded_baseline(r, {0: 0.91, 1: 0.92, 2: 0.93, 7: 0.1, 8: 0.1, 9: 0.1})
    r.supported("h1", GOOD, GOOD)
    judged = view(r)["hypotheses"]["h1"]["judgements"]["heldout"]
    assert judged["baseline_values"] == [0.91, 0.92, 0.93]
    decide(r.ledger, r.agents["ev"], "h1", "promoted")
    campaign = view(r)["campaign"]
    last = campaign["iterations"]["last"]
    assert last["improvement"] == pytest.approx(0.96 - 0.92)
    assert last["improvement_percent"] == pytest.approx(0.04 / 0.92 * 100)
    assert not last["improved"] and campaign["iterations"]["stagnant"] == 1
    assert campaign["status"]["state"] == "stopped"
    assert campaign["status"]["stop_reasons"] == ["insufficient_improvement"]
    assert verify_store(r.ledger.store).ok


def test_a_judge_todo_of_the_measured_baseline_is_never_handed_out() -> None:
    r = loop(measured=True)
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASE)  # the executor's completion adds a judge todo by successor rule
    todos = [t for t, v in view(r)["todos"].items()
             if v["action_kind"] == "judge_evidence" and v["hypothesis_id"] == "base"]
    assert todos, "the successor rule made a judge todo for the baseline"
    assert should_run(r.ledger, "ev")["reason"] == "no_eligible_todo"


def test_the_judge_command_says_why_a_partial_packet_needs_a_retry(tmp_path: Path) -> None:
    workspace, owner_token = init_workspace(tmp_path, "partial")
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner_token))
    r.contract()
    r.propose("h1")
    r.run("h1", "dev", [0.95, 0.96])  # seeds 0 and 1 only
    r.ledger.store.close()
    judged = run_loopx(tmp_path, "evidence", "judge", "h1", "--split", "dev", "--agent-id", "ev",
                       token=r.agents["ev"].token or "")
    assert judged.returncode == 0, judged.stderr
    assert judged.stdout.startswith(
        "h1 dev: needs_retry (no packet has acc for every seed (0, 1, 2): a measurement is "
        "every seed at once) over seeds - against the assumed baseline 0.9 (seq ")
