"""Wording shared by the Markdown and HTML renderers, so both say the same thing the same way.

Statement kinds stay distinct: a hypothesis is always introduced as one, findings are grouped by
standing, and only judgements and decisions recorded by loopx's rules are called results.
"""

from __future__ import annotations

from typing import Any

from loopx.narrator.reader import number, signed
from loopx.research.control import RULE_WORDS

SPLIT_NAMES = {"dev": "Dev", "heldout": "Held-out", "train": "Train"}
STATE_WORDS = {
    "proposed": "proposed, not yet run", "selected": "selected, waiting for an executor",
    "running": "running", "evidence_recorded": "evidence recorded, not yet judged",
    "supported": "supported on dev, not yet on held-out data",
    "needs_retry": "needs another attempt",
    "contradicted": "significantly worse than the baseline, to be retired",
    "no_effect_found": "no effect found (a negative result, kept as evidence), to be retired",
    "retry_exhausted": "its attempts ran out without a judgement either way, to be retired",
    "at_promotion_gate": "at the promotion gate", "promoted": "promoted", "retired": "retired",
    "baseline": "the campaign's measured baseline: run on each split, never judged or promoted",
    # Not a frontier state: the frontier shows a failed guardrail as "contradicted".
    "guardrail_failed": "its evaluated commits touched protected files, to be retired",
    "unreproduced": "a re-run of its evaluated commit did not give the held-out values it "
                    "recorded, to be retired",
    "invalid_result": "its result was measured invalid (it violates a constraint), to be retired",
}
RETIRE_WORDS = {
    "contradicted": "significantly worse than the baseline (the evidence contradicted it)",
    "no_effect_found": "no effect found (a negative result, kept as evidence)",
    "duplicate": "it repeated an earlier hypothesis",
    "operator_rejected": "the owner rejected its promotion",
    "retry_exhausted": "its attempts ran out",
    "superseded": "a later hypothesis superseded it",
    "guardrail_failed": "a guardrail failed: its evaluated commits touched protected files, or a "
                        "re-run of them did not give its recorded held-out values",
    "invalid_result": "its result was invalid (it violates a constraint), whatever it scored",
}
ASSUMED = "a number typed into the contract, not measured"
GROUP_WORDS = {
    "established": "Established (observed facts, computed results, negative results, "
                   "reproducibility notes)",
    "qualified": "Interpretations (a reading of the results, not established)",
    "not_established": "Hypotheses (not established)",
    "risk": "Risks",
}
CANDIDATE_WORDS = {
    "promotion": ("Promotion candidates", "worth merging: dev support, a held-out test that "
                  "supports it (under the campaign's control, when the contract sets one) and "
                  "every gate passed; awaiting a decision"),
    "retirement": ("Retirement candidates", "to retire: worse than the baseline, no effect "
                   "found, invalid or repeated; negative results are kept as evidence"),
    "retry": ("Retry candidates", "another bounded dev attempt: the last one failed or found "
              "nothing yet, and attempts are left"),
}
RETIRED_INTRO = ("Negative results are results, kept as evidence: each saves future search. "
                 "\"No effect found\" means the test did not show an effect, not that there is "
                 "none; only \"significantly worse\" says the idea hurt.")


def campaign_why(campaign: dict[str, Any]) -> str:
    """Why the policy (or the owner) moved the campaign where it is: ``, stopped on R`` and the
    like, or nothing."""
    if campaign["stop_reasons"]:
        return f", stopped on {', '.join(campaign['stop_reasons'])}"
    if campaign.get("pause_reasons"):
        return f", paused on {', '.join(campaign['pause_reasons'])}"
    if campaign.get("completion"):
        return f", completed: {campaign['completion']}{target_words(campaign)}"
    return ""


