"""Governance commands: propose / approve / reject / can-execute / action and approvals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopx.cli.app import (
    cli,
    emit,
    json_file_option,
    json_object,
    key_values,
    run_tool,
    with_agent,
    with_json,
    with_token,
)
from loopx.cli.direct import credentials
from loopx.governance.resources import RESOURCES
from loopx.kernel.errors import UsageProblem

NOT_PERMITTED = 9  # `loopx can-execute`: the proposal may not execute (not an error)


def costs(values: tuple[str, ...], option: str) -> dict[str, Any]:
    """``RESOURCE=N`` options into an estimated cost (resources as in the contract's budget)."""
    out = key_values(values, option)
    unknown = sorted(set(out) - set(RESOURCES))
    if unknown:
        raise UsageProblem(f"{option}: unknown resource(s) {', '.join(unknown)}; resources: "
                           f"{', '.join(RESOURCES)}")
    return out


# -- contract --------------------------------------------------------------------------------

def _proposal_text(p: dict[str, Any]) -> str:
    head = (f"{p['proposal_id']}: {p['risk']} {p['tool']} ({p['state']}"
            f"{', needs approval' if p['requires_approval'] else ''})")
    if p["can_execute"]:
        return head + "\nmay execute"
    return head + "\nmay not execute: " + "; ".join(p["reasons"])


@cli.command("propose")
@click.option("--name", required=True, metavar="TEXT", help="What the action is, in a few words.")
@click.option("--tool", required=True, metavar="TOOL",
              help="The tool: loopx.NAME for loopx's own, or an experiment adapter's name.")
@click.option("--risk", type=click.Choice(["read", "write", "compute", "external", "destructive"]),
              help="Risk class (required outside loopx.*; a loopx tool's is its registered one).")
@click.option("--reason", required=True, metavar="TEXT", help="The scientific reason for it.")
@click.option("--args", "arguments", metavar="JSON", help="The tool's arguments as a JSON object.")
@json_file_option("--args-file", help_text="The arguments from a JSON file instead (- for stdin).")
@click.option("--cost", "cost", multiple=True, metavar="RESOURCE=N",
              help="Estimated cost, e.g. gpu_hours=0.5 (repeatable).")
@click.option("--proposal-id", metavar="ID", help="Its id (default: a fresh prop-... id).")
@with_agent
def propose(ctx: click.Context, name: str, tool: str, risk: str | None, reason: str,
            arguments: str | None, args_file: Path | None, cost: tuple[str, ...],
            proposal_id: str | None, agent_id: str, token_file: Path | None,
            as_json: bool) -> None:
    """Propose an action; prints whether it is eligible, needs approval and may execute."""
    from loopx.tools.governance import Propose

    out = run_tool(ctx, "action.propose",
                   Propose(name, tool, reason, risk, json_object(arguments, args_file, "--args"),
                           costs(cost, "--cost"), proposal_id),
                   credentials(agent_id, token_file))
    emit(as_json, out, _proposal_text(out))


def _verdict_command(verdict: str) -> Any:
    approving = verdict == "approve"

    @click.argument("subject_id", metavar="ID")
    @click.option("--note", required=True, metavar="TEXT", help="Why (kept with the verdict).")
    @click.option("--subject", type=click.Choice(["proposal", "decision", "preview"]),
                  help="What ID names, if it is ambiguous.")
    @click.option("--approver", metavar="NAME", help="Who decided, for the record.")
    @click.option("--agent-id", default="owner", show_default=True, metavar="ID",
                  help="Only the owner approves or rejects (with the owner token).")
    @with_token
    def command(ctx: click.Context, subject_id: str, note: str, subject: str | None,
                approver: str | None, agent_id: str, token_file: Path | None,
                as_json: bool) -> None:
        from loopx.tools.governance import OwnerVerdict

        out = run_tool(ctx, f"action.{verdict}", OwnerVerdict(subject_id, note, subject, approver),
                       credentials(agent_id, token_file))
        text = f"{out['subject']['kind']} {subject_id} {out['verdict']} at seq {out['seq']}"
        if "can_execute" in out:
            ce = out["can_execute"]
            text += ("; it may execute" if ce["can_execute"]
                     else "; it may not execute: " + "; ".join(ce["reasons"]))
        if out["transition"]:
            text += f"\ncampaign {out['transition']}: objective_target_reached"
        emit(as_json, out, text)

    command.__doc__ = ("Approve a proposal, decision or preview (owner token); approval never "
                       "executes anything." if approving else
                       "Reject a proposal, decision or preview (owner token).")
    return command


cli.command("approve")(_verdict_command("approve"))
cli.command("reject")(_verdict_command("reject"))


@cli.command("can-execute")
@click.argument("proposal_id", metavar="ID")
@with_json
def can_execute(ctx: click.Context, proposal_id: str, as_json: bool) -> None:
    """Whether a proposal may execute now: exit 0 if so, 9 if not (with every reason)."""
    from loopx.tools.governance import ProposalRef

    out = run_tool(ctx, "action.can_execute", ProposalRef(proposal_id))
    emit(as_json, out, "yes" if out["can_execute"] else "no: " + "; ".join(out["reasons"]))
    if not out["can_execute"]:
        ctx.exit(NOT_PERMITTED)


@cli.group()
def action() -> None:
    """Proposed actions: show one, record what came of it."""


@action.command("show")
@click.argument("proposal_id", metavar="ID")
@with_json
def action_show(ctx: click.Context, proposal_id: str, as_json: bool) -> None:
    """Show a proposal: what it asks, its approval, its result, whether it may execute."""
    from loopx.tools.governance import ProposalRef

    out = run_tool(ctx, "action.status", ProposalRef(proposal_id))
    emit(as_json, out, _proposal_text(out))


@action.command("record")
@click.argument("proposal_id", metavar="ID")
@click.option("--success/--failure", required=True, help="Whether the action succeeded.")
@click.option("--result", metavar="JSON", help="What it produced, as a JSON object.")
@json_file_option("--result-file", help_text="The result from a JSON file instead (- for stdin).")
@click.option("--error", metavar="TEXT", help="What went wrong (with --failure).")
@click.option("--usage", multiple=True, metavar="RESOURCE=N",
              help="Usage it cost, recorded in the same step (repeatable).")
@with_agent
def action_record(ctx: click.Context, proposal_id: str, success: bool, result: str | None,
                  result_file: Path | None, error: str | None, usage: tuple[str, ...],
                  agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Record what came of an executed proposal; failures are kept like successes."""
    from loopx.tools.governance import RecordResult

    out = run_tool(ctx, "action.record",
                   RecordResult(proposal_id, success, json_object(result, result_file, "--result"),
                                error, costs(usage, "--usage")),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"{'success' if success else 'failure'} of {proposal_id} recorded at "
                       f"seq {out['seq']}")


@cli.command("approvals")
@with_json
def approvals(ctx: click.Context, as_json: bool) -> None:
    """List what awaits the owner's approval, oldest first."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "approvals.list", NoParams())
    lines = [f"{r['subject']['kind']:<9} {r['subject']['id']:<20} by {r['by']:<16} "
             f"{r['summary']}" for r in out["pending"]]
    emit(as_json, out, "\n".join(lines) or "nothing awaits approval")
