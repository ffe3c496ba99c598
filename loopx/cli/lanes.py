"""Lane commands: agent, todo, quota should-run, status and lanes (role profiles)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopx.cli.app import (
    Command,
    cli,
    emit,
    json_arg,
    json_file_option,
    json_object,
    parse_under,
    role_option,
    run_tool,
    token_output,
    with_agent,
    with_json,
    with_token,
    workspace_of,
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem

# -- agents ----------------------------------------------------------------------------------

@cli.group()
def agent() -> None:
    """Agents and their capability grants (register and revoke need the owner token)."""


@agent.command("register")
@click.option("--agent-id", required=True, metavar="ID", help="The new agent's id.")
@role_option("The role it is granted.", required=True)
@click.option("--quota", type=click.IntRange(min=0), metavar="N",
              help="Claims this agent may make (overrides the role's claim_quota; 0 = no limit).")
@click.option("--note", metavar="TEXT", help="A short note kept with the grant.")
@click.option("--out-token-file", type=click.Path(dir_okay=False, path_type=Path), metavar="F",
              help="Write the agent's token to this new file (mode 600) instead of printing it.")
@with_token
def agent_register(ctx: click.Context, agent_id: str, role: str, quota: int | None,
                   note: str | None, out_token_file: Path | None, token_file: Path | None,
                   as_json: bool) -> None:
    """Grant an agent a role and print its token once (needs the owner token)."""
    from loopx.tools.lanes import AgentRegister

    with token_output(out_token_file) as keep:
        out = run_tool(ctx, "agent.register", AgentRegister(agent_id, role, quota, note),
                       credentials("owner", token_file))
        keep(out["token"])
    if out_token_file is not None:
        out = {**out, "token": None, "token_file": str(out_token_file)}
    else:
        out = {**out, "token_file": None}
    where = (f"token written to {out_token_file}" if out_token_file else
             f"token (shown once, keep it secret): {out['token']}")
    emit(as_json, out, f"registered {agent_id} as {role} (grant {out['grant_id']})\n{where}")


@agent.command("list")
@with_json
def agent_list(ctx: click.Context, as_json: bool) -> None:
    """List agents: role, grant, claims made, leases held now."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "agent.list", NoParams())
    lines = [f"{a['agent_id']:<24} {a['role']:<20} "
             f"{'revoked' if a['revoked'] else 'active':<8} claims {a['claims']:<5} "
             f"holding {', '.join(a['holding']) or '-'}" for a in out["agents"]]
    emit(as_json, out, "\n".join(lines) or "no agents registered")


@agent.command("revoke")
@click.option("--agent-id", required=True, metavar="ID", help="The agent to revoke.")
@click.option("--reason", default="", metavar="TEXT", help="Why (kept in the log).")
@with_token
def agent_revoke(ctx: click.Context, agent_id: str, reason: str, token_file: Path | None,
                 as_json: bool) -> None:
    """Revoke an agent's grant (needs the owner token); its leases lapse at once."""
    from loopx.tools.lanes import AgentRevoke

    out = run_tool(ctx, "agent.revoke", AgentRevoke(agent_id, reason),
                   credentials("owner", token_file))
    emit(as_json, out, f"revoked {agent_id} (grant {out['grant_id']})")


# -- todos -----------------------------------------------------------------------------------

@cli.group()
def todo() -> None:
    """Todos and their lifecycle: add, list, show, claim, heartbeat, release, complete, fail;
    and changes: reprioritise, block, unblock, cancel, reassign."""


@todo.command("add")
@click.option("--todo-id", metavar="ID", help="The new todo's id.")
@click.option("--title", metavar="TEXT", help="One line saying what to do.")
@role_option("The role that may take it.")
@click.option("--action", "action_kind", metavar="KIND", help="Its action kind (one of the role's actions).")
@click.option("--text", default="", metavar="TEXT", help="Longer instructions.")
@click.option("--assign", "assigned_to", metavar="AGENT", help="Only this agent may take it.")
@click.option("--blocked-by", multiple=True, metavar="ID", help="Not claimable until ID completes (repeatable).")
@click.option("--unblocks", metavar="ID", help="Todo ID waits for this one to complete.")
@click.option("--hypothesis", "hypothesis_id", metavar="ID", help="The hypothesis it works on.")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher is taken first.")
@click.option("--ttl", type=float, metavar="SECONDS", help="Lease TTL (default: the role's).")
@click.option("--max-attempts", type=click.IntRange(min=1), metavar="N",
              help="Failures and expiries before it fails for good (default: the role's).")
