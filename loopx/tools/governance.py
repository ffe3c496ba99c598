"""Governance tools: the contract, action proposals and approvals, usage, findings and the
campaign state machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopx.tools.registry import NoParams, ToolContext, tool


@dataclass(frozen=True)
class ContractInit:
    contract: dict[str, Any]


@tool("contract.init", params=ContractInit, writes=True)
def contract_init(ctx: ToolContext, p: ContractInit) -> dict[str, Any]:
    """Write the research contract's first version (curator); the campaign becomes planned."""
    from loopx.governance.contract import contract_version, init_contract

    records = init_contract(ctx.ledger, ctx.credentials(), p.contract)
    return {"contract": contract_version(ctx.view()), "seq": records[0]["seq"],
            "campaign_state": ctx.view()["campaign"]["status"]["state"]}


@dataclass(frozen=True)
class ContractShow:
    version: int | None = None


@tool("contract.show", params=ContractShow, writes=False)
def contract_show(ctx: ToolContext, p: ContractShow) -> dict[str, Any]:
    """The contract in force (or an earlier version), with every version's change note."""
    from loopx.governance.contract import contract_version

    view = ctx.view()
    shown = contract_version(view, p.version)
    history = [{"version": v["version"], "seq": v["seq"], "record_id": v["record_id"],
                "agent_id": v["agent_id"], "ts": v["ts"],
                "changed": (v["amendment"] or {}).get("changed", []),
                "reason": (v["amendment"] or {}).get("reason")}
               for v in view["campaign"]["versions"]]
    return {"contract": withhold_heldout(shown), "in_force": history[-1]["version"],
            "versions": history}


WITHHELD = "(withheld: given only in a held-out todo's claim packet)"


def withhold_heldout(contract: dict[str, Any]) -> dict[str, Any]:
    """The contract as shown: the held-out location replaced by a note."""
    heldout = contract["evaluation"]["heldout"]
    if heldout.get("location") is None:
        return contract
    evaluation = {**contract["evaluation"], "heldout": {**heldout, "location": WITHHELD}}
    return {**contract, "evaluation": evaluation}


@dataclass(frozen=True)
class ContractAmend:
    reason: str
    settings: dict[str, Any] = field(default_factory=dict)
    replacement: dict[str, Any] | None = None


@tool("contract.amend", params=ContractAmend, writes=True)
def contract_amend(ctx: ToolContext, p: ContractAmend) -> dict[str, Any]:
    """Write the next contract version (curator): settings by dotted path, or a whole contract."""
    from loopx.governance.contract import amend_contract

    record = amend_contract(ctx.ledger, ctx.credentials(), p.reason,
                            settings=list(p.settings.items()), replacement=p.replacement)
    payload = record["payload"]
    return {"version": payload["version"], "seq": record["seq"],
            "changed": payload["amendment"]["changed"], "supersedes": payload["supersedes"]}


@dataclass(frozen=True)
class Propose:
    name: str
    tool: str
    reason: str
    risk: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    estimated_cost: dict[str, float] = field(default_factory=dict)
    proposal_id: str | None = None


@tool("action.propose", params=Propose, writes=True)
def action_propose(ctx: ToolContext, p: Propose) -> dict[str, Any]:
    """Propose an action through a tool; returns whether it is eligible, needs approval, may run."""
    from loopx.governance.actions import propose

    return propose(ctx.ledger, ctx.credentials(), name=p.name, tool=p.tool, reason=p.reason,
                   risk=p.risk, arguments=p.arguments, estimated_cost=p.estimated_cost,
                   proposal_id=p.proposal_id)


@dataclass(frozen=True)
class OwnerVerdict:
    subject_id: str
    note: str
    subject: str | None = None
    approver: str | None = None


def _verdict(ctx: ToolContext, p: OwnerVerdict, *, approved: bool) -> dict[str, Any]:
    from loopx.governance.actions import decide_approval

    return decide_approval(ctx.ledger, ctx.credentials(), p.subject_id, approved=approved,
                           note=p.note, kind=p.subject, approver=p.approver)


@tool("action.approve", params=OwnerVerdict, writes=True)
def action_approve(ctx: ToolContext, p: OwnerVerdict) -> dict[str, Any]:
    """Approve a proposal, decision or preview (owner token); approval never executes anything."""
    return _verdict(ctx, p, approved=True)


@tool("action.reject", params=OwnerVerdict, writes=True)
def action_reject(ctx: ToolContext, p: OwnerVerdict) -> dict[str, Any]:
    """Reject a proposal, decision or preview (owner token)."""
    return _verdict(ctx, p, approved=False)


@dataclass(frozen=True)
class ProposalRef:
    proposal_id: str


@tool("action.can_execute", params=ProposalRef, writes=False)
def action_can_execute(ctx: ToolContext, p: ProposalRef) -> dict[str, Any]:
    """Whether a proposal may execute now, with every reason it may not."""
    from loopx.governance.actions import verdict

    return verdict(ctx.view(), p.proposal_id)


@tool("action.status", params=ProposalRef, writes=False)
def action_status(ctx: ToolContext, p: ProposalRef) -> dict[str, Any]:
    """One proposal: what it asks, its approval, its result and whether it may execute."""
    from loopx.governance.actions import proposal_row, verdict

    verdict(ctx.view(), p.proposal_id)  # NotFound for an unknown id
    return proposal_row(ctx.view(), p.proposal_id)


