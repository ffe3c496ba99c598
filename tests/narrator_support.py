"""Campaigns for the narrator's tests: a small fixed one (one promotion, one retirement of a
refinement, one retry, one promotion candidate, findings of three standings), one with a
measured baseline and campaign-level control, one under a contract written before that control
existed; and the check that every number a story shows is logged or recomputable."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lanes_support import Campaign, campaign

from loopx.governance.contract import amend_contract
from loopx.governance.findings import add_finding
from loopx.kernel.checks import Credentials
from loopx.research.decisions import decide
from loopx.research.evidence import judgement_payload
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.agents import register_agent

DEV_GOOD = [0.93, 0.94, 0.95]
HELDOUT_GOOD = [0.92, 0.93, 0.94]
HELDOUT_BEST = [0.95, 0.96, 0.97]
BAD = [0.85, 0.84, 0.86]


@dataclass
class Fixed:
    """The campaign, its research driver and the narrator's credentials."""

    c: Campaign
    r: ResearchLoop
    narrator: Credentials

    def view(self) -> dict[str, Any]:
        return self.c.ledger.state()["lanes"]


BASE_COMMIT = hashlib.sha1(b"base").hexdigest()
EVALUATED_COMMIT = hashlib.sha1(b"evaluated").hexdigest()


def fixed_campaign(contract: dict[str, Any] | None = None, **hypothesis_fields: Any) -> Fixed:
    """h-wide promoted; h-wider (refines h-wide) contradicted and retired; h-drop failed once
    (a retry candidate); h-deep contradicted on dev (a retirement candidate); h-norm supported
    on both splits (a promotion candidate).
    ``hypothesis_fields`` are added to every hypothesis (to plant values in them)."""
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({"base_commit": BASE_COMMIT, **(contract or CONTRACT)})
    _, token = register_agent(c.ledger, c.owner, "narr", "product_narrator")
    ev = r.agents["ev"]
    r.supported("h-wide", DEV_GOOD, HELDOUT_GOOD, title="Wider hidden layer",
                **hypothesis_fields)
    decide(c.ledger, ev, "h-wide", "promoted", decision_id="d-wide")
    r.propose("h-wider", parent_id="h-wide", title="Even wider hidden layer",
              mechanism="width", parameters={"width": 1024}, **hypothesis_fields)
    r.run("h-wider", "dev", BAD)
    r.judge("h-wider", "dev")
    decide(c.ledger, ev, "h-wider", "retired", reason="contradicted", decision_id="d-wider")
    r.propose("h-drop", title="Dropout before the head", mechanism="regularization",
              **hypothesis_fields)
    r.run("h-drop", "dev", None, status="failed")
    r.propose("h-deep", title="Two more layers", mechanism="depth", **hypothesis_fields)
    r.run("h-deep", "dev", BAD, commits=(BASE_COMMIT, EVALUATED_COMMIT))
    r.judge("h-deep", "dev")
    r.supported("h-norm", DEV_GOOD, HELDOUT_BEST, title="Batch norm", mechanism="normalization",
                **hypothesis_fields)
    add_finding(c.ledger, r.agents["cur"], kind="interpretation", finding_id="f-why",
                statement="Width helps because the digits need more features",
                evidence=[{"kind": "record", "ref": "d-wide"}])
    add_finding(c.ledger, r.agents["cur"], kind="risk", finding_id="f-risk",
                statement="Three seeds are few", evidence=[])
    return Fixed(c, r, Credentials("narr", token))


# -- a measured baseline under campaign-level control ----------------------------------------

BASE_VALUES = [0.80, 0.81, 0.79]
MEASURED = {**CONTRACT, "metric": {**CONTRACT["metric"], "baseline": 0.8,
                                   "baseline_hypothesis": "base"},
            "promotion_policy": {"required_gates": ["heldout"],
                                 "campaign_control": {"rule": "lond", "level": 0.05}}}


