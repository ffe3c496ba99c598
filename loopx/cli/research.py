"""Research commands: hypothesis propose, evidence append-packet|judge, novelty audit, gate check,
decide, and the projections graph, frontier and candidates."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli.app import (
    cli,
    emit,
    json_arg,
    json_file_option,
    key_values,
    parse_under,
    run_tool,
    with_agent,
    with_json,
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem

under_option = click.option("--under", required=True, metavar="TODO_ID:EPOCH",
                            help="The held todo this record is written under.")


def _refs(values: tuple[str, ...], option: str) -> list[dict[str, str]]:
    """``KIND:REF`` options (``paper:arXiv:2101.00001``) into grounding refs."""
    out = []
    for text in values:
        kind, sep, ref = text.partition(":")
        if not sep or not ref:
            raise UsageProblem(f"{option} {text!r}: expected KIND:REF, e.g. paper:arXiv:2101.0001 "
                               "(kinds: record, paper, url, file, note)")
        out.append({"kind": kind, "ref": ref})
    return out


# -- hypotheses ------------------------------------------------------------------------------

@cli.group()
def hypothesis() -> None:
    """Hypotheses: propose one under a held todo."""


@hypothesis.command("propose")
@json_file_option("--file", "-f", "source",
                  help_text="The research_hypothesis_v0 payload as JSON instead of flags.")
@click.option("--hypothesis-id", metavar="ID", help="The hypothesis' id.")
@click.option("--title", metavar="TEXT", help="A one-line title.")
@click.option("--statement", metavar="TEXT", help="What is claimed, testably.")
@click.option("--mechanism", metavar="FAMILY", help="Its mechanism family (e.g. width, lr).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="A parameter (repeatable; VALUE is JSON when it parses).")
@click.option("--parent", metavar="ID", help="The hypothesis this one refines.")
@click.option("--supersedes", metavar="ID", help="A hypothesis this one replaces.")
@click.option("--grounding", multiple=True, metavar="KIND:REF",
              help="Where the idea came from (repeatable): record, paper, url, file or note.")
@click.option("--no-grounding-reason", metavar="TEXT", help="Why there is no grounding ref.")
@click.option("--claims-novelty", is_flag=True,
              help="It claims research novelty (an independent audit is then required).")
@click.option("--expected-effect", metavar="TEXT", help="What the proposer expects to see.")
@click.option("--dev-todo", metavar="TODO_ID",
              help="Also add a run_dev_eval todo with this id for the executors, in one batch.")
@under_option
@with_agent
def hypothesis_propose(ctx: click.Context, source: Path | None, hypothesis_id: str | None,
                       title: str | None, statement: str | None, mechanism: str | None,
                       params: tuple[str, ...], parent: str | None, supersedes: str | None,
                       grounding: tuple[str, ...], no_grounding_reason: str | None,
                       claims_novelty: bool, expected_effect: str | None,
                       dev_todo: str | None, under: str, agent_id: str,
                       token_file: Path | None, as_json: bool) -> None:
    """Propose a hypothesis (proposer token, under a held todo); one with the mechanism family
    and parameters of any earlier hypothesis is refused as a duplicate, and the refusal
    recorded."""
    from loopx.tools.research import HypothesisPropose

    if source is not None:
        payload = json_arg(None, source, "--file")
        if not isinstance(payload, dict):
            raise UsageProblem("--file must hold a JSON object (a research_hypothesis_v0 payload)")
    else:
        missing = [o for o, v in (("--hypothesis-id", hypothesis_id), ("--title", title),
                                  ("--statement", statement), ("--mechanism", mechanism))
                   if v is None]
        if missing:
            raise UsageProblem(f"missing {', '.join(missing)} (or give the payload with --file)")
        payload = {"hypothesis_id": hypothesis_id, "title": title, "statement": statement,
                   "mechanism_family": mechanism, "parameters": key_values(params, "--param"),
                   "grounding_refs": _refs(grounding, "--grounding"),
                   "claims_novelty": claims_novelty}
        optional = {"parent_id": parent, "supersedes": supersedes,
                    "no_grounding_reason": no_grounding_reason,
                    "expected_effect": expected_effect}
        payload.update({k: v for k, v in optional.items() if v is not None})
    todos = []
    if dev_todo is not None:
        todos.append({"todo_id": dev_todo, "title": f"Dev evaluation of {payload.get('title')}",
                      "role": "research_executor", "action_kind": "run_dev_eval",
                      "hypothesis_id": payload.get("hypothesis_id")})
    todo_id, epoch = parse_under(under)
    out = run_tool(ctx, "hypothesis.propose", HypothesisPropose(payload, todo_id, epoch, todos),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"hypothesis {out['hypothesis_id']} at seq {out['seq']}"
                       + (f" with todo(s) {', '.join(out['todos'])}" if out["todos"] else ""))


# -- evidence --------------------------------------------------------------------------------

@cli.group()
def evidence() -> None:
    """Evidence: executors' packets and the evaluator's judgements of them."""


@evidence.command("append-packet")
@click.argument("source", metavar="FILE|-", type=click.Path(dir_okay=False, path_type=Path))
@under_option
@with_agent
def evidence_append_packet(ctx: click.Context, source: Path, under: str, agent_id: str,
                           token_file: Path | None, as_json: bool) -> None:
    """Record an attempt's auto_research_evidence_packet_v0 payload (executor, under its todo);
    failed attempts are recorded too."""
    from loopx.tools.research import AppendPacket

    payload = json_arg(None, source, "FILE")
    if not isinstance(payload, dict):
        raise UsageProblem("FILE must hold a JSON object (an evidence packet payload)")
    todo_id, epoch = parse_under(under)
    out = run_tool(ctx, "evidence.append_packet", AppendPacket(payload, todo_id, epoch),
                   credentials(agent_id, token_file))
    emit(as_json, out, f"packet {out['packet_id']} ({out['status']}) for "
                       f"{out['hypothesis_id']} at seq {out['seq']}")


@evidence.command("judge")
@click.argument("hypothesis_id", metavar="HYPOTHESIS")
@click.option("--split", type=click.Choice(["dev", "heldout"]), required=True,
              help="Which split's results to judge.")
@with_agent
def evidence_judge(ctx: click.Context, hypothesis_id: str, split: str, agent_id: str,
                   token_file: Path | None, as_json: bool) -> None:
    """Judge every scored packet of a hypothesis on one split with the contract's rule and
    record the verdict (evaluator). The first held-out judgement is final."""
    from loopx.research.projections import control_words
    from loopx.tools.research import Judge

    out = run_tool(ctx, "evidence.judge", Judge(hypothesis_id, split),
                   credentials(agent_id, token_file))
    figures = (f" ({out['notes']})" if out["notes"] else "") if out["p_value"] is None else (
        f": mean delta {out['mean_delta']:+.4g}, p {out['p_value']:.3g}")
    if out["control"]:
        figures = f": mean delta {out['mean_delta']:+.4g}{control_words(out)}"
    against = (f"the measured baseline ({len(out['baseline_values'])} values)"
               if out["baseline_values"] else f"the assumed baseline {out['baseline']:g}")
    emit(as_json, out, f"{hypothesis_id} {split}: {out['verdict']}{figures} over seeds "
                       f"{', '.join(map(str, out['seeds'])) or '-'} against {against} "
                       f"(seq {out['seq']})")


# -- novelty, gates, decisions ---------------------------------------------------------------

@cli.group()
def novelty() -> None:
    """Novelty audits, by an agent other than the hypothesis' proposer."""


