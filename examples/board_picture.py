"""Take a picture of a board: `python examples/board_picture.py board.html out.png`.

Uses Playwright with Debian's chromium (`apt-get install chromium`; Playwright's own browser
download does not work everywhere), background networking off. The README's picture was made
this way from the board `examples/research.sh` publishes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(board: str, out: str, width: int = 1280, height: int = 960) -> None:
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(Path(board).resolve().as_uri(), wait_until="load")
        page.screenshot(path=out)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
