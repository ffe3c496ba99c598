"""The board in a real headless Chromium: Debian's chromium driven by Playwright (which cannot
download a browser here), with background networking off. The page loads without console
errors, asks for nothing but itself, and shows the expected cards in three side-by-side columns.

`.ci/run` installs chromium, so CI always runs this; elsewhere it skips, saying why.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from narrator_support import fixed_campaign

from loopx.narrator.publish import render

BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--disable-default-apps", "--metrics-recording-only"]


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


def test_the_board_loads_in_chromium_with_no_errors_and_no_requests(tmp_path: Path) -> None:
    executable = chromium()
    try:
        from playwright import sync_api
    except ImportError:
        if os.environ.get("LOOPX_REQUIRE_BROWSER"):
            raise
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    board = tmp_path / "board.html"
    board.write_text(render(fixed_campaign().c.ledger, "board", "html").text)
    url = board.as_uri()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=BROWSER_ARGS,
                                    headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            requests: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url, wait_until="load")
            page.wait_for_load_state("networkidle")

            assert problems == []
            assert requests == [url]  # the page itself, and nothing it asks for
            columns: dict[str, Any] = {}
            for kind in ("promotion", "retirement", "retry"):
                column = page.locator(f'[data-column="{kind}"]')
                assert column.is_visible()
                columns[kind] = column.bounding_box()
                cards = column.locator("a.card")
                names = [cards.nth(i).get_attribute("data-hypothesis")
                         for i in range(cards.count())]
                assert names == {"promotion": ["h-wide", "h-norm"],
                                 "retirement": ["h-wider", "h-deep"],
                                 "retry": ["h-drop"]}[kind]
                assert all(cards.nth(i).is_visible() for i in range(cards.count()))
            # Side by side, in order, on the first screen's width.
            assert columns["promotion"]["x"] < columns["retirement"]["x"] < columns["retry"]["x"]
            assert columns["promotion"]["y"] == columns["retirement"]["y"] == columns["retry"]["y"]
            assert page.locator("svg.graph g.node").count() == 5
            # A card's link lands on its evidence.
            page.locator('[data-column="retry"] a.card').first.click()
            assert page.evaluate("location.hash") == "#" + page.locator(
                '[data-column="retry"] a.card').first.get_attribute("href").lstrip("#")
            assert page.locator(page.evaluate("location.hash")).is_visible()
        finally:
            browser.close()
