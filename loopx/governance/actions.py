"""Action proposals and approvals: propose, approve or reject, can-execute, record the result.

Eligibility (the contract's tool lists) and approval (the owner's verdict) are separate, and
approval never executes anything: an executor asks :func:`verdict` and runs the tool itself.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from loopx.governance.moves import approval_move, with_owed_move
from loopx.governance.rules import (
    approval_required,
    awaits_owner,
    can_execute,
    loopx_tool_risk,
    proposal_state,
    tool_eligible,
    tool_risk,
    unknown_tool,
)
from loopx.governance.state import approval_subjects, current_contract
from loopx.kernel.errors import NotFound, Refused, UsageProblem

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState


def new_id(prefix: str) -> str:
    """A short random id for a proposal, finding or decision (``prop-3f9c...``)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def propose(ledger: Ledger, creds: Credentials, *, name: str, tool: str, reason: str,
            risk: str | None = None, arguments: dict[str, Any] | None = None,
            estimated_cost: dict[str, float] | None = None,
            proposal_id: str | None = None) -> dict[str, Any]:
    """Record a proposal judged under the contract in force; returns it with its verdict.

    The risk defaults to the one loopx reconstructs for the tool (a ``loopx.*`` tool's
    registered class, the contract's ``tool_risks`` entry); a stated risk must equal it, except
    that a tool the contract does not declare is raised to ``destructive`` whatever was stated
    (``risk_raised_from`` in the answer says from what).

    Raises:
        Refused: no contract, a duplicate id, a risk other than a declared or registered one;
        RecordRejected: a bad field or a secret; UsageProblem: an unknown ``loopx.`` tool, or
        no risk for a tool outside loopx under a contract that declares no tool risks.
    """
    if risk is None:
        try:
            loopx_tool_risk(tool)
        except KeyError:
            raise UsageProblem(unknown_tool(tool)) from None
    pid = proposal_id or new_id("prop")
    raised: list[str] = []

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        contract = current_contract(view)
        if contract is None:
            raise Refused("there is no contract to judge a proposal under",
                          hint="the curator writes one with `loopx contract init`")
        stated = _risk(contract, tool, risk, raised)
        eligible, _ = tool_eligible(contract, tool)
        return ledger.prepare({"schema_version": "action_proposal_v0", "payload": {
            "proposal_id": pid, "name": name, "tool": tool, "arguments": arguments or {},
            "risk": stated, "reason": reason, "estimated_cost": estimated_cost or {},
            "eligible": eligible, "requires_approval": approval_required(contract, stated),
            "contract_version": contract["version"]}}, who)

    [record] = ledger.write(creds, plan)
    return {**proposal_row(ledger.state()["lanes"], pid), "seq": record["seq"],
            "risk_raised_from": raised[-1] if raised else None}


def _risk(contract: dict[str, Any], tool: str, stated: str | None, raised: list[str]) -> str:
    """The risk a proposal records: the stated one, or the one loopx reconstructs when none is
    stated; an undeclared campaign tool's is raised to destructive (appending the stated risk to
    ``raised``). A stated risk other than a declared or registered one is left for the write
    check to refuse, naming the field (an unknown ``loopx.`` tool too)."""
    try:
        rule = tool_risk(contract, tool)
    except KeyError:
        assert stated is not None  # without one, an unknown loopx tool is refused before the lock
        return stated
    if stated is None:
        if rule is None:
            raise UsageProblem("--risk is required for a tool outside loopx: the contract in "
                               "force declares no tool risks (read, write, compute, external "
                               "or destructive)")
        return rule.risk
    if rule is not None and rule.source == "undeclared" and stated != rule.risk:
        raised.append(stated)
        return rule.risk
    return stated


def find_subject(view: LaneState, subject_id: str, kind: str | None = None) -> str:
    """Which kind of subject ``subject_id`` names (proposal, decision or preview).

    Raises:
        NotFound: none; UsageProblem: both (pass the kind).
    """
    tables = approval_subjects(view)
    if kind is not None:
        if kind not in tables:
            raise NotFound(f"there is no {kind} {subject_id!r} to approve")
        if subject_id not in tables[kind]:
            raise NotFound(f"there is no {kind} {subject_id!r}")
        return kind
    found = [k for k, table in tables.items() if subject_id in table]
    if not found:
        raise NotFound(f"there is no proposal, decision or preview {subject_id!r}",
                       hint="`loopx approvals` lists what is pending")
    if len(found) > 1:
        raise UsageProblem(f"{subject_id!r} names a {' and a '.join(found)}; pass --subject")
    return found[0]


