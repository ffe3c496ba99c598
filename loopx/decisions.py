"""Decisions: promote or retire a hypothesis. One decision is one iteration, and the stop
policy is evaluated in the same locked step: when it fires, the stop is in the same batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.actions import new_id
from loopx.governance_checks import stop_transition
from loopx.lane_state import apply_record, overlay
from loopx.ledger import draft

if TYPE_CHECKING:
    from loopx.checks import Credentials, Identity
    from loopx.lane_state import LaneState
    from loopx.ledger import Ledger
    from loopx.store.base import Record


def record_decision(ledger: Ledger, creds: Credentials, payload: dict[str, Any], *,
                    under: tuple[str, int] | None = None) -> dict[str, Any]:
    """Append a decision (``research_decision_v0`` payload) and, if the stop policy fires with
    it, the campaign's stop; a later decision on the hypothesis supersedes the live one.

    Raises:
        RecordRejected, Forbidden, Refused, StaleLease.
    """
    payload = {"decision_id": new_id("dec"), **payload}

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        live = view["hypothesis_decisions"].get(payload["hypothesis_id"])
        cites = {"supersedes": live} if "supersedes" not in payload and live else {}
        [decision] = ledger.prepare(draft({**payload, **cites}, kind="research_decision_v0",
                                          under=under), who)
        # Fold the decision into a scratch overlay to see whether the policy fires with it.
        scratch = overlay(view)
        apply_record(scratch, {**decision, "seq": 0, "ts": now})
        stop = stop_transition(scratch, decision)
        if stop is None:
            return [decision]
        return [decision, *ledger.prepare({"schema_version": "campaign_transition_v0",
                                           "payload": stop}, who)]

    records = ledger.write(creds, plan)
    out: dict[str, Any] = {"decision_id": records[0]["payload"]["decision_id"],
                           "seq": records[0]["seq"], "stopped": len(records) > 1}
    if len(records) > 1:
        out["stop_reasons"] = records[1]["payload"]["stop_reasons"]
    return out
