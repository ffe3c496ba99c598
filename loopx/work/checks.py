"""The lanes' write rules: who wrote a record and whether their role may, fencing of todo-bound
writes by lease epoch, claims, expiries, todos, grants and revocations.

Registered with the kernel in :mod:`loopx.work.domain`; higher domains add their own claim
rules through the extension points in :mod:`loopx.work.extensions`.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.checks import OWNER, OWNER_CAPABILITY, OWNER_ROLE, Identity
from loopx.kernel.domains import Expected, installed
from loopx.kernel.errors import Forbidden, NotFound, Refused, StaleLease, Unauthorized
from loopx.kernel.rules import applies
from loopx.kernel.tokens import token_matches
from loopx.work.extensions import CLAIM_CHECK
from loopx.work.leases import lease_live
from loopx.work.scope import action_of, allowed
from loopx.work.should_run import (
    agent_entry,
    blockers,
    claim_fields,
    live_holdings,
    quota_left,
    select,
)
from loopx.work.state import LaneState, effective
from loopx.work.successors import condition_table, successor_todos, unknown_conditions

RESERVED_AGENTS = ("owner", "loopx-store")


def identify(lanes: LaneState, agent_id: str, token: str) -> Identity:
    """The identity of an agent presenting ``token``, from its live grant.

    Raises:
        Unauthorized: not registered, revoked, or the token is another agent's.
    """
    try:
        agent = agent_entry(lanes, agent_id)
    except NotFound as exc:
        # To a caller presenting a token, an unknown agent is a failed authentication (exit 7),
        # not a lookup that found nothing (exit 6).
        raise Unauthorized(f"agent {agent_id!r} is not registered", hint=exc.hint) from None
    if not token_matches(token, agent["token_sha256"]):
        raise Unauthorized(f"the token is not agent {agent_id!r}'s")
    return Identity(agent_id, agent["role"], agent["grant_id"])


def writer_of(lanes: LaneState, record: dict[str, Any]) -> Identity:
    """The identity a stored record claims, checked against the grants in force.

    Raises:
        Unauthorized: the agent, role or capability does not match a live grant.
    """
    agent_id, role, capability = record["agent_id"], record["lane_role"], record["capability"]
    if agent_id == "owner":
        if role != OWNER_ROLE or capability != OWNER_CAPABILITY:
            raise Unauthorized("owner records carry lane_role 'owner' and capability 'owner'")
        return OWNER
    agent = lanes["agents"].get(agent_id)
    if agent is None or agent["revoked"]:
        raise Unauthorized(f"agent {agent_id!r} holds no live grant")
    if role != agent["role"] or capability != agent["grant_id"]:
        raise Unauthorized(f"agent {agent_id!r} writes as role {agent['role']!r} under grant "
                           f"{agent['grant_id']}, not {role!r} under {capability}")
    return Identity(agent_id, role, capability)


def gate(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """The rules every record passes first: the role's write scope, and fencing by epoch."""
    kind = record["schema_version"]
    action = action_of(record)
    payload = record["payload"]
    profile = None if who.is_owner else lanes["profiles"].get(who.role)
    if not who.is_owner and profile is None:
        raise Forbidden(who.role, kind, action, why="the role has no profile")
    if kind == "todo_item_v0" and payload.get("successor_rule_id") is not None:
        raise Refused("successor_rule_id is set only by a successor rule firing on a completion")
    if not allowed(None if profile is None else profile["write_scope"], kind, action):
        raise Forbidden(who.role, kind, action)
    if who.is_owner and record["todo_id"] is not None:
        raise Refused("the owner holds no todos; owner records carry no todo_id")
    if kind == "auto_research_lane_claim_v1" or (kind == "todo_event_v0" and action == "expired"):
        return  # a claim or an expiry is checked against the lease it takes or ends
    if record["todo_id"] is not None:
        _check_fenced(lanes, who, record)


