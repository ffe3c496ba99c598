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
    import gc

    # What a hot read loads (modules, their classes and functions) is never garbage, yet it is
    # enough to set off about ten collections, each walking all of it again: a cold read's
    # imports and answer run with the collector off (reference counting still frees the rest).
    gc.disable()
    try:
        from loopx.cli.direct import run

        code = run(sys.argv[1:])
    except KeyboardInterrupt:
        sys.stderr.write("loopx: interrupted\n")
        sys.exit(130)
    finally:
        gc.enable()
    if code is not None:
        # Answered: the process only exits now, and the exit's last full collection would walk
        # everything loaded again (about 4 ms). Frozen, it is skipped there (and freed as ever).
        gc.freeze()
        sys.exit(code)
    from loopx.cli.app import main as click_main

    click_main()


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, loaded on first use
        from loopx.cli.app import cli

        return cli
    raise AttributeError(f"module 'loopx.cli' has no attribute {name!r}")
