"""The board in a real headless Chromium: Debian's chromium driven by Playwright (which cannot
download a browser here), with background networking off. At a desktop width and at a phone's,
the page loads without console errors and asks for nothing but itself; at the desktop width the
four columns stand side by side with the expected cards, every colour and shape drawn has its
legend entry (compared as the browser computes them), each hypothesis has its chart with one
mark per recorded value, and cards and marks carry hover titles; at 420 px the columns stack
and nothing overflows the page sideways.

`.ci/run` installs chromium, so CI always runs this; elsewhere it skips, saying why.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from narrator_support import fixed_campaign, measured_campaign

from loopx.narrator.publish import render

BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--disable-default-apps", "--metrics-recording-only"]

# (shape, computed stroke, computed fill) of every mark in a picture and of every swatch in its
# legend; and the computed left-edge colour of every card and of every card swatch.
LEGEND_CHECK = """() => {
  const sig = el => [el.getAttribute('data-shape'), getComputedStyle(el).stroke,
                     getComputedStyle(el).fill].join(' | ');
  const uniq = xs => [...new Set(xs)].sort();
  const out = {};
  for (const name of ['graph', 'charts']) {
    const section = document.getElementById(name);
    const legend = section.querySelector(`[data-legend="${name}"]`);
    out[name] = {marks: uniq([...section.querySelectorAll('svg .mark')].map(sig)),
                 keys: uniq([...legend.querySelectorAll('.key-mark')].map(sig))};
  }
  const edge = el => getComputedStyle(el).borderLeftColor;
  out.cards = {marks: uniq([...document.querySelectorAll('#candidates a.card')].map(edge)),
               keys: uniq([...document.querySelectorAll('[data-legend="cards"] .swatch.card')]
                          .map(edge))};
  return out;
}"""
# Marks without a hover title: a mark's own <title>, or (a hypothesis' box) its group's.
UNTITLED = """() => [...document.querySelectorAll('svg .mark')].filter(el => {
  const own = el.querySelector(':scope > title');
  const group = el.parentElement.matches('g.node') && el.parentElement.querySelector(
      ':scope > title');
  return !((own || group) && (own || group).textContent.trim());
}).length"""


def chromium() -> str:
    found = os.environ.get("LOOPX_CHROMIUM") or next(
        (p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                     "/usr/bin/chromium") if p and Path(p).exists()), None)
    if found is None:
        if os.environ.get("LOOPX_REQUIRE_BROWSER"):
            pytest.fail("LOOPX_REQUIRE_BROWSER is set but no Chromium was found")
        pytest.skip("no Chromium found: install Debian's chromium (`apt-get install chromium`) "
                    "or set LOOPX_CHROMIUM; .ci/run installs it")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    try:
        from playwright import sync_api
    except ImportError:
        if os.environ.get("LOOPX_REQUIRE_BROWSER"):
            raise
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=BROWSER_ARGS,
                                     headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, campaign in (("fixed", fixed_campaign), ("measured", measured_campaign)):
        path = tmp_path_factory.mktemp("board") / f"{name}.html"
        path.write_text(render(campaign().c.ledger, "board", "html").text)
        out[name] = path
    return out


class Loaded:
    """A page loaded from a file, with what it logged and asked for."""

    def __init__(self, browser: Any, board: Path, width: int) -> None:
        self.url = board.as_uri()
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on("console",
                     lambda m: self.problems.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(self.url, wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def check_quiet(self) -> None:
        assert self.problems == []
        assert self.requests == [self.url]  # the page itself, and nothing it asks for


def test_the_board_loads_in_chromium_with_its_columns_legends_charts_and_titles(
        browser: Any, boards: dict[str, Path]) -> None:
    loaded = Loaded(browser, boards["fixed"], 1280)
    page = loaded.page
    try:
        loaded.check_quiet()
        columns: dict[str, Any] = {}
        for kind, expected in (("promotion", ["h-wide", "h-norm"]),
                               ("retirement", ["h-wider", "h-deep"]), ("retry", ["h-drop"]),
                               ("next", ["h-drop", "h-deep", "h-norm"])):
            column = page.locator(f'[data-column="{kind}"]')
            assert column.is_visible()
            columns[kind] = column.bounding_box()
            cards = column.locator("a.card")
            assert [cards.nth(i).get_attribute("data-hypothesis")
                    for i in range(cards.count())] == expected
            assert all(cards.nth(i).is_visible() for i in range(cards.count()))
            # The full name on hover.
            assert all(cards.nth(i).get_attribute("title").startswith(expected[i] + ": ")
                       for i in range(cards.count()))
        # Side by side, in order, on the first screen's width.
        xs = [columns[k]["x"] for k in ("promotion", "retirement", "retry", "next")]
        assert xs == sorted(xs) and len(set(xs)) == 4
        assert len({round(c["y"]) for c in columns.values()}) == 1
        # The campaign's state sits between the first screen and the columns.
        status = page.locator("#status")
        assert status.is_visible() and "Campaign planned" in status.inner_text()
        assert page.locator("header.first").bounding_box()["y"] < status.bounding_box()["y"] \
            < columns["promotion"]["y"]
        # Every colour and shape drawn has its legend entry, and every entry is drawn.
        legends = page.evaluate(LEGEND_CHECK)
        for name, found in legends.items():
            assert found["marks"] and found["marks"] == found["keys"], (name, found)
        assert all(page.locator(f'[data-legend="{n}"]').is_visible() for n in legends)
        # One chart per hypothesis, one mark per recorded value (h-drop: its failed attempt).
        assert page.locator("svg.graph g.node").count() == 5
        marks = {"h-wide": (6, 0), "h-wider": (3, 0), "h-drop": (0, 1), "h-deep": (3, 0),
                 "h-norm": (6, 0)}
        assert page.locator("svg.chart").count() == len(marks)
        for hypothesis, (values, missing) in marks.items():
            chart = page.locator(f'svg.chart[data-hypothesis="{hypothesis}"]')
            assert chart.is_visible()
            assert chart.locator('[data-kind="value"]').count() == values
            assert chart.locator('[data-kind="no-value"]').count() == missing
            assert chart.locator('[data-kind="assumed"]').count() == 1
        assert page.evaluate(UNTITLED) == 0
        # A card's link lands on its evidence; so does a box of the graph.
        page.locator('[data-column="retry"] a.card').first.click()
        assert page.evaluate("location.hash") == "#" + page.locator(
            '[data-column="retry"] a.card').first.get_attribute("href").lstrip("#")
        assert page.locator(page.evaluate("location.hash")).is_visible()
        page.locator("svg.graph g.node").nth(1).click()
        assert page.locator(page.evaluate("location.hash")).inner_text() == "h-wider"
    finally:
        page.close()


def test_a_measured_baseline_has_its_own_marks_and_its_legend_entries(
        browser: Any, boards: dict[str, Path]) -> None:
    loaded = Loaded(browser, boards["measured"], 1280)
    try:
        loaded.check_quiet()
        chart = loaded.page.locator('svg.chart[data-hypothesis="h-good"]')
        assert chart.locator('[data-kind="baseline"]').count() == 6
        assert chart.locator('[data-kind="value"]').count() == 6
        assert chart.locator('[data-kind="assumed"]').count() == 0
        for name, found in loaded.page.evaluate(LEGEND_CHECK).items():
            assert found["marks"] and found["marks"] == found["keys"], (name, found)
    finally:
        loaded.page.close()


def test_on_a_narrow_screen_the_columns_stack_and_nothing_overflows(
        browser: Any, boards: dict[str, Path]) -> None:
    width = 420
    for board in boards.values():
        loaded = Loaded(browser, board, width)
        page = loaded.page
        try:
            loaded.check_quiet()
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            boxes = [page.locator(f'[data-column="{kind}"]').bounding_box()
                     for kind in ("promotion", "retirement", "retry", "next")]
            assert len({round(b["x"]) for b in boxes}) == 1  # one above the other, in order
            assert all(a["y"] + a["height"] <= b["y"] for a, b in pairwise(boxes))
            cards = page.locator("a.card")
            for i in range(cards.count()):
                box = cards.nth(i).bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width
            charts = page.locator("svg.chart")
            for i in range(charts.count()):
                box = charts.nth(i).bounding_box()
                assert box["width"] > 200 and box["x"] + box["width"] <= width
            # The graph keeps its size and scrolls inside its own box, not the page.
            scroller = page.locator("#graph .scroll").bounding_box()
            assert scroller["x"] + scroller["width"] <= width
        finally:
            page.close()


def test_a_served_board_runs_its_reloader_under_its_policy_and_reloads_on_a_new_record(
        browser: Any, tmp_path: Path) -> None:
    """The served page's policy allows its one script (by hash) and nothing else: the page
    loads without a violation, and when a record is appended it reloads itself at the new
    head."""
    from helpers import head_seq, research_workspace, served_board

    from loopx.testing.research import CONTRACT
    from loopx.workspace import find_workspace

    root = tmp_path / "ws"
    r = research_workspace(root, "served")
    r.contract(CONTRACT)
    r.propose("h1", title="Wider hidden layer")
    r.ledger.store.close()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    with served_board(root) as url:
        page.goto(url, wait_until="load")
        seq = 'document.querySelector(\'meta[name="loopx-head-seq"]\').content'
        assert page.evaluate(seq) == str(head_seq(root))
        ledger = find_workspace(root).ledger()
        r.ledger = ledger
        with page.expect_navigation(timeout=30_000):
            r.propose("h2", title="A newer idea")
        ledger.store.close()
        page.wait_for_load_state("load")
        assert page.evaluate(seq) == str(head_seq(root))
        assert "A newer idea" in page.content()
        assert problems == []  # a policy violation is a console error
        page.close()