@novelty.command("audit")
@click.argument("hypothesis_id", metavar="HYPOTHESIS")
@click.option("--verdict", type=click.Choice(["novel", "not_novel", "inconclusive"]),
              required=True, help="The audit's verdict.")
@click.option("--ref", "refs", multiple=True, metavar="KIND:REF",
              help="What the audit compared against (repeatable).")
@click.option("--note", metavar="TEXT", help="The audit's reasoning, briefly.")
@with_agent
def novelty_audit(ctx: click.Context, hypothesis_id: str, verdict: str, refs: tuple[str, ...],
                  note: str | None, agent_id: str, token_file: Path | None,
                  as_json: bool) -> None:
    """Record a novelty audit (evaluator; never of a hypothesis the auditor proposed)."""
    from loopx.tools.research import Audit

    out = run_tool(ctx, "novelty.audit", Audit(hypothesis_id, verdict, _refs(refs, "--ref"),
                                               note), credentials(agent_id, token_file))
    emit(as_json, out, f"novelty of {hypothesis_id}: {verdict} (seq {out['seq']})")


@cli.group()
def gate() -> None:
    """Gates verified outside the log: the protected boundary, from git; the held-out packets,
    re-run."""


# How `gate check` names the rule a violation broke (the protected scope's needs no words);
# a borrowed change also says whose it was.
RULE_WORDS = {"outside_editable": " (outside the editable scope)",
              "unscreened": " (after the dev runs: held-out ran code no dev run screened)",
              "borrowed": " (another hypothesis' change: {detail})"}


