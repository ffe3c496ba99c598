"""Lane tools: agents, todos, claims, and role profiles (``status`` is
:mod:`loopx.tools.status`, should-run :mod:`loopx.tools.quota`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopx.tools.registry import NoParams, ToolContext, tool


@dataclass(frozen=True)
class AgentRegister:
    agent_id: str
    role: str
    quota: int | None = None
    note: str | None = None


@tool("agent.register", params=AgentRegister, writes=True)
def agent_register(ctx: ToolContext, p: AgentRegister) -> dict[str, Any]:
    """Grant an agent a role (owner token); the agent's token is returned once."""
    from loopx.work.agents import register_agent

    record, token = register_agent(ctx.ledger, ctx.credentials(), p.agent_id, p.role,
                                   quota=p.quota, note=p.note)
    return {"agent_id": p.agent_id, "role": p.role, "grant_id": record["record_id"],
            "seq": record["seq"], "token": token}


@dataclass(frozen=True)
class AgentRevoke:
    agent_id: str
    reason: str = ""


@tool("agent.revoke", params=AgentRevoke, writes=True)
def agent_revoke(ctx: ToolContext, p: AgentRevoke) -> dict[str, Any]:
    """Revoke an agent's grant (owner token); its leases lapse and its token is refused."""
    from loopx.work.agents import revoke_agent

    record = revoke_agent(ctx.ledger, ctx.credentials(), p.agent_id, p.reason)
    return {"agent_id": p.agent_id, "grant_id": record["payload"]["grant_id"],
            "seq": record["seq"]}


