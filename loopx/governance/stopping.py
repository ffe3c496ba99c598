"""The stop policy: iterations, improvement, and every stop reason that applies.

One iteration is one decision record (DESIGN section 9). Improvement is the change in the best
promoted held-out metric, in the contract's direction, relative to the best before it (the
contract's baseline until something is promoted). All of it is a pure function of the log.
"""

from __future__ import annotations

from typing import Any

from loopx.governance.resources import RESOURCES, sum_usage

STOP_REASONS = ("budget_exhausted:<resources>", "maximum_iterations_reached",
                "insufficient_improvement", "persistent_validity_failure", "operator_requested")
# Retirements that make an iteration invalid whatever its decision's flag says.
INVALID = ("guardrail_failed", "invalid_result")


def initial_iterations() -> dict[str, Any]:
    """Iteration counters before any decision."""
    return {"count": 0, "best": None, "best_hypothesis": None, "stagnant": 0, "invalid": 0,
            "failed": 0, "last": None}


def _better(value: float, than: float, direction: str) -> bool:
    return value > than if direction == "maximize" else value < than


def best_of(values: list[tuple[float, str]],
            direction: str) -> tuple[float | None, str | None]:
    """The best (value, hypothesis) under ``direction`` ((None, None) for none); ties keep the
    first."""
    best: tuple[float | None, str | None] = (None, None)
    for value, hypothesis in values:
        if best[0] is None or _better(value, best[0], direction):
            best = (value, hypothesis)
    return best


def next_iteration(iterations: dict[str, Any], contract: dict[str, Any] | None,
                   decision: dict[str, Any], heldout_value: float | None,
                   seq: int, measured_baseline: float | None = None) -> dict[str, Any]:
    """The counters after one more decision (a promotion may raise the best held-out value).

    Before any promotion the reference is ``measured_baseline`` when the plan measures one (the
    mean the promotion's held-out judgement compared with), else the contract's assumed scalar
    baseline.

    An iteration improves when the best moved by a positive amount that is at least the stop
    policy's ``min_improvement_percent`` of the previous best (any positive move when the previous
    best is zero). An iteration is invalid when its decision says so (``valid`` false) or retires
    for ``guardrail_failed`` or ``invalid_result``; an invalid one never moves the best. It
    failed when it retires for ``retry_exhausted`` (no attempt gave a result either way).
    """
    out = dict(iterations)
    out["count"] = iterations["count"] + 1
    improvement: float | None = None
    percent: float | None = None
    improved = False
    retired = decision["outcome"] == "retired"
    # Decisions written before the flag existed carry none: they were valid.
    valid = decision.get("valid", True) and not (retired and decision["reason"] in INVALID)
    failed = retired and decision["reason"] == "retry_exhausted"
    if (valid and contract is not None and decision["outcome"] == "promoted"
            and heldout_value is not None):
        metric = contract["metric"]
        reference = metric["baseline"] if measured_baseline is None else measured_baseline
        before = iterations["best"] if iterations["best"] is not None else reference
        if _better(heldout_value, before, metric["direction"]):
            improvement = abs(heldout_value - before)
            percent = improvement / abs(before) * 100 if before != 0 else None
            threshold = contract["stop_policy"]["min_improvement_percent"]
            improved = percent is None or percent >= threshold
            out["best"], out["best_hypothesis"] = heldout_value, decision["hypothesis_id"]
    out["stagnant"] = 0 if improved else iterations["stagnant"] + 1
    out["invalid"] = 0 if valid else iterations["invalid"] + 1
    # Counters made before this one existed start it at 0.
    out["failed"] = iterations.get("failed", 0) + 1 if failed else 0
    out["last"] = {"decision_id": decision["decision_id"], "seq": seq, "improved": improved,
                   "improvement": improvement, "improvement_percent": percent, "valid": valid,
                   "failed": failed}
    return out


def budget_rows(contract: dict[str, Any] | None, used: dict[str, float]) -> dict[str, Any]:
    """Per resource: limit (0 = none), used, remaining (None without a limit), exhausted."""
    budget = contract["budget"] if contract else {}
    rows = {}
    for resource in RESOURCES:
        limit = budget.get(f"max_{resource}", 0) or 0
        spent = used.get(resource, 0)
        rows[resource] = {"limit": limit, "used": spent,
                          "remaining": max(sum_usage(limit, -spent), 0) if limit else None,
                          "exhausted": bool(limit) and spent >= limit}
    return rows


def exhausted(contract: dict[str, Any] | None, used: dict[str, float]) -> list[str]:
    """Resources whose non-zero limit is used up, in a fixed order."""
    return [r for r, row in budget_rows(contract, used).items() if row["exhausted"]]


def over_budget(contract: dict[str, Any] | None, used: dict[str, float],
                cost: dict[str, float]) -> list[str]:
    """Resources for which ``cost`` exceeds what the budget has left."""
    rows = budget_rows(contract, used)
    return [r for r, amount in cost.items()
            if amount and rows.get(r, {}).get("remaining") is not None
            and amount > rows[r]["remaining"]]


def stop_reasons(contract: dict[str, Any] | None, iterations: dict[str, Any],
                 used: dict[str, float]) -> list[str]:
    """Every stop reason that applies now, in the seed's order (none without a contract)."""
    if contract is None:
        return []
    policy = contract["stop_policy"]
    reasons = []
    spent = exhausted(contract, used)
    if policy["stop_on_budget_exhaustion"] and spent:
        reasons.append("budget_exhausted:" + ",".join(spent))
    if policy["max_iterations"] and iterations["count"] >= policy["max_iterations"]:
        reasons.append("maximum_iterations_reached")
    if policy["patience_iterations"] and iterations["stagnant"] >= policy["patience_iterations"]:
        reasons.append("insufficient_improvement")
    if (policy["stop_on_persistent_validity_failure"]
            and iterations["invalid"] >= policy.get("max_consecutive_validity_failures", 2)):
        reasons.append("persistent_validity_failure")
    return reasons