@dataclass(frozen=True)
class RecordResult:
    proposal_id: str
    success: bool
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    usage: dict[str, float] = field(default_factory=dict)


@tool("action.record", params=RecordResult, writes=True)
def action_record(ctx: ToolContext, p: RecordResult) -> dict[str, Any]:
    """Record what came of an executed proposal, success or failure, and the usage it cost."""
    from loopx.governance.actions import record_result

    return record_result(ctx.ledger, ctx.credentials(), p.proposal_id, success=p.success,
                         result=p.result, error=p.error, usage=p.usage or None)


@tool("approvals.list", params=NoParams, writes=False)
def approvals_list(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """What awaits the owner's approval, oldest first."""
    from loopx.governance.actions import pending_approvals

    return {"pending": pending_approvals(ctx.view())}


def _under(todo_id: str | None, epoch: int | None) -> tuple[str, int] | None:
    """The held todo a usage or finding record is written under, if any (epoch 0 when only the
    todo is given)."""
    return None if todo_id is None else (todo_id, epoch or 0)


@dataclass(frozen=True)
class UsageAdd:
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    storage_gb: float = 0.0
    download_gb: float = 0.0
    experiments: int = 0
    proposal_id: str | None = None
    note: str | None = None
    under_todo_id: str | None = None
    under_epoch: int | None = None


@tool("usage.add", params=UsageAdd, writes=True)
def usage_add(ctx: ToolContext, p: UsageAdd) -> dict[str, Any]:
    """Record resource use by the calling agent (non-negative increments)."""
    from loopx.governance.resources import RESOURCES
    from loopx.governance.usage import add_usage

    increments = {k: getattr(p, k) for k in RESOURCES}
    return add_usage(ctx.ledger, ctx.credentials(), increments, proposal_id=p.proposal_id,
                     note=p.note, under=_under(p.under_todo_id, p.under_epoch))


@tool("usage.show", params=NoParams, writes=False)
def usage_show(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """Usage against the budget, in total and per agent."""
    from loopx.governance.usage import usage_report

    return usage_report(ctx.view())


@dataclass(frozen=True)
class FindingAdd:
    kind: str
    statement: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    confidence: str | None = None
    supersedes: str | None = None
    finding_id: str | None = None
    under_todo_id: str | None = None
    under_epoch: int | None = None


@tool("finding.add", params=FindingAdd, writes=True)
def finding_add(ctx: ToolContext, p: FindingAdd) -> dict[str, Any]:
    """Record a finding of one statement kind, with the evidence it rests on."""
    from loopx.governance.findings import add_finding

    return add_finding(ctx.ledger, ctx.credentials(), kind=p.kind, statement=p.statement,
                       evidence=p.evidence, confidence=p.confidence, supersedes=p.supersedes,
                       finding_id=p.finding_id,
                       under=_under(p.under_todo_id, p.under_epoch))


@dataclass(frozen=True)
class FindingList:
    include_superseded: bool = False


@tool("finding.list", params=FindingList, writes=False)
def finding_list(ctx: ToolContext, p: FindingList) -> dict[str, Any]:
    """Findings grouped by standing: established, qualified, not established, risks."""
    from loopx.governance.findings import finding_groups

    return finding_groups(ctx.view(), include_superseded=p.include_superseded)


@tool("campaign.status", params=NoParams, writes=False)
def campaign_status(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """The campaign: state, contract version, iterations, budget and what awaits approval."""
    from loopx.governance.campaign import status

    state = ctx.ledger.state()
    return {**status(state["lanes"]), "head": {"seq": state.cursor.seq,
                                               "hash": state.cursor.hash}}


@dataclass(frozen=True)
class Evaluate:
    dry_run: bool = False


@tool("campaign.evaluate", params=Evaluate, writes=True)
def campaign_evaluate(ctx: ToolContext, p: Evaluate) -> dict[str, Any]:
    """Evaluate the campaign's policy now; complete, stop or pause it as owed (unless dry_run)."""
    from loopx.governance.campaign import evaluate

    creds = ctx.creds if ctx.creds is not None and ctx.creds.token else None
    return evaluate(ctx.ledger, creds, dry_run=p.dry_run)


@dataclass(frozen=True)
class Transition:
    to_state: str
    reason: str


@tool("campaign.transition", params=Transition, writes=True)
def campaign_transition(ctx: ToolContext, p: Transition) -> dict[str, Any]:
    """Move the campaign state machine (illegal moves are refused, naming the legal ones)."""
    from loopx.governance.campaign import transition
    from loopx.governance.rules import STATES
    from loopx.kernel.errors import UsageProblem

    if p.to_state not in STATES:
        raise UsageProblem(f"unknown state {p.to_state!r}; states: {', '.join(STATES)}")
    record = transition(ctx.ledger, ctx.credentials(), p.to_state, p.reason)
    payload = record["payload"]
    return {"from_state": payload["from_state"], "to_state": payload["to_state"],
            "stop_reasons": payload["stop_reasons"], "pause_reasons": payload["pause_reasons"],
            "completion": payload["completion"], "seq": record["seq"]}
