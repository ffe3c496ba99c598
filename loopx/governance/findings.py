"""Findings: statements of one kind each, kept apart so a hypothesis or an interpretation is
never returned as an established result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.actions import new_id
from loopx.kernel.ledger import draft

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.work.state import LaneState

# How each statement kind stands (the seed's claim boundary).
STANDING = {
    "observed_fact": "established",
    "computed_result": "established",
    "negative_result": "established",
    "reproducibility_note": "established",
    "interpretation": "qualified",
    "hypothesis": "not_established",
    "risk": "risk",
}
GROUPS = ("established", "qualified", "not_established", "risk")


def add_finding(ledger: Ledger, creds: Credentials, *, kind: str, statement: str,
                evidence: list[dict[str, Any]], confidence: str | None = None,
                supersedes: str | None = None, finding_id: str | None = None,
                under: tuple[str, int] | None = None) -> dict[str, Any]:
    """Record a finding; established kinds must cite evidence.

    Raises:
        RecordRejected: an unknown kind, no evidence where needed, a secret; Refused.
    """
    payload: dict[str, Any] = {"finding_id": finding_id or new_id("find"), "kind": kind,
                               "statement": statement, "evidence": evidence}
    if confidence:
        payload["confidence"] = confidence
    if supersedes:
        payload["supersedes"] = supersedes
    [record] = ledger.append(draft(payload, under=under), creds=creds, kind="finding_v0")
    return {"finding_id": payload["finding_id"], "kind": kind, "standing": STANDING[kind],
            "seq": record["seq"]}


def finding_groups(view: LaneState, *, include_superseded: bool = False) -> dict[str, Any]:
    """Current findings grouped by standing; only ``established`` holds established results."""
    groups: dict[str, list[dict[str, Any]]] = {g: [] for g in GROUPS}
    for finding_id, f in sorted(view["findings"].items(), key=lambda kv: kv[1]["seq"]):
        if f["superseded_by"] is not None and not include_superseded:
            continue
        groups[STANDING[f["kind"]]].append({
            "finding_id": finding_id, "kind": f["kind"], "statement": f["statement"],
            "evidence": f["evidence"], "confidence": f.get("confidence"),
            "by": f["agent_id"], "seq": f["seq"], "superseded_by": f["superseded_by"]})
    return groups
