"""Kernel commands: init, append, log, show, verify, schemas, migrate."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loopx.cli.app import (
    agent_option,
    cli,
    emit,
    json_option,
    run_tool,
    token_file_option,
    token_output,
    with_json,
    workspace_of,
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem

if TYPE_CHECKING:
    from loopx.workspace import Workspace


@cli.command()
@click.option("--goal-id", metavar="ID", help="The campaign's goal id (default: from the directory name).")
@click.option("--owner-token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the owner token to this new file (mode 600) instead of printing it.")
@click.option("--contract-scope", "contract_scopes", multiple=True, metavar="PATH",
              help="A repository path every contract version must stay inside (repeatable; "
                   "default: the whole repository).")
@click.option("--store", "store", envvar="LOOPX_STORE", metavar="URL",
              help="Where the log lives: 'file' (default: .loopx/log/) or "
                   "postgresql://user@host/db?log=NAME (password from PGPASSWORD or ~/.pgpass; "
                   "never recorded). Default: $LOOPX_STORE.")
@click.option("--join", is_flag=True,
              help="Work on the campaign another host initialised in the --store PostgreSQL log: "
                   "write this host's settings only (no genesis, no owner token).")
@with_json
def init(ctx: click.Context, goal_id: str | None, owner_token_file: Path | None,
         contract_scopes: tuple[str, ...], store: str | None, join: bool, as_json: bool) -> None:
    """Create a workspace here (or at --workspace) and its owner token, shown once. Run again
    after an init that stopped early, it finishes that one."""
    from loopx.workspace import WORKSPACE_DIR, init_workspace, pending_init

    root = Path(ctx.obj["workspace"] or ".").resolve()
    if root.name == WORKSPACE_DIR:
        root = root.parent
    if join:
        _join(root, goal_id, owner_token_file, contract_scopes, store, as_json)
        return
    goal = goal_id or _slug(root.name)

    def deliver(workspace: Workspace, token: str, resumed: bool) -> None:
        # Before init lets go of the token: a kill after this leaves nothing to finish.
        keep(token)
        shown = None if owner_token_file else token
        made = "finished the loopx init that had stopped early:" if resumed else "initialised"
        emit(as_json, {**_made(workspace, goal, shown, owner_token_file, joined=False),
                       "resumed": resumed},
             f"{made} loopx workspace {workspace.dir} (goal {goal})\n"
             + (f"owner token written to {owner_token_file}" if owner_token_file else
                f"owner token (shown once, keep it secret): {token}"))

    with token_output(owner_token_file, left_empty_ok=pending_init(root)) as keep:
        init_workspace(root, goal, contract_scopes=list(contract_scopes) or None, store=store,
                       deliver=deliver)


def _join(root: Path, goal_id: str | None, owner_token_file: Path | None,
          contract_scopes: tuple[str, ...], store: str | None, as_json: bool) -> None:
    from loopx.workspace import join_workspace

    if owner_token_file is not None:
        raise UsageProblem("--join makes no owner token (the first host's init did): drop "
                           "--owner-token-file")
    workspace, goal = join_workspace(root, store or "", goal_id=goal_id,
                                     contract_scopes=list(contract_scopes) or None)
    emit(as_json, {**_made(workspace, goal, None, None, joined=True), "resumed": False},
         f"joined loopx workspace {workspace.dir} (goal {goal}) on {workspace.store_location}\n"
         "no owner token is made here: the owner's is the one the first host's init showed")


def _made(workspace: Workspace, goal: str, token: str | None, token_file: Path | None, *,
          joined: bool) -> dict[str, Any]:
    """What ``init --json`` prints (docs/cli.md)."""
    return {"workspace": str(workspace.root), "goal_id": goal, "owner_token": token,
            "owner_token_file": str(token_file) if token_file else None,
            "contract_scopes": workspace.settings()["contract_scopes"],
            "store": workspace.store_location, "joined": joined}


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.:\-]+", "-", name).strip("-._:")
    return slug[:128] or "loopx-goal"


@cli.command()
@click.option("--kind", "-k", metavar="KIND", help="Record kind (or set schema_version in each draft).")
@click.option("--file", "-f", "source", required=True, metavar="F|-",
              help="JSON draft, or an array of drafts committed as one batch; - for stdin.")
@agent_option
@token_file_option
@click.option("--expect-seq", type=click.IntRange(min=0), metavar="SEQ",
              help="Commit only if the log's head is still at SEQ.")
@with_json
def append(ctx: click.Context, kind: str | None, source: str, agent_id: str,
           token_file: Path | None, expect_seq: int | None, as_json: bool) -> None:
    """Append a record or an atomic batch of records through the checked path."""
    from loopx.kernel.canonical import JSONInputError, loads_strict
    from loopx.tools.kernel import Append

    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageProblem(f"cannot read {source}: {exc.strerror}") from None
    try:
        docs = loads_strict(raw)
    except JSONInputError as exc:
        raise UsageProblem(f"{source} is not valid JSON: {exc}") from None
    out = run_tool(ctx, "record.append", Append(docs, kind, expect_seq),
                   credentials(agent_id, token_file))
    first, last = out["records"][0], out["records"][-1]
    span = f"seq {first['seq']}" if first is last else f"seq {first['seq']}-{last['seq']}"
    emit(as_json, out, f"appended {len(out['records'])} record(s), {span}; "
                       f"head {last['hash'][:16]}")


def _complete_kind(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from loopx.kernel.kinds import kind_names

    return [k for k in kind_names() if k.startswith(incomplete)]


def _known_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The ``--kind`` values, each a registered record kind (else a usage error naming the
    nearest kinds, or every kind when none is near)."""
    import difflib

    from loopx.kernel.kinds import kind_names

    known = kind_names()
    for kind in kinds:
        if kind not in known:
            near = difflib.get_close_matches(kind, known, n=3, cutoff=0.6)
            listed = (f"did you mean {', '.join(near)}?" if near
                      else f"known kinds: {', '.join(known)}")
            raise UsageProblem(f"--kind {kind!r} is not a record kind; {listed}")
    return kinds


