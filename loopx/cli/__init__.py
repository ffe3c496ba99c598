"""The ``loopx`` command line: a thin layer over the tool registry.

Every command takes ``--json`` for stable machine output (documented in docs/cli.md). Errors
that are the user's to fix print one message (or a JSON error object with ``--json``) and exit
with the error's own code; they never print a traceback. Heavy imports stay inside commands so
a cold start stays cheap.
"""

from loopx.cli.app import cli, main  # command modules load on demand (COMMAND_MODULES)

__all__ = ["cli", "main"]
