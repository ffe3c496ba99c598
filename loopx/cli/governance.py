"""Governance commands: contract, propose / approve / reject / can-execute / action, approvals,
usage, finding and campaign."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopx.cli.app import (
    agent_option,
    cli,
    credentials,
    emit,
    json_object,
    json_option,
    key_values,
    parse_under,
    run_tool,
    token_file_option,
)
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
@click.option("--args-file", type=click.Path(dir_okay=False, path_type=Path), metavar="F|-",
              help="The arguments from a JSON file instead (- for stdin).")
@click.option("--cost", "cost", multiple=True, metavar="RESOURCE=N",
              help="Estimated cost, e.g. gpu_hours=0.5 (repeatable).")
@click.option("--proposal-id", metavar="ID", help="Its id (default: a fresh prop-... id).")
@agent_option
@token_file_option
@json_option
@click.pass_context
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
    @token_file_option
    @json_option
    @click.pass_context
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
        emit(as_json, out, text)

    command.__doc__ = ("Approve a proposal, decision or preview (owner token); approval never "
                       "executes anything." if approving else
                       "Reject a proposal, decision or preview (owner token).")
    return command


cli.command("approve")(_verdict_command("approve"))
cli.command("reject")(_verdict_command("reject"))


@cli.command("can-execute")
@click.argument("proposal_id", metavar="ID")
@json_option
@click.pass_context
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
@json_option
@click.pass_context
def action_show(ctx: click.Context, proposal_id: str, as_json: bool) -> None:
    """Show a proposal: what it asks, its approval, its result, whether it may execute."""
    from loopx.tools.governance import ProposalRef

    out = run_tool(ctx, "action.status", ProposalRef(proposal_id))
    emit(as_json, out, _proposal_text(out))


@action.command("record")
@click.argument("proposal_id", metavar="ID")
@click.option("--success/--failure", required=True, help="Whether the action succeeded.")
@click.option("--result", metavar="JSON", help="What it produced, as a JSON object.")
@click.option("--result-file", type=click.Path(dir_okay=False, path_type=Path), metavar="F|-",
              help="The result from a JSON file instead (- for stdin).")
@click.option("--error", metavar="TEXT", help="What went wrong (with --failure).")
@click.option("--usage", multiple=True, metavar="RESOURCE=N",
              help="Usage it cost, recorded in the same step (repeatable).")
@agent_option
@token_file_option
@json_option
@click.pass_context
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
@json_option
@click.pass_context
def approvals(ctx: click.Context, as_json: bool) -> None:
    """List what awaits the owner's approval, oldest first."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "approvals.list", NoParams())
    lines = [f"{r['subject']['kind']:<9} {r['subject']['id']:<20} by {r['by']:<16} "
             f"{r['summary']}" for r in out["pending"]]
    emit(as_json, out, "\n".join(lines) or "nothing awaits approval")


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
@agent_option
@token_file_option
@json_option
@click.pass_context
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
@json_option
@click.pass_context
def usage_show(ctx: click.Context, as_json: bool) -> None:
    """Show usage against the budget, in total and per agent."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "usage.show", NoParams())
    lines = [_budget_text(out["budget"])]
    for agent_id, row in out["agents"].items():
        used = ", ".join(f"{k} {v:g}" for k, v in row.items() if v)
        lines.append(f"  {agent_id}: {used}")
    emit(as_json, out, "\n".join(lines))


# -- findings --------------------------------------------------------------------------------

@cli.group()
def finding() -> None:
    """Findings: facts, computed results, interpretations, hypotheses, risks, negative results."""


def _evidence(values: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for text in values:
        kind, sep, ref = text.partition(":")
        if not sep or kind not in ("record", "artifact", "file", "url") or not ref:
            raise UsageProblem(f"--evidence {text!r}: expected record:ID, artifact:PATH@SHA256, "
                               "file:PATH or url:URL")
        entry: dict[str, Any] = {"kind": kind, "ref": ref}
        if kind == "artifact":
            path, at, digest = ref.rpartition("@")
            if not at:
                raise UsageProblem(f"--evidence {text!r}: an artifact is PATH@SHA256")
            entry.update(ref=path, sha256=digest)
        elif kind == "url" and ref.startswith("//"):
            entry["ref"] = text  # url:https://... keeps its scheme
        out.append(entry)
    return out


@finding.command("add")
@click.option("--kind", required=True,
              type=click.Choice(["observed_fact", "computed_result", "interpretation",
                                 "hypothesis", "risk", "negative_result", "reproducibility_note"]),
              help="The statement kind (kept distinct: a hypothesis is never a result).")
@click.option("--statement", required=True, metavar="TEXT", help="The statement.")
@click.option("--evidence", multiple=True, metavar="REF",
              help="record:ID, artifact:PATH@SHA256, file:PATH or url:URL (repeatable).")
@click.option("--confidence", type=click.Choice(["low", "medium", "high"]), help="Confidence.")
@click.option("--supersedes", metavar="ID", help="A finding this one replaces.")
@click.option("--finding-id", metavar="ID", help="Its id (default: a fresh find-... id).")
@click.option("--under", metavar="TODO_ID:EPOCH", help="The held todo it was found under.")
@agent_option
@token_file_option
@json_option
@click.pass_context
def finding_add(ctx: click.Context, kind: str, statement: str, evidence: tuple[str, ...],
                confidence: str | None, supersedes: str | None, finding_id: str | None,
                under: str | None, agent_id: str, token_file: Path | None,
                as_json: bool) -> None:
    """Record a finding of one kind; facts and results must cite their evidence."""
    from loopx.tools.governance import FindingAdd

    todo_id, epoch = parse_under(under)
    out = run_tool(ctx, "finding.add",
                   FindingAdd(kind, statement, _evidence(evidence), confidence, supersedes,
                              finding_id, todo_id, epoch),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"{out['finding_id']} ({kind}, {out['standing']}) at seq {out['seq']}")


@finding.command("list")
@click.option("--all", "include_superseded", is_flag=True, help="Include superseded findings.")
@json_option
@click.pass_context
def finding_list(ctx: click.Context, include_superseded: bool, as_json: bool) -> None:
    """List findings by standing; hypotheses and interpretations never appear as established."""
    from loopx.tools.governance import FindingList

    out = run_tool(ctx, "finding.list", FindingList(include_superseded))
    titles = {"established": "Established", "qualified": "Interpretations (qualified)",
              "not_established": "Hypotheses (not established)", "risk": "Risks"}
    lines = []
    for group, title in titles.items():
        if out[group]:
            lines.append(f"{title}:")
            lines += [f"  {f['finding_id']} [{f['kind']}] {f['statement']}" for f in out[group]]
    emit(as_json, out, "\n".join(lines) or "no findings")


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
@json_option
@click.pass_context
def campaign_status(ctx: click.Context, as_json: bool) -> None:
    """Show the campaign: state, contract, iterations, budget and what awaits approval."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "campaign.status", NoParams())
    c = out["contract"]
    it = out["iterations"]
    lines = [f"campaign {out['state']} since seq {out['since_seq']}"
             + (f" ({', '.join(out['stop_reasons'])})" if out["stop_reasons"] else ""),
             (f"contract {c['contract_id']} v{c['version']}, {c['mode']} mode, {c['metric']} "
              f"{c['direction']} {baseline_words(c)}, plan v{c['plan_version']}, "
              f"{_control_words(c['campaign_control'])}") if c else "no contract yet",
             f"iterations {it['count']}, best {it['best'] if it['best'] is not None else '-'}"
             f", without improvement {it['stagnant']}, invalid in a row {it['invalid']}",
             _budget_text(out["budget"])]
    if out["would_stop"]:
        lines.append(f"the stop policy would stop it now: {', '.join(out['would_stop'])}")
    if out["pending_approvals"]:
        lines.append(f"{out['pending_approvals']} awaiting approval (`loopx approvals`)")
    emit(as_json, out, "\n".join(lines))