def decide_approval(ledger: Ledger, creds: Credentials, subject_id: str, *, approved: bool,
                    note: str, kind: str | None = None,
                    approver: str | None = None) -> dict[str, Any]:
    """The owner approves or rejects a subject (owner token; never one's own). Approving the
    promotion that reached the objective's target completes the campaign in the same batch.

    Raises:
        Forbidden: not the owner; Refused: already decided, self-approval, an ineligible tool;
        NotFound: no such subject.
    """
    answer: dict[str, Any] = {}

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        subject_kind = find_subject(view, subject_id, kind)
        answer["subject"] = {"kind": subject_kind, "id": subject_id}
        payload: dict[str, Any] = {"subject": answer["subject"],
                                   "verdict": "approved" if approved else "rejected",
                                   "note": note}
        if approver:
            payload["approver"] = approver
        [record] = ledger.prepare({"schema_version": "approval_v0", "payload": payload}, who)
        return with_owed_move(ledger, view, record, who, now, approval_move)

    record, *moved = ledger.write(creds, plan)
    out: dict[str, Any] = {"subject": answer["subject"], "verdict": record["payload"]["verdict"],
                           "seq": record["seq"], "record_id": record["record_id"],
                           "transition": moved[0]["payload"]["to_state"] if moved else None}
    if answer["subject"]["kind"] == "proposal":
        out["can_execute"] = verdict(ledger.state()["lanes"], subject_id)
    return out


def verdict(view: LaneState, proposal_id: str) -> dict[str, Any]:
    """Whether a proposal may execute now, with every reason it may not.

    Raises:
        NotFound: no such proposal.
    """
    if proposal_id not in view["proposals"]:
        raise NotFound(f"there is no proposal {proposal_id!r}")
    judged = can_execute(view, proposal_id)
    return {"proposal_id": proposal_id, "can_execute": judged.can_execute,
            "state": judged.state, "reasons": judged.reasons}


def record_result(ledger: Ledger, creds: Credentials, proposal_id: str, *, success: bool,
                  result: dict[str, Any] | None = None, error: str | None = None,
                  usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """Record what came of an executed proposal (and, in the same batch, the usage it cost).

    Raises:
        Refused: no such proposal, not the proposer, not permitted to run, already recorded.
    """
    drafts: list[dict[str, Any]] = [{"schema_version": "action_result_v0", "payload": {
        "proposal_id": proposal_id, "success": success, "result": result or {},
        **({"error": error} if error else {})}}]
    if usage:
        drafts.append({"schema_version": "usage_v0",
                       "payload": {**usage, "proposal_id": proposal_id}})
    written = ledger.append(drafts, creds=creds)
    return {"proposal_id": proposal_id, "success": success, "seq": written[0]["seq"],
            "usage_seq": written[1]["seq"] if len(written) > 1 else None}


def proposal_row(view: LaneState, proposal_id: str) -> dict[str, Any]:
    """One proposal as shown by the CLI: what it asks, its state and whether it may execute."""
    p = view["proposals"][proposal_id]
    judged = can_execute(view, proposal_id)
    return {
        "proposal_id": proposal_id, "name": p["name"], "tool": p["tool"], "risk": p["risk"],
        "arguments": p["arguments"], "reason": p["reason"],
        "estimated_cost": p["estimated_cost"], "proposed_by": p["agent_id"],
        "proposed_seq": p["seq"], "eligible": p["eligible"],
        "requires_approval": p["requires_approval"], "contract_version": p["contract_version"],
        "state": proposal_state(p), "approval": p["approval"], "result": p["result"],
        "can_execute": judged.can_execute, "reasons": judged.reasons,
    }


def pending_approvals(view: LaneState) -> list[dict[str, Any]]:
    """Subjects awaiting the owner, oldest first: proposals that need approval, promotions when
    the contract requires the owner's approval of them, and first-screen previews."""
    rows = []
    contract = current_contract(view)
    for pid, p in view["proposals"].items():
        if contract is not None and awaits_owner(contract, p):
            rows.append({"subject": {"kind": "proposal", "id": pid}, "seq": p["seq"],
                         "by": p["agent_id"], "summary": f"{p['risk']} {p['tool']}: {p['name']}",
                         "reason": p["reason"], "estimated_cost": p["estimated_cost"]})
    if contract is not None and contract["promotion_policy"]["require_owner_approval"]:
        for did, d in view["decisions"].items():
            if d["outcome"] == "promoted" and d["approval"] is None and d["superseded_by"] is None:
                rows.append({"subject": {"kind": "decision", "id": did}, "seq": d["seq"],
                             "by": d["agent_id"], "summary": f"promote {d['hypothesis_id']}",
                             "reason": d.get("note") or "", "estimated_cost": {}})
    for pid, preview in view["previews"].items():
        if preview["approval"] is None:
            screen = preview["first_screen"]
            rows.append({"subject": {"kind": "preview", "id": pid}, "seq": preview["seq"],
                         "by": preview["agent_id"], "summary": f"first screen: {screen['title']}",
                         "reason": screen["headline"], "estimated_cost": {}})
    return sorted(rows, key=lambda r: r["seq"])
