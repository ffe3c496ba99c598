"""What ``loopx mcp`` exposes: the MCP tool table, which calls wait for nobody, and the one
argument the server rewrites (where a publication may be written).

Every MCP tool is a registry tool (``loopx.tools``) under a name a model reads easily. The
table names, for each, the record kind a role must be able to write to see it: the kind the
tool appends, so the listing follows the role's ``write_scope``. ``None`` lists it for every
role: the reads (none of them shows a private record's body) and the lease lifecycle, which
every role runs for the todos it holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# MCP tool -> (registry tool, the record kind a role must be able to write to see it; None:
# every role). Grouped by lane; docs/mcp.md shows the same table by role.
MCP_TOOLS: dict[str, tuple[str, str | None]] = {
    # The lease lifecycle: every role, for its own todos.
    "should_run": ("quota.should_run", None),
    "claim": ("todo.claim", None),
    "heartbeat": ("todo.heartbeat", None),
    "complete": ("todo.complete", None),
    "fail": ("todo.fail", None),
    "release": ("todo.release", None),
    # Curator.
    "init_contract": ("contract.init", "research_contract_v0"),
    "amend_contract": ("contract.amend", "research_contract_v0"),
    "record_research_plan": ("research_plan.record", "research_plan_v0"),
    "transition_campaign": ("campaign.transition", "campaign_transition_v0"),
    # Proposer (and whoever adds todos: the evaluator's gate and retry todos).
    "propose_hypothesis": ("hypothesis.propose", "research_hypothesis_v0"),
    "add_todos": ("todo.add", "todo_item_v0"),
    # Proposer and curator: the material an idea (or the campaign) is grounded in.
    "add_grounding": ("grounding.add", "grounding_ref_v0"),
    # Whoever's role added a todo may change it (the owner too, over the CLI).
    "reprioritise_todo": ("todo.reprioritise", "todo_change_v0"),
    "block_todo": ("todo.block", "todo_change_v0"),
    "unblock_todo": ("todo.unblock", "todo_change_v0"),
    "cancel_todo": ("todo.cancel", "todo_change_v0"),
    "reassign_todo": ("todo.reassign", "todo_change_v0"),
    # Executor.
    "append_evidence_packet": ("evidence.append_packet", "auto_research_evidence_packet_v0"),
    # Evaluator / promoter.
    "judge_evidence": ("evidence.judge", "research_evidence_event_v0"),
    "audit_novelty": ("novelty.audit", "novelty_audit_v0"),
    "check_gate": ("gate.check", "gate_result_v0"),
    "decide": ("decision.decide", "research_decision_v0"),
    # Narrator.
    "preview_story": ("story.preview", "publication_preview_v0"),
    "publish_story": ("story.publish", "publication_v0"),
    # Every packaged role's bookkeeping, as its profile allows.
    "propose_action": ("action.propose", "action_proposal_v0"),
    "record_action_result": ("action.record", "action_result_v0"),
    "add_usage": ("usage.add", "usage_v0"),
    "add_finding": ("finding.add", "finding_v0"),
    # Reads.
    "frontier": ("frontier.show", None),
    "candidates": ("candidates.list", None),
    "graph": ("graph.export", None),
    "story": ("story.render", None),
    "contract_show": ("contract.show", None),
    "action_status": ("action.status", None),
    "campaign_status": ("campaign.status", None),
    "todo_list": ("todo.list", None),
    "todo_show": ("todo.show", None),
    "finding_list": ("finding.list", None),
    "grounding_list": ("grounding.list", None),
    "research_plan_show": ("research_plan.show", None),
}
# The loop itself never waits for the owner: the lease lifecycle, asking (propose_action) and
# reporting what an executed proposal did (record_action_result; gating the report of an
# approved action would only ask for approval of the approval).
UNGATED = frozenset({"should_run", "claim", "heartbeat", "complete", "fail", "release",
                     "propose_action", "record_action_result"})
# Repeating these changes nothing more (a repeated completion of the same epoch writes nothing).
IDEMPOTENT = frozenset({"complete"})
# Parameters the server fills in from the session rather than the model.
SESSION_PARAMS: dict[str, tuple[str, ...]] = {"should_run": ("agent_id",)}
# Where an MCP publication may be written: this directory of the project, and nowhere else.
PUBLIC_DIR = "public"
# What a model must know about a tool beyond the registry's summary.
NOTES: dict[str, str] = {
    "publish_story": f"over MCP, out is a file name inside the project's {PUBLIC_DIR}/ "
                     "directory (e.g. story.md, board.html)",
}


def session_args(name: str, args: dict[str, Any], root: Path) -> dict[str, Any]:
    """The arguments a call runs with: ``args`` with what the server decides rewritten.

    Raises:
        UsageProblem: an argument the server confines is out of bounds (naming it).
        StorageError: the publication directory could not be made.
    """
    if name == "publish_story":
        return {**args, "out": str(publication_path(root, args.get("out")))}
    return args


def publication_path(root: Path, out: Any) -> Path:
    """Where ``out`` lands inside ``<root>/public/``, created if missing.

    An MCP client is a model: it may name a file to publish to, never a path outside the
    project's public directory (the CLI's ``--out`` is the person's own choice and unconfined).

    Raises:
        UsageProblem: ``out`` is not a relative path that stays inside the directory.
        StorageError: the directory could not be made.
    """
    from loopx.kernel.errors import StorageError, UsageProblem

    public = root / PUBLIC_DIR
    hint = f"give a file name such as story.md; it is written to {public}/"
    if not isinstance(out, str) or not out.strip():
        raise UsageProblem("out: required: the file name to publish to", hint=hint)
    relative = Path(out)
    if relative.is_absolute() or ".." in relative.parts:
        raise UsageProblem(f"out: {out!r} leaves the project's {PUBLIC_DIR}/ directory; over "
                           "MCP a publication is written only there", hint=hint)
    try:
        public.mkdir(exist_ok=True)
    except OSError as exc:
        raise StorageError.from_os(exc, "create", path=public,
                                   outcome="nothing was published") from None
    target = public / relative
    # A symlink inside public/ must not carry the write elsewhere either.
    if not target.parent.resolve().is_relative_to(public.resolve()) or target.is_symlink():
        raise UsageProblem(f"out: {out!r} resolves outside the project's {PUBLIC_DIR}/ "
                           "directory", hint=hint)
    return target
