"""The narrator: the story's and the board's structure and numbers for a small fixed campaign,
the first-screen gate, publication records and their pins."""

from __future__ import annotations

import hashlib
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from narrator_support import (
    DEV_GOOD,
    HELDOUT_GOOD,
    Fixed,
    check_numbers,
    fixed_campaign,
    legacy_campaign,
    measured_campaign,
)

from loopx.governance.actions import decide_approval
from loopx.governance.contract import amend_contract
from loopx.kernel.errors import Refused
from loopx.kernel.verify import Anchor, verify_store
from loopx.narrator.first_screen import NEUTRAL, screen_sha256
from loopx.narrator.publish import preview, publish, render
from loopx.narrator.story import number
from loopx.research.decisions import decide


@pytest.fixture(scope="module")
def fixed() -> Fixed:
    return fixed_campaign()


def record(f: Fixed, record_id: str) -> dict[str, Any]:
    [found] = [r for r, _ in f.c.ledger.store.read() if r["record_id"] == record_id]
    return found


def sections(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("#")]


# -- Markdown: structure and numbers --------------------------------------------------------

def test_markdown_has_the_story_sections_in_order(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "story", "md").text
    assert sections(text) == [
        "# Research case",
        "## The question",
        "## Disclosure",
        "## The analysis plan",
        "## What was tried",
        "## Evidence", "### h-wide", "### h-wider", "### h-drop", "### h-deep", "### h-norm",
        "## What was promoted, and why",
        "## What was retired, and why",
        "## Candidates", "### Promotion candidates", "### Retirement candidates",
        "### Retry candidates",
        "## Findings", "### Interpretations (a reading of the results, not established)",
        "### Risks",
        "## Open risks",
    ]


def test_markdown_shows_the_hypothesis_tree_with_refinements_under_their_parent(
        fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "story", "md").text
    tried = text.split("## What was tried")[1].split("## Evidence")[0]
    items = [line for line in tried.splitlines() if line.lstrip().startswith("- ")]
    assert [(len(line) - len(line.lstrip()), line.split(":")[0].strip("- ")) for line in items] \
        == [(0, "Hypothesis h-wide"), (2, "Hypothesis h-wider"), (0, "Hypothesis h-drop"),
            (0, "Hypothesis h-deep"), (0, "Hypothesis h-norm")]
    assert "; promoted (" in items[0] and "; retired (" in items[1]
    assert "; needs another attempt (" in items[2]
    assert "significantly worse than the baseline, to be retired" in items[3]
    assert "at the promotion gate" in items[4]


def test_every_judgement_line_quotes_its_record_exactly(fixed: Fixed) -> None:
    """Values, seeds, baseline, mean change and p on each line are the judgement record's own
    (to four significant digits), and the line names that record."""
    text = render(fixed.c.ledger, "story", "md").text
    lines = [line for line in text.splitlines()
             if re.match(r"^\s*- (Dev|Held-out): ", line)]
    # h-wide 2 (and 2 under promoted), h-wider 1 (and 1 under retired), h-deep 1 (and 1 under
    # its retirement candidacy), h-norm 2.
    assert len(lines) == 10
    for line in lines:
        plain = line.replace("\\", "")
        event_id = re.search(r"\((rec_[0-9a-f]{32})\)$", plain).group(1)
        p = record(fixed, event_id)["payload"]
        assert f"values [{', '.join(number(v) for v in p['values'])}]" in plain
        assert f"seeds [{', '.join(number(s) for s in p['seeds'])}]" in plain
        assert (f"assumed baseline {number(p['baseline'])} (a number typed into the contract, "
                "not measured)") in plain
        sign = "+" if p["mean_delta"] >= 0 else ""
        assert f"mean change {sign}{number(p['mean_delta'])}" in plain
        assert f"p = {number(p['p_value'])}" in plain
        assert f": {p['verdict']} under" in plain
        c = p["control"]
        assert (c is None) == (p["split"] == "dev"), line
        if c is not None:
            assert (f"campaign control: test {c['index']} of the campaign's held-out family under "
                    f"{c['rule']} at level {number(c['level'])}: threshold "
                    f"{number(c['threshold'])}, adjusted p {number(c['adjusted_p'])}, "
                    + ("a discovery" if c["discovery"] else "not a discovery")) in plain


def test_the_recorded_values_are_the_fixture_values(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "story", "md").text.replace("\\", "")
    evidence = text.split("### h-wide")[1].split("### h-wider")[0]
    assert f"values [{', '.join(map(str, DEV_GOOD))}] over seeds [0, 1, 2]" in evidence
    assert f"values [{', '.join(map(str, HELDOUT_GOOD))}] over seeds [0, 1, 2]" in evidence
    assert "baseline 0.9" in evidence


def test_every_metric_the_story_quotes_names_a_record_holding_it(fixed: Fixed) -> None:
    """Logged numbers name their record and field; the computed ones (expected false
    promotions, the Benjamini-Hochberg count) name their formula and every recorded input, and
    recomputing them from those inputs gives the value shown."""
    story = render(fixed.c.ledger, "story", "md").story
    assert story.numbers
    derived = check_numbers(story.numbers, lambda rid: record(fixed, rid)["payload"])
    assert derived == 2


def test_statement_kinds_stay_distinct(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "story", "md").text
    assert "Each line is a hypothesis: an idea under test, not a result." in text
    findings = text.split("## Findings")[1].split("## Open risks")[0]
    interpretation = findings.split("### Interpretations")[1].split("###")[0]
    assert "Interpretation f-why: Width helps" in interpretation
    assert "not established" in findings.split("### Interpretations")[1].splitlines()[0]
    assert "### Established" not in findings  # nothing was recorded as established
    assert "Risk f-risk: Three seeds are few" in findings.split("### Risks")[1]


def test_promoted_retired_and_retry_say_why(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "story", "md").text
    promoted = text.split("## What was promoted, and why")[1].split("## What was retired")[0]
    assert "- h-wide: Wider hidden layer" in promoted
    assert "promoted by decision d-wide at revision" in promoted
    # Never a bare "every gate passed": the held-out test under the campaign's control.
    assert "every required gate passed" not in promoted
    assert ("dev supported it, its held-out test passed the campaign's control (test 1 of the "
            "campaign's held-out family under lond at level 0.05: threshold 0.01914, adjusted p "
            "0.04585, a discovery), and the other required gates passed") in promoted
    retired = text.split("## What was retired, and why")[1].split("## Candidates")[0]
    assert "Negative results are results" in retired
    assert "h-wider: Even wider hidden layer (retired by decision d-wider" in retired
    assert "significantly worse than the baseline (the evidence contradicted it)" in retired
    candidates = text.split("## Candidates")[1].split("## Findings")[0]
    promotion = candidates.split("### Promotion candidates")[1].split("###")[0]
    retirement = candidates.split("### Retirement candidates")[1].split("###")[0]
    retry = candidates.split("### Retry candidates")[1]
    assert re.findall(r"^- (h-[a-z]+)", promotion, re.M) == ["h-norm"]
    assert re.findall(r"^- (h-[a-z]+)", retirement, re.M) == ["h-deep"]
    assert "reasons: contradicted" in retirement
    assert re.findall(r"^- (h-[a-z]+)", retry, re.M) == ["h-drop"]
    assert "2 attempt(s) left" in retry