def target_words(campaign: dict[str, Any]) -> str:
    """The target a completed campaign reached, and how it moved after the first evidence:
    `` (target acc 0.93; lowered from 0.95 to 0.93 at seq 57, after evidence was recorded)``."""
    target = campaign.get("target")
    if not target:
        return ""
    moves = []
    for move in target["moved"]:
        old, new = move["from"], move["to"]
        how = ("set" if old is None else "removed" if new is None
               else "lowered" if new < old else "raised")
        moves.append(f"{how} from {'none' if old is None else number(old)} to "
                     f"{'none' if new is None else number(new)} at seq {move['seq']}, after "
                     "evidence was recorded")
    return (f" (target {target['metric']} {number(target['value'])}"
            + "".join(f"; {m}" for m in moves) + ")")


def label(item: dict[str, Any]) -> str:
    """How a hypothesis is named: its id, or a private record's id."""
    return f"private hypothesis {item['key']}" if item["private"] else str(item["hypothesis_id"])


def state_words(item: dict[str, Any]) -> str:
    """A hypothesis' state in words (a failed guardrail is told apart from worse evidence)."""
    return STATE_WORDS[item.get("state_words") or item["state"]]


def baseline_words(j: dict[str, Any]) -> str | None:
    """What a judgement measured against: an assumed number, labelled so, or measured values."""
    if j["baseline_kind"] == "assumed":
        return f"assumed baseline {number(j['baseline'])} ({ASSUMED})"
    if j["baseline_kind"] == "measured":
        return f"measured baseline values {_list(j['baseline_values'])}"
    return None


def control_words(c: dict[str, Any]) -> str:
    """How the campaign-level control judged one held-out test."""
    looks = f", over {c['looks']} permitted looks" if c["looks"] > 1 else ""
    return (f"test {c['index']} of the campaign's held-out family under {c['rule']} at level "
            f"{number(c['level'])}: threshold {number(c['threshold'])}{looks}, adjusted p "
            f"{number(c['adjusted_p'])}, " + ("a discovery" if c["discovery"]
                                               else "not a discovery"))


def judgement_line(j: dict[str, Any]) -> str:
    """One judgement in words: verdict, rule, values over seeds, baseline (assumed or
    measured), delta and p, the campaign-level control and the plan version it was made under."""
    split = SPLIT_NAMES.get(j["split"], j["split"])
    if j["private"]:
        return f"{split}: judgement {j['event_id']} is private"
    parts = [f"{split}: {j['verdict']} under {j['rule']} on {j['metric']}"]
    if j["values"]:
        # Under rules version 5 a judgement of several packets holds each seed's mean.
        means = len(j["packet_ids"]) > 1 and len(set(j["seeds"])) == len(j["seeds"])
        parts.append(f"{'per-seed means' if means else 'values'} {_list(j['values'])} over "
                     f"seeds {_list(j['seeds'])}")
    baseline = baseline_words(j)
    if baseline:
        parts.append(baseline)
    if j["mean_delta"] is not None:
        parts.append(f"mean change {signed(j['mean_delta'])}")
    if j["p_value"] is not None:
        parts.append(f"p = {number(j['p_value'])}")
    if j["control"]:
        parts.append("campaign control: " + control_words(j["control"]))
    elif j["split"] == "heldout" and j["verdict"] != "needs_retry":
        parts.append("no campaign-level control applied")
    if j["plan_version"] is not None:
        parts.append(f"under plan version {j['plan_version']}" + (
            ", which an amendment replaced: it no longer counts" if j["plan_replaced"] else ""))
    if j.get("final"):
        parts.append("the hypothesis' final held-out test")
    if j["provenance"] == "claimed":
        parts.append("claimed provenance: never counts")
    return "; ".join(parts) + f" ({j['event_id']})"


def uncounted_words(reason: dict[str, Any], seed: Any) -> str:
    """Why no judgement counts a charted value (``research.evidence.uncounted``)."""
    why = reason["why"]
    if why == "claimed":
        return "claimed provenance: evidence from outside never counts"
    if why == "not_scored":
        return f"a {reason['status']} attempt: only scored packets count"
    if why == "other_seed":
        return f"seed {seed} is not one of its plan's seeds {_list(reason['seeds'])}"
    return (f"its packet lacks seed(s) {_list(reason['missing'])} here: a measurement is every "
            "seed at once")


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


