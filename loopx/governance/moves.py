"""The campaign's own moves: the completion, stop or pause its policy owes at a point of the log.

The campaign moves by itself only in the batch of the record that makes a move due: a decision
(one iteration), or the owner's approval of the promotion that reached the objective's target.
The kernel's follow-ups make that batch owe the transition (:mod:`loopx.governance.domain`), and
the operation that writes the trigger plans it (:func:`with_owed_move`), so no writer can skip
it and ``loopx verify`` holds the log to it. Pure functions of the checked state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopx.governance.state import TERMINAL, current_contract
from loopx.governance.stopping import stop_reasons

if TYPE_CHECKING:
    from loopx.kernel.checks import Identity
    from loopx.kernel.ledger import Ledger

View = dict[str, Any]
Record = dict[str, Any]

PAUSE_REASONS = ("consecutive_failed_iterations", "target_awaits_owner_approval")
TARGET_REACHED = "objective_target_reached"
# The reason a policy move carries: these words, then what fired it ("with decision d-7").
MOVE_WORDS = {"stopped": "stop policy evaluated", "paused": "pause rule fired",
              "completed": "objective target reached"}


def policy_reasons(view: View) -> list[str]:
    """The stop policy's reasons at this point of the log."""
    campaign = view["campaign"]
    return stop_reasons(current_contract(view), campaign["iterations"],
                        campaign["usage"]["total"])


def target_reached(view: View) -> bool:
    """Whether the standing best held-out value reaches the contract's target (``metric.target``)
    in the metric's direction; never without a target or a best."""
    contract = current_contract(view)
    best = view["campaign"]["iterations"]["best"]
    target = None if contract is None else contract["metric"].get("target")
    if target is None or best is None:
        return False
    return bool(best >= target if contract["metric"]["direction"] == "maximize"
                else best <= target)


def best_awaits_owner(view: View) -> bool:
    """Whether the promotion that holds the best still waits for the owner's verdict, which the
    contract requires (``promotion_policy.require_owner_approval``, or the ``owner`` gate)."""
    contract = current_contract(view)
    hypothesis = view["campaign"]["iterations"]["best_hypothesis"]
    if contract is None or hypothesis is None:
        return False
    policy = contract["promotion_policy"]
    if not (policy.get("require_owner_approval") or "owner" in policy.get("required_gates", ())):
        return False
    # Decisions are research's to fold; governance reads them as data (as approvals do).
    decision_id = view.get("hypothesis_decisions", {}).get(hypothesis)
    decision = view.get("decisions", {}).get(decision_id or "")
    return bool(decision is not None and decision["outcome"] == "promoted"
                and decision["approval"] is None)


def completion_due(view: View) -> bool:
    """Whether the objective is met: the target is reached by a promotion that waits for no one."""
    return target_reached(view) and not best_awaits_owner(view)


def pause_reasons(view: View) -> list[str]:
    """The pause rules that fire now, in a fixed order.

    Only a running campaign pauses, and only on a decision counted since it entered that state:
    after the owner resumes it, a rule fires again with the next decision, not before.
    """
    status = view["campaign"]["status"]
    iterations = view["campaign"]["iterations"]
    contract = current_contract(view)
    if (contract is None or status["state"] != "running"
            or iterations["count"] <= status.get("since_iteration", 0)):
        return []
    reasons = []
    limit = contract["stop_policy"].get("max_consecutive_failed_iterations", 0)
    if limit and iterations.get("failed", 0) >= limit:
        reasons.append("consecutive_failed_iterations")
    if target_reached(view) and best_awaits_owner(view):
        reasons.append("target_awaits_owner_approval")
    return reasons


def due_move(view: View, trigger: str = "", decision_id: str | None = None
             ) -> dict[str, Any] | None:
    """The transition the policy owes now (its payload), if any.

    The objective met completes a running or paused campaign, even when a stop reason applies
    too; otherwise a stop reason stops it; otherwise a pause rule pauses it. ``trigger`` ends
    the reason ("with decision d-7").
    """
    status = view["campaign"]["status"]
    state = status["state"]
    if state in TERMINAL:
        return None
    base = {"from_state": state, "iteration": view["campaign"]["iterations"]["count"],
            "decision_id": decision_id}
    if state in ("running", "paused") and completion_due(view):
        return _move(base, "completed", trigger, completion=TARGET_REACHED)
    due = policy_reasons(view)
    if due:
        return _move(base, "stopped", trigger, stop_reasons=due)
    pauses = pause_reasons(view)
    if pauses:
        return _move(base, "paused", trigger, pause_reasons=pauses)
    return None


def _move(base: dict[str, Any], to_state: str, trigger: str, **extra: Any) -> dict[str, Any]:
    reason = MOVE_WORDS[to_state] + (f" {trigger}" if trigger else "")
    return {**base, "to_state": to_state, "reason": reason, **extra}


def decision_move(view: View, decision: Record) -> dict[str, Any] | None:
    """The move a decision (already folded into ``view``) makes its batch carry next, if any."""
    decision_id = decision["payload"]["decision_id"]
    return due_move(view, f"with decision {decision_id}", decision_id)


def approval_move(view: View, approval: Record) -> dict[str, Any] | None:
    """The completion the owner's approval of a promotion (already folded in) makes its batch
    carry, when that promotion was all the objective's target still waited for."""
    p = approval["payload"]
    state = view["campaign"]["status"]["state"]
    if (p["subject"]["kind"] != "decision" or p["verdict"] != "approved"
            or state not in ("running", "paused") or not completion_due(view)):
        return None
    decision_id = p["subject"]["id"]
    return _move({"from_state": state, "iteration": view["campaign"]["iterations"]["count"],
                  "decision_id": decision_id}, "completed",
                 f"with the owner's approval of decision {decision_id}",
                 completion=TARGET_REACHED)


def with_owed_move(ledger: Ledger, view: View, record: Record, who: Identity, now: str,
                   move_for: Callable[[View, Record], dict[str, Any] | None]) -> list[Record]:
    """``record`` followed by the campaign move it makes due (planned on a scratch overlay, so
    ``view`` is left as it is); the write check demands exactly that move next."""
    scratch = ledger.domains.overlay(view)
    ledger.domains.fold(scratch, {**record, "seq": 0, "ts": now})
    move = move_for(scratch, record)
    if move is None:
        return [record]
    return [record, *ledger.prepare({"schema_version": "campaign_transition_v0",
                                     "payload": move}, who)]
