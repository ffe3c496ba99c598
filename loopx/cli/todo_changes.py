"""Todo change commands: ``loopx todo reprioritise``, ``block``, ``unblock``, ``cancel`` and
``reassign``, added to the ``todo`` group (registered in ``SUBCOMMAND_MODULES`` of
:mod:`loopx.cli.app`). Each calls its ``todo.*`` tool in :mod:`loopx.tools.todo_changes`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopx.cli.app import (
    agent_option,
    credentials,
    emit,
    json_option,
    run_tool,
    token_file_option,
)
from loopx.cli.lanes import todo
from loopx.kernel.errors import UsageProblem

reason_option = click.option("--reason", metavar="TEXT",
                             help="Why the change is made (kept in the log).")
fence_option = click.option(
    "--fence", "fence_epoch", type=click.IntRange(min=1), metavar="EPOCH",
    help="The epoch of the live lease this change ends: its holder is fenced out (needed to "
         "take a todo from its holder).")


def _text(out: dict[str, Any], what: str) -> str:
    """One line for people: what changed, or that nothing needed to."""
    if not out["changed"]:
        return f"{out['todo_id']}: unchanged, it already {what}"
    fenced = out["fenced"]
    tail = (f"; lease of {fenced['agent_id']} at epoch {fenced['epoch']} ended" if fenced
            else "")
    return f"{out['todo_id']}: {what} (seq {out['seq']}){tail}; now {out['todo']['state']}"


@todo.command("reprioritise")
@click.argument("todo_id")
@click.option("--priority", type=int, required=True,
              help="The new priority; higher is taken first.")
@reason_option
@agent_option
@token_file_option
@json_option
@click.pass_context
def todo_reprioritise(ctx: click.Context, todo_id: str, priority: int, reason: str | None,
                      agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Give a todo a new priority (the role that added it, or the owner)."""
    from loopx.tools.todo_changes import Reprioritise

    out = run_tool(ctx, "todo.reprioritise", Reprioritise(todo_id, priority, reason),
                   credentials(agent_id, token_file))
    emit(as_json, out, _text(out, f"has priority {priority}"))


@todo.command("block")
@click.argument("todo_id")
@click.option("--by", "blocker", required=True, metavar="ID",
              help="The todo it must wait for (until that one completes).")
@reason_option
@agent_option
@token_file_option
@json_option
@click.pass_context
def todo_block(ctx: click.Context, todo_id: str, blocker: str, reason: str | None,
               agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Make a todo wait for another to complete (refused if it would make a cycle)."""
    from loopx.tools.todo_changes import Blocker

    out = run_tool(ctx, "todo.block", Blocker(todo_id, blocker, reason),
                   credentials(agent_id, token_file))
    emit(as_json, out, _text(out, f"waits for {blocker}"))


@todo.command("unblock")
@click.argument("todo_id")
@click.option("--by", "blocker", required=True, metavar="ID",
              help="The blocker to remove from its blocked_by.")
@reason_option
@agent_option
@token_file_option
@json_option
@click.pass_context
def todo_unblock(ctx: click.Context, todo_id: str, blocker: str, reason: str | None,
                 agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Stop a todo waiting for one of its blockers."""
    from loopx.tools.todo_changes import Blocker

    out = run_tool(ctx, "todo.unblock", Blocker(todo_id, blocker, reason),
                   credentials(agent_id, token_file))
    emit(as_json, out, _text(out, f"does not wait for {blocker}"))


@todo.command("cancel")
@click.argument("todo_id")
@click.option("--reason", required=True, metavar="TEXT",
              help="Why it is cancelled (kept in the log and shown on the board).")
@fence_option
@agent_option
@token_file_option
@json_option
@click.pass_context
def todo_cancel(ctx: click.Context, todo_id: str, reason: str, fence_epoch: int | None,
                agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Cancel a todo for good: it is never selected or claimable again."""
    from loopx.tools.todo_changes import Cancel

    out = run_tool(ctx, "todo.cancel", Cancel(todo_id, reason, fence_epoch),
                   credentials(agent_id, token_file))
    emit(as_json, out, _text(out, "is cancelled"))


@todo.command("reassign")
@click.argument("todo_id")
@click.option("--to", "assigned_to", metavar="AGENT",
              help="The live agent of the todo's role who alone may take it.")
@click.option("--unassign", is_flag=True, help="Let any agent of its role take it again.")
@reason_option
@fence_option
@agent_option
@token_file_option
@json_option
@click.pass_context
def todo_reassign(ctx: click.Context, todo_id: str, assigned_to: str | None, unassign: bool,
                  reason: str | None, fence_epoch: int | None, agent_id: str,
                  token_file: Path | None, as_json: bool) -> None:
    """Assign a todo to another agent of its role, or unassign it."""
    from loopx.tools.todo_changes import Reassign

    if (assigned_to is None) == (not unassign):
        raise UsageProblem("give exactly one of --to AGENT and --unassign")
    out = run_tool(ctx, "todo.reassign", Reassign(todo_id, assigned_to, reason, fence_epoch),
                   credentials(agent_id, token_file))
    emit(as_json, out, _text(out, f"is assigned to {assigned_to}" if assigned_to
                             else "is unassigned"))