def require_todo(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A todo-bound kind must name the todo (and epoch) it works under."""
    if record["todo_id"] is None:
        raise Refused(f"{record['schema_version']} must name the todo it works under (todo_id "
                      "and epoch)", hint="claim a todo first: `loopx quota should-run --claim`")


def _check_fenced(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    todo_id, epoch, now = record["todo_id"], record["epoch"], record["ts"]
    todo = lanes["todos"].get(todo_id)
    if todo is None:
        raise Refused(f"todo {todo_id!r} does not exist")
    if epoch is None:
        raise StaleLease(f"a write tied to todo {todo_id!r} must carry its epoch")
    if todo["holder"] != who.agent_id or epoch != todo["epoch"]:
        now_held = (f"held by {todo['holder']} at epoch {todo['epoch']}" if todo["holder"]
                    else f"{todo['status']}, last epoch {todo['epoch']}")
        raise StaleLease(f"todo {todo_id!r}: {who.agent_id} does not hold epoch {epoch} "
                         f"(the todo is {now_held})", hint="ask `loopx quota should-run` again")
    if not lease_live(todo, lanes["agents"], now):
        raise StaleLease(f"todo {todo_id!r}: the lease of {who.agent_id} expired at "
                         f"{todo['expires']}", hint="claim it again to continue")


def check_claim(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A claim takes an open, unblocked todo of the writer's role at the next epoch, within
    the role's limits, and (through should-run) the todo selection picks."""
    todo_id, payload, now = record["todo_id"], record["payload"], record["ts"]
    todo = lanes["todos"].get(todo_id or "")
    if todo is None:
        raise Refused(f"cannot claim todo {todo_id!r}: it does not exist")
    if who.is_owner or todo["role"] != who.role:
        raise Refused(f"todo {todo_id!r} is for role {todo['role']!r}, not {who.role!r}")
    if todo["assigned_to"] not in (None, who.agent_id):
        raise Refused(f"todo {todo_id!r} is assigned to {todo['assigned_to']!r}")
    if todo["status"] != "open":
        if todo["status"] == "claimed" and not lease_live(todo, lanes["agents"], now):
            raise Refused(f"todo {todo_id!r}: its lapsed lease must be recorded as expired "
                          "in the same batch, before the claim")
        raise Refused(f"todo {todo_id!r} is {todo['status']}"
                      + (f" by {todo['holder']}" if todo["holder"] else ""))
    if record["epoch"] != todo["epoch"] + 1:
        raise StaleLease(f"a claim of todo {todo_id!r} takes epoch {todo['epoch'] + 1}, "
                         f"not {record['epoch']}")
    waiting = blockers(todo, lanes)
    if waiting:
        raise Refused(f"todo {todo_id!r} is blocked by {', '.join(waiting)}")
    for extra in installed().extensions(CLAIM_CHECK):
        extra(lanes, who, todo_id, todo)
    profile = lanes["profiles"][who.role]
    if len(live_holdings(lanes, who.agent_id, now)) >= profile["max_concurrent_claims"]:
        raise Refused(f"{who.agent_id} already holds {profile['max_concurrent_claims']} lease(s), "
                      "the role's max_concurrent_claims")
    if quota_left(lanes, who.agent_id) == 0:
        raise Refused(f"{who.agent_id} has used its claim quota")
    if payload["lease_ttl_seconds"] != effective(todo, lanes["profiles"], "lease_ttl_seconds"):
        raise Refused(f"a claim of todo {todo_id!r} must use its lease_ttl_seconds "
                      f"({effective(todo, lanes['profiles'], 'lease_ttl_seconds')})")
    if payload.get("via", "should_run") == "should_run":
        chosen = select(lanes, who.agent_id, now)
        if chosen.todo_id != todo_id or chosen.reason != "selected":
            raise Refused(f"should-run selects {chosen.todo_id or 'nothing'} for {who.agent_id}, "
                          f"not {todo_id!r}")
    elif profile["explicit_claims"] == "none" or (
            profile["explicit_claims"] == "successors_only" and todo["rule"] is None):
        raise Refused(f"role {who.role!r} may claim explicitly only "
                      + ("nothing" if profile["explicit_claims"] == "none"
                         else "successor todos") + f"; {todo_id!r} is not one",
                      hint="take the todo `loopx quota should-run --claim` selects")
    if applies(lanes, 2):  # rules version 2 (loopx.kernel.rules)
        check_claim_packet(lanes, who, record)


def check_claim_packet(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A claim describes itself exactly as loopx computes it for this todo and agent now.

    The claim packet explains why the agent may take the next bounded action (004's Lane Claim
    Packet), so a claim appended by hand may not state another role's capability token,
    actions or write scope, nor another hypothesis or other blockers than the todo's. Claims
    loopx writes carry these very values, so logs it wrote verify as before.
    """
    payload = record["payload"]
    want = claim_fields(lanes, who.agent_id, record["todo_id"])
    for name, value in want.items():
        if payload.get(name) != value:
            raise Refused(f"a claim of todo {record['todo_id']!r} by {who.agent_id} must carry "
                          f"{name} {value!r}, not {payload.get(name)!r}",
                          hint="claim with `loopx quota should-run --claim` or `loopx todo "
                               "claim`, which fill the packet in")


def check_todo_event(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """An expiry ends a lapsed lease and names its holder; every other event is fenced."""
    if action_of(record) != "expired":
        require_todo(lanes, who, record)
        return
    todo_id, now = record["todo_id"], record["ts"]
    todo = lanes["todos"].get(todo_id or "")
    if todo is None or todo["status"] != "claimed" or record["epoch"] != todo["epoch"]:
        raise Refused(f"todo {todo_id!r} epoch {record['epoch']} is not a held lease")
    if lease_live(todo, lanes["agents"], now):
        raise Refused(f"todo {todo_id!r}: the lease of {todo['holder']} holds until "
                      f"{todo['expires']}")
    if record["payload"].get("expired_agent_id") != todo["holder"]:
        raise Refused(f"todo {todo_id!r}: expired_agent_id must name the holder {todo['holder']}")


def check_todo(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A new todo: a fresh id, a role that takes its action, an assignee of that role, and
    links that name open todos without making a cycle."""
    p = record["payload"]
    todos, profiles = lanes["todos"], lanes["profiles"]
    todo_id, role = p["todo_id"], p["role"]
    if todo_id in todos:
        raise Refused(f"todo {todo_id!r} already exists")
    target = profiles.get(role)
    if target is None:
        raise Refused(f"todo {todo_id!r}: no role {role!r} (roles: {', '.join(sorted(profiles))})")
    if p["action_kind"] not in target["actions"]:
        raise Refused(f"todo {todo_id!r}: role {role!r} does not take action "
                      f"{p['action_kind']!r} (it takes {', '.join(target['actions']) or 'none'})")
    if not who.is_owner and role not in lanes["profiles"][who.role]["adds_todos_for"]:
        raise Forbidden(who.role, "todo_item_v0", "add",
                        why=f"it may not add todos for role {role!r}")
    assignee = p.get("assigned_to")
    if assignee is not None:
        agent = lanes["agents"].get(assignee)
        if agent is None or agent["revoked"] or agent["role"] != role:
            raise Refused(f"todo {todo_id!r}: assigned_to {assignee!r} is not a live {role} agent")
    _check_links(lanes, todo_id, p.get("blocked_by", []), p.get("unblocks_todo_id"))


def _check_links(lanes: LaneState, todo_id: str, blocked_by: list[str], unblocks: str | None) -> None:
    todos = lanes["todos"]
    missing = [b for b in blocked_by if b not in todos]
    if missing or todo_id in blocked_by:
        raise Refused(f"todo {todo_id!r}: blocked_by names "
                      + (f"unknown todos {', '.join(missing)}" if missing else "itself"))
    if unblocks is None:
        return
    target = todos.get(unblocks)
    if target is None or target["status"] != "open":
        raise Refused(f"todo {todo_id!r}: unblocks_todo_id {unblocks!r} must be an open todo")
    # A cycle would block both forever: refuse if the target already (transitively) blocks us.
    stack, seen = list(blocked_by), set()
    while stack:
        current = stack.pop()
        if current == unblocks:
            raise Refused(f"todo {todo_id!r}: blocking {unblocks!r} would make a cycle")
        if current not in seen:
            seen.add(current)
            stack += todos.get(current, {}).get("blocked_by", [])


def check_grant(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A grant names a free agent id and a known role."""
    p = record["payload"]
    if p["agent_id"] in RESERVED_AGENTS:
        raise Refused(f"agent id {p['agent_id']!r} is reserved")
    if p["role"] not in lanes["profiles"]:
        raise Refused(f"no role {p['role']!r} (roles: {', '.join(sorted(lanes['profiles']))})")
    current = lanes["agents"].get(p["agent_id"])
    if current is not None and not current["revoked"]:
        raise Refused(f"agent {p['agent_id']!r} is already registered (grant "
                      f"{current['grant_id']}); revoke it first")


def check_revocation(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A revocation ends a live grant."""
    p = record["payload"]
    agent = lanes["agents"].get(p["agent_id"])
    if agent is None or agent["revoked"] or agent["grant_id"] != p["grant_id"]:
        raise Refused(f"agent {p['agent_id']!r} has no live grant {p['grant_id']}")


def check_profile(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A profile's successor rules name only conditions a domain registered (``loopx lanes
    apply`` says so first, naming the file; this holds a profile appended by hand to it)."""
    table = condition_table()
    for i, rule in enumerate(record["payload"].get("successor_todos", [])):
        unknown = unknown_conditions(rule, table)
        if unknown:
            raise Refused(f"profile {record['payload']['role']!r}: successor_todos.{i}.conditions "
                          f"names unknown condition(s) {', '.join(unknown)}",
                          hint="`loopx lanes show --json` lists the known ones under conditions")


def owed_successors(lanes: LaneState, record: dict[str, Any]) -> list[Expected]:
    """Successor todos a completion (not yet folded in) must be followed by in its batch.

    Their conditions read ``lanes`` as it stands here, before the completion: the same state
    the completing plan saw (with the records ahead of it in the batch), under the lock and
    again in ``loopx verify``.
    """
    if record["payload"]["event"] != "completed":
        return []
    todo = lanes["todos"][record["todo_id"]]
    profile = lanes["profiles"].get(record["lane_role"], {})
    wanted = successor_todos(profile, record["todo_id"], todo, record["agent_id"],
                             record["payload"].get("result", {}), lanes)
    return [Expected(f"successor todo {w['todo_id']}", lambda r, w=w: _check_successor(r, w))
            for w in wanted]


def _check_successor(record: dict[str, Any], want: dict[str, Any]) -> None:
    from loopx.work.records import (
        TodoItemV0,  # pydantic loads only when a completion is checked
    )

    normal = TodoItemV0.model_validate(want).model_dump(mode="json")
    if (record["schema_version"] != "todo_item_v0" or record["payload"] != normal
            or record["todo_id"] is not None):
        raise Refused(f"a completion must be followed by its successor todo {want['todo_id']!r} "
                      "exactly as the role's rule makes it")
