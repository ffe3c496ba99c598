"""Research tools: hypotheses, evidence packets and judgements, novelty audits and grounding
refs, the protected boundary gate, decisions, the research plan, and the projections (graph,
frontier, candidates)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopx.tools.registry import NoParams, ToolContext, tool


def _under(todo_id: str | None, epoch: int | None) -> tuple[str, int]:
    from loopx.kernel.errors import UsageProblem

    if todo_id is None or epoch is None:
        raise UsageProblem("this record is written under a held todo: give its id and epoch")
    return todo_id, epoch


@dataclass(frozen=True)
class HypothesisPropose:
    hypothesis: dict[str, Any]
    under_todo_id: str | None = None
    under_epoch: int | None = None
    todos: list[dict[str, Any]] = field(default_factory=list)


@tool("hypothesis.propose", params=HypothesisPropose, writes=True)
def hypothesis_propose(ctx: ToolContext, p: HypothesisPropose) -> dict[str, Any]:
    """Propose a hypothesis under a held todo, with the todos that will work on it."""
    from loopx.research.operations import propose_hypothesis

    return propose_hypothesis(ctx.ledger, ctx.credentials(), p.hypothesis,
                              under=_under(p.under_todo_id, p.under_epoch), todos=p.todos)


@dataclass(frozen=True)
class AppendPacket:
    packet: dict[str, Any]
    under_todo_id: str | None = None
    under_epoch: int | None = None


@tool("evidence.append_packet", params=AppendPacket, writes=True)
def evidence_append_packet(ctx: ToolContext, p: AppendPacket) -> dict[str, Any]:
    """Record one attempt's evidence packet (scored or failed) under the held todo."""
    from loopx.research.operations import append_packet

    return append_packet(ctx.ledger, ctx.credentials(), p.packet,
                         under=_under(p.under_todo_id, p.under_epoch))


@dataclass(frozen=True)
class Judge:
    hypothesis_id: str
    split: str


@tool("evidence.judge", params=Judge, writes=True)
def evidence_judge(ctx: ToolContext, p: Judge) -> dict[str, Any]:
    """Judge every scored packet of a hypothesis on one split under the contract's rule and
    record it; a held-out judgement is final."""
    from loopx.research.operations import judge

    return judge(ctx.ledger, ctx.credentials(), p.hypothesis_id, p.split)


@dataclass(frozen=True)
class Audit:
    hypothesis_id: str
    verdict: str
    refs: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None


@tool("novelty.audit", params=Audit, writes=True)
def novelty_audit(ctx: ToolContext, p: Audit) -> dict[str, Any]:
    """Record an independent novelty audit (never of a hypothesis the auditor proposed)."""
    from loopx.research.operations import audit_novelty

    return audit_novelty(ctx.ledger, ctx.credentials(), p.hypothesis_id, p.verdict,
                         refs=p.refs, note=p.note)


@dataclass(frozen=True)
class GroundingAdd:
    ref: dict[str, Any]
    hypothesis_id: str | None = None


@tool("grounding.add", params=GroundingAdd, writes=True)
def grounding_add(ctx: ToolContext, p: GroundingAdd) -> dict[str, Any]:
    """Record a grounding ref: for a hypothesis the writer proposed, or campaign-wide (curator)."""
    from loopx.research.grounding import add_grounding_ref

    return add_grounding_ref(ctx.ledger, ctx.credentials(), p.ref, hypothesis_id=p.hypothesis_id)


@dataclass(frozen=True)
class GroundingList:
    hypothesis_id: str | None = None


@tool("grounding.list", params=GroundingList, writes=False)
def grounding_list(ctx: ToolContext, p: GroundingList) -> dict[str, Any]:
    """Grounding refs with their normalised names: a hypothesis' ideation material, or all."""
    from loopx.kernel.errors import NotFound
    from loopx.research.grounding import listing
    from loopx.research.novelty import boundary

    state = ctx.ledger.state()
    view = state["lanes"]
    if p.hypothesis_id is not None and p.hypothesis_id not in view["hypotheses"]:
        raise NotFound(f"there is no hypothesis {p.hypothesis_id!r}")
    fence = boundary(view)
    return {"head_seq": state.seq, "hypothesis_id": p.hypothesis_id,
            "refs": listing(view, p.hypothesis_id),
            "novelty_boundary": {"statement": fence["statement"],
                                 "prior_art": fence["prior_art"],
                                 "contract_version": fence["contract_version"]}}


@dataclass(frozen=True)
class GateCheck:
    hypothesis_id: str


