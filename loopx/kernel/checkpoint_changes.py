"""What changed in a state since it was loaded from its checkpoint: the keys of each table whose
row differs from the file's, so that a value derived from a few rows (a projection cached beside
the state) is recomputed only where its inputs moved.

A lazily loaded table (:class:`~loopx.kernel.lazy_table.LazyTable`) holds every row read or
written since the load with the text it was stored as, and remembers the keys removed: only
those can differ, and each is compared as the bytes a save would write. A table read whole, or not loaded
lazily, is reported as wholly changed (None): the answer may say too much, never too little.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from loopx.kernel.fold import State
from loopx.kernel.lazy_table import LazyTable

if TYPE_CHECKING:
    import sqlite3

# Per table (``part/name``, as the checkpoint names it): the keys that may differ from the
# file, or None when any may.
Changes = dict[str, "set[str] | None"]

_dumps = json.JSONEncoder(separators=(",", ":")).encode  # as the checkpoint writes a row


def loaded_db(state: State) -> sqlite3.Connection | None:
    """The checkpoint file ``state`` was loaded from (open, read-only), or None."""
    return getattr(state, "db", None)


def changes_since_load(state: State, *, since_delta: bool = False) -> Changes | None:
    """Each table's (and each plain value's) keys that may differ from the checkpoint file the
    state was loaded from; tables absent from the answer are unchanged. None: not loaded from
    one, or (``since_delta``) no longer saved on top of that file.

    ``since_delta``: from the file plus the delta the state was loaded with, or last saved as
    (:func:`loaded_delta`), instead of the file alone.
    """
    db = loaded_db(state)
    if db is None:
        return None
    delta = None
    if since_delta:
        if not saved_on_file(state):
            return None  # a whole save since: its deltas are not of this file
        delta = loaded_delta(state)
    out: Changes = {}
    for part_name, part in state.parts.items():
        for name, value in dict.items(part):
            tbl = f"{part_name}/{name}"
            if isinstance(value, LazyTable):
                keys = _table_changes(db, tbl, value)
                if delta is not None and keys is not None and tbl in delta["tables"]:
                    keys = _since_delta(keys, value, delta["tables"][tbl])
                if keys is None or keys:
                    out[tbl] = keys
            elif isinstance(value, dict):
                out[tbl] = None  # not loaded lazily: nothing says which rows moved
            else:
                saved = (delta["entries"].get(part_name, {}) if delta is not None else {})
                stored = (_dumps(saved[name]) if name in saved
                          else _stored_entry(db, part_name, name))
                if stored != _dumps(value):
                    out[tbl] = None
    return out


def saved_on_file(state: State) -> bool:
    """Whether ``state``'s saves still go on top of the file it was loaded from (no whole save
    wrote another file since)."""
    return getattr(state, "base_id", None) == getattr(state, "db_base_id", None)


def loaded_delta(state: State) -> dict[str, Any] | None:
    """The delta (:mod:`loopx.kernel.checkpoint_delta`) ``state`` was loaded with or last saved
    as, parsed from its bytes (the fold has changed the objects it loaded since), or None. Read
    only: the answer is shared by every caller."""
    data = getattr(state, "delta", None)
    if data is None:
        return None
    parsed = getattr(state, "delta_parsed", None)
    if parsed is None or parsed[0] is not data:  # parsed once per delta (callers only read)
        parsed = (data, json.loads(data))
        state.delta_parsed = parsed  # type: ignore[attr-defined]
    return parsed[1]  # type: ignore[no-any-return]


def _since_delta(keys: set[str], table: LazyTable, change: dict[str, Any]) -> set[str]:
    """Of the ``keys`` of ``table`` changed since the file, those whose row also differs from
    the delta's ``change`` to that table (a row the delta set, or a key it removed)."""
    rows, deleted = change["rows"], set(change["deleted"])
    if change.get("whole"):
        deleted = set()  # the delta held the whole table: a key it lacks was absent
        keys = keys | rows.keys()  # and one it held may be gone since
    out = set()
    for key in keys:
        if dict.__contains__(table, key):
            if key not in rows or _dumps(dict.__getitem__(table, key)) != _dumps(rows[key]):
                out.add(key)
        elif key in rows or not (key in deleted or change.get("whole")):
            out.add(key)
    return out


def _table_changes(db: sqlite3.Connection, tbl: str, table: LazyTable) -> set[str] | None:
    if table.complete:
        stored = db.execute("SELECT 1 FROM rows WHERE tbl = ? LIMIT 1", (tbl,)).fetchone()
        # Empty in the file: every row held is new. Otherwise it was read whole, and the keys
        # removed before that are no longer known.
        return None if stored is not None else {str(k) for k in dict.keys(table)}
    # The table kept each row's stored text as it read it: no need to read the file again.
    return {str(k) for k in table.changes(_dumps)} | {str(k) for k in table.deleted}


def _stored_entry(db: sqlite3.Connection, part: str, name: str) -> Any:
    row = db.execute("SELECT body FROM entries WHERE part = ? AND name = ?",
                     (part, name)).fetchone()
    return None if row is None else row[0]