def test_the_story_quotes_its_anchor(fixed: Fixed) -> None:
    rendered = render(fixed.c.ledger, "story", "md")
    head = fixed.c.ledger.store.head()
    assert (rendered.head_seq, rendered.head_hash) == (head.seq, head.hash)
    assert f"`loopx verify --expect {head.seq}:{head.hash}`" in rendered.text
    assert f"head hash {head.hash}" in rendered.text


def test_a_title_cannot_add_markdown_of_its_own() -> None:
    f = fixed_campaign()
    f.r.propose("h-md", title="[click](http://example.com) **now** # heading")
    text = render(f.c.ledger, "story", "md").text
    assert "[click](http" not in text and "**now**" not in text
    assert r"\[click\](http://example.com) \*\*now\*\* \# heading" in text


# -- HTML: structure ------------------------------------------------------------------------

class Page(HTMLParser):
    """Collects what the structure tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.h2: list[str] = []
        self.links: list[str] = []
        self.sources: list[str] = []
        self.columns: dict[str, list[str]] = {}
        self._column: str | None = None
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if "href" in a:
            self.links.append(str(a["href"]))
        if "src" in a:
            self.sources.append(str(a["src"]))
        if a.get("data-column"):
            self._column = a["data-column"]
            self.columns[self._column] = []
        if tag == "a" and a.get("data-hypothesis") and self._column:
            self.columns[self._column].append(str(a["data-hypothesis"]))
        self._in_h2 = tag == "h2"

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.h2.append(data)
            self._in_h2 = False


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def test_the_board_shows_three_columns_with_the_expected_cards(fixed: Fixed) -> None:
    page = parse(render(fixed.c.ledger, "board", "html").text)
    # The fourth column: every live hypothesis, from the frontier (promoted and retired ones
    # have no next action).
    assert page.columns == {"promotion": ["h-wide", "h-norm"],
                            "retirement": ["h-wider", "h-deep"], "retry": ["h-drop"],
                            "next": ["h-drop", "h-deep", "h-norm"]}
    assert [h for h in page.h2 if h != "Candidates"][:4] == [
        "Worth merging", "Retired, or to retire", "Needs another turn", "Next actions"]


def test_every_card_links_to_its_evidence_in_the_page(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "board", "html").text
    page = parse(text)
    cards = re.findall(r'<a class="card" href="#([^"]+)" data-hypothesis="([^"]+)"', text)
    assert len(cards) == 8  # five candidates or decided, three live with a next action
    for target, hypothesis in cards:
        assert target in page.ids
        assert re.search(f'<h3 id="{target}">{hypothesis}</h3>', text)


def test_the_board_is_self_contained(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "board", "html").text
    page = parse(text)
    assert "script" not in page.tags and "link" not in page.tags and "img" not in page.tags
    assert page.sources == []
    assert all(link.startswith("#") for link in page.links), page.links
    assert "url(" not in text and "@import" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert "svg" in page.tags and "style" in page.tags


def test_the_board_draws_the_graph_and_the_frontier(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "board", "html").text
    graph = text.split('id="graph"')[1].split("</section>")[0]
    states = re.findall(r'<g class="node" data-state="([a-z_]+)"', graph)
    assert states == ["promoted", "retired", "needs_retry", "contradicted", "at_promotion_gate"]
    # h-wide: an attempt and its judgement on dev, then on held-out, then the decision, in
    # log order: a record's kind is its glyph's shape.
    first = graph.split('<g class="node"')[1].split('<g class="node"')[0]
    assert re.findall(r'class="mark" data-shape="([a-z]+)"', first) == [
        "box", "circle", "diamond", "circle", "diamond", "star"]
    frontier = text.split('id="frontier"')[1].split("</section>")[0]
    assert re.findall(r"<tr><td>(h-[a-z]+)</td><td>([a-z_]+)</td>", frontier) == [
        ("h-wide", "promoted"), ("h-wider", "retired"), ("h-drop", "needs_retry"),
        ("h-deep", "contradicted"), ("h-norm", "at_promotion_gate")]


def test_the_html_story_has_the_same_sections_as_the_markdown(fixed: Fixed) -> None:
    page = parse(render(fixed.c.ledger, "story", "html").text)
    assert page.h2[:7] == ["The question", "Disclosure", "The analysis plan", "What was tried",
                           "Evidence", "What was promoted, and why", "What was retired, and why"]
    assert {"promotion", "retirement", "retry"} <= set(page.columns)
    assert "script" not in page.tags


def test_text_from_records_is_escaped_in_html() -> None:
    f = fixed_campaign()
    f.r.propose("h-x", title='<img src="https://example.com/x.png"> & <b>bold</b>')
    text = render(f.c.ledger, "board", "html").text
    assert "<img" not in text and "<b>bold" not in text
    assert "&lt;img src=&quot;https://example.com/x.png&quot;&gt; &amp; &lt;b&gt;" in text


# -- the board a person reads: legends, hover titles, the campaign's state, next actions and
# -- the metric over time ---------------------------------------------------------------------

def between(text: str, start: str, end: str = "</section>") -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def drawn(fragment: str, cls: str) -> set[tuple[str, str, str]]:
    """(shape, stroke, fill) of every element whose class list holds ``cls``."""
    out = set()
    for attrs in re.findall(r"<(?:rect|circle|path|polygon)\s([^>]*)>", fragment):
        a = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
        if cls in a.get("class", "").split():
            out.add((a["data-shape"], a["stroke"], a["fill"]))
    return out


def test_every_colour_and_shape_the_board_draws_has_a_legend_entry_and_no_more() -> None:
    from loopx.narrator.legend import STATE_COLOURS

    for f in (fixed_campaign(), measured_campaign()):
        text = render(f.c.ledger, "board", "html").text
        cards = between(text, 'id="candidates"')
        edges = set(re.findall(r'<a class="card"[^>]*style="border-left-color:(#[0-9a-f]{6})"',
                               cards))
        swatches = set(re.findall(r'class="swatch card"[^>]*border-left-color:(#[0-9a-f]{6})',
                                  between(cards, 'data-legend="cards"', "</div>")))
        assert edges and edges == swatches
        for section_id, legend in (("graph", "graph"), ("charts", "charts")):
            part = between(text, f'id="{section_id}"')
            marks = drawn(part.split('data-legend="')[0] if section_id == "graph" else
                          part.split('<div class="charts">')[1], "mark")
            keys = drawn(between(part, f'data-legend="{legend}"', "</ul>"), "key-mark")
            assert marks and marks == keys, (section_id, marks ^ keys)
    # One colour per state, so a colour names its state.
    assert len(set(STATE_COLOURS.values())) == len(STATE_COLOURS)


def test_a_legend_says_what_each_glyph_means(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "board", "html").text
    graph = between(text, 'data-legend="graph"', "</ul>")
    words = re.findall(r'<li class="key" title="([^"]+)">', graph)
    assert {"promoted", "retired", "needs retry", "contradicted", "at promotion gate",
            "judgement: supports", "judgement: contradicts", "decision: promoted",
            "decision: retired", "attempt, scored"} <= set(words)
    assert any(w.startswith("refines") for w in words)
    assert any(w.startswith("attempt without a score") for w in words)  # h-drop's failure


def test_every_card_and_mark_has_a_hover_title_and_a_long_name_is_never_lost() -> None:
    f = fixed_campaign()
    long_title = "A much longer title than any box can hold, about width and depth together"
    f.r.propose("h-long", title=long_title)
    text = render(f.c.ledger, "board", "html").text
    titles = re.findall(r'<a class="card"[^>]* title="([^"]+)"', text)
    assert len(titles) == text.count('<a class="card"') and "h-drop: Dropout before the " \
        "head (needs another attempt)" in titles
    for svg in re.findall(r"<svg [^>]*class=\"(?:graph|chart)\".*?</svg>", text):
        # Every mark holds its title; a hypothesis' box is titled by the group around it.
        marks = re.findall(r'<(rect|circle|path|polygon)\s[^>]*class="mark[^"]*" '
                           r'data-shape="([a-z]+)"[^>]*?(/?)>(<title>)?', svg)
        assert marks and all(closed == "" and title for _, shape, closed, title in marks
                             if shape != "box")
        nodes = re.findall(r'<g class="node".*?</g>', svg)
        assert all("<title>" in node for node in nodes)
        assert len(nodes) == sum(1 for _, shape, *_ in marks if shape == "box")
    graph = between(text, 'id="graph"')
    box = graph.split("h-long: ", 1)[1].split("</g>")[0]
    shown = box.split("<")[0]
    assert shown.endswith("\u2026") and len(shown) < len(long_title)  # cut short on the box
    assert f"<title>h-long: {long_title}: proposed, not yet run</title>" in box
    # ... and the box links to the evidence, which gives the whole title.
    target = re.findall(r'<a href="#([^"]+)"><g class="node"', graph)[-1]
    assert f'<h3 id="{target}">h-long</h3><p class="full-title">{long_title}</p>' in text


def test_the_campaigns_state_and_stop_reason_come_right_after_the_first_screen() -> None:
    from lanes_support import campaign

    from loopx.testing.research import CONTRACT, ResearchLoop

    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "stop_policy": {"max_iterations": 1}})
    r.supported("h-wide", DEV_GOOD, HELDOUT_GOOD, title="Wider hidden layer")
    r.supported("h-other", DEV_GOOD, None, title="Another idea")
    decide(c.ledger, r.agents["ev"], "h-wide", "promoted", decision_id="d-wide")
    text = render(c.ledger, "board", "html").text
    page = parse(text)
    assert page.ids.index("status") == page.ids.index("top") + 1
    status = between(text, 'id="status"')
    assert ("Campaign stopped: the stop policy&#x27;s maximum number of iterations (decisions) "
            "was reached (maximum_iterations_reached). 1 iteration (decisions) of the 1 the "
            "stop policy allows.") in status
    assert "1 promoted, 0 retired, 1 open" in status
    # Nothing but the narrator works now: the next-action column says so.
    column = between(text, 'data-column="next"', '<div class="legend"')
    assert "the campaign is stopped, so no role but the narrator takes work now" in column
    assert 'data-hypothesis="h-other"' in column


def test_the_next_actions_are_the_frontiers_for_every_live_hypothesis(fixed: Fixed) -> None:
    from loopx.narrator.board import ACTION_WORDS
    from loopx.research.projections import frontier

    text = render(fixed.c.ledger, "board", "html").text
    column = between(text, 'data-column="next"', '<div class="legend"')
    cards = dict(re.findall(r'data-hypothesis="(h-[a-z]+)".*?next: (.*?)</span>', column))
    live = [r for r in frontier(fixed.view()) if r.state not in ("promoted", "retired")]
    assert list(cards) == [r.hypothesis_id for r in live]
    for row in live:
        assert row.next_action and row.next_role
        assert cards[row.hypothesis_id] == (f"{ACTION_WORDS[row.next_action]} "
                                            f"({row.next_action}), by the {row.next_role} role")
    assert "why: 2 attempt(s) left" in column  # the frontier's own words


def chart_of(text: str, hypothesis: str) -> str:
    [svg] = re.findall(rf'<svg [^>]*class="chart"[^>]*data-hypothesis="{hypothesis}".*?</svg>',
                       text)
    return svg


def points(svg: str, kind: str) -> list[tuple[float, float, str]]:
    """(x, y, hover title) of each mark of ``kind`` in a chart."""
    out = []
    for tag, title in re.findall(rf'<((?:circle|rect|polygon|path)[^>]*data-kind="{kind}"[^>]*)>'
                                 r"<title>([^<]*)</title>", svg):
        a = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
        if "d" in a:
            x, y = (float(v) for v in a["d"][1:].split()[:2])
        elif "cx" in a:
            x, y = float(a["cx"]), float(a["cy"])
        elif "points" in a:
            x, y = (float(v) for v in a["points"].split()[0].split(","))
        else:
            x = float(a["x"]) + float(a["width"]) / 2
            y = float(a["y"]) + float(a["height"]) / 2
        out.append((x, y, unescape(title)))
    return out


def test_each_hypothesis_has_a_chart_of_every_value_in_log_order(fixed: Fixed) -> None:
    view = fixed.view()
    text = render(fixed.c.ledger, "board", "html").text
    charts = between(text, 'id="charts"')
    assert re.findall(r'class="chart" role="img" data-hypothesis="(h-[a-z]+)"', charts) == [
        "h-wide", "h-wider", "h-drop", "h-deep", "h-norm"]
    for hid, entry in view["hypotheses"].items():
        svg = chart_of(charts, hid)
        values = [(p, s, seed, v) for p in entry["packets"]
                  for s, _, seed, v in view["packets"][p]["results"]]
        drawn_points = points(svg, "value")
        assert len(drawn_points) == len(values), hid
        for (_, _, title), (packet, split, seed, value) in zip(
                sorted(drawn_points), values, strict=True):
            # In log order, left to right; each names its split, value, seed and packet.
            assert (f"{hid}: {'held-out' if split == 'heldout' else split} value "
                    f"{number(value)}, seed {seed}, attempt 1 ({packet}, seq "
                    f"{view['packets'][packet]['seq']})") == title
        # A higher value is drawn higher (SVG's y grows downward).
        by_value = sorted(drawn_points, key=lambda p: float(p[2].split(" value ")[1].split(",")[0]))
        assert [p[1] for p in by_value] == sorted((p[1] for p in by_value), reverse=True)
        # The assumed baseline: a labelled line.
        assert svg.count('data-kind="assumed"') == 1 and ">assumed baseline 0.9</text>" in svg
    # h-drop's failed attempt has no value: a mark of its own, at its place in the log.
    [(_, _, failed)] = points(chart_of(charts, "h-drop"), "no-value")
    assert failed.startswith("h-drop: attempt 1 failed, no value (rec_")


def test_a_measured_baseline_is_charted_as_its_own_values(measured: Fixed) -> None:
    view = measured.view()
    text = render(measured.c.ledger, "board", "html").text
    charts = between(text, 'id="charts"')
    assert 'data-hypothesis="base"' not in charts  # the baseline is in every chart, not its own
    base = [v for p in view["hypotheses"]["base"]["packets"]
            for *_, v in view["packets"][p]["results"]]
    svg = chart_of(charts, "h-good")
    marks = points(svg, "baseline")
    assert len(marks) == len(base) == 6 and 'data-kind="assumed"' not in svg
    assert all(t.startswith("measured baseline base: ") for *_, t in marks)
    # The baseline ran before h-good: its marks are to the left of every value of h-good.
    assert max(x for x, *_ in marks) < min(x for x, *_ in points(svg, "value"))
    assert "against the baseline measured by hypothesis base" in charts


def test_every_charted_number_is_registered_with_its_packet(measured: Fixed) -> None:
    numbers = render(measured.c.ledger, "board", "html").story.numbers
    payloads = {r["record_id"]: r["payload"] for r, _ in measured.c.ledger.store.read()}
    check_numbers(numbers, payloads.__getitem__)
    registered = {(n["record_id"], n["field"]) for n in numbers if "derived" not in n}
    view = measured.view()
    for pid, packet in view["packets"].items():
        for i in range(len(packet["results"])):
            assert (pid, f"results.{i}.value") in registered
            assert (pid, f"results.{i}.seed") in registered


def test_a_private_packet_is_never_charted() -> None:
    from loopx.work.todos import add_todos

    f = fixed_campaign()
    add_todos(f.c.ledger, f.r.agents["ev"], [{
        "todo_id": "dev-secret", "title": "again", "role": "research_executor",
        "action_kind": "run_dev_eval", "assigned_to": "ex", "hypothesis_id": "h-drop"}])
    todo_id, epoch = f.r._claim("ex")
    f.c.ledger.append({"todo_id": todo_id, "epoch": epoch, "visibility": "private",
                       "payload": {"hypothesis_id": "h-drop", "status": "scored", "attempt": 2,
                                   "results": [{"split": "dev", "metric": "acc", "seed": 0,
                                                "value": 0.8765432}]}},
                      creds=f.r.agents["ex"], kind="auto_research_evidence_packet_v0")
    text = render(f.c.ledger, "board", "html").text
    assert "0.8765" not in text
    svg = chart_of(text, "h-drop")
    assert points(svg, "value") == [] and len(points(svg, "no-value")) == 1
    assert "h-drop: Dropout before the head" in text
    assert "1 private attempt(s) not drawn" in between(text, 'id="charts"')


# -- the first-screen gate ------------------------------------------------------------------

def test_an_unapproved_headline_change_is_held_back(tmp_path: Path) -> None:
    f = fixed_campaign()
    out = tmp_path / "story.md"
    first = publish(f.c.ledger, f.narrator, "story", "md", out)
    gate = first["first_screen"]
    assert gate["status"] == "held_back"
    assert gate["first_screen"] == NEUTRAL
    assert gate["held_back"]["headline"].startswith("Promoted: Wider hidden layer.")
    assert "no approved preview" in gate["reason"]
    text = out.read_text()
    assert text.startswith(f"# {NEUTRAL['title']}\n\n> {NEUTRAL['headline']}")
    assert "Promoted: Wider hidden layer" not in text.split("## The question")[0]
    [pub] = f.c.records("publication_v0")
    assert pub["payload"]["first_screen_status"] == "held_back"
    assert pub["payload"]["held_back_sha256"] == screen_sha256(gate["held_back"])

    # The narrator previews it, the owner approves it: now it is published.
    shown = preview(f.c.ledger, f.narrator, preview_id="pv-1")
    assert shown["first_screen"] == gate["held_back"]
    decide_approval(f.c.ledger, f.c.owner, "pv-1", approved=True, note="reviewed")
    second = publish(f.c.ledger, f.narrator, "story", "md", out)
    assert second["first_screen"]["status"] == "approved_change"
    assert second["first_screen"]["preview_id"] == "pv-1"
    assert out.read_text().startswith(f"# digits\n\n> {gate['held_back']['headline']}")
    assert publish(f.c.ledger, f.narrator, "story", "md", out)["first_screen"]["status"] \
        == "unchanged"

    # A new promotion changes the headline again: held back, the approved screen is kept.
    decide(f.c.ledger, f.r.agents["ev"], "h-norm", "promoted", decision_id="d-norm")
    third = publish(f.c.ledger, f.narrator, "board", "html", tmp_path / "board.html")
    assert third["first_screen"]["status"] == "held_back"
    assert third["first_screen"]["held_back"]["headline"].startswith("Promoted: Batch norm.")
    board = (tmp_path / "board.html").read_text()
    assert gate["held_back"]["headline"] in board and "Promoted: Batch norm." not in board


def test_a_rejected_preview_keeps_the_screen_held_back(tmp_path: Path) -> None:
    f = fixed_campaign()
    preview(f.c.ledger, f.narrator, preview_id="pv-1")
    decide_approval(f.c.ledger, f.c.owner, "pv-1", approved=False, note="not yet")
    out = publish(f.c.ledger, f.narrator, "story", "md", tmp_path / "s.md")
    assert out["first_screen"]["status"] == "held_back"
    assert "the owner rejected this first screen" in out["first_screen"]["reason"]


def test_a_preview_needs_a_change_and_is_not_repeated() -> None:
    f = fixed_campaign()
    preview(f.c.ledger, f.narrator, preview_id="pv-1")
    with pytest.raises(Refused, match="already awaits the owner"):
        preview(f.c.ledger, f.narrator, preview_id="pv-2")
    decide_approval(f.c.ledger, f.c.owner, "pv-1", approved=True, note="ok")


def test_no_one_approves_their_own_preview_and_only_the_owner_approves() -> None:
    from loopx.kernel.errors import Forbidden

    f = fixed_campaign()
    preview(f.c.ledger, f.narrator, preview_id="pv-1")
    with pytest.raises((Forbidden, Refused)):
        decide_approval(f.c.ledger, f.narrator, "pv-1", approved=True, note="mine")


def test_a_publication_appended_around_the_narrator_obeys_the_gate() -> None:
    f = fixed_campaign()
    head = f.c.head()
    screen = {**NEUTRAL, "headline": "Everything works"}
    payload = {"publication_id": "pub-x", "surface": "story", "format": "md",
               "head_seq": head, "head_hash": f.c.ledger.store.head().hash,
               "output_sha256": "0" * 64, "output_bytes": 1, "first_screen": screen,
               "first_screen_sha256": screen_sha256(screen), "first_screen_status": "unchanged"}
    with pytest.raises(Refused, match="differs from the one published last"):
        f.c.ledger.append({"payload": payload}, creds=f.narrator, kind="publication_v0")
    with pytest.raises(Refused, match="approved preview"):
        f.c.ledger.append({"payload": {**payload, "first_screen_status": "approved_change"}},
                          creds=f.narrator, kind="publication_v0")
    with pytest.raises(Refused, match="not the digest"):
        f.c.ledger.append({"payload": {**payload, "first_screen_sha256": "1" * 64}},
                          creds=f.narrator, kind="publication_v0")
    assert f.c.head() == head


# -- publication records --------------------------------------------------------------------

def test_a_publication_pins_its_snapshot_and_digest(tmp_path: Path) -> None:
    f = fixed_campaign()
    before = f.c.ledger.store.head()
    out = publish(f.c.ledger, f.narrator, "board", "html", tmp_path / "board.html",
                  publication_id="pub-1")
    [pub] = f.c.records("publication_v0")
    p = pub["payload"]
    data = (tmp_path / "board.html").read_bytes()
    assert (p["head_seq"], p["head_hash"]) == (before.seq, before.hash)
    assert p["output_sha256"] == hashlib.sha256(data).hexdigest() == out["output_sha256"]
    assert p["output_bytes"] == len(data)
    assert pub["seq"] == before.seq + 1 and pub["agent_id"] == "narr"
    assert f"loopx verify --expect {before.seq}:{before.hash}" in data.decode()
    report = verify_store(f.c.ledger.store, Anchor(before.seq, before.hash))
    assert report.ok, report.problem


def test_verify_reports_a_publication_pinning_a_snapshot_the_log_never_had() -> None:
    f = fixed_campaign()
    head = f.c.ledger.store.head()
    payload = {"publication_id": "pub-x", "surface": "story", "format": "md",
               "head_seq": head.seq, "head_hash": "f" * 64, "output_sha256": "0" * 64,
               "output_bytes": 1, "first_screen": NEUTRAL,
               "first_screen_sha256": screen_sha256(NEUTRAL), "first_screen_status": "unchanged"}
    f.c.ledger.append({"payload": payload}, creds=f.narrator, kind="publication_v0")
    report = verify_store(f.c.ledger.store)
    assert not report.ok
    assert report.first_bad_seq == head.seq + 1
    assert "pins seq" in report.problem


def test_a_failed_publication_leaves_no_file_and_no_record(tmp_path: Path) -> None:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.errors import Unauthorized

    f = fixed_campaign()
    head = f.c.head()
    out = tmp_path / "story.md"
    with pytest.raises(Unauthorized):
        publish(f.c.ledger, Credentials("narr", "lpx_" + "0" * 64), "story", "md", out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert f.c.head() == head


def test_only_the_narrator_publishes(tmp_path: Path) -> None:
    from loopx.kernel.errors import Forbidden

    f = fixed_campaign()
    with pytest.raises(Forbidden):
        publish(f.c.ledger, f.r.agents["ev"], "story", "md", tmp_path / "s.md")
    assert list(tmp_path.iterdir()) == []


def test_an_empty_campaign_renders_and_says_so() -> None:
    from lanes_support import campaign

    c = campaign()
    text = render(c.ledger, "story", "md").text
    assert "No research contract has been written yet." in text
    assert "No hypotheses yet." in text and "- Nothing has been promoted." in text
    page = parse(render(c.ledger, "board", "html").text)
    assert page.columns == {"promotion": [], "retirement": [], "retry": [], "next": []}


def test_the_first_screen_gate_of_a_hypothesis_follows_approved_previews() -> None:
    from loopx.research.projections import row
    from loopx.testing.research import CONTRACT

    f = fixed_campaign({**CONTRACT, "promotion_policy": {
        "required_gates": ["heldout", "first_screen"]}})
    gate = row(f.view(), "h-norm").gates["first_screen"]
    assert (gate.required, gate.status) == (True, "pending")
    assert "no approved first-screen preview since revision" in gate.reasons[0]
    # It never blocks a promotion: the headline can only show a promotion after it.
    assert row(f.view(), "h-norm").promotion is not None
    preview(f.c.ledger, f.narrator, preview_id="pv-1")
    assert row(f.view(), "h-norm").gates["first_screen"].status == "pending"
    approval = decide_approval(f.c.ledger, f.c.owner, "pv-1", approved=True, note="ok")
    gate = row(f.view(), "h-norm").gates["first_screen"]
    assert (gate.status, gate.rests_on) == ("passed", [approval["record_id"]])


# -- disclosure: what was tried, the error control, the plan, the baseline, honest wording ---

@pytest.fixture(scope="module")
def measured() -> Fixed:
    return measured_campaign()


def section(markdown: str, title: str) -> str:
    """One `## ` section of a Markdown story, backslash escapes removed."""
    return markdown.replace("\\", "").split(f"\n## {title}\n")[1].split("\n## ")[0]


def payloads(f: Fixed, kind: str) -> list[dict[str, Any]]:
    return [r["payload"] | {"_id": r["record_id"], "_provenance": r["provenance"]}
            for r in f.c.records(kind)]


def final_heldout_tests(f: Fixed) -> dict[str, dict[str, Any]]:
    """Per hypothesis, its first held-out judgement that is not of claimed provenance."""
    out: dict[str, dict[str, Any]] = {}
    for p in payloads(f, "research_evidence_event_v0"):
        if p["split"] == "heldout" and p["_provenance"] != "claimed":
            out.setdefault(p["hypothesis_id"], p)
    return out


def test_the_disclosure_counts_what_was_tried_judged_and_tested(measured: Fixed) -> None:
    text = render(measured.c.ledger, "story", "md").text
    disclosure = section(text, "Disclosure")
    proposed = {p["hypothesis_id"] for p in payloads(measured, "research_hypothesis_v0")}
    dev = {p["hypothesis_id"] for p in payloads(measured, "research_evidence_event_v0")
           if p["split"] == "dev"}
    heldout = final_heldout_tests(measured)
    assert (len(proposed - {"base"}), len(dev), len(heldout)) == (6, 5, 3)  # base never judged
    counts = ("Tried: 6 hypotheses proposed (the measured baseline not counted); 5 judged on dev "
              "(screening); 3 entered the held-out family by claiming a held-out read, 3 of them "
              "judged on held-out data (confirmation).")
    assert counts in disclosure
    family = re.findall(r"^- Test (\d+): (h-[a-z]+): held-out (\w+)", disclosure, re.M)
    assert family == [("1", "h-good", "supports"), ("2", "h-null", "inconclusive"),
                      ("3", "h-gone", "inconclusive")]
    for hypothesis, p in heldout.items():
        c = p["control"]
        assert (f"Test {c['index']}: {hypothesis}: held-out {p['verdict']}; p = "
                f"{number(p['p_value'])}; adjusted p {number(c['adjusted_p'])}, threshold "
                f"{number(c['threshold'])}: " + ("a discovery" if c["discovery"] else
                                                 "not a discovery") + f" ({p['_id']})"
                ) in disclosure
    board = render(measured.c.ledger, "board", "html").text
    assert counts in board and 'id="disclosure"' in board


def test_the_control_rule_and_the_expected_false_promotions_are_disclosed(
        measured: Fixed) -> None:
    rendered = render(measured.c.ledger, "story", "md")
    disclosure = section(rendered.text, "Disclosure")
    assert ("Campaign-level control: LOND online false discovery rate control (lond) at level "
            "0.05, applied online in log order to every held-out test.") in disclosure
    # One discovery among three tests: LOND promises at most 0.05 x 1 false promotions.
    assert ("Under lond at level 0.05: 3 held-out tests, 1 discovery; expected false "
            "promotions at most 0.05 (computed: level x discoveries") in disclosure
    p_values = sorted(p["p_value"] for p in final_heldout_tests(measured).values())
    assert p_values[0] < 0.05 / 3 and p_values[1] > 0.05 * 2 / 3  # so BH passes exactly one
    assert ("Closing Benjamini-Hochberg figure (a disclosure beside the rule, not the rule): 1 "
            "of 3 held-out p-values pass at level 0.05 (computed).") in disclosure
    assert check_numbers(rendered.story.numbers,
                         lambda rid: record(measured, rid)["payload"]) == 2


def test_alpha_spending_discloses_the_thresholds_it_spent() -> None:
    f = measured_campaign("alpha_spending")
    disclosure = section(render(f.c.ledger, "story", "md").text, "Disclosure")
    spent = sum(p["control"]["threshold"] for p in final_heldout_tests(f).values())
    assert ("Campaign-level control: online alpha spending (family-wise error control) "
            "(alpha_spending) at level 0.05") in disclosure
    assert (f"Under alpha_spending at level 0.05: 3 held-out tests, 1 discovery; expected "
            f"false promotions at most {number(spent)} (computed: the sum of the thresholds "
            "spent") in disclosure


def test_a_contract_without_campaign_control_says_so_plainly() -> None:
    f = legacy_campaign()
    assert f.view()["campaign"]["plans"][0]["plan"]["promotion_policy.campaign_control"] is None
    rendered = render(f.c.ledger, "story", "md")
    text = rendered.text.replace("\\", "")
    disclosure = section(rendered.text, "Disclosure")
    assert ("Campaign-level control: none. This contract sets no campaign-level error control, "
            "so each held-out test was judged on its own at the contract's alpha.") in disclosure
    assert "Under lond" not in text and "adjusted p" not in text
    assert "1 of 1 held-out p-values pass at level 0.05 (computed)" in disclosure
    [heldout] = final_heldout_tests(f).values()
    promoted = section(rendered.text, "What was promoted, and why")
    assert f"p = {number(heldout['p_value'])}; no campaign-level control applied" in promoted
    assert (f"its held-out test supported it at p = {number(heldout['p_value'])} on its own: no "
            "campaign-level control") in promoted
    assert "campaign control none (no campaign-level control)" in section(
        rendered.text, "The analysis plan")
    assert "no campaign-level error control applied: each of the 1 held-out test(s)" in section(
        rendered.text, "Open risks")
    assert "no campaign-level control)." in rendered.story.doc["first_screen"]["headline"]
    # The BH level is the contract's alpha, a logged input.
    assert check_numbers(rendered.story.numbers, lambda rid: record(f, rid)["payload"]) == 1


def test_plan_amendments_show_what_changed_from_what_and_when() -> None:
    f = measured_campaign()
    packets = len(f.c.records("auto_research_evidence_packet_v0"))
    amendment = amend_contract(f.c.ledger, f.r.agents["cur"], "a change that matters",
                               settings=[("metric.min_delta", 0.01)])
    text = render(f.c.ledger, "story", "md").text
    plan = section(text, "The analysis plan")
    [edit] = [r for r in f.c.records("research_contract_v0") if r["payload"]["version"] == 2]
    assert (f"  - Edited before the freeze, with no evidence under it yet (so it rescues nothing): "
            f"contract version 2 ({edit['record_id']}), seq {edit['seq']}: attempt limit "
            "(promotion_policy.max_attempts) 3 -> 2.") in plan
    assert "- Plan version 1, from contract version 1 (" in plan  # no longer in force
    assert (f"- Plan version 2 (in force), opened by contract version 3 "
            f"({amendment['record_id']}), seq {amendment['seq']} after {packets} evidence "
            "packet(s); not frozen yet: no evidence under it. Changed: minimum change "
            "(metric.min_delta) 0 -> 0.01. Judgements made under an earlier plan version no "
            "longer count.") in plan
    # Every judgement shown was made under plan version 1, and says it no longer counts.
    lines = re.findall(r"^\s*- (?:Dev|Held-out): .*$", text.replace("\\", ""), re.M)
    assert lines and all("under plan version 1, which an amendment replaced: it no longer "
                         "counts" in line for line in lines)
    # Evidence under the new plan freezes it and is labelled with it.
    f.r.run("base", "dev", [0.80, 0.81, 0.79])
    f.r.supported("h-new", [0.90, 0.91, 0.89], None, title="New idea", mechanism="new")
    text = render(f.c.ledger, "story", "md").text.replace("\\", "")
    [line] = [line for line in section(text, "Evidence").split("### h-new")[1].splitlines()
              if line.startswith("- Dev: ")]
    assert line.endswith(")") and "; under plan version 2 (" in line
    assert "frozen at seq" in section(text, "The analysis plan").split("Plan version 2")[1]
    board = render(f.c.ledger, "board", "html").text
    assert "minimum change (metric.min_delta) 0 -&gt; 0.01" in board


BASELINE_MENTION = re.compile(r"(\w+) baseline (?:values )?\\?\[?\d")


@pytest.mark.parametrize("surface, fmt", [("story", "md"), ("story", "html"), ("board", "html")])
def test_an_assumed_baseline_is_labelled_wherever_it_is_used(fixed: Fixed, surface: str,
                                                             fmt: str) -> None:
    rendered = render(fixed.c.ledger, surface, fmt)
    text = unescape(rendered.text)
    mentions = BASELINE_MENTION.findall(text)
    judgements = len(fixed.c.records("research_evidence_event_v0"))
    assert len(mentions) > judgements and set(mentions) == {"assumed"}
    assert "assumed baseline 0.9 (a number typed into the contract, not measured)" in text
    assert ("over the assumed baseline 0.9" in
            rendered.story.doc["first_screen"]["headline"])
    if surface == "board":  # the cards say what their mean change is measured against
        assert text.count("mean change +0.03 against the assumed baseline 0.9") == 1


def test_a_measured_baseline_is_named_and_never_counted_as_a_hypothesis(
        measured: Fixed) -> None:
    text = render(measured.c.ledger, "story", "md").text
    plain = text.replace("\\", "")
    assert "assumed baseline" not in plain
    assert set(BASELINE_MENTION.findall(plain)) == {"measured", "scalar"}
    assert plain.count("scalar baseline") == 1  # the plan's unused number, said to be unused
    assert "scalar baseline 0.8 (not used: it is measured)" in plain
    assert ("Baseline: measured by hypothesis base: 3 value(s) on dev, 3 value(s) on held-out "
            "(never judged, promoted or retired).") in section(text, "Disclosure")
    assert "- Metric: acc (maximize), baseline measured by hypothesis base," in plain
    assert "measured baseline values [0.8, 0.81, 0.79]" in section(text, "Evidence")
    base = section(text, "Evidence").split("### base")[1].split("###")[0]
    assert "state: the campaign's measured baseline" in base and "Gates:" not in base
    board = render(measured.c.ledger, "board", "html").text
    page = parse(board)
    assert all("base" not in cards for cards in page.columns.values())
    assert "<tr><td>base</td><td>baseline</td>" in board
    assert '<g class="node" data-state="baseline">' in board


def test_every_heldout_judgement_of_a_promoted_hypothesis_is_shown(measured: Fixed) -> None:
    events = [p for p in payloads(measured, "research_evidence_event_v0")
              if p["hypothesis_id"] == "h-good" and p["split"] == "heldout"]
    assert [p["_provenance"] for p in events] == ["claimed", "computed"]
    final = events[1]
    c = final["control"]
    for surface, fmt in (("story", "md"), ("story", "html"), ("board", "html")):
        text = unescape(render(measured.c.ledger, surface, fmt).text).replace("\\", "")
        promoted = text.split("What was promoted, and why")[1].split("What was retired")[0]
        lines = [line for line in re.split(r"\n|<li>", promoted) if "Held-out: " in line]
        assert [re.search(r"\((rec_[0-9a-f]{32})\)", line).group(1) for line in lines] == [
            p["_id"] for p in events]
        assert "claimed provenance: never counts" in lines[0]
        assert "the hypothesis' final held-out test" in lines[1]
        assert (f"test {c['index']} of the campaign's held-out family under lond at level 0.05: "
                f"threshold {number(c['threshold'])}, adjusted p {number(c['adjusted_p'])}, "
                "a discovery") in lines[1]
        assert "every required gate passed" not in promoted
        assert (f"promoted by decision d-good at revision {record_decision(measured)}: dev "
                "supported it, its held-out test passed the campaign's control (test 1 of the "
                f"campaign's held-out family under lond at level 0.05: threshold "
                f"{number(c['threshold'])}, adjusted p {number(c['adjusted_p'])}, a discovery)"
                ) in promoted


def record_decision(f: Fixed) -> int:
    [d] = [p for p in payloads(f, "research_decision_v0") if p["decision_id"] == "d-good"]
    return int(d["revision"])


def test_retirements_are_worded_honestly(measured: Fixed) -> None:
    text = render(measured.c.ledger, "story", "md").text
    candidates = section(text, "Candidates").split("### Retirement candidates")[1].split("###")[0]
    blocks = {m.group(1): m.group(0) for m in re.finditer(
        r"^- (h-[a-z]+):.*?(?=^- |\Z)", candidates, re.M | re.S)}
    assert list(blocks) == ["h-null", "h-worse", "h-flaky"]
    null = final_heldout_tests(measured)["h-null"]
    assert "  - no effect found (a negative result, kept as evidence)\n" in blocks["h-null"]
    assert ("    - Held-out: inconclusive under welch_one_sided on acc;" in blocks["h-null"]
            and f"p = {number(null['p_value'])};" in blocks["h-null"])
    # A null result is never called a contradiction: only significantly worse values are.
    assert "contradict" not in blocks["h-null"] and "worse" not in blocks["h-null"]
    assert ("  - significantly worse than the baseline (the evidence contradicted it)\n"
            "    - Dev: contradicts") in blocks["h-worse"]
    assert ("  - its attempts ran out: 2 of 2 attempt(s) used (failed, timeout) without a "
            "judgement that supports or contradicts it") in blocks["h-flaky"]
    retired = section(text, "What was retired, and why")
    assert "only \"significantly worse\" says the idea hurt" in retired
    gone = final_heldout_tests(measured)["h-gone"]
    assert re.search(r"- h-gone: Label smoothing \(retired by decision d-gone at revision \d+: no "
                     r"effect found \(a negative result, kept as evidence\); note: held-out "
                     r"showed nothing\)\n  - Held-out: inconclusive .*\(" + gone["_id"] + r"\)",
                     retired)
    tried = section(text, "What was tried")
    assert "Hypothesis h-null: Dropout (family regularization, proposed by prop); no effect " \
           "found (a negative result, kept as evidence), to be retired" in tried
    assert "h-flaky: Bigger batches (family batch, proposed by prop); its attempts ran out " \
           "without a judgement either way, to be retired" in tried
    board = render(measured.c.ledger, "board", "html").text
    page = parse(board)
    assert page.columns == {"promotion": ["h-good"],
                            "retirement": ["h-gone", "h-null", "h-worse", "h-flaky"],
                            "retry": ["h-flat"], "next": ["h-null", "h-worse", "h-flat",
                                                          "h-flaky"]}
    states = dict(re.findall(r'data-hypothesis="(h-[a-z]+)" data-state="([a-z_]+)"', board))
    assert (states["h-null"], states["h-flaky"]) == ("no_effect_found", "retry_exhausted")
    card = board.split('data-hypothesis="h-null"')[1].split("</a>")[0]
    assert "why: no effect found (a negative result, kept as evidence)" in card


def test_a_computed_number_that_does_not_recompute_is_caught(fixed: Fixed) -> None:
    numbers = render(fixed.c.ledger, "story", "md").story.numbers

    def payload(rid: str) -> dict[str, Any]:
        return record(fixed, rid)["payload"]

    check_numbers(numbers, payload)
    i = next(k for k, n in enumerate(numbers) if n.get("derived") == "expected_false_promotions")
    wrong = [*numbers[:i], {**numbers[i], "value": numbers[i]["value"] + 0.01}, *numbers[i + 1:]]
    with pytest.raises(AssertionError):
        check_numbers(wrong, payload)
    inputs = [{**numbers[i]["inputs"][0], "value": 0.5}, *numbers[i]["inputs"][1:]]
    with pytest.raises(AssertionError):  # an input that is not what its record holds
        check_numbers([{**numbers[i], "inputs": inputs}], payload)
    logged = next(k for k, n in enumerate(numbers) if "derived" not in n)
    with pytest.raises(AssertionError):
        check_numbers([{**numbers[logged], "value": -1}], payload)


def test_the_anchor_names_the_write_rules_and_when_each_took_effect() -> None:
    """A log started under older write rules and upgraded later: the reader learns which rules
    checked which records (a judgement under version 4 pooled a seed's values, under 5 it
    averages them)."""
    from lanes_support import Clock

    from loopx.domains import DOMAINS, RULES_VERSION
    from loopx.kernel.checks import Credentials
    from loopx.kernel.domains import Domains
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store import MemoryStore
    from loopx.testing.research import CONTRACT, ResearchLoop
    from loopx.workspace import bootstrap_log

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=4))
    r = ResearchLoop(old, Credentials("owner", bootstrap_log(old, "old")))
    r.contract(CONTRACT)
    assert render(old, "story", "md").text.count(", under write rules version 4.") == 1
    new = Ledger(store)
    r.ledger = new
    r.propose("h1")
    upgraded = next(rec["seq"] for rec, _ in store.read()
                    if rec["schema_version"] == "rules_upgrade_v0")
    said = (f", under write rules version {RULES_VERSION} from seq {upgraded} (before: version 4 "
            "from seq 1).")
    for surface, fmt in (("story", "md"), ("story", "html"), ("board", "html")):
        assert said in unescape(render(new, surface, fmt).text), (surface, fmt)


def test_a_judgement_of_several_packets_is_quoted_as_per_seed_means() -> None:
    f = fixed_campaign()
    text = render(f.c.ledger, "story", "md").text
    assert "per-seed means" not in text  # every judgement so far rests on one packet
    f.r.run("h-drop", "dev", [0.91, 0.92, 0.93])
    f.r.run("h-drop", "dev", [0.93, 0.92, 0.91])
    f.r.judge("h-drop", "dev")
    text = render(f.c.ledger, "story", "md").text
    assert "per-seed means [0.92, 0.92, 0.92] over seeds [0, 1, 2]" in section(text, "Evidence")


def test_a_value_no_judgement_counts_is_drawn_grey_and_says_why() -> None:
    """A board reader sees every reported value, but the ones no test reads (claimed evidence,
    a seed outside the plan, a packet missing a seed, the padding of a measured baseline) were
    drawn like the ones the judgements counted."""
    from lanes_support import campaign

    from loopx.kernel.ledger import draft
    from loopx.research.operations import append_packet
    from loopx.testing.research import CONTRACT, ResearchLoop
    from loopx.work.claims import complete, should_run
    from loopx.work.todos import add_todos

    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": {**CONTRACT["promotion_policy"], "max_attempts": 5}})
    r.propose("base", mechanism="baseline")
    r.propose("h1")

    def packet(hid: str, seeds: dict[int, float], *, claimed: bool = False) -> None:
        add_todos(c.ledger, r.agents["ev"], [{
            "todo_id": f"t{len(c.ledger.state()['lanes']['todos'])}", "title": "t",
            "role": "research_executor", "action_kind": "run_dev_eval", "assigned_to": "ex",
            "hypothesis_id": hid}])
        got = should_run(c.ledger, "ex", claim=True, creds=r.agents["ex"])["todo"]
        under = (got["todo_id"], got["epoch"])
        d = draft({"hypothesis_id": hid, "status": "scored", "results": [
            {"split": "dev", "metric": "acc", "seed": s, "value": v} for s, v in seeds.items()]},
            kind="auto_research_evidence_packet_v0", under=under)
        if claimed:
            d["provenance"] = "claimed"
        c.ledger.append(d, creds=r.agents["ex"]) if claimed else append_packet(
            c.ledger, r.agents["ex"], d["payload"], under=under)
        complete(c.ledger, r.agents["ex"], *under, {"status": "scored"})

    packet("base", {0: 0.9, 1: 0.9, 2: 0.9, 7: 0.1})  # padded with a seed the plan never named
    packet("h1", {0: 0.95, 1: 0.96, 2: 0.97})  # counted
    packet("h1", {0: 0.99, 1: 0.99})  # partial: a measurement is every seed at once
    packet("h1", {0: 0.99, 1: 0.99, 2: 0.99}, claimed=True)
    r.judge("h1", "dev")
    text = render(c.ledger, "board", "html").text
    svg = chart_of(between(text, 'id="charts"'), "h1")
    assert len(points(svg, "value")) == 3 and len(points(svg, "baseline")) == 3
    why = sorted(title.split("; not counted: ")[1] for *_, title in points(svg, "uncounted"))
    assert why == ["claimed provenance: evidence from outside never counts"] * 3 + [
        "its packet lacks seed(s) [2] here: a measurement is every seed at once"] * 2 + [
        "seed 7 is not one of its plan's seeds [0, 1, 2]"]
    assert "8 value(s) from 3 evidence packet(s), 5 of them counted by no judgement" in text
    assert "value no judgement counts (its hover says why)" in between(text, 'id="charts"')


def test_the_disclosure_names_the_base_every_experiment_started_from() -> None:
    """A reader can check which code the comparisons were made on, and which record fixed it:
    the contract version that pinned it."""
    from narrator_support import BASE_COMMIT, fixed_campaign

    from loopx.governance.state import current_contract
    from loopx.narrator.publish import render

    f = fixed_campaign()
    contract = current_contract(f.c.ledger.state()["lanes"])
    assert contract is not None
    story = render(f.c.ledger, "story", "md").text
    [line] = [line for line in story.splitlines() if line.startswith("- Base: ")]
    assert line == (f"- Base: commit {BASE_COMMIT}, pinned by the contract (version 1, "
                    f"{contract['record_id']}, seq {contract['seq']}); every scored run written "
                    "under write rules version 8 started from it.")
    board = render(f.c.ledger, "board", "html").text
    assert f"<li>Base: commit {BASE_COMMIT}, pinned by the contract" in board


def test_with_a_measured_baseline_the_base_line_says_it_ran_the_base_unchanged() -> None:
    from lanes_support import campaign

    from loopx.narrator.publish import render
    from loopx.testing.research import CONTRACT, GOOD, ResearchLoop

    c = campaign(rules=8)  # before rules version 9 a packet could fix an unpinned base
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"}})
    r.propose("base", mechanism="baseline")
    base = "a" * 40
    r.run("base", "dev", [0.85, 0.86, 0.84], commits=(base, base))
    r.propose("h1")
    r.run("h1", "dev", GOOD, commits=(base, "b" * 40))
    story = render(c.ledger, "story", "md").text
    [line] = [line for line in story.splitlines() if line.startswith("- Base: ")]
    assert line.startswith(f"- Base: commit {base}, fixed by the first scored packet (rec_")
    assert "; the contract pins none, so that packet's executor chose it)" in line
    assert line.endswith("started from it, and the measured baseline ran it unchanged, so each "
                         "comparison is of a hypothesis' own change.")
