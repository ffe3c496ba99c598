"""The research contract's commands: contract init, show and amend."""

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
    optional_agent_option,
    run_tool,
    with_json,
    with_token,
)
from loopx.cli.campaign import baseline_words
from loopx.cli.direct import credentials
from loopx.cli.governance import costs
from loopx.kernel.errors import UsageProblem


@cli.group()
def contract() -> None:
    """The research contract: objective, metric, splits, budget, stop policy, tools, mode."""


@contract.command("init")
@json_file_option("--file", "-f", "source",
                  help_text="The whole contract as JSON (- for stdin) instead of flags.")
@click.option("--prompt", metavar="TEXT", help="The scientific question, in words.")
@click.option("--name", metavar="TEXT", help="Objective name (default: the prompt's first sentence).")
@click.option("--domain", metavar="TEXT", help="Objective domain.")
@click.option("--input", "inputs", multiple=True, metavar="FIELD", help="An input field (repeatable).")
@click.option("--target", "targets", multiple=True, metavar="FIELD", help="A target field (repeatable).")
@click.option("--generalization", multiple=True, metavar="TEXT",
              help="What the real test generalizes to (repeatable).")
@click.option("--success-metric", "success_metrics", multiple=True, metavar="NAME",
              help="A measurable success metric (repeatable).")
@click.option("--metric", metavar="NAME", help="The primary metric the decisions use.")
@click.option("--direction", type=click.Choice(["maximize", "minimize"]),
              help="Whether the metric is better higher or lower.")
@click.option("--baseline", type=float, metavar="X", help="The baseline value of the metric.")
@click.option("--seeds", metavar="N,N,...", help="Seeds every hypothesis is run over.")
@click.option("--dev-split", default="dev", show_default=True, metavar="NAME",
              help="The dev split's name.")
@click.option("--heldout-split", default="heldout", show_default=True, metavar="NAME",
              help="The held-out split's name.")
@click.option("--baseline-hypothesis", metavar="ID",
              help="Measure the baseline: the hypothesis whose packets are the baseline (Welch's "
                   "test); --baseline is then optional.")
@click.option("--protected", multiple=True, metavar="PATH",
              help="protected_scope: a path or glob no evaluated commit may change (repeatable).")
@click.option("--protected-commit", metavar="SHA",
              help="The commit whose protected scope every evaluated commit must hold.")
@click.option("--base-commit", metavar="SHA",
              help="The commit every experiment starts from (a scored packet citing commits "
                   "is refused until one is pinned).")
@click.option("--editable", multiple=True, metavar="PATH",
              help="editable_scope: a path executors are meant to change (repeatable).")
@click.option("--dev-location", metavar="LOCATION",
              help="Where the dev data is (handed to dev todos' claims).")
@click.option("--heldout-location", metavar="LOCATION",
              help="Where the held-out data is (handed only to held-out todos' claims).")
@click.option("--mode", type=click.Choice(["assistant", "guided", "bounded"]), default="guided",
              show_default=True, help="Which actions need the owner's approval.")
@click.option("--allow-tool", "allowed", multiple=True, metavar="TOOL",
              help="A tool the campaign may use (repeatable; globs like lab.* work).")
@click.option("--deny-tool", "denied", multiple=True, metavar="TOOL",
              help="A tool the campaign may never use (repeatable).")
@click.option("--budget", "budget", multiple=True, metavar="RESOURCE=N",
              help="A ceiling, e.g. cpu_hours=10 (repeatable; 0 = no limit).")
@click.option("--tool-risk", "tool_risks", multiple=True, metavar="TOOL=RISK",
              help="The risk class of one of the campaign's own tools, e.g. lab.train=compute "
                   "(repeatable; globs like lab.* work; an undeclared tool is destructive).")
@click.option("--set", "settings", multiple=True, metavar="PATH=VALUE",
              help="Any other field by dotted path, e.g. stop_policy.max_iterations=8.")