@tool("gate.check", params=GateCheck, writes=True)
def gate_check(ctx: ToolContext, p: GateCheck) -> dict[str, Any]:
    """Verify the protected boundary from git for the evidence a hypothesis rests on; record it."""
    from loopx.research.git_read import repo_root
    from loopx.research.operations import check_gate

    return check_gate(ctx.ledger, ctx.credentials(), p.hypothesis_id,
                      repo=repo_root(ctx.workspace.root))


@dataclass(frozen=True)
class GateReproduce:
    hypothesis_id: str
    command: list[str]
    timeout_seconds: float = 3600.0


@tool("gate.reproduce", params=GateReproduce, writes=True)
def gate_reproduce(ctx: ToolContext, p: GateReproduce) -> dict[str, Any]:
    """Re-run the held-out packets a promotion rests on, from their commits; record it."""
    from loopx.research.git_read import repo_root
    from loopx.research.operations import reproduce_gate

    return reproduce_gate(ctx.ledger, ctx.credentials(), p.hypothesis_id,
                          repo=repo_root(ctx.workspace.root), command=list(p.command),
                          timeout=p.timeout_seconds)


@dataclass(frozen=True)
class Decide:
    hypothesis_id: str
    outcome: str
    reason: str | None = None
    note: str | None = None
    decision_id: str | None = None
    violations: list[str] = field(default_factory=list)


@tool("decision.decide", params=Decide, writes=True)
def decision_decide(ctx: ToolContext, p: Decide) -> dict[str, Any]:
    """Promote or retire a hypothesis on its candidate, bound to its revision (evaluator)."""
    from loopx.research.decisions import decide

    return decide(ctx.ledger, ctx.credentials(), p.hypothesis_id, p.outcome, reason=p.reason,
                  note=p.note, decision_id=p.decision_id, violations=list(p.violations))


@tool("graph.export", params=NoParams, writes=False)
def graph_export(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """The research_evidence_graph_v0: typed nodes and edges, in a fixed order."""
    from loopx.research.graph import graph_json

    state = ctx.ledger.state()
    return graph_json(state["lanes"], state.seq)


@dataclass(frozen=True)
class Frontier:
    agent_id: str | None = None


@tool("frontier.show", params=Frontier, writes=False)
def frontier_show(ctx: ToolContext, p: Frontier) -> dict[str, Any]:
    """decentralized_research_frontier_v0: each hypothesis' state, next action and its role."""
    from loopx.kernel.gc_pause import paused_gc
    from loopx.research.projections import frontier

    with paused_gc():  # the state and the rows hold no cycles (loopx.kernel.gc_pause)
        state = ctx.ledger.state()
        view = state["lanes"]
        role = None
        if p.agent_id is not None:
            from loopx.work.should_run import agent_entry  # only to filter by role

            role = "owner" if p.agent_id == "owner" else agent_entry(view, p.agent_id)["role"]
        rows = frontier(view, role=role, agent_id=p.agent_id)
        return {"schema_version": "decentralized_research_frontier_v0", "head_seq": state.seq,
                "agent_id": p.agent_id, "role": role, "hypotheses": [r.to_json() for r in rows]}


@tool("candidates.list", params=NoParams, writes=False)
def candidates_list(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """Promotion, retirement and retry candidates, each with the records it rests on."""
    from loopx.kernel.gc_pause import paused_gc
    from loopx.research.projections import candidates

    with paused_gc():  # the state and the candidates hold no cycles (loopx.kernel.gc_pause)
        state = ctx.ledger.state()
        return {"head_seq": state.seq, **candidates(state["lanes"])}


@dataclass(frozen=True)
class ResearchPlanRecord:
    plan: dict[str, Any]
    reason: str | None = None


@tool("research_plan.record", params=ResearchPlanRecord, writes=True)
def research_plan_record(ctx: ToolContext, p: ResearchPlanRecord) -> dict[str, Any]:
    """Record the research plan (curator or owner): version 1, or a revision superseding the
    version in force."""
    from loopx.research.research_plan import progress, record_plan

    record = record_plan(ctx.ledger, ctx.credentials(), p.plan, reason=p.reason)
    payload = record["payload"]
    return {"plan_id": payload["plan_id"], "version": payload["version"],
            "record_id": record["record_id"], "seq": record["seq"],
            "supersedes": payload["supersedes"],
            **progress(ctx.view(), payload)}


@dataclass(frozen=True)
class ResearchPlanShow:
    version: int | None = None


@tool("research_plan.show", params=ResearchPlanShow, writes=False)
def research_plan_show(ctx: ToolContext, p: ResearchPlanShow) -> dict[str, Any]:
    """The research plan in force (or an earlier version): its steps, each with its status
    derived from the log, and every version's reason."""
    from loopx.research.research_plan import show

    state = ctx.ledger.state()
    return {"head_seq": state.seq, **show(state["lanes"], p.version)}
