"""The ``loopx`` command line: a thin layer over the library.

Every command takes ``--json`` for stable machine output (documented in docs/cli.md). Errors
that are the user's to fix print one message (or a JSON error object with ``--json``) and exit
with the error's own code; they never print a traceback. Heavy imports stay inside commands so
a cold start stays cheap.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from loopx.errors import LoopxError, UsageProblem

JSON_META = "loopx.json"


class LoopxGroup(click.Group):
    """Turns loopx errors into a message and the error's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LoopxError as exc:
            if ctx.meta.get(JSON_META):
                click.echo(json.dumps(exc.to_json(), sort_keys=True))
            else:
                click.echo(f"loopx: {exc.message}", err=True)
                if exc.hint:
                    click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            # `loopx log | head` closes the pipe early; that is not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)


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


def _workspace(ctx: click.Context) -> Any:
    from loopx.workspace import find_workspace

    return find_workspace(ctx.obj["workspace"])


@cli.command()
@click.option("--goal-id", metavar="ID", help="The campaign's goal id (default: from the directory name).")
@click.option("--owner-token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the owner token to this new file (mode 600) instead of printing it.")
@json_option
@click.pass_context
def init(ctx: click.Context, goal_id: str | None, owner_token_file: Path | None,
         as_json: bool) -> None:
    """Create a workspace here (or at --workspace) and its owner token, shown once."""
    from loopx.workspace import WORKSPACE_DIR, init_workspace

    root = Path(ctx.obj["workspace"] or ".").resolve()
    if root.name == WORKSPACE_DIR:
        root = root.parent
    goal = goal_id or _slug(root.name)
    token_fd = _new_private_file(owner_token_file) if owner_token_file else None
    try:
        workspace, token = init_workspace(root, goal)
    except BaseException:
        if owner_token_file is not None and token_fd is not None:
            os.close(token_fd)
            owner_token_file.unlink()
        raise
    if token_fd is not None:
        with os.fdopen(token_fd, "w") as f:
            f.write(token + "\n")
    shown = None if owner_token_file else token
    emit(as_json, {"workspace": str(workspace.root), "goal_id": goal, "owner_token": shown,
                   "owner_token_file": str(owner_token_file) if owner_token_file else None},
         f"initialised loopx workspace {workspace.dir} (goal {goal})\n"
         + (f"owner token written to {owner_token_file}" if owner_token_file else
            f"owner token (shown once, keep it secret): {token}"))


def _new_private_file(path: Path) -> int:
    """Create ``path`` (mode 600) before anything else, so a bad path fails early and cleanly."""
    try:
        return os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        raise UsageProblem(f"{path} already exists; the owner token needs a new file") from None
    except OSError as exc:
        raise UsageProblem(f"cannot create {path}: {exc.strerror}") from None


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.:\-]+", "-", name).strip("-._:")
    return slug[:128] or "loopx-goal"


@cli.command()
@click.option("--kind", "-k", metavar="KIND", help="Record kind (or set schema_version in each draft).")
@click.option("--file", "-f", "source", required=True, metavar="F|-",
              help="JSON draft, or an array of drafts committed as one batch; - for stdin.")
@click.option("--agent-id", envvar="LOOPX_AGENT_ID", default="owner", show_default=True,
              help="Writer's agent id where a draft has none (env LOOPX_AGENT_ID).")
@click.option("--role", "lane_role", envvar="LOOPX_ROLE", default="owner", show_default=True,
              help="Writer's lane role where a draft has none (env LOOPX_ROLE).")
@click.option("--expect-seq", type=click.IntRange(min=0), metavar="SEQ",
              help="Commit only if the log's head is still at SEQ.")
@json_option
@click.pass_context
def append(ctx: click.Context, kind: str | None, source: str, agent_id: str, lane_role: str,
           expect_seq: int | None, as_json: bool) -> None:
    """Append a record or an atomic batch of records through the checked path."""
    from loopx.canonical import JSONInputError, loads_strict

    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageProblem(f"cannot read {source}: {exc.strerror}") from None
    try:
        docs = loads_strict(raw)
    except JSONInputError as exc:
        raise UsageProblem(f"{source} is not valid JSON: {exc}") from None
    workspace = _workspace(ctx)
    ledger = workspace.ledger()
    with ledger.store:
        records = ledger.append(docs, agent_id=agent_id, lane_role=lane_role, kind=kind,
                                expect_seq=expect_seq)
    summary = [{"seq": r["seq"], "record_id": r["record_id"], "schema_version": r["schema_version"],
                "hash": r["hash"], "ts": r["ts"]} for r in records]
    first, last = records[0], records[-1]
    span = f"seq {first['seq']}" if first is last else f"seq {first['seq']}-{last['seq']}"
    emit(as_json, {"records": summary, "head": {"seq": last["seq"], "hash": last["hash"]}},
         f"appended {len(records)} record(s), {span}; head {last['hash'][:16]}")


