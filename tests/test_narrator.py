"""The narrator: the story's and the board's structure and numbers for a small fixed campaign,
the first-screen gate, publication records and their pins."""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from narrator_support import DEV_GOOD, HELDOUT_GOOD, Fixed, fixed_campaign

from loopx.actions import decide_approval
from loopx.decisions import decide
from loopx.errors import Refused
from loopx.narrator.first_screen import NEUTRAL, screen_sha256
from loopx.narrator.publish import preview, publish, render
from loopx.narrator.story import number
from loopx.verify import Anchor, verify_store


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
    assert "contradicted by its evidence" in items[3]
    assert "at the promotion gate" in items[4]


def test_every_judgement_line_quotes_its_record_exactly(fixed: Fixed) -> None:
    """Values, seeds, baseline, mean change and p on each line are the judgement record's own
    (to four significant digits), and the line names that record."""
    text = render(fixed.c.ledger, "story", "md").text
    lines = [line for line in text.splitlines()
             if re.match(r"^\s*- (Dev|Held-out): ", line)]
    assert len(lines) == 8  # h-wide 2 (and 2 under promoted), h-wider 1, h-deep 1, h-norm 2
    for line in lines:
        plain = line.replace("\\", "")
        event_id = re.search(r"\((rec_[0-9a-f]{32})\)$", plain).group(1)
        p = record(fixed, event_id)["payload"]
        assert f"values [{', '.join(number(v) for v in p['values'])}]" in plain
        assert f"seeds [{', '.join(number(s) for s in p['seeds'])}]" in plain
        assert f"baseline {number(p['baseline'])}" in plain
        sign = "+" if p["mean_delta"] >= 0 else ""
        assert f"mean change {sign}{number(p['mean_delta'])}" in plain
        assert f"p = {number(p['p_value'])}" in plain
        assert f": {p['verdict']} under" in plain


def test_the_recorded_values_are_the_fixture_values(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "story", "md").text.replace("\\", "")
    evidence = text.split("### h-wide")[1].split("### h-wider")[0]
    assert f"values [{', '.join(map(str, DEV_GOOD))}] over seeds [0, 1, 2]" in evidence
    assert f"values [{', '.join(map(str, HELDOUT_GOOD))}] over seeds [0, 1, 2]" in evidence
    assert "baseline 0.9" in evidence


def test_every_metric_the_story_quotes_names_a_record_holding_it(fixed: Fixed) -> None:
    story = render(fixed.c.ledger, "story", "md").story
    assert story.numbers
    for n in story.numbers:
        doc = record(fixed, n["record_id"])["payload"]
        for part in n["field"].split("."):
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        assert doc == n["value"], n


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
    assert "every required gate passed" in promoted
    retired = text.split("## What was retired, and why")[1].split("## Candidates")[0]
    assert "Negative results are results" in retired
    assert "h-wider: Even wider hidden layer (retired by decision d-wider" in retired
    assert "the evidence contradicted it" in retired
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
    assert page.columns == {"promotion": ["h-wide", "h-norm"],
                            "retirement": ["h-wider", "h-deep"], "retry": ["h-drop"]}
    assert [h for h in page.h2 if h != "Candidates"][:3] == [
        "Worth merging", "Failed clearly", "Needs another turn"]


def test_every_card_links_to_its_evidence_in_the_page(fixed: Fixed) -> None:
    text = render(fixed.c.ledger, "board", "html").text
    page = parse(text)
    cards = re.findall(r'<a class="card" href="#([^"]+)" data-hypothesis="([^"]+)"', text)
    assert len(cards) == 5
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
    # h-wide: 2 attempts, 2 judgements, 1 decision.
    first = graph.split('<g class="node"')[1].split('<g class="node"')[0]
    assert first.count("<circle") == 5
    frontier = text.split('id="frontier"')[1].split("</section>")[0]
    assert re.findall(r"<tr><td>(h-[a-z]+)</td><td>([a-z_]+)</td>", frontier) == [
        ("h-wide", "promoted"), ("h-wider", "retired"), ("h-drop", "needs_retry"),
        ("h-deep", "contradicted"), ("h-norm", "at_promotion_gate")]


def test_the_html_story_has_the_same_sections_as_the_markdown(fixed: Fixed) -> None:
    page = parse(render(fixed.c.ledger, "story", "html").text)
    assert page.h2[:5] == ["The question", "What was tried", "Evidence",
                           "What was promoted, and why", "What was retired, and why"]
    assert {"promotion", "retirement", "retry"} <= set(page.columns)
    assert "script" not in page.tags


def test_text_from_records_is_escaped_in_html() -> None:
    f = fixed_campaign()
    f.r.propose("h-x", title='<img src="https://example.com/x.png"> & <b>bold</b>')
    text = render(f.c.ledger, "board", "html").text
    assert "<img" not in text and "<b>bold" not in text
    assert "&lt;img src=&quot;https://example.com/x.png&quot;&gt; &amp; &lt;b&gt;" in text


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
    from loopx.errors import Forbidden

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
    from loopx.checks import Credentials
    from loopx.errors import Unauthorized

    f = fixed_campaign()
    head = f.c.head()
    out = tmp_path / "story.md"
    with pytest.raises(Unauthorized):
        publish(f.c.ledger, Credentials("narr", "lpx_" + "0" * 64), "story", "md", out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert f.c.head() == head


def test_only_the_narrator_publishes(tmp_path: Path) -> None:
    from loopx.errors import Forbidden

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
    assert page.columns == {"promotion": [], "retirement": [], "retry": []}


def test_the_first_screen_gate_of_a_hypothesis_follows_approved_previews() -> None:
    from loopx.projections import row
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