def _promotion_why(basis: list[dict[str, Any]]) -> str:
    """Why a promotion was made, claiming no more than its final held-out test shows."""
    shown = [j for j in basis if not j["private"]]
    if not shown:
        return "dev supported it and the required gates passed (its held-out test is private)"
    j = shown[0]
    if j["control"]:
        how = ("its held-out test passed the campaign's control (" + control_words(j["control"])
               + ")")
    else:
        p_value = "" if j["p_value"] is None else f" at p = {number(j['p_value'])}"
        how = f"its held-out test supported it{p_value} on its own: no campaign-level control"
    return f"dev supported it, {how}, and the other required gates passed"


def decision_line(d: dict[str, Any] | None) -> str | None:
    """A decision in words: why (for a promotion, its held-out test under the campaign's
    control), its note, and the owner's verdict when there is one."""
    if d is None:
        return None
    if d["private"]:
        return f"decision {d['record_id']} is private"
    why = (_promotion_why(d["basis"]) if d["outcome"] == "promoted"
           else RETIRE_WORDS.get(d["reason"], d["reason"]))
    text = f"{d['outcome']} by decision {d['decision_id']} at revision {d['revision']}: {why}"
    if d["note"]:
        text += f"; note: {d['note']}"
    if d["approval"] is not None:
        text += f"; the owner {d['approval']['verdict']} it ({d['approval']['record_id']})"
    return text


def why_lines(reasons: list[str], why: dict[str, Any]) -> list[tuple[int, str]]:
    """A retirement candidate's reasons, each in words, then (one level down) the judgements
    it rests on."""
    out = []
    for reason in reasons:
        text = RETIRE_WORDS.get(reason, reason)
        detail = why.get(reason) or {}
        if detail.get("text"):
            text += f": {detail['text']}"
        out.append((0, text))
        out += [(1, judgement_line(j)) for j in detail.get("basis", [])]
    return out


def evidence_lines(h: dict[str, Any]) -> list[str]:
    """A public hypothesis' evidence in words: its record and state, judgements (every
    held-out one), attempts, required gates and decision, one line each."""
    lines = [f"Hypothesis record {h['record_id']}; state: {state_words(h)}"]
    lines += [judgement_line(j) for split, j in h["evidence"].items()
              if split != "heldout" or not h["heldout_tests"]]
    lines += [judgement_line(j) for j in h["heldout_tests"]]
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
    if risk["kind"] == "assumed_baseline":
        return (f"assumed baseline {number(risk['value'])}: {ASSUMED}; every mean change and "
                "p-value is measured against it")
    if risk["kind"] == "no_control":
        return ("no campaign-level error control applied: each of the "
                f"{risk['tests']} held-out test(s) was judged on its own, so the more are "
                "tested, the likelier a false promotion")
    return ("the campaign stopped on: " + ", ".join(risk["stop_reasons"]))


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _list(values: list[Any]) -> str:
    return "[" + ", ".join(number(v) for v in values) + "]"


def anchor_line(anchor: dict[str, Any]) -> str:
    """The snapshot the story was rendered from, and the write rules its records were checked
    under (each upgrade with the seq it took effect at)."""
    line = (f"Rendered from the evidence log at seq {anchor['head_seq']}, head hash "
            f"{anchor['head_hash']}")
    rules = anchor.get("rules") or []
    if not rules:
        return line + "."
    *earlier, last = rules
    line += f", under write rules version {last['version']}"
    if earlier:
        line += (f" from seq {last['since_seq']} (before: "
                 + ", ".join(f"version {r['version']} from seq {r['since_seq']}"
                             for r in earlier) + ")")
    return line + "."


