"""Checkpoints of folded state: an SQLite file of rows, read lazily, trusted only if the log agrees.

Deleting a checkpoint changes only speed. One whose format or fold version differs, or whose
cursor does not name a record with that seq and hash in the log, is discarded and rebuilt.

Every dict directly under a reducer's part (a domain's slice such as ``todos``, or the kernel's
``kinds``) is a table of one row per key, in the fold's key order; other values are stored
whole. A loaded state reads a row only when something asks for its key (:class:`LazyTable`), so
a command that looks at a few todos of a big log parses those few, not the whole state. A
checkpoint file is never changed in place: a save writes a new file (a copy of the one the state
was loaded from, plus every row this process touched) and renames it over the old one, so a
reader's open file stays the consistent snapshot it loaded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from loopx.kernel.fold import State
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
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # One row per value under a part: ``is_table`` rows hold their entries in ``rows``.
    ("CREATE TABLE entries (part TEXT NOT NULL, name TEXT NOT NULL, pos INTEGER NOT NULL, "
     "is_table INTEGER NOT NULL, body TEXT, PRIMARY KEY (part, name))"),
    ("CREATE TABLE rows (tbl TEXT NOT NULL, key TEXT NOT NULL, pos INTEGER NOT NULL, "
     "body TEXT NOT NULL, PRIMARY KEY (tbl, key))"),
    "CREATE INDEX rows_order ON rows (tbl, pos)",
)


class _Source:
    """The rows of one table in an open, read-only checkpoint file."""

    __slots__ = ("db", "tbl")

    def __init__(self, db: sqlite3.Connection, tbl: str) -> None:
        self.db = db
        self.tbl = tbl

    def fetch(self, key: str) -> tuple[bool, Any]:
        row = self.db.execute("SELECT body FROM rows WHERE tbl = ? AND key = ?",
                              (self.tbl, key)).fetchone()
        return (False, None) if row is None else (True, json.loads(row[0]))

    def first(self) -> tuple[str, str] | None:
        row = self.db.execute("SELECT key, body FROM rows WHERE tbl = ? ORDER BY pos LIMIT 1",
                              (self.tbl,)).fetchone()
        return None if row is None else (row[0], row[1])

    def ordered(self) -> Iterator[tuple[str, str]]:
        return iter(self.db.execute("SELECT key, body FROM rows WHERE tbl = ? ORDER BY pos",
                                    (self.tbl,)))


_MISSING = object()
_key_json = json.encoder.encode_basestring  # type: ignore[attr-defined]


class LazyTable(dict):  # type: ignore[type-arg]
    """A dict whose entries load from a checkpoint on first use.

    Looking up a key reads that row only. Anything that needs the whole table (iteration, len,
    equality, copying) loads every row first, in the fold's order, and from then on it is an
    ordinary dict. Rows read or written here are what a save writes back (they may have been
    changed in place); ``deleted`` are keys removed since the load.

    While not complete it always holds at least one row, because C code that sizes a dict
    directly (the json encoder's empty-dict shortcut) would take an empty one for ``{}``: a
    table is loaded with its first row, and removing the last row held loads the rest.
    """

    __slots__ = ("complete", "deleted", "source")

    def __init__(self, source: _Source) -> None:
        super().__init__()
        self.source: _Source | None = source
        self.complete = False
        self.deleted: set[str] = set()
        first = source.first()
        if first is None:
            self.complete, self.source = True, None
        else:
            dict.__setitem__(self, first[0], json.loads(first[1]))

    # Keyed access: one row at most. ``d[key]`` for a row already read is the dict's own
    # lookup (a miss calls __missing__), so a loaded table reads as fast as a dict.
    def _fetch(self, key: Any) -> Any:
        """The row ``key``, not yet held: read and kept, or _MISSING."""
        if self.complete or key in self.deleted or not isinstance(key, str):
            return _MISSING
        assert self.source is not None
        found, value = self.source.fetch(key)
        if not found:
            return _MISSING
        dict.__setitem__(self, key, value)
        return value

    def _load(self, key: Any) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        return self._fetch(key)

    def __missing__(self, key: Any) -> Any:
        value = self._fetch(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        if self.complete:
            return dict.get(self, key, default)
        value = self._load(key)
        return default if value is _MISSING else value

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._fetch(key) is not _MISSING

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = self._load(key)
        if value is _MISSING:
            dict.__setitem__(self, key, default)
            return default
        return value

    def pop(self, key: Any, *default: Any) -> Any:
        if self._load(key) is _MISSING:
            return dict.pop(self, key, *default)
        value = self[key]
        del self[key]
        return value

    def __delitem__(self, key: Any) -> None:
        if self._load(key) is _MISSING:
            raise KeyError(key)
        if not self.complete and dict.__len__(self) == 1:
            self.materialize()  # keep a row while incomplete (see the class docstring)
        if not self.complete:
            self.deleted.add(key)
        dict.__delitem__(self, key)

    # Everything else sees the whole table.
    def materialize(self) -> None:
        """Load every row, in the fold's order, keeping the objects already handed out."""
        if self.complete:
            return
        assert self.source is not None
        touched = dict(dict.items(self))
        # One parse of every row as one JSON object, in the fold's order: far cheaper than one
        # json.loads per row, and the dict comes out of the parser already ordered.
        ordered: dict[str, Any] = json.loads(
            "{" + ",".join([f"{_key_json(key)}:{body}" for key, body in self.source.ordered()])
            + "}")
        for key in self.deleted:
            ordered.pop(key, None)  # removed here (if added again, it is new: at the end)
        for key, value in touched.items():
            ordered[key] = value  # a stored key keeps its place; a new one goes to the end
        dict.clear(self)
        dict.update(self, ordered)
        self.complete = True
        self.deleted = set()
        self.source = None

    def _whole(self) -> LazyTable:
        self.materialize()
        return self

    def __iter__(self) -> Iterator[Any]:
        return dict.__iter__(self._whole())

    def __len__(self) -> int:
        return dict.__len__(self._whole())

    def __eq__(self, other: object) -> bool:
        return dict.__eq__(self._whole(), other)

    def __ne__(self, other: object) -> bool:
        return dict.__ne__(self._whole(), other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return dict.__repr__(self._whole())

    def __reversed__(self) -> Iterator[Any]:
        return dict.__reversed__(self._whole())

    def __or__(self, other: Any) -> Any:
        return dict(self._whole()) | other

    def __ror__(self, other: Any) -> Any:
        return other | dict(self._whole())

    def __ior__(self, other: Any) -> Self:
        dict.update(self._whole(), other)
        return self

    def __reduce__(self) -> Any:
        return (dict, (dict(self._whole()),))

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        import copy

        return copy.deepcopy(dict(self._whole()), memo)

    def keys(self) -> Any:
        return dict.keys(self._whole())

    def values(self) -> Any:
        return dict.values(self._whole())

    def items(self) -> Any:
        return dict.items(self._whole())

    def copy(self) -> dict[str, Any]:
        return dict(dict.items(self._whole()))

    def popitem(self) -> tuple[Any, Any]:
        return dict.popitem(self._whole())

    def clear(self) -> None:
        self.materialize()
        dict.clear(self)

    def update(self, *args: Any, **kwargs: Any) -> None:
        # Updated keys keep their place if stored; new ones go to the end, as in a dict.
        dict.update(self, *args, **kwargs)


def _connect_ro(path: Path) -> sqlite3.Connection:
    import sqlite3

    # immutable: a checkpoint file is never written in place (saves rename a new one over it),
    # so the open file is a snapshot and needs no locks.
    return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True,
                           check_same_thread=False)


def load_checkpoint(path: Path, store: Store, version: str) -> tuple[State | None, str]:
    """The checkpointed state if it is usable, else None; the string says why it was not.

    Only the small values are read now; a table's rows are read when asked for.
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
                LazyTable(_Source(db, f"{part}/{name}")) if is_table else json.loads(body))
    except sqlite3.DatabaseError:
        _close(db)
        return None, "checkpoint unreadable"
    except (KeyError, TypeError, ValueError):
        _close(db)
        return None, "checkpoint malformed"
    if not store.cursor_matches(cursor):
        db.close()
        return None, "checkpoint disagrees with the log"
    return _Loaded(cursor, parts, db), "checkpoint used"


def _close(db: sqlite3.Connection | None) -> None:
    if db is not None:
        db.close()


class _Loaded(State):
    """A state read from a checkpoint file, which it keeps open for its lazy tables."""

    def __init__(self, cursor: Cursor, parts: dict[str, dict[str, Any]],
                 db: sqlite3.Connection) -> None:
        super().__init__(cursor, parts)
        self.db = db


def save_checkpoint(path: Path, state: State, version: str, *,
                    extras: Sequence[SaveExtra] = ()) -> None:
    """Write the state to a new file beside ``path``, fsync it, rename it over ``path`` and
    fsync the directory. A state loaded from a checkpoint copies that file's untouched rows.
    Each of ``extras`` then adds its own tables in the same transaction."""
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
            _write(db, state, version, copied=base is not None)
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


def _write(db: sqlite3.Connection, state: State, version: str, *, copied: bool) -> None:
    """Write ``state`` into ``db``: everything, or (``copied``: ``db`` holds the file the state
    was loaded from) the entries and the rows the state touched since."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
        ("checkpoint_format", str(CHECKPOINT_FORMAT)), ("fold_version", version),
        ("cursor", dumps(state.cursor.to_json()))])
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
                     for n, (key, row) in enumerate(dict.items(value))])
            else:
                if isinstance(value, LazyTable):
                    value.materialize()
                db.execute("DELETE FROM rows WHERE tbl = ?", (tbl,))
                db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)",
                               [(tbl, str(key), n, dumps(row))
                                for n, (key, row) in enumerate(dict.items(value))])