@cli.command()
@click.option("--kind", "-k", "kinds", multiple=True, metavar="KIND", help="Only these kinds (repeatable).")
@click.option("--since", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="Only records after SEQ.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N records.")
@json_option
@click.pass_context
def log(ctx: click.Context, kinds: tuple[str, ...], since: int, limit: int | None,
        as_json: bool) -> None:
    """List records in commit order (JSON Lines of the stored records with --json)."""
    from loopx.canonical import dumps

    with _workspace(ctx).store() as store:
        start = store.seek(since) if since else None
        shown = 0
        for record, _ in store.read(start):
            if kinds and record["schema_version"] not in kinds:
                continue
            if as_json:
                click.echo(dumps(record).decode())
            else:
                click.echo(f"{record['seq']:>7} {record['ts']} {record['schema_version']:<34} "
                           f"{record['agent_id']:<20} {record['record_id']}")
            shown += 1
            if limit is not None and shown >= limit:
                break


@cli.command()
@click.argument("record_id")
@json_option
@click.pass_context
def show(ctx: click.Context, record_id: str, as_json: bool) -> None:
    """Show one record by its record id (or by its seq number)."""
    with _workspace(ctx).store() as store:
        record = store.get(int(record_id)) if record_id.isdigit() else store.find(record_id)
    emit(as_json, record, json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False))


@cli.command()
@click.option("--expect", "anchor", metavar="SEQ:HASH",
              help="Also prove the log still reaches this anchor (detects a truncated tail).")
@json_option
@click.pass_context
def verify(ctx: click.Context, anchor: str | None, as_json: bool) -> None:
    """Check the whole log: canonical lines, hash chain, sequence, batches, schemas."""
    from loopx.errors import IntegrityError
    from loopx.verify import Anchor, verify_store

    try:
        parsed = Anchor.parse(anchor) if anchor else None
    except ValueError as exc:
        raise UsageProblem(f"--expect: {exc}") from None
    with _workspace(ctx).store() as store:
        report = verify_store(store, parsed)
    if as_json:
        emit(True, report.to_json(), "")
        if not report.ok:
            ctx.exit(IntegrityError.exit_code)
        return
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    if not report.ok:
        raise IntegrityError(f"first bad seq {report.first_bad_seq} ({report.where}): "
                             f"{report.problem}", seq=report.first_bad_seq)
    anchored = f"; anchor seq {report.anchor['seq']} matches" if report.anchor else ""
    click.echo(f"ok: {report.records} records in {report.segments} segment(s), head seq "
               f"{report.head_seq} {report.head_hash}{anchored}")


@cli.group()
def schemas() -> None:
    """JSON Schema files for every record kind."""


@schemas.command("export")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("schemas"),
              show_default=True, help="Directory to write the schemas into.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file differs.")
@json_option
def schemas_export(out: Path, check: bool, as_json: bool) -> None:
    """Write (or --check) one schema per record kind, plus the draft schema."""
    from loopx.schemas import drift, export

    if check:
        stale = drift(out) if out.is_dir() else ["(directory missing)"]
        emit(as_json, {"ok": not stale, "stale": stale},
             "schemas are up to date" if not stale else "stale: " + ", ".join(stale))
        if stale:
            raise SystemExit(1)
        return
    paths = export(out)
    emit(as_json, {"written": [str(p) for p in paths]}, f"wrote {len(paths)} schemas to {out}")


@cli.command()
@json_option
@click.pass_context
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Bring a workspace to the current format (format 1 is the only one so far)."""
    from loopx.workspace import migrate_workspace

    workspace, migrated = migrate_workspace(ctx.obj["workspace"])
    emit(as_json, {"workspace": str(workspace.root), "format_version": workspace.format_version,
                   "migrated": migrated},
         f"{workspace.dir} is at format {workspace.format_version}; "
         + ("migrated" if migrated else "nothing to migrate"))


def main() -> None:
    """Console entry point: click's own usage errors also honour ``--json``."""
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