@campaign.command("evaluate")
@click.option("--dry-run", is_flag=True, help="Only report the stop reasons; write nothing.")
@click.option("--agent-id", envvar="LOOPX_AGENT_ID", metavar="ID",
              help="Who stops the campaign if a reason applies (owner or evaluator_promoter).")
@token_file_option
@json_option
@click.pass_context
def campaign_evaluate(ctx: click.Context, dry_run: bool, agent_id: str | None,
                      token_file: Path | None, as_json: bool) -> None:
    """Evaluate the stop policy now, and stop the campaign if any reason applies."""
    from loopx.tools.governance import Evaluate

    creds = credentials(agent_id, token_file) if agent_id else None
    out = run_tool(ctx, "campaign.evaluate", Evaluate(dry_run), creds)
    if out["stopped"]:
        text = f"stopped at seq {out['seq']}: {', '.join(out['reasons'])}"
    elif out["finished"]:
        text = f"campaign already {out['state']}; nothing to evaluate"
    elif out["reasons"]:
        text = f"campaign {out['state']}; stop reasons apply: {', '.join(out['reasons'])}"
    else:
        text = f"campaign {out['state']}; no stop reason applies"
    emit(as_json, out, text)


@campaign.command("transition")
@click.argument("to_state", metavar="STATE")
@click.option("--reason", required=True, metavar="TEXT", help="Why the campaign moves.")
@agent_option
@token_file_option
@json_option
@click.pass_context
def campaign_transition(ctx: click.Context, to_state: str, reason: str, agent_id: str,
                        token_file: Path | None, as_json: bool) -> None:
    """Move the campaign: planned, ready, running, paused, completed, stopped or failed."""
    from loopx.tools.governance import Transition

    out = run_tool(ctx, "campaign.transition", Transition(to_state, reason),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"campaign {out['from_state']} -> {out['to_state']} at seq {out['seq']}"
                       + (f" ({', '.join(out['stop_reasons'])})" if out["stop_reasons"] else ""))
