"""Checkpoints of folded state: an SQLite file of rows, read lazily, trusted only if the log agrees.

Deleting a checkpoint changes only speed. One whose format or fold version differs, or whose
cursor does not name a record with that seq and hash in the log, is discarded and rebuilt.

Every dict directly under a reducer's part (a domain's slice such as ``todos``, or the kernel's
``kinds``) is a table of one row per key, in the fold's key order; other values are stored
whole. A loaded state reads a row only when something asks for its key (:class:`LazyTable`), so
a command that looks at a few todos of a big log parses those few, not the whole state. A
checkpoint file is never changed in place: a save writes a new file (a copy of the one the state
was loaded from, plus every row this process changed) and renames it over the old one, so a
reader's open file stays the consistent snapshot it loaded. A state loaded from a file that
changed few rows since is saved as a delta beside that file instead
(:mod:`loopx.kernel.checkpoint_delta`), which costs what those rows cost: so a checkpoint can be
saved often, and a reader folds a short tail on top of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx.kernel.checkpoint_delta import (
    apply_delta,
    delta_of,
    delta_path,
    read_delta,
    write_delta,
)
from loopx.kernel.fold import State
from loopx.kernel.lazy_table import LazyTable, TableSource
from loopx.kernel.store.base import Cursor, Store
from loopx.kernel.store.fs import fsync_dir

if TYPE_CHECKING:
    import sqlite3

CHECKPOINT_FORMAT = 2
# The extension point (``Domain.extensions``) whose hooks write what a domain derives from the
# state into the same file and transaction as the state: see :func:`save_checkpoint`.
SAVE_EXTRA = "checkpoint.save"
# A hook (new file, the state, the file it was loaded from if the new one copies it, else None).
SaveExtra = Callable[["sqlite3.Connection", State, "sqlite3.Connection | None"], None]
# The extension point whose hooks add what a domain derives from the state to a delta save
# (``extras``): each returns a dict of JSON values to merge in, or None.
DELTA_EXTRA = "checkpoint.delta"
DeltaExtra = Callable[[State], "dict[str, Any] | None"]
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # One row per value under a part: ``is_table`` rows hold their entries in ``rows``.
    ("CREATE TABLE entries (part TEXT NOT NULL, name TEXT NOT NULL, pos INTEGER NOT NULL, "
     "is_table INTEGER NOT NULL, body TEXT, PRIMARY KEY (part, name))"),
    ("CREATE TABLE rows (tbl TEXT NOT NULL, key TEXT NOT NULL, pos INTEGER NOT NULL, "
     "body TEXT NOT NULL, PRIMARY KEY (tbl, key))"),
    "CREATE INDEX rows_order ON rows (tbl, pos)",
)


def _connect_ro(path: Path) -> sqlite3.Connection:
    import sqlite3

    # immutable: a checkpoint file is never written in place (saves rename a new one over it),
    # so the open file is a snapshot and needs no locks.
    return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True,
                           check_same_thread=False)


def load_checkpoint(path: Path, store: Store, version: str, *,
                    use_delta: bool = True) -> tuple[State | None, str]:
    """The checkpointed state if it is usable, else None; the string says why it was not.

    Only the small values are read now (and the delta, if one applies); a table's rows are
    read when asked for.
    """
    import sqlite3

    if not path.exists():
        return None, "no checkpoint"
    db = None
    try:
        db = _connect_ro(path)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        if meta.get("checkpoint_format") != str(CHECKPOINT_FORMAT):
            db.close()
            return None, "checkpoint format differs"
        if meta.get("fold_version") != version:
            db.close()
            return None, "fold version changed"
        cursor = Cursor.from_json(json.loads(meta["cursor"]))
        parts: dict[str, dict[str, Any]] = {}
        for part, name, is_table, body in db.execute(
                "SELECT part, name, is_table, body FROM entries ORDER BY rowid"):
            parts.setdefault(part, {})[name] = (
                LazyTable(TableSource(db, f"{part}/{name}")) if is_table else json.loads(body))
        base_id = meta.get("base_id")
        found = read_delta(path, base_id, version) if use_delta else None
        applied = None
        if found is not None:
            delta, data = found
            try:
                ahead = Cursor.from_json(delta["cursor"])
                if store.cursor_matches(ahead):
                    apply_delta(parts, delta)
                    cursor, applied = ahead, data
            except (KeyError, TypeError, ValueError, AttributeError):
                db.close()  # a delta that does not fit its base: the base alone
                return load_checkpoint(path, store, version, use_delta=False)
    except sqlite3.DatabaseError:
        _close(db)
        return None, "checkpoint unreadable"
    except (KeyError, TypeError, ValueError):
        _close(db)
        return None, "checkpoint malformed"
    if not store.cursor_matches(cursor):
        db.close()
        return None, "checkpoint disagrees with the log"
    return _Loaded(cursor, parts, db, base_id, applied), "checkpoint used"


def _close(db: sqlite3.Connection | None) -> None:
    if db is not None:
        db.close()


class _Loaded(State):
    """A state read from a checkpoint file, which it keeps open for its lazy tables."""

    def __init__(self, cursor: Cursor, parts: dict[str, dict[str, Any]],
                 db: sqlite3.Connection, base_id: str | None, delta: bytes | None) -> None:
        super().__init__(cursor, parts)
        self.db = db
        self.base_id = base_id  # the base file its unchanged rows are those of
        self.db_base_id = base_id  # the one ``db`` is (a whole save since writes another)
        # The delta of ``base_id`` last read or written, as its bytes: what the state was when
        # loaded, or when last saved (read only by loopx.kernel.checkpoint_changes).
        self.delta = delta


def save_checkpoint(path: Path, state: State, version: str, *, full: bool = True,
                    extras: Sequence[SaveExtra] = (),
                    delta_extras: Sequence[DeltaExtra] = ()) -> bool:
    """Save ``state`` as the checkpoint at ``path``; whether it was saved.

    A state loaded from a checkpoint whose changes since are few is saved as a delta of that
    file (:mod:`loopx.kernel.checkpoint_delta`). Otherwise, if ``full``: write a new file beside
    ``path`` (a state loaded from a checkpoint copies that file's unchanged rows), fsync it,
    rename it over ``path`` and fsync the directory. Each of ``extras`` adds its own tables to a
    whole file in the same transaction; each of ``delta_extras`` adds its part to a delta.
    """
    if isinstance(state, _Loaded):
        data = delta_of(state, state.base_id, version, delta_extras)
        if data is not None:
            write_delta(path, data)
            state.delta = data
            return True
    if not full:
        return False
    base_id = os.urandom(8).hex()
    _save_whole(path, state, version, base_id, extras)
    if isinstance(state, _Loaded):
        state.base_id = base_id  # its unchanged rows are those of the new file too
        state.delta = None
    delta_path(path).unlink(missing_ok=True)  # it names the old file: ignored, but tidy
    return True


def _save_whole(path: Path, state: State, version: str, base_id: str,
                extras: Sequence[SaveExtra]) -> None:
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        base = getattr(state, "db", None)
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a temp file: fsynced whole, then renamed
            db.execute("PRAGMA synchronous = OFF")
            if base is not None and _lazy(state):
                base.backup(db)
            else:
                base = None
                for statement in _SCHEMA:
                    db.execute(statement)
            db.execute("BEGIN")
            _write(db, state, version, base_id, copied=base is not None)
            for extra in extras:
                extra(db, state, base)
            db.execute("COMMIT")
        finally:
            db.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except (OSError, sqlite3.Error) as exc:
        # A full disk must not leave a partial temp file behind to fill it further.
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise
        raise OSError(f"checkpoint not written: {exc}") from exc
    fsync_dir(path.parent)


def _lazy(state: State) -> bool:
    return any(isinstance(v, LazyTable) and not v.complete
               for part in state.parts.values() for v in part.values())


def _write(db: sqlite3.Connection, state: State, version: str, base_id: str, *,
           copied: bool) -> None:
    """Write ``state`` into ``db``: everything, or (``copied``: ``db`` holds the file the state
    was loaded from) the entries and the rows the state changed since."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
        ("checkpoint_format", str(CHECKPOINT_FORMAT)), ("fold_version", version),
        ("cursor", dumps(state.cursor.to_json())), ("base_id", base_id)])
    if copied:
        db.execute("DELETE FROM entries")
    for part_name, part in state.parts.items():
        for pos, (name, value) in enumerate(dict.items(part)):
            is_table = isinstance(value, dict)
            db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?)",
                       (part_name, name, pos, int(is_table), None if is_table else dumps(value)))
            if not is_table:
                continue
            tbl = f"{part_name}/{name}"
            if isinstance(value, LazyTable) and not value.complete and copied:
                # The copied file holds this table as loaded: apply what changed since.
                db.executemany("DELETE FROM rows WHERE tbl = ? AND key = ?",
                               [(tbl, key) for key in value.deleted])
                top = db.execute("SELECT COALESCE(MAX(pos), -1) FROM rows WHERE tbl = ?",
                                 (tbl,)).fetchone()[0]
                # A key still stored keeps its place; a new one goes after every other.
                db.executemany(
                    "INSERT INTO rows VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (tbl, key) DO UPDATE SET body = excluded.body",
                    [(tbl, str(key), top + 1 + n, dumps(row))
                     for n, (key, row) in enumerate(value.changes(dumps).items())])
            else:
                if isinstance(value, LazyTable):
                    value.materialize()
                db.execute("DELETE FROM rows WHERE tbl = ?", (tbl,))
                db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)",
                               [(tbl, str(key), n, dumps(row))
                                for n, (key, row) in enumerate(dict.items(value))])
