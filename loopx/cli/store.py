"""``loopx store``: where the log lives, and moving it between backends."""

from __future__ import annotations

import click

from loopx.cli.app import cli, emit, with_json, workspace_of


@cli.group()
def store() -> None:
    """The workspace's store: copy its log to PostgreSQL or to a file log."""


@store.command("copy")
@click.option("--to", "to", required=True, metavar="URL|DIR",
              help="postgresql://user@host/db?log=NAME (password from LOOPX_STORE, PGPASSWORD "
                   "or ~/.pgpass), or a new directory that becomes a file-log workspace.")
@click.option("--use", is_flag=True,
              help="Afterwards, record the PostgreSQL copy as this workspace's store.")
@with_json
def store_copy(ctx: click.Context, to: str, use: bool, as_json: bool) -> None:
    """Copy the log byte for byte (same seq, hashes and head), verifying both sides."""
    from loopx.workspace import copy_store

    result = copy_store(workspace_of(ctx), to, use=use)
    head = result["head"]
    resumed = (f" (the target already held this log up to seq {result['resumed_from']})"
               if result["resumed_from"] else "")
    emit(as_json, result,
         f"copied {result['records']} records to {result['to']}{resumed}; head seq {head['seq']} "
         f"{head['hash']}\ncheck it any time with `loopx verify --expect "
         f"{head['seq']}:{head['hash']}`" + ("\nthis workspace now uses the copy" if use else ""))
