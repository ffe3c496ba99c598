"""The governance rules as pure functions: mode x risk approvals, allow/deny eligibility, the
campaign state machine, and the seed's stop logic over sequences of decisions."""

from __future__ import annotations

from typing import Any

import pytest

from loopx.governance.records import ResearchContractV0
from loopx.governance.rules import (
    STATES,
    approval_required,
    tool_eligible,
    transition_allowed,
)
from loopx.governance.stopping import initial_iterations, next_iteration, stop_reasons

BASE: dict[str, Any] = {
    "contract_id": "c1",
    "objective": {"name": "n", "prompt": "p", "domain": "d"},
    "metric": {"name": "acc", "direction": "maximize", "baseline": 0.5, "seeds": [0, 1]},
    "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout"}},
}


def contract(**fields: Any) -> dict[str, Any]:
    """A contract payload as stored (every default filled in by the model)."""
    return ResearchContractV0.model_validate({**BASE, **fields}).model_dump(mode="json")


RISKS = ("read", "write", "compute", "external", "destructive")
# mode, guided_auto_approve, approval_required_for -> the risks that need approval.
MATRIX = [
    ("assistant", [], [], {"write", "compute", "external", "destructive"}),
    ("assistant", ["write", "compute"], [], {"write", "compute", "external", "destructive"}),
    ("assistant", [], ["read"], set(RISKS)),
    ("guided", [], [], {"write", "compute", "external", "destructive"}),
    ("guided", ["write"], [], {"compute", "external", "destructive"}),
    ("guided", ["compute"], [], {"write", "external", "destructive"}),
    ("guided", ["write", "compute"], [], {"external", "destructive"}),
    ("guided", ["write", "compute"], ["compute"], {"compute", "external", "destructive"}),
    ("bounded", [], [], {"destructive"}),
    ("bounded", [], ["external"], {"external", "destructive"}),
    ("bounded", [], ["write", "compute"], {"write", "compute", "destructive"}),
    ("bounded", ["write"], ["write"], {"write", "destructive"}),
]
CELLS = [(mode, relax, extra, risk, risk in needs)
         for mode, relax, extra, needs in MATRIX for risk in RISKS]


@pytest.mark.parametrize(("mode", "relax", "extra", "risk", "needs"), CELLS,
                         ids=[f"{m}-{'+'.join(r) or 'strict'}-{'+'.join(e) or 'none'}-{k}"
                              for m, r, e, k, _ in CELLS])
def test_mode_by_risk_approval_matrix(mode: str, relax: list[str], extra: list[str], risk: str,
                                      needs: bool) -> None:
    c = contract(mode=mode, guided_auto_approve=relax, approval_required_for=extra)
    assert approval_required(c, risk) is needs


@pytest.mark.parametrize(("allowed", "denied", "tool", "eligible"), [
    ([], [], "lab.train", True),                       # empty allowlist admits everything...
    ([], ["lab.delete_run"], "lab.train", True),
    ([], ["lab.delete_run"], "lab.delete_run", False),  # ...that is not denied
    (["lab.train"], [], "lab.train", True),            # a non-empty allowlist admits only
    (["lab.train"], [], "lab.evaluate", False),        # what it lists
    (["lab.*"], ["lab.delete_*"], "lab.train", True),  # globs
    (["lab.*"], ["lab.delete_*"], "lab.delete_run", False),  # denied always wins
    (["loopx.*"], [], "loopx.todo.add", True),
    (["loopx.*"], [], "lab.train", False),
])
def test_allow_and_deny(allowed: list[str], denied: list[str], tool: str, eligible: bool) -> None:
    ok, why = tool_eligible(contract(allowed_tools=allowed, denied_tools=denied), tool)
    assert ok is eligible
    assert why


def test_a_tool_cannot_be_both_allowed_and_denied() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="both allowed and denied: lab.x"):
        contract(allowed_tools=["lab.x", "lab.y"], denied_tools=["lab.x"])


LEGAL = {("created", "planned"), ("planned", "ready"), ("ready", "running"),
         ("running", "paused"), ("paused", "running"), ("running", "completed"),
         ("paused", "completed")}  # the owner's approval completes a campaign paused for it
LEGAL |= {(s, t) for s in ("created", "planned", "ready", "running", "paused")
          for t in ("stopped", "failed")}


@pytest.mark.parametrize(("current", "target"), [(s, t) for s in STATES for t in STATES])
def test_state_machine(current: str, target: str) -> None:
    assert transition_allowed(current, target) is ((current, target) in LEGAL)


def decision(n: int, outcome: str = "retired", reason: str = "contradicted",
             hypothesis: str | None = None) -> dict[str, Any]:
    return {"decision_id": f"d{n}", "hypothesis_id": hypothesis or f"h{n}", "outcome": outcome,
            "reason": reason}


