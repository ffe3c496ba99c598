"""Wording shared by the Markdown and HTML renderers, so both say the same thing the same way.

Statement kinds stay distinct: a hypothesis is always introduced as one, findings are grouped by
standing, and only judgements and decisions recorded by loopx's rules are called results.
"""

from __future__ import annotations

from typing import Any

from loopx.narrator.story import number, signed

SPLIT_NAMES = {"dev": "Dev", "heldout": "Held-out", "train": "Train"}
STATE_WORDS = {
    "proposed": "proposed, not yet run", "selected": "selected, waiting for an executor",
    "running": "running", "evidence_recorded": "evidence recorded, not yet judged",
    "supported": "supported on dev, not yet on held-out data",
    "needs_retry": "needs another attempt", "contradicted": "contradicted by its evidence",
    "at_promotion_gate": "at the promotion gate", "promoted": "promoted", "retired": "retired",
}
RETIRE_WORDS = {
    "contradicted": "the evidence contradicted it",
    "duplicate": "it repeated an earlier hypothesis",
    "operator_rejected": "the owner rejected its promotion",
    "retry_exhausted": "its attempts ran out without a scored result",
    "superseded": "a later hypothesis superseded it",
    "guardrail_failed": "its evaluated commits touched protected files",
}
GROUP_WORDS = {
    "established": "Established (observed facts, computed results, negative results, "
                   "reproducibility notes)",
    "qualified": "Interpretations (a reading of the results, not established)",
    "not_established": "Hypotheses (not established)",
    "risk": "Risks",
}
CANDIDATE_WORDS = {
    "promotion": ("Promotion candidates", "worth merging: every gate passed, awaiting a decision"),
    "retirement": ("Retirement candidates", "failed clearly: retiring them saves future search"),
    "retry": ("Retry candidates", "unscored attempts that need another bounded executor turn"),
}


def label(item: dict[str, Any]) -> str:
    """How a hypothesis is named: its id, or a private record's id."""
    return f"private hypothesis {item['key']}" if item["private"] else str(item["hypothesis_id"])


def judgement_line(j: dict[str, Any]) -> str:
    """One judgement in words: verdict, rule, values over seeds, baseline, delta and p."""
    split = SPLIT_NAMES.get(j["split"], j["split"])
    if j["private"]:
        return f"{split}: judgement {j['event_id']} is private"
    parts = [f"{split}: {j['verdict']} under {j['rule']} on {j['metric']}"]
    if j["values"]:
        parts.append(f"values {_list(j['values'])} over seeds {_list(j['seeds'])}")
    if j["baseline"] is not None:
        parts.append(f"baseline {number(j['baseline'])}")
    elif j["baseline_values"]:
        parts.append(f"baseline values {_list(j['baseline_values'])}")
    if j["mean_delta"] is not None:
        parts.append(f"mean change {signed(j['mean_delta'])}")
    if j["p_value"] is not None:
        parts.append(f"p = {number(j['p_value'])}")
    if j["provenance"] == "claimed":
        parts.append("claimed provenance: never counts")
    return "; ".join(parts) + f" ({j['event_id']})"


def attempt_line(a: dict[str, Any]) -> str:
    """One attempt in words: number, status, branch and commit."""
    if a["private"]:
        return f"attempt {a['packet_id']} is private"
    text = f"attempt {a['attempt']} {a['status']}"
    if a["branch"]:
        text += f" on branch {a['branch']}"
    if a["evaluated_commit"]:
        text += f" at commit {a['evaluated_commit'][:12]}"
    return text + f" ({a['packet_id']})"


def decision_line(d: dict[str, Any] | None) -> str | None:
    """A decision in words, with the owner's verdict when there is one."""
    if d is None:
        return None
    if d["private"]:
        return f"decision {d['record_id']} is private"
    why = ("every required gate passed" if d["outcome"] == "promoted"
           else RETIRE_WORDS.get(d["reason"], d["reason"]))
    text = f"{d['outcome']} by decision {d['decision_id']} at revision {d['revision']}: {why}"
    if d["approval"] is not None:
        text += f"; the owner {d['approval']['verdict']} it ({d['approval']['record_id']})"
    return text


def evidence_lines(h: dict[str, Any]) -> list[str]:
    """A public hypothesis' evidence in words: its record and state, judgements, attempts,
    required gates and decision, one line each."""
    lines = [f"Hypothesis record {h['record_id']}; state: {STATE_WORDS[h['state']]}"]
    lines += [judgement_line(j) for j in h["evidence"].values()]
    lines += [attempt_line(a) for a in h["attempts"]]
    if h["gates"]:
        lines.append("Gates: " + ", ".join(f"{g.replace('_', ' ')} {s}"
                                           for g, s in h["gates"].items()))
    decision = decision_line(h["decision"])
    if decision:
        lines.append(f"Decision: {decision}")
    return lines


def risk_line(risk: dict[str, Any]) -> str:
    """An open risk in words."""
    if risk["kind"] == "gate":
        name = f"private hypothesis {risk['key']}" if risk["hypothesis_id"] is None \
            else risk["hypothesis_id"]
        return f"{name}: the {risk['gate'].replace('_', ' ')} gate is {risk['status']}"
    if risk["kind"] == "claimed_evidence":
        return (f"{risk['hypothesis_id']}: its {risk['split']} judgement {risk['event_id']} "
                "rests on claimed evidence, which never counts toward promotion")
    return ("the campaign stopped on: " + ", ".join(risk["stop_reasons"]))


def _list(values: list[Any]) -> str:
    return "[" + ", ".join(number(v) for v in values) + "]"


def anchor_line(anchor: dict[str, Any]) -> str:
    """The snapshot the story was rendered from."""
    return (f"Rendered from the evidence log at seq {anchor['head_seq']}, head hash "
            f"{anchor['head_hash']}.")


def verify_command(anchor: dict[str, Any]) -> str:
    """The command that checks a copy of the log against the story's anchor."""
    return f"loopx verify --expect {anchor['head_seq']}:{anchor['head_hash']}"
