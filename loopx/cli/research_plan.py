"""The research plan's commands: research-plan record and show (not the analysis plan, which is
part of the contract: `loopx contract show`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopx.cli.app import (
    cli,
    emit,
    json_arg,
    run_tool,
    with_agent,
    with_json,
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem


@cli.group("research-plan")
def research_plan() -> None:
    """The research plan: ordered steps naming hypotheses and experiments, each with its status
    from the log (not the analysis plan, which the contract holds)."""


def _plan_file(source: Path) -> dict[str, Any]:
    """A plan payload from a JSON file (``-`` for stdin) or, by its suffix, a TOML file."""
    if source.suffix.lower() == ".toml":
        import tomllib

        try:
            text = source.read_text()
        except OSError as exc:
            raise UsageProblem(f"cannot read {source}: {exc.strerror}") from None
        try:
            value: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageProblem(f"FILE is not valid TOML: {exc}") from None
    else:
        value = json_arg(None, source, "FILE")
    if not isinstance(value, dict):
        raise UsageProblem("FILE must hold an object: a research_plan_v0 payload with steps")
    return value


@research_plan.command("record")
@click.argument("source", metavar="FILE|-", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--reason", metavar="TEXT",
              help="Why this revision replans (required once a plan exists).")
@with_agent
def research_plan_record(ctx: click.Context, source: Path, reason: str | None, agent_id: str,
                         token_file: Path | None, as_json: bool) -> None:
    """Record the research plan from a JSON or TOML file (curator or owner token): version 1,
    or the next version, which supersedes the one in force."""
    from loopx.tools.research import ResearchPlanRecord

    out = run_tool(ctx, "research_plan.record", ResearchPlanRecord(_plan_file(source), reason),
                   credentials(agent_id, token_file))
    lines = [f"research plan {out['plan_id']} version {out['version']} recorded at seq "
             f"{out['seq']} ({len(out['steps'])} step(s))"]
    lines += _step_lines(out["steps"])
    emit(as_json, out, "\n".join(lines))


@research_plan.command("show")
@click.option("--version", "version", type=click.IntRange(min=1), metavar="N",
              help="An earlier version (default: the one in force).")
@with_json
def research_plan_show(ctx: click.Context, version: int | None, as_json: bool) -> None:
    """Show the research plan in force (or an earlier version): each step with its status
    derived from the log, and every version's reason."""
    from loopx.tools.research import ResearchPlanShow

    out = run_tool(ctx, "research_plan.show", ResearchPlanShow(version))
    plan = out["plan"]
    counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in out["counts"].items() if n)
    lines = [f"research plan {plan['plan_id']} version {plan['version']} (in force: "
             f"{out['in_force']}), by {plan['agent_id']} at seq {plan['seq']}: {counts}"]
    if plan["summary"]:
        lines.append(f"summary: {plan['summary']}")
    lines += _step_lines(out["steps"])
    lines += [f"  v{v['version']} (seq {v['seq']}, {v['agent_id']}): {v['reason']}"
              for v in out["versions"][1:]]
    emit(as_json, out, "\n".join(lines))


def _step_lines(steps: list[dict[str, Any]]) -> list[str]:
    lines = []
    for i, step in enumerate(steps, 1):
        lines.append(f"{i}. [{step['status'].replace('_', ' ')}] {step['step_id']}: "
                     f"{step['title']}")
        if step["rationale"]:
            lines.append(f"     why: {step['rationale']}")
        named = [f"{h['hypothesis_id']} ({h['state'].replace('_', ' ')})"
                 for h in step["hypotheses"]]
        named += [f"todo {t['todo_id']} ({t['status'].replace('_', ' ')})" for t in step["todos"]]
        named += [f"experiment: {e}" for e in step["experiments"]]
        lines += [f"     - {n}" for n in named]
    return lines