@tool("agent.list", params=NoParams, writes=False)
def agent_list(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """Every registered agent: role, grant, revoked, claims made, leases held now."""
    from loopx.work.agents import agent_rows

    return {"agents": agent_rows(ctx.view(), ctx.ledger.now())}


@dataclass(frozen=True)
class TodoAdd:
    todos: list[dict[str, Any]]
    under_todo_id: str | None = None
    under_epoch: int | None = None


@tool("todo.add", params=TodoAdd, writes=True)
def todo_add(ctx: ToolContext, p: TodoAdd) -> dict[str, Any]:
    """Add todos (todo_item_v0 payloads) as one batch, optionally under a held todo."""
    from loopx.work.todos import add_todos

    under = None
    if p.under_todo_id is not None:
        under = (p.under_todo_id, p.under_epoch if p.under_epoch is not None else -1)
    records = add_todos(ctx.ledger, ctx.credentials(), p.todos, under=under)
    return {"added": [{"todo_id": r["payload"]["todo_id"], "seq": r["seq"]} for r in records]}


@dataclass(frozen=True)
class TodoList:
    role: str | None = None
    states: list[str] = field(default_factory=list)
    agent_id: str | None = None


@tool("todo.list", params=TodoList, writes=False)
def todo_list(ctx: ToolContext, p: TodoList) -> dict[str, Any]:
    """Todos in the order added, filtered by role, state and holder or assignee."""
    from loopx.kernel.errors import UsageProblem
    from loopx.work.todos import STATES, todo_rows

    bad = [s for s in p.states if s not in STATES]
    if bad:
        raise UsageProblem(f"unknown state(s) {', '.join(bad)}; states: {', '.join(STATES)}")
    rows = todo_rows(ctx.view(), ctx.ledger.now(), role=p.role,
                     states=tuple(p.states), agent=p.agent_id)
    return {"todos": rows}


@dataclass(frozen=True)
class TodoRef:
    todo_id: str


@tool("todo.show", params=TodoRef, writes=False)
def todo_show(ctx: ToolContext, p: TodoRef) -> dict[str, Any]:
    """One todo: its state, holder, epoch, lease, blockers and attempts."""
    from loopx.work.todos import todo_row

    return todo_row(ctx.view(), p.todo_id, ctx.ledger.now())


@tool("todo.claim", params=TodoRef, writes=True)
def todo_claim(ctx: ToolContext, p: TodoRef) -> dict[str, Any]:
    """Claim a named todo explicitly, as the role's profile allows (executors: successors)."""
    from loopx.work.claims import claim

    return claim(ctx.ledger, ctx.credentials(), p.todo_id)


@dataclass(frozen=True)
class HeldTodo(TodoRef):
    """A todo the caller holds and the epoch of its claim: what every lease step names."""

    epoch: int


@dataclass(frozen=True)
class Heartbeat(HeldTodo):
    ttl_seconds: float | None = None


@tool("todo.heartbeat", params=Heartbeat, writes=True)
def todo_heartbeat(ctx: ToolContext, p: Heartbeat) -> dict[str, Any]:
    """Extend the lease on a held todo."""
    from loopx.work.claims import heartbeat

    return heartbeat(ctx.ledger, ctx.credentials(), p.todo_id, p.epoch, p.ttl_seconds)


@dataclass(frozen=True)
class Release(HeldTodo):
    reason: str | None = None


@tool("todo.release", params=Release, writes=True)
def todo_release(ctx: ToolContext, p: Release) -> dict[str, Any]:
    """Give a held todo back unfinished; it is open again at once."""
    from loopx.work.claims import release

    return release(ctx.ledger, ctx.credentials(), p.todo_id, p.epoch, p.reason)


@dataclass(frozen=True)
class Complete(HeldTodo):
    result: dict[str, Any] = field(default_factory=dict)


@tool("todo.complete", params=Complete, writes=True)
def todo_complete(ctx: ToolContext, p: Complete) -> dict[str, Any]:
    """Complete a held todo with its result; the role's successor rules fire in the same step."""
    from loopx.work.claims import complete

    return complete(ctx.ledger, ctx.credentials(), p.todo_id, p.epoch, p.result)


@dataclass(frozen=True)
class Fail(HeldTodo):
    reason: str
    result: dict[str, Any] = field(default_factory=dict)


@tool("todo.fail", params=Fail, writes=True)
def todo_fail(ctx: ToolContext, p: Fail) -> dict[str, Any]:
    """Record a failed attempt; the todo reopens until its attempts are spent."""
    from loopx.work.claims import fail

    return fail(ctx.ledger, ctx.credentials(), p.todo_id, p.epoch, p.reason, p.result)


@tool("lanes.show", params=NoParams, writes=False)
def lanes_show(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """The role profiles in force (as recorded in the log)."""
    from loopx.work.scope import role_scope
    from loopx.work.successors import condition_table

    profiles = ctx.view()["profiles"]
    return {"profiles": [{**profile, "effective_scope": {k: list(v) for k, v in
                                                         role_scope(profile["write_scope"]).items()}}
                         for _, profile in sorted(profiles.items())],
            "conditions": {name: c.summary for name, c in sorted(condition_table().items())}}


@dataclass(frozen=True)
class Apply:
    force: bool = False


@tool("lanes.apply", params=Apply, writes=True)
def lanes_apply(ctx: ToolContext, p: Apply) -> dict[str, Any]:
    """Validate the profile files in .loopx/lanes/ and record those that changed (owner token);
    a file edited from an older version than the one in force is refused unless ``force``."""
    from loopx.kernel.errors import StorageError
    from loopx.kernel.store.fs import fault
    from loopx.work.profiles import load_profiles
    from loopx.workspace import record_profiles
    from loopx.workspace.files import LANES_APPLYING, clear_applying, write_applying, write_synced
    from loopx.workspace.lane_files import file_bases, profile_digest

    wdir = ctx.workspace.dir
    profiles = load_profiles(ctx.workspace.lanes_dir)
    synced = file_bases(wdir, ctx.view()["profiles"])
    try:
        # Noted first: killed after the record, the next run finds what these files are
        # based on from the note (lane_files.file_bases) instead of refusing their next edit.
        write_applying(wdir, {role: profile_digest(q) for role, q in profiles.items()})
    except OSError as exc:
        raise StorageError.from_os(exc, "write", path=wdir / LANES_APPLYING,
                                   outcome="nothing was recorded") from None
    done = record_profiles(ctx.ledger, ctx.credentials(),
                           {f"{role}.toml": q for role, q in profiles.items()},
                           based_on=None if p.force else synced)
    fault("lanes-recorded")  # tests: killed here, before the bases are written
    try:
        write_synced(wdir, {**(synced or {}), **done.synced})
        clear_applying(wdir)
    except OSError:
        pass  # recorded all the same; the note stands for the bases until the next run
    return {"recorded": [{"role": r["payload"]["role"], "seq": r["seq"]} for r in done.records],
            "unchanged": sorted(set(profiles) - {r["payload"]["role"] for r in done.records})}