def run(c: dict[str, Any], steps: list[tuple[str, float | None]],
        used: dict[str, float] | None = None) -> tuple[dict[str, Any], list[list[str]]]:
    """Fold decisions ("promote" with its held-out value, "retire", "invalid") and return the
    counters and the stop reasons after each one."""
    it = initial_iterations()
    reasons = []
    for n, (step, value) in enumerate(steps, start=1):
        d = {"promote": decision(n, "promoted", "gates_passed"),
             "retire": decision(n), "invalid": decision(n, reason="guardrail_failed")}[step]
        it = next_iteration(it, c, d, value, seq=n)
        reasons.append(stop_reasons(c, it, used or {}))
    return it, reasons


# The seed's flow: each case lists the decisions and the reasons expected after the last one.
STOP_CASES = [
    ("improving keeps going", {"max_iterations": 10, "patience_iterations": 2,
                               "min_improvement_percent": 1.0},
     [("promote", 0.6), ("promote", 0.7), ("promote", 0.8)], None, []),
    ("maximum iterations", {"max_iterations": 3}, [("promote", 0.6), ("retire", None),
                                                   ("retire", None)], None,
     ["maximum_iterations_reached"]),
    ("patience runs out", {"patience_iterations": 2},
     [("promote", 0.6), ("retire", None), ("retire", None)], None, ["insufficient_improvement"]),
    ("an improvement below the threshold counts as none",
     {"patience_iterations": 2, "min_improvement_percent": 5.0},
     [("promote", 0.501), ("promote", 0.502)], None, ["insufficient_improvement"]),
    ("a worse promotion is no improvement", {"patience_iterations": 1},
     [("promote", 0.7), ("promote", 0.65)], None, ["insufficient_improvement"]),
    ("persistent validity failure", {"max_consecutive_validity_failures": 2},
     [("invalid", None), ("invalid", None)], None, ["persistent_validity_failure"]),
    ("a valid iteration resets validity failures", {"max_consecutive_validity_failures": 2},
     [("invalid", None), ("retire", None), ("invalid", None)], None, []),
    ("validity failures ignored when the policy says so",
     {"stop_on_persistent_validity_failure": False},
     [("invalid", None), ("invalid", None), ("invalid", None)], None, []),
    ("budget exhausted", {}, [("retire", None)], {"experiments": 3, "cpu_hours": 9.0},
     ["budget_exhausted:cpu_hours,experiments"]),
    ("budget exhaustion ignored when the policy says so", {"stop_on_budget_exhaustion": False},
     [("retire", None)], {"experiments": 3, "cpu_hours": 9.0}, []),
    ("zero means no limit", {}, [("retire", None)], {"gpu_hours": 1e6}, []),
    ("several reasons at once",
     {"max_iterations": 3, "patience_iterations": 2, "max_consecutive_validity_failures": 2},
     [("promote", 0.6), ("invalid", None), ("invalid", None)], {"experiments": 3},
     ["budget_exhausted:experiments", "maximum_iterations_reached", "insufficient_improvement",
      "persistent_validity_failure"]),
]


@pytest.mark.parametrize(("policy", "steps", "used", "expected"),
                         [c[1:] for c in STOP_CASES], ids=[c[0] for c in STOP_CASES])
def test_stop_logic(policy: dict[str, Any], steps: list[tuple[str, float | None]],
                    used: dict[str, float] | None, expected: list[str]) -> None:
    c = contract(stop_policy=policy, budget={"max_experiments": 3, "max_cpu_hours": 8.0})
    _, reasons = run(c, steps, used)
    assert reasons[-1] == expected


def test_improvement_is_measured_against_the_best_so_far() -> None:
    c = contract(stop_policy={"min_improvement_percent": 10.0})
    it, _ = run(c, [("promote", 0.6), ("promote", 0.65)])
    # 0.65 is better than 0.6 but by under 10%: the best moves, the iteration is no improvement.
    assert (it["best"], it["stagnant"], it["last"]["improved"]) == (0.65, 1, False)
    it, _ = run(c, [("promote", 0.6), ("promote", 0.65), ("promote", 0.8)])
    assert it["best"] == 0.8 and it["count"] == 3 and it["stagnant"] == 0
    last = it["last"]
    assert last["improved"] and last["improvement"] == pytest.approx(0.15)
    assert last["improvement_percent"] == pytest.approx(0.15 / 0.65 * 100)


def test_minimize_and_a_zero_baseline() -> None:
    c = contract(metric={"name": "loss", "direction": "minimize", "baseline": 0.0, "seeds": [0]})
    it, _ = run(c, [("promote", -0.5)])
    assert it["best"] == -0.5 and it["last"]["improved"] and it["last"]["improvement_percent"] is None
    it, _ = run(c, [("promote", 0.3)])  # higher loss is worse than the baseline
    assert it["best"] is None and not it["last"]["improved"]


def test_no_contract_no_stop() -> None:
    it = next_iteration(initial_iterations(), None, decision(1), None, seq=1)
    assert it["count"] == 1 and stop_reasons(None, it, {"experiments": 99}) == []
