"""Todo change commands: ``loopx todo reprioritise``, ``block``, ``unblock``, ``cancel`` and
``reassign``, added to the ``todo`` group (registered in ``SUBCOMMAND_MODULES`` of
:mod:`loopx.cli.app`). Each calls its ``todo.*`` tool in :mod:`loopx.tools.todo_changes`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loopx.cli.app import emit, run_tool, with_agent
from loopx.cli.direct import credentials
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


def _change_command(name: str, *options: Callable[[Any], Any]
                    ) -> Callable[[Callable[..., None]], click.Command]:
    """``loopx todo NAME TODO_ID``: ``options`` (in that order), then the agent's credentials and
    --json; the function gets the click context first."""
    def register(fn: Callable[..., None]) -> click.Command:
        fn = with_agent(fn)
        for option in reversed((click.argument("todo_id"), *options)):
            fn = option(fn)
        return todo.command(name)(fn)

    return register


def _change(ctx: click.Context, name: str, params: Any, agent_id: str, token_file: Path | None,
            as_json: bool, what: str) -> None:
    """Run the tool ``name`` as the agent and print its answer (``what`` says the change)."""
    out = run_tool(ctx, name, params, credentials(agent_id, token_file))
    emit(as_json, out, _text(out, what))


@_change_command("reprioritise",
                 click.option("--priority", type=int, required=True,
                              help="The new priority; higher is taken first."),
                 reason_option)
def todo_reprioritise(ctx: click.Context, todo_id: str, priority: int, reason: str | None,
                      agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Give a todo a new priority (the role that added it, or the owner)."""
    from loopx.tools.todo_changes import Reprioritise

    _change(ctx, "todo.reprioritise", Reprioritise(todo_id, priority, reason), agent_id,
            token_file, as_json, f"has priority {priority}")


@_change_command("block",
                 click.option("--by", "blocker", required=True, metavar="ID",
                              help="The todo it must wait for (until that one completes)."),
                 reason_option)
def todo_block(ctx: click.Context, todo_id: str, blocker: str, reason: str | None,
               agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Make a todo wait for another to complete (refused if it would make a cycle)."""
    from loopx.tools.todo_changes import Blocker

    _change(ctx, "todo.block", Blocker(todo_id, blocker, reason), agent_id, token_file, as_json,
            f"waits for {blocker}")


@_change_command("unblock",
                 click.option("--by", "blocker", required=True, metavar="ID",
                              help="The blocker to remove from its blocked_by."),
                 reason_option)
def todo_unblock(ctx: click.Context, todo_id: str, blocker: str, reason: str | None,
                 agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Stop a todo waiting for one of its blockers."""
    from loopx.tools.todo_changes import Blocker

    _change(ctx, "todo.unblock", Blocker(todo_id, blocker, reason), agent_id, token_file,
            as_json, f"does not wait for {blocker}")


@_change_command("cancel",
                 click.option("--reason", required=True, metavar="TEXT",
                              help="Why it is cancelled (kept in the log and shown on the "
                                   "board)."),
                 fence_option)
def todo_cancel(ctx: click.Context, todo_id: str, reason: str, fence_epoch: int | None,
                agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Cancel a todo for good: it is never selected or claimable again."""
    from loopx.tools.todo_changes import Cancel

    _change(ctx, "todo.cancel", Cancel(todo_id, reason, fence_epoch), agent_id, token_file,
            as_json, "is cancelled")


@_change_command("reassign",
                 click.option("--to", "assigned_to", metavar="AGENT",
                              help="The live agent of the todo's role who alone may take it."),
                 click.option("--unassign", is_flag=True,
                              help="Let any agent of its role take it again."),
                 reason_option, fence_option)
def todo_reassign(ctx: click.Context, todo_id: str, assigned_to: str | None, unassign: bool,
                  reason: str | None, fence_epoch: int | None, agent_id: str,
                  token_file: Path | None, as_json: bool) -> None:
    """Assign a todo to another agent of its role, or unassign it."""
    from loopx.tools.todo_changes import Reassign

    if (assigned_to is None) == (not unassign):
        raise UsageProblem("give exactly one of --to AGENT and --unassign")
    _change(ctx, "todo.reassign", Reassign(todo_id, assigned_to, reason, fence_epoch), agent_id,
            token_file, as_json, f"is assigned to {assigned_to}" if assigned_to
            else "is unassigned")