@gate.command("check")
@click.argument("hypothesis_id", metavar="HYPOTHESIS")
@with_agent
def gate_check(ctx: click.Context, hypothesis_id: str, agent_id: str, token_file: Path | None,
               as_json: bool) -> None:
    """Verify from git that the evidence a hypothesis rests on left the protected scope alone
    (and stayed inside the editable scope, if set); record the result (evaluator)."""
    from loopx.tools.research import GateCheck

    out = run_tool(ctx, "gate.check", GateCheck(hypothesis_id), credentials(agent_id, token_file))
    lines = [f"protected boundary of {hypothesis_id}: {'passed' if out['passed'] else 'FAILED'} "
             f"({len(out['packets'])} packet(s), seq {out['seq']})"]
    lines += [f"  {v['path']}: {v['change']} in {v['commit'][:12]}"
              + RULE_WORDS.get(v["rule"], "").format(detail=v["detail"])
              for v in out["violations"]]
    lines += [f"  {r}" for r in out["reasons"] if not out["violations"]]
    emit(as_json, out, "\n".join(lines))


@gate.command("reproduce", context_settings={"ignore_unknown_options": True})
@click.argument("hypothesis_id", metavar="HYPOTHESIS")
@click.option("--timeout", type=click.FloatRange(min=0.001), default=3600.0, show_default=True,
              help="Seconds one re-run may take before it is stopped (the packet is then "
                   "not re-run).")
@with_agent
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD...")
def gate_reproduce(ctx: click.Context, hypothesis_id: str, timeout: float, agent_id: str,
                   token_file: Path | None, as_json: bool, command: tuple[str, ...]) -> None:
    """Re-run each held-out packet the hypothesis' final held-out judgement rests on or compared
    it with, from the commit it cites, with CMD in a fresh worktree (the request on stdin, no
    loopx variables or token); compare the values with the recorded ones and record the result
    (evaluator)."""
    from loopx.tools.research import GateReproduce

    out = run_tool(ctx, "gate.reproduce", GateReproduce(hypothesis_id, list(command), timeout),
                   credentials(agent_id, token_file))
    verdict = ("passed" if out["passed"] else "FAILED" if any(
        r["outcome"] == "differs" for r in out["reproductions"]) else "not verified")
    lines = [f"reproduced gate of {hypothesis_id}: {verdict} ({len(out['reproductions'])} "
             f"packet(s), tolerance {out['tolerance']:g}, seq {out['seq']})"]
    lines += [f"  {r['packet_id']}: {r['outcome'].replace('_', ' ')}"
              + (f": {r['detail']}" if r["detail"] else "") for r in out["reproductions"]]
    emit(as_json, out, "\n".join(lines))


@cli.command("decide")
@click.argument("outcome", type=click.Choice(["promote", "retire"]))
@click.argument("hypothesis_id", metavar="HYPOTHESIS")
@click.option("--reason", type=click.Choice(["contradicted", "duplicate", "operator_rejected",
                                             "retry_exhausted", "superseded",
                                             "guardrail_failed", "no_effect_found",
                                             "invalid_result"]),
              help="Why it is retired (required with retire).")
