"""The ``loopx`` command line: a thin layer over the tool registry.

Every command takes ``--json`` for stable machine output (documented in docs/cli.md). Errors
that are the user's to fix print one message (or a JSON error object with ``--json``) and exit
with the error's own code; they never print a traceback. Heavy imports stay inside commands so
a cold start stays cheap: the hottest reads (:mod:`loopx.cli.direct`) do not even load click,
and the click command tree (:mod:`loopx.cli.app`, ``cli``) loads only for the others.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["cli", "main"]


def main() -> None:
    """Console entry point: a hot read command runs directly, anything else through click."""
    from loopx.cli.direct import run

    try:
        code = run(sys.argv[1:])
    except KeyboardInterrupt:
        sys.stderr.write("loopx: interrupted\n")
        sys.exit(130)
    if code is not None:
        sys.exit(code)
    from loopx.cli.app import main as click_main

    click_main()


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, loaded on first use
        from loopx.cli.app import cli

        return cli
    raise AttributeError(f"module 'loopx.cli' has no attribute {name!r}")
