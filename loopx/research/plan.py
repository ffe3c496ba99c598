"""The analysis plan: the part of the contract that decides what a measurement means.

Metric, direction, baseline definition, alpha, seeds, test, minimum change, attempt limit,
held-out read budget and the campaign-level control. The plan may be edited freely until the
first evidence packet is recorded; from then on it is frozen, and an amendment that changes it
opens a new plan version. Evidence belongs to the plan version in force when it was recorded,
and a judgement under a plan counts only packets of that plan, so an amendment can never rescue
a judgement made on the old terms. Folded into ``campaign["plans"]``: every version, with what
changed, from what to what, and how many packets were recorded before it opened.
"""

from __future__ import annotations

from typing import Any

PLAN_FIELDS = (
    "metric.name", "metric.direction", "metric.baseline", "metric.baseline_hypothesis",
    "metric.min_delta", "metric.seeds", "promotion_policy.rule", "promotion_policy.alpha",
    "promotion_policy.campaign_control", "promotion_policy.max_attempts",
    "evaluation.heldout_read_budget",
)


def plan_of(contract: dict[str, Any]) -> dict[str, Any]:
    """The plan fields of a stored contract version (absent ones as None: a contract written
    before a field existed did not choose it)."""
    out: dict[str, Any] = {}
    for path in PLAN_FIELDS:
        section, name = path.split(".")
        out[path] = (contract.get(section) or {}).get(name)
    return out


def fold_contract(plans: list[dict[str, Any]], contract: dict[str, Any], seq: int,
                  packets: int) -> list[dict[str, Any]]:
    """``plans`` after one more contract version (a new list; entries are never edited in
    place). ``packets`` is how many evidence packets the log holds at ``seq``."""
    plan = plan_of(contract)
    if plans and plans[-1]["plan"] == plan:
        return plans
    if not plans:
        return [_version(1, contract, seq, packets, plan, [])]
    last = plans[-1]
    changes = [{"field": f, "before": last["plan"][f], "after": plan[f]}
               for f in PLAN_FIELDS if last["plan"][f] != plan[f]]
    if last["frozen_seq"] is None:
        # Not frozen yet: no evidence was measured under it, so editing it rescues nothing.
        edit = {"contract_version": contract["version"], "seq": seq, "changes": changes}
        return [*plans[:-1], {**last, "plan": plan, "edits": [*last["edits"], edit]}]
    return [*plans, _version(last["version"] + 1, contract, seq, packets, plan, changes)]


def _version(number: int, contract: dict[str, Any], seq: int, packets: int,
             plan: dict[str, Any], changes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": number, "contract_version": contract["version"], "seq": seq,
            "packets_before": packets, "frozen_seq": None, "changes": changes, "edits": [],
            "plan": plan}


def freeze(plans: list[dict[str, Any]], seq: int) -> list[dict[str, Any]]:
    """``plans`` with the plan in force frozen at ``seq`` (the first packet under it)."""
    if not plans or plans[-1]["frozen_seq"] is not None:
        return plans
    return [*plans[:-1], {**plans[-1], "frozen_seq": seq}]


def current_plan(view: dict[str, Any]) -> dict[str, Any] | None:
    """The plan version in force (None before any contract)."""
    plans = view["campaign"]["plans"]
    return plans[-1] if plans else None


def evidence_since(view: dict[str, Any]) -> int | None:
    """The seq of the campaign's first evidence packet, if there is one (the first plan
    version froze there)."""
    plans = view["campaign"]["plans"]
    return plans[0]["frozen_seq"] if plans else None


def plan_version(view: dict[str, Any]) -> int:
    """The number of the plan version in force (0 before any contract)."""
    plan = current_plan(view)
    return 0 if plan is None else int(plan["version"])


def attempt_limit(view: dict[str, Any]) -> int:
    """The attempts a hypothesis has under the plan in force (3 before any contract)."""
    plan = current_plan(view)
    return (plan["plan"]["promotion_policy.max_attempts"] if plan else None) or 3
