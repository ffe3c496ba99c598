"""Finding commands: record findings of one statement kind with their evidence, and list them
by standing."""

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
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem


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
@with_agent
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
@with_json
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
