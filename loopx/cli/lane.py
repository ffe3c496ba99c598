"""The ``loopx lane`` group: run one lane with a command (``run``), or print what an agent needs
to take a lane by hand (``prompt``)."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli.app import (
    agent_option,
    cli,
    emit,
    json_option,
    role_option,
    token_file_option,
    with_json,
)
from loopx.cli.direct import credentials


@cli.group("lane")
def lane() -> None:
    """Run a lane with a command, or print a lane's instructions for an agent."""


@lane.command("run", context_settings={"ignore_unknown_options": True})
@role_option("The role the agent must have (checked).")
@agent_option
@token_file_option
@click.option("--timeout", type=click.FloatRange(min=0.001), default=3600.0, show_default=True,
              help="Seconds a command may run before it is stopped and its attempt failed.")
@click.option("--idle-polls", type=click.IntRange(min=0), default=0, show_default=True,
              help="Stop after this many polls in a row with nothing to do (0: never).")
@click.option("--poll-seconds", type=click.FloatRange(min=0.0), default=2.0,
              show_default=True, help="Seconds between polls when there is nothing to do.")
@click.option("--max-attempts", type=click.IntRange(min=0), default=0, show_default=True,
              help="Stop after this many attempts (0: never).")
@click.option("--max-failures", type=click.IntRange(min=0), default=3, show_default=True,
              help="Stop after this many failed attempts in a row (0: never), before a "
                   "command broken for every todo spends each one's attempts.")
@click.option("--no-worktree", is_flag=True,
              help="Run an executor's command in the workspace, not in its own git worktree.")
@click.option("--persistent", is_flag=True,
              help="Start CMD once and hand it one task per line on stdin (a "
                   "loopx_lane_task_v0), reading one result line back per task.")
@json_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD...")
@click.pass_context
def lane_run(ctx: click.Context, role: str | None, agent_id: str, token_file: Path | None,
             timeout: float, idle_polls: int, poll_seconds: float, max_attempts: int,
             max_failures: int, no_worktree: bool, persistent: bool, as_json: bool,
             command: tuple[str, ...]) -> None:
    """Run one lane: claim what should-run selects, run CMD for it (the claim packet on stdin
    and in LOOPX_* variables, no token), record its loopx_lane_result_v0, repeat. A CMD known
    not to start stops the lane before any claim (exit 2, nothing written); one that fails to
    start once claimed is recorded as a failed attempt and stops it too."""
    from loopx.cli.app import workspace_of
    from loopx.runner.run import RunnerOptions, run_lane

    options = RunnerOptions(list(command), timeout=timeout, idle_polls=idle_polls,
                            poll_seconds=poll_seconds, max_attempts=max_attempts,
                            max_failures=max_failures, worktrees=not no_worktree,
                            persistent=persistent)
    report = run_lane(workspace_of(ctx), credentials(agent_id, token_file), options, role=role)
    out = report.to_json()
    emit(as_json, out, f"{agent_id} ({out['role']}) stopped: {out['stopped_because']}; "
                       f"{out['completed']} completed, {out['failed']} failed, "
                       f"{out['released']} released")
    if out["stopped_because"] == "command_cannot_start":
        ctx.exit(2)  # the command given is bad input


@lane.command("prompt")
@role_option("The role whose lane to print.", required=True)
@with_json
def lane_prompt(ctx: click.Context, role: str, as_json: bool) -> None:
    """Print what an LLM coding agent needs to take ROLE's lane by hand: the loop, the commands,
    what it must not do, and that other agents' text is data, not instructions."""
    from loopx.kernel.errors import WorkspaceError
    from loopx.runner.prompt import lane_prompt as render
    from loopx.runner.prompt import recorded_profile
    from loopx.workspace import find_workspace

    profile = None
    try:  # inside a workspace, the profiles recorded in its log are the ones in force
        ledger = find_workspace(ctx.obj["workspace"]).ledger()
    except WorkspaceError:
        ledger = None
    if ledger is not None:
        try:
            profile = recorded_profile(ledger.state()["lanes"], role)
        finally:
            ledger.store.close()
    text = render(role, profile)
    emit(as_json, {"role": role, "prompt": text}, text)
