"""The hot read commands, run without click: ``quota should-run --json`` (what an agent asks
between steps), ``status --json``, ``frontier --json`` and ``candidates --json`` (printed
from the rows kept with the checkpoint: :mod:`loopx.research.row_cache`), and plain ``board``
(the page, as text: see :data:`TEXT`).

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
    from loopx.tools.registry import call

    return _run_read(workspace, lambda ctx: call(name, ctx, params), creds)


def error_json(exc: LoopxError) -> str:
    """A loopx error as the one-line JSON object ``--json`` prints."""
    return json.dumps(exc.to_json(), sort_keys=True)


# -- the commands ----------------------------------------------------------------------------

Options = dict[str, Any]
# Per command: its options that take a value, its flags, and what runs it.
VALUED = {"quota should-run": ("--agent-id", "--token-file"), "status": (), "frontier": (),
          "candidates": (), "board": ()}
FLAGS = {"quota should-run": ("--json", "--claim"), "status": ("--json",),
         "frontier": ("--json",), "candidates": ("--json",), "board": ()}
# Commands run here in their text form only (their --json is click's): what they print is
# written as click.echo writes it to a UTF-8 stream that is no terminal, and a text holding an
# escape character (which click strips there) is left to click.
TEXT = ("board",)


class Text:
    """A text command's answer: ``out`` for stdout as it is (no newline added), ``note`` a line
    for stderr."""

    __slots__ = ("note", "out")

    def __init__(self, out: str, note: str) -> None:
        self.out, self.note = out, note


def screen_note(rendered: dict[str, Any]) -> str:
    """How the first-screen gate chose the rendered page's first screen, in words."""
    gate = rendered["first_screen"]
    if gate["status"] != "held_back":
        return f"first screen {gate['status'].replace('_', ' ')}"
    return f"first screen held back: {gate['reason']}"


def _board(workspace: str | None, opts: Options) -> Text | None:
    # What the tool story.render returns for the board, as `loopx board` prints it.
    from loopx.narrator.publish import render

    def body(ctx: Any) -> dict[str, Any]:
        rendered = render(ctx.ledger, "board", "html", workspace_root=ctx.workspace.root)
        return {"text": rendered.text, "first_screen": rendered.choice.to_json()}

    out = _run_read(workspace, body)
    return Text(out["text"], f"loopx: {screen_note(out)}\n")


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
    """``body`` with a tool context on the workspace, closed afterwards: a hot read's tool body
    (:mod:`loopx.tools.reads`) runs here without the registry (its tool params are dataclasses)."""
    from loopx.tools.context import ToolContext
    from loopx.workspace import find_workspace

    tool_ctx = ToolContext(find_workspace(workspace), creds)
    try:
        return body(tool_ctx)
    finally:
        tool_ctx.close()


def _projection(name: str) -> Callable[[str | None, Options], list[bytes]]:
    def run(workspace: str | None, opts: Options) -> list[bytes]:
        # The same output as the tools frontier.show and candidates.list, as JSON text.
        from loopx.kernel.gc_pause import paused_gc
        from loopx.research import row_cache
        from loopx.workspace import find_workspace

        ledger = find_workspace(workspace).ledger()
        try:
            with paused_gc():  # the state and the rows hold no cycles (loopx.kernel.gc_pause)
                return getattr(row_cache, f"{name}_chunks")(ledger.state())
        finally:
            ledger.store.close()

    return run


# Each returns the answer as JSON data or text, or None to leave the command to click.
COMMANDS: dict[str, Callable[[str | None, Options],
                             dict[str, Any] | list[bytes] | Text | None]] = {
    "quota should-run": _should_run, "status": _status, "frontier": _projection("frontier"),
    "candidates": _projection("candidates"), "board": _board}


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
    if ("--json" in opts) == (command in TEXT):
        return None  # other text output is click's (it strips terminal escapes, for one)
    if command in TEXT and not (_utf8(sys.stdout) and _utf8(sys.stderr)):
        return None  # click may wrap such a stream
    return command, workspace, opts


def _utf8(stream: Any) -> bool:
    return (getattr(stream, "encoding", None) or "").lower().replace("-", "") == "utf8"


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
        if isinstance(out, Text):
            if "\x1b" in out.out or "\x1b" in out.note:
                return None  # click strips escapes from a stream that is no terminal
            _write(sys.stdout, out.out)
            _write(sys.stderr, out.note)
            return 0
        if isinstance(out, list):
            _print_chunks(out)
        else:
            _print(json.dumps(out, sort_keys=True, ensure_ascii=False))
    except LoopxError as exc:
        if command in TEXT:
            return _fail_text(exc)
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

        error = StorageError.from_os(exc, "access")
        if command in TEXT:
            return _fail_text(error)
        _print(error_json(error))
        return error.exit_code
    return 0


def _fail_text(exc: LoopxError) -> int | None:
    """A text command's error as the click group reports it (loopx.cli.app.fail): its exit
    code; None (click runs the command again) if the words hold an escape click would strip."""
    text = f"loopx: {exc.message}\n" + (f"hint: {exc.hint}\n" if exc.hint else "")
    if "\x1b" in text:
        return None
    _write(sys.stderr, text)
    return exc.exit_code


def _write(stream: Any, text: str) -> None:
    """``text`` on ``stream`` as click.echo writes it (no escapes in it: see :data:`TEXT`)."""
    stream.write(text)
    stream.flush()


def _print_chunks(chunks: list[bytes]) -> None:
    """A line given as UTF-8 pieces (a projection's kept rows): written as they are, without
    joining megabytes into one copy first, when stdout is a file taking UTF-8."""
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if buffer is None or not _utf8(out):
        _print(b"".join(chunks).decode())
        return
    out.flush()
    buffer.flush()
    try:
        fd = buffer.fileno()
    except (OSError, ValueError):  # not a file (a test's captured stream): one write
        buffer.write(b"".join(chunks) + b"\n")
        buffer.flush()
        return
    pending: list[bytes | memoryview] = [c for c in chunks if c]
    pending.append(b"\n")
    first = 0
    while first < len(pending):
        # At most IOV_MAX (1024 on Linux) pieces a call; a call may write fewer bytes.
        written = os.writev(fd, pending[first:first + 1024])
        while first < len(pending) and written >= len(pending[first]):
            written -= len(pending[first])
            first += 1
        if written:
            pending[first] = memoryview(pending[first])[written:]


def _print(line: str) -> None:
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if len(line) > 65536 and buffer is not None and _utf8(out):
        # A long answer (the frontier of a big campaign) goes out as its bytes in one write,
        # not copied once more into the text layer.
        out.flush()
        buffer.write(line.encode())
        buffer.write(b"\n")
        buffer.flush()
        return
    out.write(line + "\n")
    out.flush()