@click.option("--contract-id", metavar="ID", help="The contract's id (default: the goal id).")
@click.option("--dry-run", is_flag=True, help="Print the contract that would be written; write nothing.")
@optional_agent_option
@with_token
def contract_init(ctx: click.Context, source: Path | None, prompt: str | None, name: str | None,
                  domain: str | None, inputs: tuple[str, ...], targets: tuple[str, ...],
                  generalization: tuple[str, ...], success_metrics: tuple[str, ...],
                  metric: str | None, direction: str | None, baseline: float | None,
                  seeds: str | None, dev_split: str, heldout_split: str,
                  baseline_hypothesis: str | None, protected: tuple[str, ...],
                  protected_commit: str | None, base_commit: str | None,
                  editable: tuple[str, ...], dev_location: str | None,
                  heldout_location: str | None, mode: str,
                  allowed: tuple[str, ...], denied: tuple[str, ...], budget: tuple[str, ...],
                  tool_risks: tuple[str, ...], settings: tuple[str, ...],
                  contract_id: str | None, dry_run: bool,
                  agent_id: str | None, token_file: Path | None, as_json: bool) -> None:
    """Write the contract's first version (curator token): from --file, or a prompt plus flags."""
    from loopx.governance.contract import (
        apply_settings,
        objective_from_prompt,
        scope_settings,
    )
    from loopx.tools.governance import ContractInit

    if source is not None:
        payload = json_object(None, source, "--file")
    else:
        if baseline is None and baseline_hypothesis is not None:
            baseline = 0.0  # measured: the scalar is never used while the plan names one
        missing = [o for o, v in (("--prompt", prompt), ("--metric", metric),
                                  ("--direction", direction), ("--baseline", baseline),
                                  ("--seeds", seeds)) if v is None]
        if missing:
            raise UsageProblem(f"missing {', '.join(missing)} (or give the whole contract "
                               "with --file)")
        assert prompt is not None and seeds is not None
        try:
            seed_list = [int(s) for s in seeds.split(",") if s.strip()]
        except ValueError:
            raise UsageProblem(f"--seeds {seeds!r}: expected integers like 0,1,2") from None
        objective, unknown = objective_from_prompt(
            prompt, name=name, domain=domain, inputs=list(inputs), targets=list(targets),
            generalization=list(generalization), success_metrics=list(success_metrics))
        payload = {
            "contract_id": contract_id or _goal(ctx), "objective": objective,
            "missing_metadata": unknown,
            "metric": {"name": metric, "direction": direction, "baseline": baseline,
                       "seeds": seed_list},
            "evaluation": {"dev": {"name": dev_split}, "heldout": {"name": heldout_split}},
            "mode": mode, "allowed_tools": list(allowed), "denied_tools": list(denied),
            "budget": {f"max_{k}": v for k, v in costs(budget, "--budget").items()},
        }
    flags = scope_settings(baseline_hypothesis=baseline_hypothesis, protected=protected,
                           protected_commit=protected_commit, base_commit=base_commit,
                           editable=editable, dev_location=dev_location,
                           heldout_location=heldout_location)
    if tool_risks:  # applied like --set tool_risks={...}, before --set
        flags.append(("tool_risks", {**(payload.get("tool_risks") or {}),
                                     **key_values(tool_risks, "--tool-risk")}))
    payload = apply_settings(payload, flags + list(key_values(settings, "--set").items()))
    if dry_run:
        _dry_run(ctx, payload, as_json)
        return
    if agent_id is None:
        raise UsageProblem("missing --agent-id (or LOOPX_AGENT_ID): the curator writes the "
                           "contract")
    out = run_tool(ctx, "contract.init", ContractInit(payload), credentials(agent_id, token_file))
    c = out["contract"]
    emit(as_json, out, f"contract {c['contract_id']} version {c['version']} written at seq "
                       f"{out['seq']}; campaign {out['campaign_state']}")


def _goal(ctx: click.Context) -> str:
    from loopx.cli.app import workspace_of

    ledger = workspace_of(ctx).ledger()
    try:
        return ledger.goal_id()
    finally:
        ledger.store.close()


def _dry_run(ctx: click.Context, payload: dict[str, Any], as_json: bool) -> None:
    """Validate a contract without writing it (its fields, then the rules on the paths it
    names) and print it as it would be stored."""
    import json

    from loopx.kernel.kinds import check_payload
    from loopx.research.contract_scope import check_contract_paths

    checked = check_payload("research_contract_v0", payload, context="contract")
    check_contract_paths(checked, _contract_scopes(ctx))
    emit(as_json, {"contract": checked, "written": False},
         json.dumps(checked, indent=2, sort_keys=True))


def _contract_scopes(ctx: click.Context) -> list[str]:
    """The workspace's contract scopes; outside any workspace, the whole repository."""
    from loopx.cli.app import workspace_of
    from loopx.kernel.errors import WorkspaceError
    from loopx.research.contract_scope import CONTRACT_SCOPES, WHOLE_REPOSITORY

    try:
        workspace = workspace_of(ctx)
    except WorkspaceError:
        return list(WHOLE_REPOSITORY)
    return list(workspace.settings()[CONTRACT_SCOPES])


