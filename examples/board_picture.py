"""Take a picture of a board: `python examples/board_picture.py board.html out.png [WIDTH
[HEIGHT]]` (default 1280 x 1400: the first screen, the campaign's state, the columns and the
first charts; a height of 0 takes the whole page).

Uses Playwright with Debian's chromium (`apt-get install chromium`; Playwright's own browser
download does not work everywhere), background networking off. The picture in docs/narrator.md
and the README was made this way from the board `examples/research.sh` publishes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(board: str, out: str, width: int = 1280, height: int = 1400) -> None:
    """Load ``board`` at ``width`` x ``height`` (0: the whole page) and save a PNG to ``out``."""
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        page = browser.new_page(viewport={"width": width, "height": height or 900})
        page.goto(Path(board).resolve().as_uri(), wait_until="load")
        page.screenshot(path=out, full_page=not height)
        browser.close()


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__.split("\n\n")[0])
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:]))
