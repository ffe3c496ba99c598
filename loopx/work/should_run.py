"""Per-agent selection: what agent X should do next, as a pure function of (state, now).

There is no central scheduler: each agent asks, and with ``--claim`` the same selection runs
under the store lock in the step that writes the claim, so two agents of one role asking at
once get different todos.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.domains import installed
from loopx.kernel.errors import NotFound, Unauthorized
from loopx.kernel.plain import Value
from loopx.work.extensions import (
    CAMPAIGN_BLOCK,
    CLAIM_DATA,
    PASS_OVER,
    Block,
)
from loopx.work.leases import lease_live
from loopx.work.scope import claim_scope
from loopx.work.state import LaneState, effective, fast_get

REASONS = ("selected", "already_holding_lease", "no_eligible_todo", "blocked", "quota_exhausted",
           "campaign_stopped", "campaign_paused", "budget_exhausted", "awaiting_approval")
TITLE_CHARS = 120


class Decision(Value):
    """The answer to should-run: whether to run, why (one of :data:`REASONS`), and what."""

    _fields = ("agent_id", "role", "run", "reason", "todo_id", "blocked", "detail")

    def __init__(self, agent_id: str, role: str, run: bool, reason: str,
                 todo_id: str | None = None, blocked: list[str] | None = None,
                 detail: dict[str, Any] | None = None) -> None:
        self.agent_id = agent_id
        self.role = role
        self.run = run
        self.reason = reason
        self.todo_id = todo_id
        self.blocked = [] if blocked is None else blocked
        self.detail = {} if detail is None else detail


def agent_entry(lanes: LaneState, agent_id: str) -> dict[str, Any]:
    """A registered, unrevoked agent's state entry.

    Raises:
        NotFound: no agent has that id.
        Unauthorized: its grant was revoked.
    """
    agent = lanes["agents"].get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r} is registered",
                       hint="the owner registers agents with `loopx agent register`")
    if agent["revoked"]:
        raise Unauthorized(f"agent {agent_id!r} was revoked")
    return agent


def live_holdings(lanes: LaneState, agent_id: str, now: str) -> list[str]:
    """Todos whose lease ``agent_id`` holds at ``now``."""
    agent = lanes["agents"][agent_id]
    return [t for t in agent["holding"] if lease_live(lanes["todos"][t], lanes["agents"], now)]


def claimable(todo: dict[str, Any], lanes: LaneState, now: str) -> bool:
    """Open, or claimed with a lease that has lapsed (expired or the holder revoked) and an
    attempt left after that expiry is counted."""
    status = todo["status"]
    if status == "open":
        return True
    if status != "claimed" or lease_live(todo, lanes["agents"], now):
        return False
    return todo["failures"] + 1 < effective(todo, lanes["profiles"], "max_attempts")


def passed_over(lanes: LaneState, todo: dict[str, Any]) -> str | None:
    """Why selection never hands out this open todo, in words, if a higher domain says so (a
    moot evaluation, say): it stays open in the log but is no work left to do."""
    return next((why.words for hook in installed().extensions(PASS_OVER)
                 if (why := hook(lanes, todo)) is not None and why.words), None)


def blockers(todo: dict[str, Any], lanes: LaneState) -> list[str]:
    """Todos that must complete before ``todo`` may be claimed."""
    todos = lanes["todos"]
    return [b for b in todo["blocked_by"] if todos.get(b, {}).get("status") != "completed"]


def quota_left(lanes: LaneState, agent_id: str) -> int | None:
    """Claims the agent may still make (None: no limit)."""
    agent = lanes["agents"][agent_id]
    quota = agent["quota"]
    if quota is None:
        quota = lanes["profiles"].get(agent["role"], {}).get("claim_quota", 0)
    return None if not quota else max(quota - agent["claims"], 0)


def select(lanes: LaneState, agent_id: str, now: str) -> Decision:
    """Decide for ``agent_id`` at ``now``: its assigned todos first, then its role's, each by
    priority and then age. Deterministic, and it stops at the first claimable todo.

    The campaign comes first: a stopped or paused campaign, an exhausted budget or an action
    of this agent awaiting approval means no new work (a todo it holds is named, so it can
    finish or release it); a todo whose estimated cost exceeds the remaining budget is passed
    over.
    """
    agent = agent_entry(lanes, agent_id)
    role = agent["role"]
    held = live_holdings(lanes, agent_id, now)
    block = campaign_block(lanes, agent_id)
    if block is not None:
        # A held lease is still the agent's to heartbeat, finish or release: say which.
        detail = {**block.detail, "holding": held} if held else block.detail
        return Decision(agent_id, role, False, block.reason, detail=detail)
    profile = lanes["profiles"].get(role, {})
    if len(held) >= profile.get("max_concurrent_claims", 1):
        return Decision(agent_id, role, True, "already_holding_lease", held[0])
    if quota_left(lanes, agent_id) == 0:
        return Decision(agent_id, role, False, "quota_exhausted")
    get = fast_get(lanes["todos"])
    queues = lanes["queues"]
    pass_over = installed().extensions(PASS_OVER)
    any_blocked = False
    # Grouped by how they are reported; each todo's words are its own.
    skipped: dict[tuple[str | None, str | None], list[str]] = {}
    # Todos assigned to this agent first, then the role's; each queue is in selection order.
    for queue in (queues.get(f"@{agent_id}", ()), queues.get(role, ())):
        for _, _, todo_id in queue:
            todo = get(todo_id)
            if todo["role"] != role or todo_id in held or not claimable(todo, lanes, now):
                continue
            if blockers(todo, lanes):
                any_blocked = True
                continue
            why = next((w for hook in pass_over if (w := hook(lanes, todo)) is not None), None)
            if why is not None:
                skipped.setdefault((why.reason, why.detail_key), []).append(todo_id)
                continue
            return Decision(agent_id, role, True, "selected", todo_id)
    reasoned = [(reason, key, ids) for (reason, key), ids in skipped.items()
                if reason is not None]
    if reasoned and not any_blocked:
        reason, key, ids = reasoned[0]
        return Decision(agent_id, role, False, reason,
                        detail={key: sorted(ids)[:8]} if key else {})
    if any_blocked:
        blocked = [t for queue in (queues.get(f"@{agent_id}", ()), queues.get(role, ()))
                   for _, _, t in queue if blockers(get(t), lanes)]
        return Decision(agent_id, role, False, "blocked", blocked=sorted(blocked)[:8])
    detail = {key: sorted(ids)[:8] for (reason, key), ids in skipped.items()
              if reason is None and key is not None}
    return Decision(agent_id, role, False, "no_eligible_todo", detail=detail)


def campaign_block(lanes: LaneState, agent_id: str) -> Block | None:
    """The first reason a higher domain gives for holding ``agent_id`` back (None: none)."""
    for hook in installed().extensions(CAMPAIGN_BLOCK):
        block = hook(lanes, agent_id)
        if block is not None:
            return block  # type: ignore[no-any-return]
    return None


def claim_packet(lanes: LaneState, goal_id: str, agent_id: str, todo_id: str, *,
                 epoch: int, expires: str | None, via: str = "should_run",
                 holding: bool = False) -> dict[str, Any]:
    """The ``auto_research_lane_claim_v1`` packet for a claim, in the lane contract's shape;
    the split's location only for the agent holding the claim."""
    todo = lanes["todos"][todo_id]
    role = lanes["agents"][agent_id]["role"]
    profile = lanes["profiles"].get(role, {})
    ttl = effective(todo, lanes["profiles"], "lease_ttl_seconds")
    fields = claim_fields(lanes, agent_id, todo_id)
    return {
        "schema_version": "auto_research_lane_claim_v1",
        "goal_id": goal_id,
        "lane_role": role,
        "agent_id": agent_id,
        "todo_id": todo_id,
        "epoch": epoch,
        "hypothesis_id": fields["hypothesis_id"],
        "capability_token": fields["capability_token"],
        "allowed_actions": fields["allowed_actions"],
        "write_scope": fields["write_scope"],
        "blocked_by": fields["blocked_by"],
        "lease_ttl_seconds": ttl,
        # A todo may carry a shorter TTL than its role's: beat at least twice per lease.
        "heartbeat_seconds": min(profile.get("heartbeat_seconds", ttl / 2), ttl / 2),
        "lease_expires_at": expires,
        "via": via,
        "data": split_data(lanes, todo, reveal=holding),
    }