@cli.command()
@click.option("--kind", "-k", "kinds", multiple=True, metavar="KIND",
              shell_complete=_complete_kind, help="Only these kinds (repeatable).")
@click.option("--since", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="Only records after SEQ.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N records.")
@with_json
def log(ctx: click.Context, kinds: tuple[str, ...], since: int, limit: int | None,
        as_json: bool) -> None:
    """List records in commit order (JSON Lines of the stored records with --json)."""
    from loopx.kernel.canonical import dumps

    kinds = _known_kinds(kinds)
    with workspace_of(ctx).store() as store:
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
@with_json
def show(ctx: click.Context, record_id: str, as_json: bool) -> None:
    """Show one record by its record id (or by its seq number)."""
    from loopx.tools.kernel import RecordRef

    record = run_tool(ctx, "record.show", RecordRef(record_id))
    emit(as_json, record, json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False))


@cli.command()
@click.option("--expect", "anchor", metavar="SEQ:HASH",
              help="Also prove the log still reaches this anchor (detects a truncated tail).")
@with_json
def verify(ctx: click.Context, anchor: str | None, as_json: bool) -> None:
    """Check the whole log: canonical lines, hash chain, sequence, batches, schemas."""
    from loopx.kernel.errors import IntegrityError
    from loopx.tools.kernel import Verify

    report = run_tool(ctx, "verify", Verify(anchor))
    if as_json:
        emit(True, report, "")
        if not report["ok"]:
            ctx.exit(IntegrityError.exit_code)
        return
    for note in report["notes"]:
        click.echo(f"note: {note}", err=True)
    if not report["ok"]:
        raise IntegrityError(f"first bad seq {report['first_bad_seq']} ({report['where']}): "
                             f"{report['problem']}", seq=report["first_bad_seq"])
    anchored = f"; anchor seq {report['anchor']['seq']} matches" if report["anchor"] else ""
    click.echo(f"ok: {report['records']} records in {report['segments']} segment(s), head seq "
               f"{report['head']['seq']} {report['head']['hash']}{anchored}")


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
    from loopx.kernel.schemas import drift, export

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
@with_json
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Bring a workspace to the current format (format 1 is the only one so far)."""
    from loopx.workspace import migrate_workspace

    workspace, migrated = migrate_workspace(ctx.obj["workspace"])
    emit(as_json, {"workspace": str(workspace.root), "format_version": workspace.format_version,
                   "migrated": migrated},
         f"{workspace.dir} is at format {workspace.format_version}; "
         + ("migrated" if migrated else "nothing to migrate"))


