"""The ``loopx`` command group, its shared options and error handling; commands live beside it.

Every command takes ``--json`` for stable machine output (documented in docs/cli.md). Errors
that are the user's to fix print one message (or a JSON error object with ``--json``) and exit
with the error's own code; they never print a traceback. Heavy imports stay inside commands so
a cold start stays cheap.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from loopx.cli.direct import ENVIRONMENT_ERRNOS, call_tool, error_json
from loopx.kernel.errors import LoopxError, UsageProblem

JSON_META = "loopx.json"


# Command -> the module under loopx.cli that defines it. A module is imported only when one of
# its commands runs (or for --help), so a hot command such as `quota should-run` does not pay
# for defining every other command.
COMMAND_MODULES: dict[str, str] = {
    **dict.fromkeys(("init", "append", "log", "show", "verify", "schemas", "migrate"), "kernel"),
    **dict.fromkeys(("agent", "todo", "quota", "status", "lanes"), "lanes"),
    "contract": "contract",
    "research-plan": "research_plan",
    **dict.fromkeys(("propose", "approve", "reject", "can-execute", "action", "approvals"),
                    "governance"),
    **dict.fromkeys(("usage", "campaign"), "campaign"),
    "finding": "findings",
    "grounding": "grounding",
    **dict.fromkeys(("hypothesis", "evidence", "novelty", "gate", "decide", "graph", "frontier",
                     "candidates"), "research"),
    **dict.fromkeys(("story", "board", "preview"), "narrator"),
    "lane": "lane",
    "demo": "demo",
    "mcp": "mcp",
    "store": "store",
}
# Command group -> modules under loopx.cli that add subcommands to it (imported with it).
SUBCOMMAND_MODULES: dict[str, tuple[str, ...]] = {"todo": ("todo_changes",)}


class LoopxGroup(click.Group):
    """Loads command modules on demand; turns loopx errors into a message and the error's exit
    code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        import importlib

        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            importlib.import_module(f"loopx.cli.{COMMAND_MODULES[cmd_name]}")
        # Already imported modules cost a dict lookup; a group defined elsewhere (loaded by
        # another command first) still gets its subcommands.
        for module in SUBCOMMAND_MODULES.get(cmd_name, ()):
            importlib.import_module(f"loopx.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LoopxError as exc:
            fail(ctx, exc)
        except BrokenPipeError:
            # `loopx log | head` closes the pipe early; that is not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)
        except OSError as exc:
            # A file a command writes outside the store (--out, a token file) on a read-only,
            # full or foreign disk: the user's to fix, so no traceback. Other errnos are bugs.
            if exc.errno not in ENVIRONMENT_ERRNOS:
                raise
            from loopx.kernel.errors import StorageError

            fail(ctx, StorageError.from_os(exc, "access"))


def fail(ctx: click.Context, exc: LoopxError) -> None:
    """Print a loopx error (a JSON error object with ``--json``) and exit with its code."""
    if ctx.meta.get(JSON_META):
        click.echo(error_json(exc))
    else:
        click.echo(f"loopx: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
    ctx.exit(exc.exit_code)


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta[JSON_META] = value
    return value


json_option = click.option("--json", "as_json", is_flag=True, is_eager=True,
                           callback=_remember_json, expose_value=True,
                           help="Print stable JSON (see docs/cli.md) instead of text.")


def emit(as_json: bool, data: Any, text: str) -> None:
    """Print ``data`` as one JSON document, or ``text`` for people."""
    if as_json:
        click.echo(json.dumps(data, sort_keys=True, ensure_ascii=False))
    elif text:
        click.echo(text)


@click.group(cls=LoopxGroup)
@click.option("--workspace", "-C", "workspace", envvar="LOOPX_WORKSPACE", metavar="PATH",
              help="Workspace directory (default: the nearest .loopx/ at or above here).")
@click.version_option(package_name="loopx")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None) -> None:
    """loopx: many independent research agents, one typed, hash-chained evidence log."""
    ctx.obj = {"workspace": workspace}


def workspace_of(ctx: click.Context) -> Any:
    from loopx.workspace import find_workspace

    return find_workspace(ctx.obj["workspace"])


@contextmanager
def token_output(path: Path | None, *, left_empty_ok: bool = False
                 ) -> Iterator[Callable[[str], None]]:
    """Where a new token goes: a new private file (mode 600), created before the work so a bad
    path fails early, written (and synced) when the token is kept, and removed again if the
    work fails; without a path, nowhere (printed). ``left_empty_ok``: an empty private file
    there is taken as one an earlier run created and was killed before filling."""
    fd = None
    if path is not None:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            fd = _left_empty(path) if left_empty_ok else None
            if fd is None:
                raise UsageProblem(f"{path} already exists; a token needs a new file") from None
        except OSError as exc:
            raise UsageProblem(f"cannot create {path}: {exc.strerror}") from None

    def keep(token: str) -> None:
        if fd is not None:
            os.write(fd, (token + "\n").encode())
            os.fsync(fd)

    try:
        yield keep
    except BaseException:
        if fd is not None and path is not None:
            os.close(fd)
            path.unlink()
        raise
    if fd is not None:
        os.close(fd)


def _left_empty(path: Path) -> int | None:
    """A descriptor to write ``path`` if it is an empty regular file only its owner reads."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_size == 0 and not info.st_mode & 0o077:
        return fd
    os.close(fd)
    return None


def run_tool(ctx: click.Context, name: str, params: Any, creds: Any = None) -> dict[str, Any]:
    """Call a registered tool against this command's workspace."""
    return call_tool(ctx.obj["workspace"], name, params, creds)


token_file_option = click.option(
    "--token-file", type=click.Path(dir_okay=False, path_type=Path), metavar="F",
    help="Read the token from this file (default: the LOOPX_TOKEN environment variable).")
agent_option = click.option(
    "--agent-id", envvar="LOOPX_AGENT_ID", required=True, metavar="ID",
    help="The acting agent (env LOOPX_AGENT_ID); 'owner' with the owner token.")
# For commands that can also run without writing (--dry-run): the command checks presence.
optional_agent_option = click.option(
    "--agent-id", envvar="LOOPX_AGENT_ID", metavar="ID",
    help="The acting agent (env LOOPX_AGENT_ID); not needed with --dry-run.")


# The tails of the commands' option stacks, so that each stack names only its own options. A
# tail goes last (nearest the function): the options it adds come after the command's own, in
# --help and in the function's parameters.
Command = Callable[..., Any]


def with_json(fn: Command) -> Command:
    """``--json`` and the click context: the end of a workspace command's stack."""
    return json_option(click.pass_context(fn))


def with_token(fn: Command) -> Command:
    """``--token-file``, then :func:`with_json`: a command that writes with a token."""
    return token_file_option(with_json(fn))


def with_agent(fn: Command) -> Command:
    """``--agent-id``, then :func:`with_token`: a command that writes as an agent."""
    return agent_option(with_token(fn))


@functools.cache
def packaged_roles() -> tuple[str, ...]:
    """The roles whose profiles ship with loopx (``lanes/*.toml``), sorted."""
    from importlib import resources

    return tuple(sorted(entry.name[:-len(".toml")]
                        for entry in resources.files("loopx.lanes").iterdir()
                        if entry.name.endswith(".toml")))


class RoleChoice(click.Choice):
    """A role: one of the packaged roles (listed in ``--help`` and offered by shell completion),
    or a role the workspace added with ``loopx lanes apply`` (looked up only for other names)."""

    name = "role"

    def __init__(self) -> None:
        # The choices are read lazily: defining a command must not touch the package data.
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:
        return packaged_roles()

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        recorded = _workspace_roles(ctx)
        if value in recorded:
            return value
        known = sorted(set(self.choices) | set(recorded))
        self.fail(f"{value!r} is not a role; roles: {', '.join(known)}", param, ctx)


def _workspace_roles(ctx: click.Context | None) -> list[str]:
    """The roles recorded in the workspace's log (none outside a workspace)."""
    from loopx.workspace import find_workspace

    root = ctx.find_root() if ctx is not None else None
    where = (root.obj or {}).get("workspace") if root is not None else None
    try:
        ledger = find_workspace(where).ledger()
    except LoopxError:
        return []
    try:
        return sorted(ledger.state()["lanes"]["profiles"])
    except LoopxError:
        return []
    finally:
        ledger.store.close()


def json_file_option(*decls: str, help_text: str) -> Callable[[Any], Any]:
    """An option naming a file of JSON, ``-`` for stdin (read it with :func:`json_arg`)."""
    return click.option(*decls, type=click.Path(dir_okay=False, path_type=Path), metavar="F|-",
                        help=help_text)


def role_option(help_text: str, *, required: bool = False) -> Callable[[Any], Any]:
    """``--role ROLE``, its choices listed in ``--help`` and completed by the shell."""
    return click.option("--role", type=RoleChoice(), required=required,
                        help=f"{help_text} (Or a role added with `loopx lanes apply`.)")


def json_arg(text: str | None, path: Path | None, what: str) -> Any:
    """A JSON value given inline or in a file (``-`` for stdin), strictly parsed."""
    from loopx.kernel.canonical import JSONInputError, loads_strict

    if text is not None and path is not None:
        raise UsageProblem(f"give {what} as text or as a file, not both")
    if path is not None:
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
        except OSError as exc:
            raise UsageProblem(f"cannot read {path}: {exc.strerror}") from None
    if text is None:
        return None
    try:
        return loads_strict(text)
    except JSONInputError as exc:
        raise UsageProblem(f"{what} is not valid JSON: {exc}") from None


def json_object(text: str | None, path: Path | None, option: str) -> dict[str, Any]:
    """A JSON object given inline or in a file (``{}`` when neither is given)."""
    value = json_arg(text, path, option)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageProblem(f"{option} must be a JSON object")
    return value


def key_values(values: tuple[str, ...], option: str) -> dict[str, Any]:
    """``KEY=VALUE`` options into a dict; values are JSON when they parse, else strings."""
    from loopx.governance.contract import parse_setting

    out = {}
    for text in values:
        try:
            key, value = parse_setting(text)
        except UsageProblem:
            raise UsageProblem(f"{option} {text!r}: expected KEY=VALUE") from None
        out[key] = value
    return out


def parse_under(value: str | None) -> tuple[str | None, int | None]:
    """``TODO_ID:EPOCH`` from ``--under`` (both None when not given)."""
    if value is None:
        return None, None
    todo_id, sep, epoch = value.rpartition(":")
    if not sep or not epoch.isdigit() or not todo_id:
        raise UsageProblem("--under: expected TODO_ID:EPOCH")
    return todo_id, int(epoch)


def main() -> None:
    """The click command line: click's own usage errors also honour ``--json``."""
    try:
        code = cli.main(prog_name="loopx", standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("loopx: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if "--json" in sys.argv[1:]:
            click.echo(json.dumps({"error": "usage", "message": exc.format_message()},
                                  sort_keys=True))
        else:
            exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