def claim_fields(lanes: LaneState, agent_id: str, todo_id: str) -> dict[str, Any]:
    """The self-describing fields of a claim of ``todo_id`` by ``agent_id`` at this point of
    the log: the todo's hypothesis and blockers, the role's capability, actions and write scope,
    and the lease's TTL.

    One computation for the claim record loopx writes, the packet should-run shows and the
    write check, which holds a claim appended by hand to exactly these values: a packet that
    states another role's capability would explain an authority the agent does not have.
    """
    todo = lanes["todos"][todo_id]
    role = lanes["agents"][agent_id]["role"]
    profile = lanes["profiles"].get(role, {})
    return {
        "hypothesis_id": todo["hypothesis_id"],
        "capability_token": profile.get("capability_token", role),
        "allowed_actions": list(profile.get("actions", [])),
        "write_scope": claim_scope(profile.get("write_scope", {})),
        "blocked_by": list(todo["blocked_by"]),
        "lease_ttl_seconds": float(effective(todo, lanes["profiles"], "lease_ttl_seconds")),
    }


def split_data(lanes: LaneState, todo: dict[str, Any], *,
               reveal: bool) -> dict[str, Any] | None:
    """The ``data`` of a claim packet: what a higher domain says the todo works on (the
    evaluation split, with its location only when ``reveal``: the agent holds the claim)."""
    for hook in installed().extensions(CLAIM_DATA):
        data = hook(lanes, todo, reveal)
        if data is not None:
            return data  # type: ignore[no-any-return]
    return None


def decision_json(decision: Decision, lanes: LaneState, goal_id: str, *, claimed: bool) -> dict[str, Any]:
    """The stable, small JSON answer of ``loopx quota should-run --json``."""
    out: dict[str, Any] = {"agent_id": decision.agent_id, "role": decision.role,
                           "run": decision.run, "reason": decision.reason, "claimed": claimed,
                           "todo": None, "claim": None}
    if decision.blocked:
        out["blocked_todos"] = decision.blocked
    if decision.detail:
        out["detail"] = decision.detail
    if decision.todo_id is not None:
        todo = lanes["todos"][decision.todo_id]
        holding = decision.reason == "already_holding_lease" or claimed
        epoch = todo["epoch"] if holding else todo["epoch"] + 1
        out["todo"] = {"todo_id": decision.todo_id, "title": todo["title"][:TITLE_CHARS],
                       "action_kind": todo["action_kind"], "epoch": epoch,
                       "hypothesis_id": todo["hypothesis_id"]}
        out["claim"] = claim_packet(lanes, goal_id, decision.agent_id, decision.todo_id,
                                    epoch=epoch, expires=todo["expires"] if holding else None,
                                    via=todo.get("via", "should_run") if holding else "should_run",
                                    holding=holding)
    return out
