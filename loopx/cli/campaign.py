"""Campaign commands: usage against the contract's budget, and the campaign's status, stop
policy and transitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopx.cli.app import (
    cli,
    emit,
    parse_under,
    run_tool,
    with_agent,
    with_json,
    with_token,
)
from loopx.cli.direct import credentials

# -- usage -----------------------------------------------------------------------------------

@cli.group()
def usage() -> None:
    """Resource usage against the contract's budget."""


@usage.command("add")
@click.option("--gpu-hours", type=float, default=0.0, help="GPU hours used.")
@click.option("--cpu-hours", type=float, default=0.0, help="CPU hours used.")
@click.option("--storage-gb", type=float, default=0.0, help="Storage added, in GB.")
@click.option("--download-gb", type=float, default=0.0, help="Data downloaded, in GB.")
@click.option("--experiments", type=int, default=0, help="Experiments run.")
@click.option("--proposal-id", metavar="ID", help="The proposal the usage belongs to.")
@click.option("--note", metavar="TEXT", help="A short note.")
@click.option("--under", metavar="TODO_ID:EPOCH", help="The held todo the usage belongs to.")
@with_agent
def usage_add(ctx: click.Context, gpu_hours: float, cpu_hours: float, storage_gb: float,
              download_gb: float, experiments: int, proposal_id: str | None, note: str | None,
              under: str | None, agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Record this agent's resource use as increments (negative ones are refused)."""
    from loopx.tools.governance import UsageAdd

    todo_id, epoch = parse_under(under)
    out = run_tool(ctx, "usage.add",
                   UsageAdd(gpu_hours, cpu_hours, storage_gb, download_gb, experiments,
                            proposal_id, note, todo_id, epoch),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"usage recorded at seq {out['seq']}\n" + _budget_text(out["budget"]))


def _budget_text(budget: dict[str, Any]) -> str:
    return "\n".join(
        f"{r:<12} used {row['used']:g}" + (f" of {row['limit']:g}" if row["limit"] else
                                           " (no limit)")
        + (" EXHAUSTED" if row["exhausted"] else "") for r, row in budget.items())


@usage.command("show")
@with_json
def usage_show(ctx: click.Context, as_json: bool) -> None:
    """Show usage against the budget, in total and per agent."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "usage.show", NoParams())
    lines = [_budget_text(out["budget"])]
    for agent_id, row in out["agents"].items():
        used = ", ".join(f"{k} {v:g}" for k, v in row.items() if v)
        lines.append(f"  {agent_id}: {used}")
    emit(as_json, out, "\n".join(lines))


# -- campaign --------------------------------------------------------------------------------

@cli.group()
def campaign() -> None:
    """The campaign state machine and its stop policy."""


def baseline_words(metric: dict[str, Any]) -> str:
    """The baseline as a reader should take it: measured, or a number that is an assumption."""
    if metric.get("baseline_hypothesis"):
        return f"from the measured baseline {metric['baseline_hypothesis']}"
    return f"from {metric['baseline']:g} (an assumed baseline, not measured)"


def _control_words(control: dict[str, Any] | None) -> str:
    return ("no campaign-level control" if not control
            else f"campaign control {control['rule']} at {control['level']:g}")


@campaign.command("status")
@with_json
def campaign_status(ctx: click.Context, as_json: bool) -> None:
    """Show the campaign: state, contract, iterations, budget and what awaits approval."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "campaign.status", NoParams())
    c = out["contract"]
    it = out["iterations"]
    why = out["stop_reasons"] or out["pause_reasons"] or [r for r in [out["completion"]] if r]
    lines = [f"campaign {out['state']} since seq {out['since_seq']}"
             + (f" ({', '.join(why)})" if why else ""),
             (f"contract {c['contract_id']} v{c['version']}, {c['mode']} mode, {c['metric']} "
              f"{c['direction']} {baseline_words(c)}"
              + (f", target {c['target']:g}" if c["target"] is not None else "")
              + f", plan v{c['plan_version']}, {_control_words(c['campaign_control'])}")
             if c else "no contract yet",
             (f"iterations {it['count']}, best {it['best'] if it['best'] is not None else '-'}"
              f", without improvement {it['stagnant']}, invalid in a row {it['invalid']}"
              f", failed in a row {it['failed']}"),
             _budget_text(out["budget"])]
    if out["would_complete"]:
        lines.append("the objective's target is reached: the campaign would complete now")
    if out["would_stop"]:
        lines.append(f"the stop policy would stop it now: {', '.join(out['would_stop'])}")
    if out["would_pause"]:
        lines.append(f"a pause rule would pause it now: {', '.join(out['would_pause'])}")
    if out["pending_approvals"]:
        lines.append(f"{out['pending_approvals']} awaiting approval (`loopx approvals`)")
    emit(as_json, out, "\n".join(lines))


@campaign.command("evaluate")
@click.option("--dry-run", is_flag=True, help="Only report the stop reasons; write nothing.")
@click.option("--agent-id", envvar="LOOPX_AGENT_ID", metavar="ID",
              help="Who stops the campaign if a reason applies (owner or evaluator_promoter).")
@with_token
def campaign_evaluate(ctx: click.Context, dry_run: bool, agent_id: str | None,
                      token_file: Path | None, as_json: bool) -> None:
    """Evaluate the campaign's policy now, and complete, stop or pause the campaign if it owes
    that move."""
    from loopx.tools.governance import Evaluate

    creds = credentials(agent_id, token_file) if agent_id else None
    out = run_tool(ctx, "campaign.evaluate", Evaluate(dry_run), creds)
    if out["stopped"]:
        text = f"stopped at seq {out['seq']}: {', '.join(out['reasons'])}"
    elif out["transition"] == "paused":
        text = f"paused at seq {out['seq']}: {', '.join(out['pause_reasons'])}"
    elif out["transition"] == "completed":
        text = f"completed at seq {out['seq']}: objective_target_reached"
    elif out["finished"]:
        text = f"campaign already {out['state']}; nothing to evaluate"
    elif out["due"] == "completed":
        text = f"campaign {out['state']}; the objective's target is reached: it would complete"
    elif out["reasons"]:
        text = f"campaign {out['state']}; stop reasons apply: {', '.join(out['reasons'])}"
    elif out["pause_reasons"]:
        text = f"campaign {out['state']}; pause rules fire: {', '.join(out['pause_reasons'])}"
    else:
        text = f"campaign {out['state']}; no stop reason applies"
    emit(as_json, out, text)


@campaign.command("transition")
@click.argument("to_state", metavar="STATE")
@click.option("--reason", required=True, metavar="TEXT", help="Why the campaign moves.")
@with_agent
def campaign_transition(ctx: click.Context, to_state: str, reason: str, agent_id: str,
                        token_file: Path | None, as_json: bool) -> None:
    """Move the campaign: planned, ready, running, paused, completed, stopped or failed."""
    from loopx.tools.governance import Transition

    out = run_tool(ctx, "campaign.transition", Transition(to_state, reason),
                   credentials(agent_id, token_file))
    why = out["stop_reasons"] or out.get("pause_reasons") or [
        r for r in [out.get("completion")] if r]
    emit(as_json, out, f"campaign {out['from_state']} -> {out['to_state']} at seq {out['seq']}"
                       + (f" ({', '.join(why)})" if why else ""))
