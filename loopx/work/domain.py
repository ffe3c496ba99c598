"""The lanes as a kernel domain: their record kinds, slices, fold handlers and write rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from loopx.kernel.domains import Domain, Hook
from loopx.work import state, todo_index

if TYPE_CHECKING:
    from loopx.kernel.domains import Check
    from loopx.kernel.kinds import KindSpec


def kinds() -> Sequence[KindSpec]:
    """The lanes' record kinds (loads their pydantic models)."""
    from loopx.kernel.kinds import KindSpec
    from loopx.work.records import (
        AgentGrantV0,
        AgentRevocationV0,
        AutoResearchLaneClaimV1,
        LaneProfileV0,
        RolloutEventV0,
        TodoChangeV0,
        TodoEventV0,
        TodoItemV0,
    )

    return (
        KindSpec("todo_item_v0", TodoItemV0, "public", "self_reported", "agents",
                 "a bounded piece of work for one role"),
        KindSpec("auto_research_lane_claim_v1", AutoResearchLaneClaimV1, "public", "computed",
                 "agents", "a leased claim of a todo (the claim packet)"),
        KindSpec("todo_event_v0", TodoEventV0, "public", "self_reported", "agents",
                 "a todo lifecycle step: heartbeat, release, completion, failure, expiry"),
        # Free text (a cancel's reason) is shown on the board: secret-shaped values are refused.
        KindSpec("todo_change_v0", TodoChangeV0, "public", "self_reported", "agents",
                 "a change of an existing todo: priority, blocker, assignee, cancellation",
                 secrets_checked=True),
        KindSpec("rollout_event_v0", RolloutEventV0, "public", "observed", "agents",
                 "an executor's rollout step"),
        KindSpec("lane_profile_v0", LaneProfileV0, "public", "self_reported", "owner",
                 "a role profile: scope, actions, lease timing, successor rules"),
        KindSpec("agent_grant_v0", AgentGrantV0, "private", "observed", "owner",
                 "the owner grants an agent a role; its record id is the capability id"),
        KindSpec("agent_revocation_v0", AgentRevocationV0, "private", "observed", "owner",
                 "the owner revokes an agent's grant"),
    )


CHECKS = "loopx.work.checks"


def checks() -> dict[str, Check]:
    """The lanes' write checks by kind (loaded by the first write)."""
    from loopx.work import change_checks, checks

    return {
        "todo_item_v0": checks.check_todo,
        "auto_research_lane_claim_v1": checks.check_claim,
        "todo_event_v0": checks.check_todo_event,
        "todo_change_v0": change_checks.check_todo_change,
        "rollout_event_v0": checks.require_todo,
        "agent_grant_v0": checks.check_grant,
        "agent_revocation_v0": checks.check_revocation,
        "lane_profile_v0": checks.check_profile,
    }


DOMAIN = Domain(
    name="work",
    slices={**{name: dict for name in state.SLICES}, todo_index.SLICE: todo_index.initial},
    folds=state.FOLDS,
    checks=checks,
    kinds=kinds,
    # The write rules load with the first write (or verify); a read never runs them.
    before_fold={"todo_event_v0": Hook(CHECKS, "owed_successors")},
    writer=Hook(CHECKS, "writer_of"),
    gate=Hook(CHECKS, "gate"),
    identify=Hook(CHECKS, "identify"),
)
