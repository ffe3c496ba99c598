"""Write scope: the action a record performs on its kind, and which actions a role may take.

Every record is one (kind, action) pair. A role profile lists the pairs its agents may append;
todo lifecycle records are every role's (for todos the agent holds); the owner writes grants,
revocations, profiles and todos. The role x kind x action matrix test is generated from this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KIND_ACTIONS: dict[str, tuple[str, ...]] = {
    "research_contract_v0": ("create", "amend"),
    "research_hypothesis_v0": ("propose", "refine"),
    "research_plan_v0": ("create", "revise"),
    "auto_research_evidence_packet_v0": ("record",),
    "research_evidence_event_v0": ("judge",),
    "rollout_event_v0": ("record",),
    "todo_item_v0": ("add",),
    "auto_research_lane_claim_v1": ("claim",),
    "todo_event_v0": ("heartbeat", "released", "completed", "failed", "expired"),
    "todo_change_v0": ("reprioritise", "block", "unblock", "cancel", "reassign"),
    "lane_profile_v0": ("set",),
    "agent_grant_v0": ("grant",),
    "agent_revocation_v0": ("revoke",),
    "campaign_transition_v0": ("planned", "ready", "running", "paused", "completed", "stopped",
                               "failed"),
    "action_proposal_v0": ("propose",),
    "approval_v0": ("approve", "reject"),
    "action_result_v0": ("record",),
    "usage_v0": ("add",),
    "finding_v0": ("add",),
    "research_decision_v0": ("promote", "retire"),
    "novelty_audit_v0": ("audit",),
    # A hypothesis' grounding (its proposer's) or the campaign's (the curator's).
    "grounding_ref_v0": ("ground", "ground_campaign"),
    "gate_result_v0": ("record",),
    "research_refusal_v0": ("record",),
    "publication_preview_v0": ("preview",),
    "publication_v0": ("publish",),
}

# Every role may write these for todos it holds (claims and expiries have their own checks).
LIFECYCLE: dict[str, tuple[str, ...]] = {
    "auto_research_lane_claim_v1": ("claim",),
    "todo_event_v0": KIND_ACTIONS["todo_event_v0"],
}

# Any writer, the owner included, may have a request refused by a research rule: the write path
# records the refusal under the requester's identity (the kind is never appended by hand).
EVERYONE: dict[str, tuple[str, ...]] = {"research_refusal_v0": ("record",)}

OWNER_ROLE = "owner"
OWNER_SCOPE: dict[str, tuple[str, ...]] = {
    "lane_profile_v0": ("set",),
    "agent_grant_v0": ("grant",),
    "agent_revocation_v0": ("revoke",),
    "todo_item_v0": ("add",),
    "todo_change_v0": KIND_ACTIONS["todo_change_v0"],
    "approval_v0": ("approve", "reject"),
    "campaign_transition_v0": KIND_ACTIONS["campaign_transition_v0"],
    "action_proposal_v0": ("propose",),
    "action_result_v0": ("record",),
    "usage_v0": ("add",),
    # The owner may set the research direction too (the curator's, by its profile).
    "research_plan_v0": ("create", "revise"),
}
OWNER_ONLY = frozenset({"lane_profile_v0", "agent_grant_v0", "agent_revocation_v0",
                        "approval_v0"})
# Record kinds whose action is named by one payload field (value -> action).
_ACTION_FIELDS: dict[str, tuple[str, dict[str, str] | None]] = {
    "todo_event_v0": ("event", None),
    "todo_change_v0": ("change", None),
    "campaign_transition_v0": ("to_state", None),
    "approval_v0": ("verdict", {"approved": "approve", "rejected": "reject"}),
    "research_decision_v0": ("outcome", {"promoted": "promote", "retired": "retire"}),
}


def action_of(record: Mapping[str, Any]) -> str:
    """The action a record performs on its kind (``todo_event_v0``: its event)."""
    kind, payload = record["schema_version"], record["payload"]
    if kind in _ACTION_FIELDS:
        name, mapping = _ACTION_FIELDS[kind]
        value = str(payload[name])
        return mapping[value] if mapping else value
    if kind == "research_contract_v0":
        return "create" if payload.get("version", 1) == 1 else "amend"
    if kind == "research_hypothesis_v0":
        return "refine" if payload.get("parent_id") else "propose"
    if kind == "grounding_ref_v0":
        return "ground" if payload.get("hypothesis_id") else "ground_campaign"
    if kind == "research_plan_v0":
        return "create" if payload.get("version", 1) == 1 else "revise"
    return KIND_ACTIONS[kind][0]


def role_scope(write_scope: Mapping[str, list[str]] | None) -> dict[str, tuple[str, ...]]:
    """Everything a role may append: its profile's write scope plus the todo lifecycle."""
    if write_scope is None:  # the owner
        return {**OWNER_SCOPE, **EVERYONE}
    scope = {kind: tuple(actions) for kind, actions in write_scope.items()} | EVERYONE
    for kind, actions in LIFECYCLE.items():
        scope[kind] = tuple(sorted(set(scope.get(kind, ())) | set(actions)))
    return scope


def claim_scope(write_scope: Mapping[str, list[str]] | None) -> list[str]:
    """The kinds a claim packet lists: what the role may append (refusals, which only the write
    path records, are left out)."""
    return sorted(k for k in role_scope(write_scope) if k not in EVERYONE)


def allowed(write_scope: Mapping[str, list[str]] | None, kind: str, action: str) -> bool:
    """Whether a role (``None`` for the owner) may append ``kind`` with ``action``."""
    return action in role_scope(write_scope).get(kind, ())


def scope_problems(write_scope: Mapping[str, list[str]]) -> list[str]:
    """Why a profile's write scope is malformed (unknown kind or action, owner-only kind)."""
    problems = []
    for kind, actions in write_scope.items():
        if kind not in KIND_ACTIONS or kind in ("workspace_v0", "store_repair_v0", "store_clock_v0",
                                                *EVERYONE):
            problems.append(f"write_scope: unknown or system kind {kind!r}")
        elif kind in OWNER_ONLY:
            problems.append(f"write_scope: {kind} is written only by the owner")
        else:
            bad = [a for a in actions if a not in KIND_ACTIONS[kind]]
            if bad:
                problems.append(f"write_scope.{kind}: unknown action(s) {', '.join(bad)}; "
                                f"{kind} has {', '.join(KIND_ACTIONS[kind])}")
    return problems
