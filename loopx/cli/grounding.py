"""Grounding commands: grounding add (a proposer's for its hypothesis, the curator's for the
campaign) and grounding list (a hypothesis' ideation material, with the novelty boundary)."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli.app import (
    cli,
    emit,
    run_tool,
    with_agent,
    with_json,
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem


@cli.group()
def grounding() -> None:
    """Grounding refs: the sources ideation drew on, which a novel audit verdict must not rest on."""


@grounding.command("add")
@click.argument("source", metavar="KIND:REF")
@click.option("--hypothesis", "hypothesis_id", metavar="ID",
              help="The hypothesis it grounds (one you proposed; hypothesis_proposer).")
@click.option("--campaign", is_flag=True,
              help="It grounds the whole campaign (research_curator).")
@click.option("--note", metavar="TEXT", help="What it is, or what it gave the idea, briefly.")
@click.option("--sha256", metavar="HEX", help="The source's content digest, if you have it.")
@with_agent
def grounding_add(ctx: click.Context, source: str, hypothesis_id: str | None, campaign: bool,
                  note: str | None, sha256: str | None, agent_id: str, token_file: Path | None,
                  as_json: bool) -> None:
    """Record a grounding_ref_v0: KIND is record, paper, url, file or note
    (paper:arXiv:2101.00001)."""
    from loopx.tools.research import GroundingAdd

    if (hypothesis_id is None) == (not campaign):
        raise UsageProblem("name what it grounds: --hypothesis ID or --campaign (one of them)")
    kind, sep, ref = source.partition(":")
    if not sep or not ref:
        raise UsageProblem(f"KIND:REF {source!r}: expected e.g. paper:arXiv:2101.0001 "
                           "(kinds: record, paper, url, file, note)")
    payload: dict[str, str] = {"kind": kind, "ref": ref}
    payload.update({k: v for k, v in (("note", note), ("sha256", sha256)) if v is not None})
    out = run_tool(ctx, "grounding.add", GroundingAdd(payload, hypothesis_id),
                   credentials(agent_id, token_file))
    target = f"hypothesis {out['hypothesis_id']}" if out["hypothesis_id"] else "the campaign"
    emit(as_json, out, f"grounding {out['grounding_id']} of {target}: {kind}:{ref} "
                       f"(compared as {out['normalised']}, seq {out['seq']})")


@grounding.command("list")
@click.option("--hypothesis", "hypothesis_id", metavar="ID",
              help="Only its ideation material: its lineage's grounding and the campaign's.")
@with_json
def grounding_list(ctx: click.Context, hypothesis_id: str | None, as_json: bool) -> None:
    """List grounding refs with the names they are compared by, and the novelty boundary."""
    from loopx.tools.research import GroundingList

    out = run_tool(ctx, "grounding.list", GroundingList(hypothesis_id))
    lines = [f"{g['id']:<40} {g['hypothesis_id'] or '(campaign)':<20} "
             f"{g['ref']['kind']}:{g['ref']['ref']}  as {g['normalised']} "
             f"({g['agent_id']}, seq {g['seq']})" for g in out["refs"]]
    fence = out["novelty_boundary"]
    if fence["prior_art"] or fence["statement"]:
        lines.append(f"novelty boundary (contract v{fence['contract_version']}): "
                     + (", ".join(f"{r['kind']}:{r['ref']}" for r in fence["prior_art"])
                        or "no prior art named")
                     + (f"; {fence['statement']}" if fence["statement"] else ""))
    emit(as_json, out, "\n".join(lines) or "no grounding refs")