@contract.command("show")
@click.option("--version", "version", type=click.IntRange(min=1), metavar="N",
              help="An earlier version (default: the one in force).")
@with_json
def contract_show(ctx: click.Context, version: int | None, as_json: bool) -> None:
    """Show the contract in force (or an earlier version) and its version history."""
    from loopx.tools.governance import ContractShow

    out = run_tool(ctx, "contract.show", ContractShow(version))
    c = out["contract"]
    m = c["metric"]
    lines = [f"contract {c['contract_id']} version {c['version']} (in force: {out['in_force']})"
             f", mode {c['mode']}",
             f"objective: {c['objective']['name']}",
             f"metric: {m['name']} ({m['direction']}), {baseline_words(m)}, "
             f"seeds {','.join(map(str, m['seeds']))}",
             f"splits: dev {c['evaluation']['dev']['name']}, held-out "
             f"{c['evaluation']['heldout']['name']}"]
    lines.append(f"base: experiments start from {c['base_commit']} (pinned)"
                 if c.get("base_commit") else
                 "base: not pinned (a scored packet citing commits is refused until it is)")
    limits = {k: v for k, v in c["budget"].items() if v}
    lines.append("budget: " + (", ".join(f"{k} {v:g}" for k, v in limits.items()) or "no limits"))
    lines.append(f"tools: allowed {', '.join(c['allowed_tools']) or 'any not denied'}; "
                 f"denied {', '.join(c['denied_tools']) or 'none'}")
    if c.get("tool_risks"):
        lines.append("tool risks: " + ", ".join(f"{t} {r}" for t, r in c["tool_risks"].items())
                     + "; any other tool outside loopx destructive")
    if c["missing_metadata"]:
        lines.append(f"missing metadata: {', '.join(c['missing_metadata'])}")
    for v in out["versions"][1:]:
        lines.append(f"  v{v['version']} (seq {v['seq']}, {v['agent_id']}): "
                     f"{', '.join(v['changed'])}: {v['reason']}")
    emit(as_json, out, "\n".join(lines))


@contract.command("amend")
@click.option("--reason", required=True, metavar="TEXT", help="Why the contract changes.")
@click.option("--set", "settings", multiple=True, metavar="PATH=VALUE",
              help="A field by dotted path, e.g. budget.max_cpu_hours=20 (repeatable).")
@json_file_option("--file", "-f", "source",
                  help_text="The whole new contract as JSON instead of --set.")
@click.option("--dry-run", is_flag=True,
              help="Check the next version as the write would; print it; write nothing.")
@optional_agent_option
@with_token
def contract_amend(ctx: click.Context, reason: str, settings: tuple[str, ...],
                   source: Path | None, dry_run: bool, agent_id: str | None,
                   token_file: Path | None, as_json: bool) -> None:
    """Write the next contract version (curator token); what changed is recorded with it."""
    from loopx.tools.governance import ContractAmend

    if bool(settings) == (source is not None):
        raise UsageProblem("give --set PATH=VALUE (repeatable) or --file, one of them")
    replacement = json_object(None, source, "--file") if source is not None else None
    if dry_run:
        _amend_dry_run(ctx, reason, list(key_values(settings, "--set").items()), replacement,
                       as_json)
        return
    if agent_id is None:
        raise UsageProblem("missing --agent-id (or LOOPX_AGENT_ID): the curator writes the "
                           "contract")
    out = run_tool(ctx, "contract.amend",
                   ContractAmend(reason, key_values(settings, "--set"), replacement),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"contract version {out['version']} written at seq {out['seq']}; "
                       f"changed {', '.join(out['changed'])}")


def _amend_dry_run(ctx: click.Context, reason: str, settings: list[tuple[str, Any]],
                   replacement: dict[str, Any] | None, as_json: bool) -> None:
    """Check the next contract version against the log as it stands; print it, write nothing."""
    from loopx.cli.app import workspace_of
    from loopx.governance.contract import preview_amendment

    ledger = workspace_of(ctx).ledger()
    try:
        payload = preview_amendment(ledger, reason, settings=settings, replacement=replacement)
    finally:
        ledger.store.close()
    changed = payload["amendment"]["changed"]
    emit(as_json, {"contract": payload, "changed": changed, "written": False},
         f"contract version {payload['version']} would change {', '.join(changed)}; "
         "nothing written (dry run)")


# -- proposals and approvals -----------------------------------------------------------------
