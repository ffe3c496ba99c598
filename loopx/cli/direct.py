"""The hot read commands, run without click: ``quota should-run --json`` (what an agent asks
between steps), ``status --json``, and ``frontier --json`` and ``candidates --json`` (printed
from the rows kept with the checkpoint: :mod:`loopx.research.row_cache`).

Defining the click command tree costs more than answering these. :func:`run` takes an argument
list only when it is one of these commands in a plain form (options it knows, each once or
repeated, nothing else) and runs the same tool, printing the same JSON, error objects and exit
codes as the click command; anything else (text output, ``--help``, a missing or odd option) it
leaves to click, which also reports every usage error. Also what both share without click:
the caller's credentials and calling a tool on a workspace.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopx.kernel.errors import LoopxError, UsageProblem

ENV_TOKEN = "LOOPX_TOKEN"
ENV_AGENT = "LOOPX_AGENT_ID"
ENV_WORKSPACE = "LOOPX_WORKSPACE"

# Errnos that describe the user's disk or permissions, not a loopx bug.
ENVIRONMENT_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES,
                                errno.EPERM, errno.EIO, errno.EFBIG})


def credentials(agent_id: str, token_file: Path | None) -> Any:
    """The caller's credentials: the token from ``--token-file`` or ``LOOPX_TOKEN``, never argv."""
    from loopx.kernel.identity import Credentials

    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise UsageProblem(f"cannot read --token-file {token_file}: {exc.strerror}") from None
    else:
        token = os.environ.get(ENV_TOKEN, "").strip()
    return Credentials(agent_id, token or None)


def call_tool(workspace: str | None, name: str, params: Any, creds: Any = None) -> dict[str, Any]:
    """Call a registered tool against the workspace at ``workspace`` (None: found from here)."""
    from loopx.tools.registry import ToolContext, call
    from loopx.workspace import find_workspace

    tool_ctx = ToolContext(find_workspace(workspace), creds)
    try:
        return call(name, tool_ctx, params)
    finally:
        tool_ctx.close()


def error_json(exc: LoopxError) -> str:
    """A loopx error as the one-line JSON object ``--json`` prints."""
    return json.dumps(exc.to_json(), sort_keys=True)


# -- the commands ----------------------------------------------------------------------------

Options = dict[str, Any]
# Per command: its options that take a value, its flags, and what runs it.
VALUED = {"quota should-run": ("--agent-id", "--token-file"), "status": (), "frontier": (),
          "candidates": ()}
FLAGS = {"quota should-run": ("--json", "--claim"), "status": ("--json",),
         "frontier": ("--json",), "candidates": ("--json",)}


def _should_run(workspace: str | None, opts: Options) -> dict[str, Any] | None:
    agent_id = opts.get("--agent-id", os.environ.get(ENV_AGENT) or None)
    token_file = opts.get("--token-file")
    if agent_id is None:
        return None  # click says it is missing
    if token_file is not None:
        path = Path(token_file)
        if path.is_dir() or (path.exists() and not os.access(path, os.R_OK)):
            return None  # click refuses it, naming the option
    claim = "--claim" in opts
    from loopx.tools import reads

    creds = credentials(agent_id, None if token_file is None else Path(token_file)) \
        if claim else None
    return _run_read(workspace, lambda ctx: reads.should_run(ctx, agent_id, claim), creds)


def _status(workspace: str | None, opts: Options) -> dict[str, Any] | None:
    from loopx.tools import reads

    return _run_read(workspace, reads.status)


def _run_read(workspace: str | None, body: Callable[[Any], dict[str, Any]],
              creds: Any = None) -> dict[str, Any]:
    """The body of a hot read's tool (:mod:`loopx.tools.reads`) on the workspace, as
    :func:`call_tool` runs the tool, without the registry (its tool params are dataclasses)."""
    from loopx.tools.context import ToolContext
    from loopx.workspace import find_workspace

    tool_ctx = ToolContext(find_workspace(workspace), creds)
    try:
        return body(tool_ctx)
    finally:
        tool_ctx.close()


def _projection(name: str) -> Callable[[str | None, Options], str]:
    def run(workspace: str | None, opts: Options) -> str:
        # The same output as the tools frontier.show and candidates.list, as JSON text.
        from loopx.kernel.gc_pause import paused_gc
        from loopx.research import row_cache
        from loopx.workspace import find_workspace

        ledger = find_workspace(workspace).ledger()
        try:
            with paused_gc():  # the state and the rows hold no cycles (loopx.kernel.gc_pause)
                return getattr(row_cache, f"{name}_text")(ledger.state())
        finally:
            ledger.store.close()

    return run


# Each returns the answer as JSON data or text, or None to leave the command to click.
COMMANDS: dict[str, Callable[[str | None, Options], dict[str, Any] | str | None]] = {
    "quota should-run": _should_run, "status": _status, "frontier": _projection("frontier"),
    "candidates": _projection("candidates")}


def parse(argv: list[str]) -> tuple[str, str | None, Options] | None:
    """(command, workspace, options) if ``argv`` is a plain ``--json`` run of one of
    :data:`COMMANDS`; None for anything click should parse."""
    workspace = os.environ.get(ENV_WORKSPACE) or None
    rest = list(argv)
    while rest and rest[0].startswith("-"):  # the group's one option
        head = rest.pop(0)
        if head in ("-C", "--workspace") and rest:
            workspace = rest.pop(0)
        elif head.startswith("--workspace="):
            workspace = head.partition("=")[2]
        else:
            return None
    words = 2 if rest[:1] == ["quota"] else 1
    command = " ".join(rest[:words])
    if command not in COMMANDS:
        return None
    opts: Options = {}
    rest = rest[words:]
    while rest:
        head = rest.pop(0)
        name, eq, value = head.partition("=")
        if name in VALUED[command]:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            opts[name] = value  # the last one wins, as in click
        elif head in FLAGS[command]:
            opts[head] = True
        else:
            return None
    if "--json" not in opts:
        return None  # text output is click's (it strips terminal escapes, for one)
    return command, workspace, opts


def run(argv: list[str]) -> int | None:
    """Run ``argv`` here if :func:`parse` takes it: prints the answer (or the error object)
    and returns the exit code; None when click should run it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    command, workspace, opts = parsed
    try:
        out = COMMANDS[command](workspace, opts)
        if out is None:
            return None
        _print(out if isinstance(out, str) else json.dumps(out, sort_keys=True,
                                                            ensure_ascii=False))
    except LoopxError as exc:
        _print(error_json(exc))
        return exc.exit_code
    except BrokenPipeError:
        # `loopx ... | head` closes the pipe early; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.errno not in ENVIRONMENT_ERRNOS:
            raise
        from loopx.kernel.errors import StorageError

        _print(error_json(StorageError.from_os(exc, "access")))
        return StorageError.from_os(exc, "access").exit_code
    return 0


def _print(line: str) -> None:
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if (len(line) > 65536 and buffer is not None
            and (out.encoding or "").lower().replace("-", "") == "utf8"):
        # A long answer (the frontier of a big campaign) goes out as its bytes in one write,
        # not copied once more into the text layer.
        out.flush()
        buffer.write(line.encode())
        buffer.write(b"\n")
        buffer.flush()
        return
    out.write(line + "\n")
    out.flush()
