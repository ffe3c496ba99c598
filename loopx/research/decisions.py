"""Decisions: promote or retire a hypothesis on its candidate. One decision is one iteration, and
the stop policy is evaluated in the same locked step: when it fires, the stop is in the same
batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.actions import new_id
from loopx.governance.checks import stop_transition
from loopx.kernel.errors import NotFound, UsageProblem
from loopx.kernel.ledger import draft
from loopx.research.projections import RETIRE_REASONS, row

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState


def decide(ledger: Ledger, creds: Credentials, hypothesis_id: str, outcome: str, *,
           reason: str | None = None, note: str | None = None, decision_id: str | None = None,
           under: tuple[str, int] | None = None) -> dict[str, Any]:
    """Promote or retire a hypothesis on what the projection shows now: bound to its revision,
    citing the records its candidate rests on, superseding its live decision. If the stop policy
    fires with it, the campaign's stop is in the same batch.

    Raises:
        ResearchRefused: no matching candidate (dev-only lift, claimed evidence...), recorded;
        Refused: a stale revision; Forbidden: not the evaluator/promoter.
    """
    if outcome not in ("promoted", "retired"):
        raise UsageProblem(f"outcome {outcome!r}: promoted or retired")
    if outcome == "promoted" and reason not in (None, "gates_passed"):
        raise UsageProblem("a promotion's reason is gates_passed")
    if outcome == "retired" and reason is None:
        raise UsageProblem("a retirement needs a reason: " + ", ".join(RETIRE_REASONS))
    did = decision_id or new_id("dec")

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        if hypothesis_id not in view["hypotheses"]:
            raise NotFound(f"there is no hypothesis {hypothesis_id!r}")
        current = row(view, hypothesis_id)
        candidate = current.promotion if outcome == "promoted" else current.retirement
        payload = {"decision_id": did, "hypothesis_id": hypothesis_id, "outcome": outcome,
                   "reason": reason or "gates_passed", "revision": current.revision,
                   "evidence_ids": list((candidate or {}).get("rests_on", [])), "note": note}
        live = view["hypothesis_decisions"].get(hypothesis_id)
        if live is not None:
            payload["supersedes"] = live
        [decision] = ledger.prepare(draft(payload, kind="research_decision_v0", under=under),
                                    who)
        # Fold the decision into a scratch overlay to see whether the policy fires with it.
        scratch = ledger.domains.overlay(view)
        ledger.domains.fold(scratch, {**decision, "seq": 0, "ts": now})
        stop = stop_transition(scratch, decision)
        if stop is None:
            return [decision]
        return [decision, *ledger.prepare({"schema_version": "campaign_transition_v0",
                                           "payload": stop}, who)]

    records = ledger.write(creds, plan)
    out: dict[str, Any] = {"decision_id": records[0]["payload"]["decision_id"],
                           "hypothesis_id": hypothesis_id, "outcome": outcome,
                           "reason": records[0]["payload"]["reason"],
                           "revision": records[0]["payload"]["revision"],
                           "evidence_ids": records[0]["payload"]["evidence_ids"],
                           "seq": records[0]["seq"], "stopped": len(records) > 1}
    if len(records) > 1:
        out["stop_reasons"] = records[1]["payload"]["stop_reasons"]
    return out
