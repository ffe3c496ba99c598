"""A checkpoint table's rows, read one by one from the open SQLite file as the fold asks for them.

:class:`LazyTable` is a dict that loads a row on first use and the whole table when something
needs it all; it remembers the stored text of each row it read, so a save can tell the rows a
process changed (in place or not) from those it only looked at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    import sqlite3


class TableSource:
    """The rows of one table in an open, read-only checkpoint file."""

    __slots__ = ("db", "tbl")

    def __init__(self, db: sqlite3.Connection, tbl: str) -> None:
        self.db = db
        self.tbl = tbl

    def fetch(self, key: str) -> str | None:
        row = self.db.execute("SELECT body FROM rows WHERE tbl = ? AND key = ?",
                              (self.tbl, key)).fetchone()
        return None if row is None else str(row[0])

    def first(self) -> tuple[str, str] | None:
        row = self.db.execute("SELECT key, body FROM rows WHERE tbl = ? ORDER BY pos LIMIT 1",
                              (self.tbl,)).fetchone()
        return None if row is None else (row[0], row[1])

    def ordered(self) -> Iterator[tuple[str, str]]:
        return iter(self.db.execute("SELECT key, body FROM rows WHERE tbl = ? ORDER BY pos",
                                    (self.tbl,)))

    def fields(self, names: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """(key, *the top-level fields ``names`` of its row) for every stored row, in no set
        order, read by SQLite without parsing the rows in Python."""
        import sqlite3

        paths = ", ".join(f"json_extract(body, '$.\"{name}\"')" for name in names)
        try:
            return self.db.execute(f"SELECT key, {paths} FROM rows WHERE tbl = ?",
                                   (self.tbl,)).fetchall()
        except sqlite3.OperationalError:  # an SQLite built without its JSON functions
            return [(key, *(row[name] for name in names)) for key, body in self.db.execute(
                "SELECT key, body FROM rows WHERE tbl = ?", (self.tbl,))
                if (row := json.loads(body)) is not None]


_MISSING = object()


def fields(table: dict[str, Any], names: tuple[str, ...]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(key, (row[name] for each of ``names``)) for every row of ``table``, in no set order.
    Of a :class:`LazyTable` not loaded whole, only the rows it holds are read in Python; the
    stored ones' fields come from SQLite, so ``names`` must be fields holding a string, a
    number or null (SQLite reads true as 1)."""
    source = table.source if isinstance(table, LazyTable) and not table.complete else None
    rows = dict.items(table)
    yield from ((key, tuple(row[name] for name in names)) for key, row in rows)
    if source is not None:
        assert isinstance(table, LazyTable)
        seen = table.deleted | dict.keys(table)
        yield from ((key, tuple(values)) for key, *values in source.fields(names)
                    if key not in seen)
_key_json = json.encoder.encode_basestring  # type: ignore[attr-defined]


class LazyTable(dict):  # type: ignore[type-arg]
    """A dict whose entries load from a checkpoint on first use.

    Looking up a key reads that row only. Anything that needs the whole table (iteration, len,
    equality, copying) loads every row first, in the fold's order, and from then on it is an
    ordinary dict. ``bodies`` keeps the stored text of each row read, so :meth:`changes` can
    tell a row changed (in place or replaced) from one only read; ``deleted`` are keys removed
    since the load.

    While not complete it always holds at least one row, because C code that sizes a dict
    directly (the json encoder's empty-dict shortcut) would take an empty one for ``{}``: a
    table is loaded with its first row, and removing the last row held loads the rest.
    """

    __slots__ = ("bodies", "complete", "deleted", "source", "stored")

    def __init__(self, source: TableSource) -> None:
        super().__init__()
        self.source: TableSource | None = source
        self.complete = False
        self.deleted: set[str] = set()
        self.bodies: dict[str, str] = {}
        first = source.first()
        self.stored = first is not None  # the file held rows of this table
        if first is None:
            self.complete, self.source = True, None
        else:
            dict.__setitem__(self, first[0], json.loads(first[1]))
            self.bodies[first[0]] = first[1]

    def preload(self, rows: dict[str, Any], deleted: list[str]) -> None:
        """Take rows changed since the file was written (a checkpoint delta): ``deleted``
        removed, then ``rows`` set, new keys after the stored ones in the order given."""
        for key in deleted:
            if dict.__contains__(self, key):
                if dict.__len__(self) == 1 and not rows:
                    self.materialize()  # keep a row while incomplete (see the class docstring)
                dict.__delitem__(self, key)
                self.bodies.pop(key, None)
            if not self.complete:
                self.deleted.add(key)
        for key, row in rows.items():
            dict.__setitem__(self, key, row)
            self.bodies.pop(key, None)

    def changes(self, dumps: Any) -> dict[str, Any]:
        """The rows held that differ from the file's (changed, replaced or new), in the order
        held: what a save must write besides :attr:`deleted`."""
        bodies = self.bodies
        return {key: row for key, row in dict.items(self)
                if (body := bodies.get(key)) is None or dumps(row) != body}

    # Keyed access: one row at most. ``d[key]`` for a row already read is the dict's own
    # lookup (a miss calls __missing__), so a loaded table reads as fast as a dict.
    def _fetch(self, key: Any) -> Any:
        """The row ``key``, not yet held: read and kept, or _MISSING."""
        if self.complete or key in self.deleted or not isinstance(key, str):
            return _MISSING
        assert self.source is not None
        body = self.source.fetch(key)
        if body is None:
            return _MISSING
        value = json.loads(body)
        dict.__setitem__(self, key, value)
        self.bodies[key] = body
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
            self.bodies.pop(key, None)  # if added again, it is a new row
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
        self.bodies = {}
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
