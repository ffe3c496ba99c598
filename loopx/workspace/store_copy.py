"""``loopx store copy``: a workspace's log copied byte for byte to PostgreSQL or a directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx.kernel.errors import IntegrityError, StorageError, UsageProblem, WorkspaceError
from loopx.kernel.ledger import Ledger
from loopx.kernel.store.base import Store
from loopx.kernel.store.copy import Copied, copy_log, copy_rest
from loopx.kernel.store.file import FileStore
from loopx.kernel.store.fs import fault
from loopx.kernel.store.location import (
    FILE,
    is_postgres,
    is_url,
    parse_postgres,
    redact,
    without_password,
)
from loopx.kernel.store.moved import Moved, follow_command
from loopx.kernel.verify import Anchor, verify_store
from loopx.workspace.create import undo_init
from loopx.workspace.directory import WORKSPACE_DIR, Workspace
from loopx.workspace.files import (
    GITIGNORE,
    copy_profiles,
    read_applying,
    read_synced,
    write_applying,
    write_atomic,
    write_settings,
    write_synced,
)

if TYPE_CHECKING:
    from loopx.kernel.store.postgres import PostgresStore


def copy_store(workspace: Workspace, to: str, *, use: bool = False) -> dict[str, Any]:
    """Copy the workspace's log, byte for byte, to ``to``: a postgresql:// URL (its log named
    by ``?log=``, else the goal id) or a directory that becomes a new workspace on a file log
    (with this one's settings and role profiles). With ``use``, this workspace then records the
    PostgreSQL copy as its store. Returns what ``loopx store copy --json`` prints.

    Raises:
        ConflictError: the target holds records that are not the start of this log (a target
            holding its start, from a copy that stopped part way, is continued).
        WorkspaceError: ``to`` is neither, ``use`` with a directory, or the directory is taken.
        IntegrityError: the log does not verify, or the copy does not reach its head.
        StorageError: either side refused.
    """
    # LOOPX_STORE may carry the target's password here, so a file log is opened directly.
    source_store = FileStore(workspace.dir) if workspace.store_location == FILE \
        else workspace.store()
    with source_store as source:
        goal = Ledger(source).goal_id()
        if is_postgres(to):
            location = parse_postgres(to, default_log=goal).conninfo_with_log()
            shown = without_password(location)
            copied = _copy_to_postgres(source, location, shown, use=use)
            if use:
                _record_store(workspace, shown)
        elif is_url(to):  # a mistyped scheme would otherwise become a directory named after it
            raise UsageProblem(f"--to: {redact(to)!r} is a URL but not a postgresql:// one; "
                               "nothing was copied",
                               hint="a target is postgresql://USER@HOST/DB?log=NAME or a "
                                    "directory path")
        else:
            if use:
                raise WorkspaceError("--use switches to a PostgreSQL copy; a directory copy is "
                                     "a workspace of its own (run commands there with -C)")
            root = Path(to).expanduser().resolve()
            root = root.parent if root.name == WORKSPACE_DIR else root
            wdir = root / WORKSPACE_DIR
            if wdir.exists() and any(wdir.iterdir()):
                raise WorkspaceError(f"{wdir} already exists; copy into a new directory")
            try:
                copied = _copy_to_directory(workspace, source, root)
            except OSError as exc:
                raise StorageError.from_os(exc, "write", path=exc.filename or root,
                                           outcome=undo_init(wdir, False)) from None
            shown = str(root)
    return {"from": redact(workspace.store_location if workspace.store_location != FILE
                           else str(workspace.dir)),
            "to": shown, "records": copied.records, "resumed_from": copied.resumed_from,
            "head": {"seq": copied.head_seq, "hash": copied.head_hash}, "used": use}


def _copy_to_postgres(source: Store, location: str, shown: str, *, use: bool) -> Copied:
    """The log copied into the PostgreSQL log at ``location``; with ``use``, ``source`` then
    marked moved there (the caller switches the workspace after)."""
    from loopx.kernel.store.postgres import PostgresStore

    with PostgresStore(location) as target:
        if isinstance(source, PostgresStore) and source.identity() == target.identity():
            raise WorkspaceError(f"{shown} is this workspace's own log; nothing was copied",
                                 hint="copy to another ?log= name or database")
        moved = source.moved() if use else None
        if moved is not None:
            return _moved_already(moved, target, shown)
        gone = target.moved()
        if gone is not None:  # its own appends would be refused mid-copy, naming "this log"
            raise WorkspaceError(
                f"{shown} was itself moved away (to {gone.to or 'another store'}, at seq "
                f"{gone.seq}), and a log moved away takes no records again; nothing was copied",
                hint="copy to a log of a new name (?log=NAME in the URL)")
        copied = copy_log(source, target)  # the bulk, while writers go on
        if use:
            copied = _mark_moved(source, target, copied, shown)  # type: ignore[arg-type]
            fault("move-marked")  # tests: pause between the mark and the caller's switch
        return copied


def _mark_moved(source: FileStore | PostgresStore, target: Store, copied: Copied,
                shown: str) -> Copied:
    """What writers committed during the bulk copy, then the mark, holding ``source`` so that
    no writer gets in between. The mark comes before the switch: a kill between the two leaves
    a log that refuses every append until the command runs again, never a switched workspace
    whose old log still takes appends (from other hosts, too)."""
    with source.locked():
        raced = source.moved()  # by another `store copy --use` meanwhile
        if raced is not None:
            raise WorkspaceError(
                f"this log was moved to {raced.to or 'another store'} while it was being copied "
                "(another `loopx store copy --use`); this workspace was not switched",
                hint=f"run {follow_command(raced.to)} to follow it")
        copied = copy_rest(source, target, copied)
        source.mark_moved(shown, target.head())
    return copied


def _moved_already(moved: Moved, target: Store, shown: str) -> Copied:
    """The switch alone, for a log already moved to ``shown`` (by this command stopped before
    its switch, or on another host): the target must hold the moved log up to the mark."""
    if moved.to != shown:
        raise WorkspaceError(f"this log moved to {moved.to or 'another store'}, not to {shown}",
                             hint=f"run {follow_command(moved.to)} to switch to where it went")
    if moved.seq is None or moved.hash is None:
        raise WorkspaceError("this log's moved mark names no head",
                             hint="run `loopx verify` on both logs, then fix .loopx/workspace.json")
    checked = verify_store(target, Anchor(moved.seq, moved.hash))
    if not checked.ok:
        raise IntegrityError(f"{shown} does not hold this log up to where it moved (seq "
                             f"{moved.seq}): {checked.problem}", seq=checked.first_bad_seq,
                             hint="run `loopx verify` on both logs")
    return Copied(0, checked.head_seq, checked.head_hash, None, moved.seq)


def _copy_to_directory(workspace: Workspace, source: Store, root: Path) -> Copied:
    wdir = root / WORKSPACE_DIR
    root.mkdir(parents=True, exist_ok=True)
    with FileStore(wdir) as target:
        copied = copy_log(source, target)
    copy_profiles({p.name: p.read_bytes() for p in sorted(workspace.lanes_dir.glob("*.toml"))},
                  wdir / "lanes")
    synced = read_synced(workspace.dir)  # the same log: the files' bases hold there too
    if synced is not None:
        write_synced(wdir, synced)
    noted = read_applying(workspace.dir)  # an apply killed after its record: see file_bases
    if noted:
        write_applying(wdir, noted)
    write_atomic(wdir / ".gitignore", GITIGNORE)
    settings = json.loads((workspace.dir / "workspace.json").read_text())
    write_settings(wdir, {**settings, "store": FILE})
    return copied


def _record_store(workspace: Workspace, location: str) -> None:
    """Point ``workspace.json`` at ``location`` (no password), keeping every other setting."""
    settings = json.loads((workspace.dir / "workspace.json").read_text())
    write_settings(workspace.dir, {**settings, "store": without_password(location)})
    shutil.rmtree(workspace.dir / "checkpoints", ignore_errors=True)  # positions of the old log