def verify_command(anchor: dict[str, Any]) -> str:
    """The command that checks a copy of the log against the story's anchor."""
    return f"loopx verify --expect {anchor['head_seq']}:{anchor['head_hash']}"


# -- disclosure and the analysis plan ---------------------------------------------------------

EXPECTED_WORDS = {
    "lond": "level x discoveries, LOND's bound on false discoveries",
    "alpha_spending": "the sum of the thresholds spent; the chance of any false promotion is "
                      "at most this",
}


def metric_words(contract: dict[str, Any]) -> str:
    """The contract's metric line, with the baseline labelled as measured or assumed."""
    m = contract["metric"]
    baseline = (f"baseline measured by hypothesis {m['baseline_hypothesis']}"
                if m["baseline_hypothesis"] else
                f"assumed baseline {number(m['baseline'])} ({ASSUMED})")
    return (f"Metric: {m['name']} ({m['direction']}), {baseline}, minimum change "
            f"{number(m['min_delta'])}, seeds {_list(m['seeds'])}")


def gates_words(contract: dict[str, Any]) -> str:
    """The gates a promotion needs, as the contract lists them (the held-out gate always)."""
    gates = list(dict.fromkeys(["heldout", *contract["required_gates"]]))
    said = [g.replace("_", " ") for g in gates if g != "reproduced"]
    if "reproduced" in gates:
        said.append("reproduced (each held-out value re-run from its commit, within "
                    f"{number(contract['reproduce_tolerance'])})")
    return "Gates a promotion needs: " + ", ".join(said)


def disclosure_lines(d: dict[str, Any]) -> list[str]:
    """How many were tried and tested, the campaign-level control and what it promises, the
    closing Benjamini-Hochberg figure, and the baseline, one line each."""
    c = d["counts"]
    skipped = " (the measured baseline not counted)" if c["baselines"] else ""
    lines = [f"Tried: {_count(c['tried'], 'hypothesis', 'hypotheses')} proposed{skipped}; "
             f"{c['judged_dev']} judged on dev (screening); {c['family']} entered the held-out "
             f"family by claiming a held-out read, {c['judged_heldout']} of them judged on "
             "held-out data (confirmation)."]
    if not d["contract_shown"]:
        return lines + ["The contract is private or not written yet: its control, baseline "
                        "and plan are not published."]
    control = d["control"]
    if control is None:
        lines.append("Campaign-level control: none. This contract sets no campaign-level error "
                     "control, so each held-out test was judged on its own at the contract's "
                     "alpha.")
    else:
        lines.append(f"Campaign-level control: {RULE_WORDS.get(control['rule'], control['rule'])}"
                     f" ({control['rule']}) at level {number(control['level'])}, applied online "
                     "in log order to every held-out test.")
    for g in d["groups"]:
        lines.append(f"Under {g['rule']} at level {number(g['level'])}: "
                     f"{_count(g['tests'], 'held-out test')}, "
                     f"{_count(g['discoveries'], 'discovery', 'discoveries')}; expected false "
                     "promotions at "
                     f"most {number(g['expected_false'])} (computed: "
                     f"{EXPECTED_WORDS.get(g['rule'], g['rule'])}).")
    if d["uncontrolled"]:
        lines.append(f"{d['uncontrolled']} held-out test(s) were judged without campaign-level "
                     "control.")
    if d["hidden"]:
        lines.append(f"{d['hidden']} private held-out test(s) are left out of these figures.")
    bh = d["bh"]
    lines.append(f"Closing Benjamini-Hochberg figure (a disclosure beside the rule, not the "
                 f"rule): {bh['passes']} of {bh['tests']} held-out p-values pass at level "
                 f"{number(bh['level'])} (computed).")
    lines.append(baseline_line(d["baseline"]))
    if d.get("base") is not None:
        measured = (d["baseline"] or {}).get("kind") == "measured"
        lines.append(base_line(d["base"], measured=measured))
    return lines


