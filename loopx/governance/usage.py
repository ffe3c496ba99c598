"""Resource usage: per-agent increments against the contract's budget ceilings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.state import current_contract
from loopx.governance.stopping import budget_rows
from loopx.kernel.ledger import draft

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.work.state import LaneState


def add_usage(ledger: Ledger, creds: Credentials, increments: dict[str, Any], *,
              proposal_id: str | None = None, note: str | None = None,
              under: tuple[str, int] | None = None) -> dict[str, Any]:
    """Record the writing agent's usage (non-negative increments), optionally under a held todo.

    Raises:
        RecordRejected: a negative or non-numeric increment, naming it; StaleLease; Refused.
    """
    payload = {k: v for k, v in increments.items() if v}
    if proposal_id:
        payload["proposal_id"] = proposal_id
    if note:
        payload["note"] = note
    [record] = ledger.append(draft(payload, under=under), creds=creds, kind="usage_v0")
    view = ledger.state()["lanes"]
    return {"seq": record["seq"], "agent_id": record["agent_id"],
            "budget": budget_rows(current_contract(view), view["campaign"]["usage"]["total"])}


def usage_report(view: LaneState) -> dict[str, Any]:
    """Totals against the budget, and each agent's share."""
    usage = view["campaign"]["usage"]
    return {"budget": budget_rows(current_contract(view), usage["total"]),
            "agents": {agent: dict(row) for agent, row in sorted(usage["agents"].items())}}