@click.option("--note", metavar="TEXT", help="A short note kept with the decision.")
@click.option("--decision-id", metavar="ID", help="Its id (default: a fresh dec-... id).")
@click.option("--violation", "violations", multiple=True, metavar="TEXT",
              help="What the result violates, judged by the evaluator (repeatable; retire only): "
                   "the iteration is invalid.")
@with_agent
def decide(ctx: click.Context, outcome: str, hypothesis_id: str, reason: str | None,
           note: str | None, decision_id: str | None, violations: tuple[str, ...],
           agent_id: str, token_file: Path | None, as_json: bool) -> None:
    """Promote or retire a hypothesis on the candidate the projection shows (evaluator); the
    campaign's policy (complete, stop, pause) is evaluated in the same step."""
    from loopx.tools.research import Decide

    if outcome == "promote" and reason is not None:
        raise UsageProblem("--reason is for retire; a promotion's reason is gates_passed")
    if outcome == "promote" and violations:
        raise UsageProblem("--violation is for retire: an invalid result is never promoted "
                           "(retire it with --reason invalid_result)")
    out = run_tool(ctx, "decision.decide",
                   Decide(hypothesis_id, "promoted" if outcome == "promote" else "retired",
                          reason, note, decision_id, list(violations)),
                   credentials(agent_id, token_file))
    text = (f"{out['decision_id']}: {hypothesis_id} {out['outcome']} ({out['reason']}) at "
            f"revision {out['revision']}, seq {out['seq']}")
    if not out["valid"]:
        text += f"; invalid: {'; '.join(out['violations'])}"
    if out["transition"] is not None:
        why = out.get("stop_reasons") or out.get("pause_reasons") or [out.get("completion")]
        text += f"\ncampaign {out['transition']}: {', '.join(why)}"
    emit(as_json, out, text)


# -- projections -----------------------------------------------------------------------------

@cli.command("graph")
@with_json
def graph(ctx: click.Context, as_json: bool) -> None:
    """The research_evidence_graph_v0: typed nodes and edges (same log, same bytes)."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "graph.export", NoParams())
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(out["counts"]["by_kind"].items()))
    lines = [f"{out['counts']['nodes']} nodes ({kinds or 'none'}), "
             f"{out['counts']['edges']} edges, at seq {out['head_seq']}"]
    lines += [f"  {e['source']} -{e['type']}-> {e['target']}" for e in out["edges"]]
    emit(as_json, out, "\n".join(lines))


@cli.command("frontier")
@click.option("--agent-id", metavar="ID",
              help="Only what this agent's role acts on next ('owner' for the owner).")
@with_json
def frontier(ctx: click.Context, agent_id: str | None, as_json: bool) -> None:
    """decentralized_research_frontier_v0: each hypothesis' state, next action and its role."""
    from loopx.tools.research import Frontier

    out = run_tool(ctx, "frontier.show", Frontier(agent_id))
    lines = [f"{h['hypothesis_id']:<24} {h['state']:<18} "
             f"{(h['next_action'] or '-') + ' (' + (h['next_role'] or '-') + ')':<40} {h['detail']}"
             for h in out["hypotheses"]]
    emit(as_json, out, "\n".join(lines) or "no hypotheses" + (f" for {agent_id}" if agent_id
                                                                 else ""))


@cli.command("candidates")
@with_json
def candidates(ctx: click.Context, as_json: bool) -> None:
    """Promotion, retirement and retry candidates, each with the records it rests on."""
    from loopx.tools.registry import NoParams

    out = run_tool(ctx, "candidates.list", NoParams())
    lines: list[str] = []
    for kind in ("promotion", "retirement", "retry"):
        for c in out[kind]:
            extra = (f" ({', '.join(c['reasons'])})" if kind == "retirement" else
                     f" ({c['attempts_left']} attempt(s) left)" if kind == "retry" else "")
            lines.append(f"{kind:<10} {c['hypothesis_id']:<24} rev {c['revision']}{extra}; "
                         f"rests on {len(c['rests_on'])} record(s)")
    emit(as_json, out, "\n".join(lines) or "no candidates")
