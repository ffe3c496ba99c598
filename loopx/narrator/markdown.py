"""The case story as Markdown. Every text from a record is escaped, so a title cannot add
links, images or headings of its own."""

from __future__ import annotations

import re
from typing import Any

from loopx.narrator import research_plan, words
from loopx.narrator.reader import number

# An underscore inside a word never starts emphasis, so ids like rec_... stay readable.
_SPECIAL = re.compile(r"([\\`*\[\]<>#|!~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def md(text: Any) -> str:
    """Text safe to place in Markdown: special characters escaped, on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def render(doc: dict[str, Any]) -> str:
    """The story document as Markdown."""
    screen = doc["first_screen"]
    action = screen["primary_action"]
    out = [f"# {md(screen['title'])}", "", f"> {md(screen['headline'])}", "",
           f"[{md(action['label'])}]({action['href']})", "",
           f"_{md(words.anchor_line(doc['anchor']))}_ Check a copy of the log against it "
           f"with `{words.verify_command(doc['anchor'])}`.", ""]
    out += _question(doc["contract"], doc["campaign"])
    out += _disclosure(doc["disclosure"])
    out += _plan(doc["disclosure"])
    out += _research_plan(doc.get("research_plan"))
    out += _tried(doc["hypotheses"])
    out += _evidence(doc["hypotheses"])
    out += _outcomes(doc)
    out += _candidates(doc["candidates"])
    out += _findings(doc["findings"])
    out += ["## Open risks", '<a id="risks"></a>', ""]
    out += [f"- {md(words.risk_line(r))}" for r in doc["risks"]] or ["- None recorded."]
    out.append("")
    return "\n".join(out)


def _question(contract: dict[str, Any] | None, campaign: dict[str, Any]) -> list[str]:
    out = ["## The question", ""]
    if contract is None:
        return out + ["No research contract has been written yet.", ""]
    if contract["private"]:
        return out + [f"The contract ({contract['record_id']}) is private.", ""]
    out += [f"**{md(contract['question'])}**", "", md(contract["prompt"]), "",
            f"- {md(words.metric_words(contract))}",
            f"- Rule: {md(contract['rule'])} at alpha {number(contract['alpha'])}; dev split "
            f"{md(contract['splits']['dev'])}, held-out split {md(contract['splits']['heldout'])}",
            f"- {md(words.gates_words(contract))}",
            f"- Contract version {contract['version']} ({contract['record_id']}); campaign "
            f"{campaign['state']}{md(words.campaign_why(campaign))}", ""]
    return out


def _disclosure(d: dict[str, Any]) -> list[str]:
    out = ["## Disclosure", '<a id="disclosure"></a>', "",
           "How many ideas were tried and tested, and what the campaign's error control "
           "promises: read every result below against these numbers.", ""]
    out += [f"- {md(line)}" for line in words.disclosure_lines(d)]
    if d["tests"]:
        out += ["", "The held-out family, in the order fixed by each hypothesis' first held-out "
                "claim:", ""]
        out += [f"- {md(words.test_line(t))}" for t in d["tests"]]
    return out + [""]


def _plan(d: dict[str, Any]) -> list[str]:
    out = ["## The analysis plan", '<a id="plan"></a>', "",
           "What decides what a measurement means. It freezes at the first evidence packet; an "
           "amendment after that opens a new plan version and never rescues a judgement made "
           "under the old one.", ""]
    lines = words.plan_lines(d["plans"])
    out += [f"{'  ' * depth}- {md(line)}" for depth, line in lines]
    if not lines:
        out.append("- No plan published (no contract, or a private one).")
    return out + [""]


def _research_plan(plan: dict[str, Any] | None) -> list[str]:
    """The research plan's section, only when one was recorded (the planner is optional)."""
    if plan is None:
        return []
    out = ["## The research plan", '<a id="research-plan"></a>', "",
           md(research_plan.INTRO), ""]
    out += [f"{'  ' * depth}- {md(line)}" for depth, line in research_plan.lines(plan)]
    revisions = research_plan.revision_lines(plan)
    if revisions:
        out += ["", "Replanned (each version supersedes the one before):", ""]
        out += [f"- {md(line)}" for line in revisions]
    return out + [""]


def _tried(hypotheses: list[dict[str, Any]]) -> list[str]:
    out = ["## What was tried", "", "Each line is a hypothesis: an idea under test, not a result. "
           "Refinements sit under the hypothesis they refine.", ""]
    for h in hypotheses:
        indent = "  " * h["depth"]
        if h["private"]:
            out.append(f"{indent}- {md(words.label(h))}: {words.state_words(h)}")
            continue
        out.append(f"{indent}- Hypothesis {md(h['hypothesis_id'])}: {md(h['title'])} "
                   f"(family {md(h['mechanism_family'])}, proposed by {md(h['proposed_by'])}); "
                   f"{words.state_words(h)} ([evidence](#{anchor(h)}))")
    return out + ([""] if hypotheses else ["No hypotheses yet.", ""])


def anchor(item: dict[str, Any]) -> str:
    """The in-page anchor of a hypothesis' evidence section."""
    return f"ev-{item['key'][4:16]}"


def _evidence(hypotheses: list[dict[str, Any]]) -> list[str]:
    out = ["## Evidence", '<a id="evidence"></a>', ""]
    for h in hypotheses:
        out += [f"### {md(words.label(h))}", f'<a id="{anchor(h)}"></a>', ""]
        if h["private"]:
            out += [f"Record {h['record_id']} is private; its evidence is not published.", ""]
            continue
        out += [f"- {md(line)}" for line in words.evidence_lines(h)]
        out.append("")
    return out


def _outcomes(doc: dict[str, Any]) -> list[str]:
    out = ["## What was promoted, and why", '<a id="promoted"></a>', ""]
    for item in doc["promoted"]:
        out.append(f"- {md(words.label(item))}"
                   + ("" if item["private"] else f": {md(item['title'])}"))
        tests = item["heldout_tests"] or ([item["heldout"]] if item["heldout"] else [])
        out += [f"  - {md(words.judgement_line(j))}" for j in tests]
        if item["dev"]:
            out.append(f"  - {md(words.judgement_line(item['dev']))}")
        out.append(f"  - {md(words.decision_line(item['decision']) or 'no decision')}")
    if not doc["promoted"]:
        out.append("- Nothing has been promoted.")
    out += ["", "## What was retired, and why", "", md(words.RETIRED_INTRO), ""]
    for item in doc["retired"]:
        out.append(f"- {md(words.label(item))}"
                   + ("" if item["private"] else f": {md(item['title'])}")
                   + f" ({md(words.decision_line(item['decision']) or 'no decision')})")
        out += [f"  - {md(words.judgement_line(j))}"
                for j in (item["decision"] or {}).get("basis", [])]
    if not doc["retired"]:
        out.append("- Nothing has been retired.")
    return out + [""]


def _candidates(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    out = ["## Candidates", '<a id="candidates"></a>', ""]
    for kind in ("promotion", "retirement", "retry"):
        title, meaning = words.CANDIDATE_WORDS[kind]
        out += [f"### {title}", "", f"_{meaning}._", ""]
        for c in found[kind]:
            extra = (f"; reasons: {', '.join(c['reasons'])}" if kind == "retirement" else
                     f"; {c['attempts_left']} attempt(s) left after {c['packet_id']}"
                     if kind == "retry" else "")
            title_text = "" if c["private"] else f": {md(c['title'])}"
            out.append(f"- {md(words.label(c))}{title_text} ([evidence](#{anchor(c)})){extra}; "
                       f"rests on {', '.join(c['rests_on'])}")
            if kind == "retirement":
                out += [f"{'  ' * (depth + 1)}- {md(line)}"
                        for depth, line in words.why_lines(c["reasons"], c["why"])]
        if not found[kind]:
            out.append("- None.")
        out.append("")
    return out


def _findings(groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    out = ["## Findings", ""]
    for group, title in words.GROUP_WORDS.items():
        items = groups.get(group, [])
        if not items:
            continue
        out += [f"### {title}", ""]
        for f in items:
            if f["private"]:
                out.append(f"- A private {f['kind'].replace('_', ' ')} ({f['record_id']})")
            else:
                out.append(f"- {f['kind'].replace('_', ' ').capitalize()} "
                           f"{md(f['finding_id'])}: {md(f['statement'])} ({f['record_id']})")
        out.append("")
    if len(out) == 2:
        out += ["No findings recorded.", ""]
    return out
