"""The campaign: its state machine, its status screen, and evaluating the stop policy by hand.

The state is a fold of the log (contract versions, transitions, the first claim after ready),
so a process started at any time sees exactly what every other process sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.actions import pending_approvals
from loopx.governance.checks import policy_reasons, stop_payload
from loopx.governance.rules import TRANSITIONS, awaiting
from loopx.governance.state import TERMINAL, current_contract
from loopx.governance.stopping import budget_rows
from loopx.kernel.errors import Refused

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState


def status(view: LaneState) -> dict[str, Any]:
    """The campaign at a glance: state, contract version, iterations, budget, what waits."""
    campaign = view["campaign"]
    contract = current_contract(view)
    state = campaign["status"]
    iterations = campaign["iterations"]
    return {
        "state": state["state"],
        "since_seq": state["since_seq"],
        "reason": state["reason"],
        "stop_reasons": state["stop_reasons"],
        "next_states": list(TRANSITIONS[state["state"]]),
        "contract": None if contract is None else {
            "contract_id": contract["contract_id"], "version": contract["version"],
            "mode": contract["mode"], "seq": contract["seq"],
            "metric": contract["metric"]["name"], "direction": contract["metric"]["direction"],
            "baseline": contract["metric"]["baseline"],
            # The scalar is an assumption unless the plan measures the baseline.
            "baseline_hypothesis": contract["metric"].get("baseline_hypothesis"),
            "plan_version": _plan_version(campaign),
            "campaign_control": contract["promotion_policy"].get("campaign_control")},
        "iterations": {k: iterations[k] for k in ("count", "best", "best_hypothesis",
                                                   "stagnant", "invalid", "last")},
        "budget": budget_rows(contract, campaign["usage"]["total"]),
        "would_stop": [] if state["state"] in TERMINAL else policy_reasons(view),
        "pending_approvals": len(pending_approvals(view)),
        "awaiting_approval": awaiting(view),
    }


def transition(ledger: Ledger, creds: Credentials, to_state: str, reason: str) -> Record:
    """Move the campaign to ``to_state``. A stop by the owner is ``operator_requested``; a stop
    by an agent must carry the stop policy's reasons, which must apply.

    Raises:
        Refused: an illegal move (naming the legal ones); Forbidden: not this role's move.
    """

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        current = view["campaign"]["status"]["state"]
        payload: dict[str, Any] = {"from_state": current, "to_state": to_state,
                                   "reason": reason}
        if to_state == "stopped":
            due = policy_reasons(view)
            payload["stop_reasons"] = ["operator_requested"] if who.is_owner or not due else due
            payload["iteration"] = view["campaign"]["iterations"]["count"]
        return ledger.prepare({"schema_version": "campaign_transition_v0", "payload": payload},
                              who)

    return ledger.write(creds, plan)[0]


def evaluate(ledger: Ledger, creds: Credentials | None, *, dry_run: bool) -> dict[str, Any]:
    """Evaluate the stop policy now; unless ``dry_run``, stop the campaign if a reason applies.

    A finished campaign (completed, stopped or failed) has nothing left to evaluate.

    Raises:
        Forbidden: the writer may not stop the campaign (owner or evaluator_promoter may).
    """
    view = ledger.state()["lanes"]
    reasons = policy_reasons(view)
    state = view["campaign"]["status"]["state"]
    finished = state in TERMINAL
    out: dict[str, Any] = {"state": state, "finished": finished,
                           "reasons": [] if finished else reasons, "stopped": False,
                           "seq": None, "iteration": view["campaign"]["iterations"]["count"]}
    if dry_run or not reasons or finished:
        return out
    if creds is None:
        raise Refused("the stop policy fires; stopping needs a token",
                      hint="run again with the owner's or an evaluator's token, or --dry-run")
    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        stop = stop_payload(view, "stop policy evaluated")
        if stop is None:
            return []
        return ledger.prepare({"schema_version": "campaign_transition_v0", "payload": stop}, who)

    written = ledger.write(creds, plan)
    if written:
        out.update(stopped=True, seq=written[0]["seq"], state="stopped",
                   reasons=written[0]["payload"]["stop_reasons"])
    return out


def _plan_version(campaign: dict[str, Any]) -> int:
    # The analysis plan is research's to fold (loopx.research.plan); the status reads its number.
    plans = campaign["plans"]
    return int(plans[-1]["version"]) if plans else 0