@click.option("--cost", "cost", multiple=True, metavar="RESOURCE=N",
              help="Estimated cost, e.g. cpu_hours=0.5 (repeatable); not handed out over budget.")
@json_file_option("--file", "-f", "source",
                  help_text="Add todo payloads from a JSON object or array instead (- for stdin).")
@click.option("--under", metavar="TODO_ID:EPOCH", help="The held todo this addition works under.")
@with_agent
def todo_add(ctx: click.Context, todo_id: str | None, title: str | None, role: str | None,
             action_kind: str | None, text: str, assigned_to: str | None,
             blocked_by: tuple[str, ...], unblocks: str | None, hypothesis_id: str | None,
             priority: int, ttl: float | None, max_attempts: int | None,
             cost: tuple[str, ...], source: Path | None,
             under: str | None, agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Add a todo for a role (or a batch of them from --file)."""
    from loopx.tools.lanes import TodoAdd

    if source is not None:
        loaded = json_arg(None, source, "--file")
        payloads = loaded if isinstance(loaded, list) else [loaded]
    else:
        missing = [o for o, v in (("--todo-id", todo_id), ("--title", title), ("--role", role),
                                  ("--action", action_kind)) if v is None]
        if missing:
            raise UsageProblem(f"missing {', '.join(missing)} (or give --file)")
        from loopx.cli.governance import costs

        payload: dict[str, Any] = {"todo_id": todo_id, "title": title, "role": role,
                                   "action_kind": action_kind, "text": text,
                                   "blocked_by": list(blocked_by), "priority": priority,
                                   "estimated_cost": costs(cost, "--cost")}
        for key, value in (("assigned_to", assigned_to), ("unblocks_todo_id", unblocks),
                           ("hypothesis_id", hypothesis_id), ("lease_ttl_seconds", ttl),
                           ("max_attempts", max_attempts)):
            if value is not None:
                payload[key] = value
        payloads = [payload]
    under_id, under_epoch = parse_under(under)
    out = run_tool(ctx, "todo.add", TodoAdd(payloads, under_id, under_epoch),
                   credentials(agent_id, token_file))
    emit(as_json, out, "added " + ", ".join(a["todo_id"] for a in out["added"]))


@todo.command("list")
@role_option("Only this role's todos.")
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only todos in this state (repeatable): open, blocked, claimed, expired, "
                   "completed, failed, cancelled.")
@click.option("--agent", "agent_id", metavar="ID", help="Only todos this agent holds or is assigned.")
@with_json
def todo_list(ctx: click.Context, role: str | None, states: tuple[str, ...], agent_id: str | None,
              as_json: bool) -> None:
    """List todos with their state, role and holder."""
    from loopx.tools.lanes import TodoList

    out = run_tool(ctx, "todo.list", TodoList(role, list(states), agent_id))
    lines = [f"{t['todo_id']:<32} {t['state']:<9} {t['role']:<20} "
             f"{(t['holder'] or t['assigned_to'] or '-'):<16} {t['title'][:60]}"
             for t in out["todos"]]
    emit(as_json, out, "\n".join(lines) or "no todos")


@todo.command("show")
@click.argument("todo_id")
@with_json
def todo_show(ctx: click.Context, todo_id: str, as_json: bool) -> None:
    """Show one todo: state, holder, epoch, lease, blockers, attempts."""
    from loopx.tools.lanes import TodoRef

    out = run_tool(ctx, "todo.show", TodoRef(todo_id))
    emit(as_json, out, "\n".join(f"{k}: {v}" for k, v in out.items()))


def _claim_text(out: dict[str, Any]) -> str:
    if not out["run"]:
        extra = f" ({', '.join(out.get('blocked_todos', []))})" if out.get("blocked_todos") else ""
        return f"wait: {out['reason']}{extra}"
    todo_info = out["todo"]
    verb = "claimed" if out["claimed"] else ("holding" if out["reason"] ==
                                             "already_holding_lease" else "would take")
    lease = out["claim"]["lease_expires_at"]
    return (f"run: {out['reason']}; {verb} {todo_info['todo_id']} epoch {todo_info['epoch']} "
            f"({todo_info['action_kind']})" + (f", lease until {lease}" if lease else ""))


@todo.command("claim")
@click.argument("todo_id")
@with_agent
def todo_claim(ctx: click.Context, todo_id: str, agent_id: str, token_file: Path | None,
               as_json: bool) -> None:
    """Claim a named todo (executors: only successor todos; else use should-run --claim)."""
    from loopx.tools.lanes import TodoRef

    out = run_tool(ctx, "todo.claim", TodoRef(todo_id), credentials(agent_id, token_file))
    emit(as_json, out, _claim_text(out))


def held_todo(fn: Command) -> Command:
    """TODO_ID and ``--epoch``: the todo a lease step acts on, the epoch of the caller's claim."""
    fn = click.option("--epoch", type=click.IntRange(min=1), required=True,
                      help="The epoch of your claim.")(fn)
    return click.argument("todo_id")(fn)


@todo.command("heartbeat")
@held_todo
@click.option("--ttl", type=float, metavar="SECONDS", help="Extend by this much (default: the claim's TTL).")
@with_agent
def todo_heartbeat(ctx: click.Context, todo_id: str, epoch: int, ttl: float | None,
                   agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Extend the lease on a todo you hold."""
    from loopx.tools.lanes import Heartbeat

    out = run_tool(ctx, "todo.heartbeat", Heartbeat(todo_id, epoch, ttl),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"lease on {todo_id} epoch {epoch} until {out['lease_expires_at']}")


@todo.command("release")
@held_todo
@click.option("--reason", metavar="TEXT", help="Why it is given back.")
@with_agent
def todo_release(ctx: click.Context, todo_id: str, epoch: int, reason: str | None,
                 agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Give a todo you hold back unfinished; it is open again at once."""
    from loopx.tools.lanes import Release

    out = run_tool(ctx, "todo.release", Release(todo_id, epoch, reason),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"released {todo_id} epoch {epoch}")


@todo.command("complete")
@held_todo
@click.option("--result", "result_text", metavar="JSON", help="The recorded result, a JSON object.")
@json_file_option("--result-file", help_text="Read the result from a file (- for stdin).")
@with_agent
def todo_complete(ctx: click.Context, todo_id: str, epoch: int, result_text: str | None,
                  result_file: Path | None, agent_id: str, token_file: Path | None,
                  as_json: bool) -> None:
    """Complete a todo you hold; your role's successor rules fire in the same step."""
    from loopx.tools.lanes import Complete

    result = json_object(result_text, result_file, "--result")
    out = run_tool(ctx, "todo.complete", Complete(todo_id, epoch, result),
                   credentials(agent_id, token_file))
    added = f"; successors: {', '.join(out['successors'])}" if out["successors"] else ""
    done = "already completed" if out["already_completed"] else "completed"
    emit(as_json, out, f"{done} {todo_id} epoch {epoch}{added}")


@todo.command("fail")
@held_todo
@click.option("--reason", required=True, metavar="TEXT", help="What went wrong.")
@click.option("--result", "result_text", metavar="JSON", help="Whatever was measured, a JSON object.")
@with_agent
def todo_fail(ctx: click.Context, todo_id: str, epoch: int, reason: str, result_text: str | None,
              agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Record a failed attempt on a todo you hold; it reopens until its attempts are spent."""
    from loopx.tools.lanes import Fail

    result = json_object(result_text, None, "--result")
    out = run_tool(ctx, "todo.fail", Fail(todo_id, epoch, reason, result),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"failed {todo_id} epoch {epoch}; now {out['state']} "
                       f"({out['failures']} failure(s))")


# -- quota, status, lanes --------------------------------------------------------------------

@cli.group()
def quota() -> None:
    """Per-agent selection: what should this agent do next."""


@quota.command("should-run")
@click.option("--agent-id", envvar="LOOPX_AGENT_ID", required=True, metavar="ID",
              help="The asking agent (env LOOPX_AGENT_ID).")
@click.option("--claim", is_flag=True, help="Also claim the selected todo, in the same locked step "
                                            "(needs the agent's token).")
@with_token
def should_run(ctx: click.Context, agent_id: str, claim: bool, token_file: Path | None,
               as_json: bool) -> None:
    """Whether this agent should run, why, and which todo (exit 0 either way)."""
    from loopx.tools.quota import ShouldRun

    creds = credentials(agent_id, token_file) if claim else None
    out = run_tool(ctx, "quota.should_run", ShouldRun(agent_id, claim), creds)
    emit(as_json, out, _claim_text(out))


@cli.command()
@with_json
def status(ctx: click.Context, as_json: bool) -> None:
    """One screen of the campaign: agents, leases held, todos by state."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "status", NoParams())
    counts = "  ".join(f"{k} {v}" for k, v in out["todos"].items())
    campaign = out["campaign"]
    version = campaign["contract_version"]
    lines = [f"goal {out['goal_id']}  head seq {out['head']['seq']}  at {out['now']}",
             f"campaign {campaign['state']}"
             + (f" ({', '.join(campaign['stop_reasons'])})" if campaign["stop_reasons"] else "")
             + (f", contract v{version}" if version else ", no contract yet")
             + (f", experiments start from {campaign['base_commit']}"
                if campaign["base_commit"] else ", base not pinned" if version else ""),
             f"todos: {counts}", "agents:"]
    lines += [f"  {a['agent_id']:<24} {a['role']:<20} "
              f"{'revoked' if a['revoked'] else 'active':<8} claims {a['claims']:<5} "
              f"holding {', '.join(a['holding']) or '-'}" for a in out["agents"]] or ["  none"]
    if out["leases"]:
        lines.append("leases:")
        lines += [f"  {le['todo_id']:<32} {le['holder']:<24} epoch {le['epoch']:<3} "
                  f"{le['state']:<8} until {le['lease_expires_at']}" for le in out["leases"]]
    if out["profiles_not_applied"]:
        lines.append("profiles edited but not applied (run `loopx lanes apply`): "
                     + ", ".join(out["profiles_not_applied"]))
    emit(as_json, out, "\n".join(lines))


@cli.group()
def lanes() -> None:
    """Role profiles: show those in force, apply edits made in .loopx/lanes/, pull the log's."""


@lanes.command("show")
@with_json
def lanes_show(ctx: click.Context, as_json: bool) -> None:
    """Show the role profiles in force (as recorded in the log)."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "lanes.show", NoParams())
    lines = []
    for p in out["profiles"]:
        scope = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(p["effective_scope"].items()))
        lines.append(f"{p['role']}: actions {', '.join(p['actions']) or '-'}; "
                     f"ttl {p['lease_ttl_seconds']:g}s; writes {scope}")
    emit(as_json, out, "\n".join(lines))


@lanes.command("apply")
@click.option("--force", is_flag=True,
              help="Record files edited from an older version than the profile in force "
                   "(undoing what was recorded since) instead of refusing them.")
@with_token
def lanes_apply(ctx: click.Context, force: bool, token_file: Path | None,
                as_json: bool) -> None:
    """Validate .loopx/lanes/*.toml and record the changed profiles (needs the owner token)."""
    from loopx.tools.lanes import Apply

    out = run_tool(ctx, "lanes.apply", Apply(force), credentials("owner", token_file))
    recorded = ", ".join(r["role"] for r in out["recorded"]) or "nothing changed"
    emit(as_json, out, f"recorded: {recorded}")




@lanes.command("pull")
@click.option("--force", is_flag=True,
              help="Also rewrite files holding edits not applied, dropping those edits.")
@with_json
def lanes_pull(ctx: click.Context, force: bool, as_json: bool) -> None:
    """Write the profiles in force into .loopx/lanes/ (files edited here are left alone)."""
    from loopx.workspace.lane_files import pull_profiles

    out = pull_profiles(workspace_of(ctx), force=force)
    lines = [f"written: {', '.join(out['written']) or 'none'}"]
    if out["pending"]:
        lines.append("edited here, not applied (left as they are; `loopx lanes apply` records "
                     f"them): {', '.join(out['pending'])}")
    lines += [f"not written: {u['role']}: {u['problem']}" for u in out["unwritable"]]
    emit(as_json, out, "\n".join(lines))
