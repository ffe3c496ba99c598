"""Agents and their capability grants: register (token shown once), list, revoke. Owner only."""

from __future__ import annotations

from typing import Any

from loopx.kernel.checks import Credentials, Identity
from loopx.kernel.errors import Refused
from loopx.kernel.ledger import Ledger
from loopx.kernel.store.base import Record
from loopx.work.should_run import live_holdings, quota_left
from loopx.work.state import LaneState


def register_agent(ledger: Ledger, creds: Credentials, agent_id: str, role: str, *,
                   quota: int | None = None, note: str | None = None) -> tuple[Record, str]:
    """Grant ``agent_id`` the role ``role``; returns the grant record and the agent's token.

    The token is returned once and stored only as its digest.

    Raises:
        Unauthorized, Forbidden: the writer is not the owner.
        Refused: the role does not exist or the agent is already registered.
    """
    from loopx.kernel.tokens import (  # registering only, not reads
        new_token,
        token_digest,
    )

    token = new_token()
    payload: dict[str, Any] = {"agent_id": agent_id, "role": role,
                               "token_sha256": token_digest(token)}
    if quota is not None:
        payload["claim_quota"] = quota
    if note:
        payload["note"] = note
    [record] = ledger.append({"payload": payload}, creds=creds, kind="agent_grant_v0")
    return record, token


def revoke_agent(ledger: Ledger, creds: Credentials, agent_id: str, reason: str = "") -> Record:
    """Revoke ``agent_id``'s live grant; its token is refused from the next write on.

    Raises:
        Refused: the agent has no live grant.
    """
    def plan(lanes: LaneState, who: Identity, now: str) -> list[Record]:
        agent = lanes["agents"].get(agent_id)
        if agent is None or agent["revoked"]:
            raise Refused(f"agent {agent_id!r} has no live grant")
        return ledger.prepare({"payload": {"agent_id": agent_id, "grant_id": agent["grant_id"],
                                           "reason": reason}}, who, kind="agent_revocation_v0")

    return ledger.write(creds, plan)[0]


def agent_rows(lanes: LaneState, now: str) -> list[dict[str, Any]]:
    """Every agent ever registered, for ``loopx agent list`` and ``loopx status``."""
    rows = []
    for agent_id, agent in sorted(lanes["agents"].items()):
        rows.append({
            "agent_id": agent_id, "role": agent["role"], "grant_id": agent["grant_id"],
            "revoked": agent["revoked"], "claims": agent["claims"],
            "quota_left": quota_left(lanes, agent_id),
            "holding": [] if agent["revoked"] else live_holdings(lanes, agent_id, now),
        })
    return rows
