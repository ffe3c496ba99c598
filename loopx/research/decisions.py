"""Decisions: promote or retire a hypothesis on its candidate. One decision is one iteration, and
the campaign's policy is evaluated in the same locked step: when it completes, stops or pauses
the campaign, that transition is in the same batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.actions import new_id
from loopx.governance.moves import decision_move, with_owed_move
from loopx.kernel.errors import NotFound, Refused, UsageProblem
from loopx.kernel.ledger import draft
from loopx.research.gates import invalid_packets, measured_packets
from loopx.research.projections import RETIRE_REASONS, row

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState


def decide(ledger: Ledger, creds: Credentials, hypothesis_id: str, outcome: str, *,
           reason: str | None = None, note: str | None = None, decision_id: str | None = None,
           under: tuple[str, int] | None = None,
           violations: list[str] | None = None) -> dict[str, Any]:
    """Promote or retire a hypothesis on what the projection shows now: bound to its revision,
    citing the records its candidate rests on, superseding its live decision. If the policy
    completes, stops or pauses the campaign with it, that transition is in the same batch.

    The decision is invalid (a validity failure, never an improvement) when results it rests on
    were measured invalid, or when the evaluator names ``violations`` itself (a retirement only).

    Raises:
        ResearchRefused: no matching candidate (dev-only lift, claimed evidence...), recorded;
        Refused: a stale revision, or ``invalid_result`` with no violation measured or named;
        Forbidden: not the evaluator/promoter.
    """
    if outcome not in ("promoted", "retired"):
        raise UsageProblem(f"outcome {outcome!r}: promoted or retired")
    if outcome == "promoted" and reason not in (None, "gates_passed"):
        raise UsageProblem("a promotion's reason is gates_passed")
    if outcome == "retired" and reason is None:
        raise UsageProblem("a retirement needs a reason: " + ", ".join(RETIRE_REASONS))
    if outcome == "promoted" and violations:
        raise UsageProblem("an invalid result is never promoted: retire it (invalid_result)")
    did = decision_id or new_id("dec")

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        if hypothesis_id not in view["hypotheses"]:
            raise NotFound(f"there is no hypothesis {hypothesis_id!r}")
        entry = view["hypotheses"][hypothesis_id]
        current = row(view, hypothesis_id)
        candidate = current.promotion if outcome == "promoted" else current.retirement
        rests_on = list((candidate or {}).get("rests_on", []))
        if (reason == "invalid_result" and violations
                and "invalid_result" not in (current.retirement or {}).get("reasons", [])):
            rests_on = measured_packets(view, entry)  # the evaluator's own judgement
        flagged = invalid_packets(view, entry)
        named = list(violations or [])
        named += [v for p in flagged for v in view["packets"][p]["violations"] if v not in named]
        payload = {"decision_id": did, "hypothesis_id": hypothesis_id, "outcome": outcome,
                   "reason": reason or "gates_passed", "revision": current.revision,
                   "evidence_ids": rests_on, "note": note}
        if reason == "invalid_result" and not named:
            raise Refused(f"no result of {hypothesis_id!r} was measured invalid: to judge it "
                          "invalid yourself, name what it violates",
                          hint="`loopx decide retire H --reason invalid_result --violation TEXT`")
        if outcome == "retired" and named:
            payload.update(valid=False, violations=named[:64])
        live = view["hypothesis_decisions"].get(hypothesis_id)
        if live is not None:
            payload["supersedes"] = live
        [decision] = ledger.prepare(draft(payload, kind="research_decision_v0", under=under),
                                    who)
        return with_owed_move(ledger, view, decision, who, now, decision_move)

    records = ledger.write(creds, plan)
    first = records[0]["payload"]
    out: dict[str, Any] = {"decision_id": first["decision_id"],
                           "hypothesis_id": hypothesis_id, "outcome": outcome,
                           "reason": first["reason"], "revision": first["revision"],
                           "evidence_ids": first["evidence_ids"], "seq": records[0]["seq"],
                           "valid": first["valid"], "violations": first["violations"],
                           "stopped": False, "transition": None}
    if len(records) > 1:
        move = records[1]["payload"]
        out["transition"] = move["to_state"]
        out["stopped"] = move["to_state"] == "stopped"
        if move["to_state"] == "stopped":
            out["stop_reasons"] = move["stop_reasons"]
        elif move["to_state"] == "paused":
            out["pause_reasons"] = move["pause_reasons"]
        else:
            out["completion"] = move["completion"]
    return out
