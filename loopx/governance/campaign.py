"""The campaign: its state machine, its status screen, and evaluating the stop policy by hand.

The state is a fold of the log (contract versions, transitions, the first claim after ready),
so a process started at any time sees exactly what every other process sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.actions import pending_approvals
from loopx.governance.moves import (
    TARGET_REACHED,
    completion_due,
    due_move,
    pause_reasons,
    policy_reasons,
    target_reached,
)
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
        "pause_reasons": state["pause_reasons"],
        "completion": state["completion"],
        "next_states": list(TRANSITIONS[state["state"]]),
        "contract": None if contract is None else {
            "contract_id": contract["contract_id"], "version": contract["version"],
            "mode": contract["mode"], "seq": contract["seq"],
            "metric": contract["metric"]["name"], "direction": contract["metric"]["direction"],
            "baseline": contract["metric"]["baseline"],
            "target": contract["metric"].get("target"),
            # The scalar is an assumption unless the plan measures the baseline.
            "baseline_hypothesis": contract["metric"].get("baseline_hypothesis"),
            "plan_version": _plan_version(campaign),
            "campaign_control": contract["promotion_policy"].get("campaign_control")},
        "iterations": {k: iterations[k] for k in ("count", "best", "best_hypothesis",
                                                   "stagnant", "invalid", "failed", "last")},
        "target_reached": target_reached(view),
        "budget": budget_rows(contract, campaign["usage"]["total"]),
        "would_stop": [] if state["state"] in TERMINAL else policy_reasons(view),
        "would_pause": pause_reasons(view),
        "would_complete": (state["state"] in ("running", "paused") and completion_due(view)),
        "pending_approvals": len(pending_approvals(view)),
        "awaiting_approval": awaiting(view),
    }


def transition(ledger: Ledger, creds: Credentials, to_state: str, reason: str) -> Record:
    """Move the campaign to ``to_state``. A stop by the owner is ``operator_requested``, and the
    owner pauses or completes at will; an agent's stop, pause or completion must carry the
    policy's reasons, which must apply.

    Raises:
        Refused: an illegal move (naming the legal ones); Forbidden: not this role's move.
    """

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        current = view["campaign"]["status"]["state"]
        payload: dict[str, Any] = {"from_state": current, "to_state": to_state,
                                   "reason": reason,
                                   "iteration": view["campaign"]["iterations"]["count"]}
        if to_state == "stopped":
            due = policy_reasons(view)
            payload["stop_reasons"] = ["operator_requested"] if who.is_owner or not due else due
        elif to_state == "paused" and not who.is_owner:
            payload["pause_reasons"] = pause_reasons(view)
        elif to_state == "completed" and (not who.is_owner or completion_due(view)):
            payload["completion"] = TARGET_REACHED
        return ledger.prepare({"schema_version": "campaign_transition_v0", "payload": payload},
                              who)

    return ledger.write(creds, plan)[0]


def evaluate(ledger: Ledger, creds: Credentials | None, *, dry_run: bool) -> dict[str, Any]:
    """Evaluate the campaign's policy now; unless ``dry_run``, make the move it owes: complete
    the campaign when the objective is met, else stop it when a stop reason applies, else pause
    it when a pause rule fires. A finished campaign has nothing left to evaluate.

    Raises:
        Refused: a move is due and no token was given; Forbidden: the writer may not make it
        (the owner and the evaluator_promoter may).
    """
    view = ledger.state()["lanes"]
    state = view["campaign"]["status"]["state"]
    finished = state in TERMINAL
    move = due_move(view)
    out: dict[str, Any] = {"state": state, "finished": finished,
                           "reasons": [] if finished else policy_reasons(view),
                           "pause_reasons": [] if move is None else move.get("pause_reasons", []),
                           "due": None if move is None else move["to_state"],
                           "stopped": False, "transition": None, "seq": None,
                           "iteration": view["campaign"]["iterations"]["count"]}
    if dry_run or move is None:
        return out
    if creds is None:
        what = ("the stop policy fires; stopping" if move["to_state"] == "stopped" else
                f"the campaign's policy owes a move to {move['to_state']}; making it")
        raise Refused(f"{what} needs a token",
                      hint="run again with the owner's or an evaluator's token, or --dry-run")

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        move = due_move(view)
        if move is None:
            return []
        return ledger.prepare({"schema_version": "campaign_transition_v0", "payload": move}, who)

    written = ledger.write(creds, plan)
    if written:
        p = written[0]["payload"]
        out.update(transition=p["to_state"], stopped=p["to_state"] == "stopped",
                   seq=written[0]["seq"], state=p["to_state"], due=p["to_state"],
                   reasons=p["stop_reasons"] if p["to_state"] == "stopped" else out["reasons"],
                   pause_reasons=p["pause_reasons"])
    return out


def _plan_version(campaign: dict[str, Any]) -> int:
    # The analysis plan is research's to fold (loopx.research.plan); the status reads its number.
    plans = campaign["plans"]
    return int(plans[-1]["version"]) if plans else 0