def measured_campaign(rule: str = "lond") -> Fixed:
    """The baseline ``base`` measured on both splits; the plan edited before any evidence
    (attempt limit 3 -> 2). h-good promoted (a claimed held-out judgement before its real one);
    h-null supported on dev, no effect on held-out (a retirement candidate); h-worse worse on
    dev (a retirement candidate); h-flat no effect on dev; h-flaky two failed attempts (its
    attempts ran out); h-gone no effect on held-out, retired with a note."""
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    contract = {**MEASURED, "promotion_policy": {**MEASURED["promotion_policy"],
                                                  "campaign_control": {"rule": rule,
                                                                       "level": 0.05}}}
    r.contract(contract)
    amend_contract(c.ledger, r.agents["cur"], "two attempts are enough",
                   settings=[("promotion_policy.max_attempts", 2)])
    _, token = register_agent(c.ledger, c.owner, "narr", "product_narrator")
    ev = r.agents["ev"]
    r.propose("base", title="The linear baseline", mechanism="baseline")
    r.run("base", "dev", BASE_VALUES)
    r.run("base", "heldout", BASE_VALUES)
    r.supported("h-good", [0.90, 0.91, 0.89], None, title="Wider hidden layer")
    r.run("h-good", "heldout", [0.90, 0.92, 0.91])
    payload = judgement_payload(c.ledger.state()["lanes"], "h-good", "heldout")
    c.ledger.append({"provenance": "claimed", "payload": payload}, creds=ev,
                    kind="research_evidence_event_v0")
    r.judge("h-good", "heldout")
    decide(c.ledger, ev, "h-good", "promoted", decision_id="d-good")
    r.supported("h-null", [0.90, 0.91, 0.89], [0.80, 0.82, 0.79], title="Dropout",
                mechanism="regularization")
    r.supported("h-worse", [0.70, 0.71, 0.69], None, title="Fewer units", mechanism="narrow")
    r.supported("h-flat", [0.80, 0.82, 0.79], None, title="Other init", mechanism="init")
    r.propose("h-flaky", title="Bigger batches", mechanism="batch")
    r.run("h-flaky", "dev", None, status="failed")
    r.run("h-flaky", "dev", None, status="timeout")
    r.supported("h-gone", [0.90, 0.91, 0.89], [0.81, 0.80, 0.80], title="Label smoothing",
                mechanism="smoothing")
    decide(c.ledger, ev, "h-gone", "retired", reason="no_effect_found", decision_id="d-gone",
           note="held-out showed nothing")
    return Fixed(c, r, Credentials("narr", token))


def legacy_campaign() -> Fixed:
    """A contract as written before campaign-level control existed (no such field, forged past
    the model's default), with one hypothesis promoted on its held-out test alone."""
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    who = c.ledger.identify(r.agents["cur"])
    records = c.ledger.prepare([
        {"schema_version": "research_contract_v0",
         "payload": {**CONTRACT, "version": 1, "supersedes": None, "amendment": None}},
        {"schema_version": "campaign_transition_v0",
         "payload": {"from_state": "created", "to_state": "planned",
                     "reason": "contract version 1 written"}}], who)
    del records[0]["payload"]["promotion_policy"]["campaign_control"]
    c.ledger.store.append(records)
    _, token = register_agent(c.ledger, c.owner, "narr", "product_narrator")
    r.supported("h-wide", DEV_GOOD, HELDOUT_GOOD, title="Wider hidden layer")
    decide(c.ledger, r.agents["ev"], "h-wide", "promoted", decision_id="d-wide")
    return Fixed(c, r, Credentials("narr", token))


# -- every number is logged, or recomputed from logged inputs --------------------------------

def field_of(payload: dict[str, Any], name: str) -> Any:
    """A dotted field of a record's payload (list items by index)."""
    value: Any = payload
    for part in name.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def recompute(n: dict[str, Any]) -> float | int:
    """A derived figure recomputed from its inputs, independently of loopx's own code."""
    def each(name: str) -> list[Any]:
        return [i["value"] for i in n["inputs"] if i["field"] == name]

    if n["derived"] == "expected_false_promotions":
        [level] = set(each("control.level"))
        if n["rule"] == "alpha_spending":  # the union bound: every threshold spent
            return sum(each("control.threshold"))
        return level * sum(1 for d in each("control.discovery") if d)
    if n["derived"] == "benjamini_hochberg_passes":
        [level] = [i["value"] for i in n["inputs"] if i["field"] != "p_value"]
        ordered = sorted(each("p_value"))
        m = len(ordered)
        # Step-up: the largest k whose k-th smallest p-value is at most k/m of the level.
        return max([k for k in range(1, m + 1) if ordered[k - 1] <= k * level / m], default=0)
    raise AssertionError(f"unknown derived figure {n['derived']!r}")


def check_numbers(numbers: list[dict[str, Any]],
                  payload_of: Callable[[str], dict[str, Any]]) -> int:
    """Each logged number is its record's field; each derived one names its formula and inputs,
    every input is its record's field, and recomputing gives the value. Returns how many
    derived figures there were."""
    derived = 0
    for n in numbers:
        if "derived" not in n:
            assert field_of(payload_of(n["record_id"]), n["field"]) == n["value"], n
            continue
        derived += 1
        assert n["formula"] and n["inputs"], n
        for i in n["inputs"]:
            assert field_of(payload_of(i["record_id"]), i["field"]) == i["value"], (n, i)
        assert abs(recompute(n) - n["value"]) <= 1e-12, n
    return derived