def base_line(b: dict[str, Any], *, measured: bool) -> str:
    """The commit every experiment starts from, and what that promises."""
    if b["private"]:
        which = f"fixed by a private packet at seq {b['seq']}"
    elif b["contract_version"] is not None:
        which = (f"commit {b['commit']}, pinned by the contract (version "
                 f"{b['contract_version']}, {b['record_id']}, seq {b['seq']})")
    else:
        which = (f"commit {b['commit']}, fixed by the first scored packet ({b['record_id']}, "
                 f"seq {b['seq']}; the contract pins none, so that packet's executor chose it)")
    ran = (", and the measured baseline ran it unchanged, so each comparison is of a "
           "hypothesis' own change") if measured else ""
    return (f"Base: {which}; every scored run written under write rules version 8 started "
            f"from it{ran}.")


def baseline_line(b: dict[str, Any]) -> str:
    """Where the baseline comes from."""
    if b["kind"] == "assumed":
        return (f"Baseline: assumed baseline {number(b['value'])} ({ASSUMED}); every judgement "
                "compares against it.")
    if b["private"]:
        return f"Baseline: measured by private hypothesis {b['key']}."
    if not b["values"]:
        return f"Baseline: measured by hypothesis {b['hypothesis_id']}, not proposed yet."
    per = ", ".join(f"{n} value(s) on {SPLIT_NAMES[s].lower()}" for s, n in b["values"].items())
    return (f"Baseline: measured by hypothesis {b['hypothesis_id']}: {per} (never judged, "
            "promoted or retired).")


def test_line(t: dict[str, Any]) -> str:
    """One member of the held-out family and its final test."""
    j = t["judgement"]
    head = f"Test {t['index']}: {label(t)}: "
    if j is None:
        return head + "claimed a held-out read, not judged yet"
    if j["private"]:
        return head + f"judgement {j['event_id']} is private"
    parts = [f"held-out {j['verdict']}"]
    if j["p_value"] is not None:
        parts.append(f"p = {number(j['p_value'])}")
    c = j["control"]
    if c:
        parts.append(f"adjusted p {number(c['adjusted_p'])}, threshold "
                     f"{number(c['threshold'])}: " + ("a discovery" if c["discovery"]
                                                     else "not a discovery"))
    else:
        parts.append("no campaign-level control")
    return head + "; ".join(parts) + f" ({j['event_id']})"


def plan_lines(plans: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Every plan version: the first in full, the later ones by what changed and when
    relative to the evidence, each followed (one level down) by the edits made before it
    froze."""
    out: list[tuple[int, str]] = []
    for p in plans:
        when = f"contract version {p['contract_version']} ({p['record_id']}), seq {p['seq']}"
        frozen = (f"frozen at seq {p['frozen_seq']} by its first evidence packet"
                  if p["frozen_seq"] is not None else "not frozen yet: no evidence under it")
        now = " (in force)" if p["current"] else ""
        if p["version"] == 1:
            stood = "as it stood then" if p["frozen_seq"] is not None else "as it stands"
            out.append((0, f"Plan version 1{now}, from {when}; {frozen}; {stood}: "
                        + "; ".join(f"{w} {v}" for w, v in p["plan"]) + "."))
        else:
            out.append((0, f"Plan version {p['version']}{now}, opened by {when} after "
                        f"{p['packets_before']} evidence packet(s); {frozen}. Changed: "
                        f"{changes_words(p['changes'])}. Judgements made under an earlier plan "
                        "version no longer count."))
        out += [(1, f"Edited before the freeze, with no evidence under it yet (so it rescues "
                f"nothing): contract version {e['contract_version']} ({e['record_id']}), seq "
                f"{e['seq']}: {changes_words(e['changes'])}.") for e in p["edits"]]
    return out


def changes_words(changes: list[dict[str, str]]) -> str:
    """What an amendment changed, field by field, before -> after."""
    return ", ".join(f"{c['words']} ({c['field']}) {c['before']} -> {c['after']}"
                     for c in changes)
