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

from loopx.kernel.lazy_table import LazyTable
from loopx.kernel.fold import State

if TYPE_CHECKING:
    import sqlite3

# Per table (``part/name``, as the checkpoint names it): the keys that may differ from the
# file, or None when any may.
Changes = dict[str, "set[str] | None"]

_dumps = json.JSONEncoder(separators=(",", ":")).encode  # as the checkpoint writes a row


def loaded_db(state: State) -> sqlite3.Connection | None:
    """The checkpoint file ``state`` was loaded from (open, read-only), or None."""
    return getattr(state, "db", None)


def changes_since_load(state: State) -> Changes | None:
    """Each table's (and each plain value's) keys that may differ from the checkpoint the state
    was loaded from; tables absent from the answer are unchanged. None: not loaded from one."""
    db = loaded_db(state)
    if db is None:
        return None
    out: Changes = {}
    for part_name, part in state.parts.items():
        for name, value in dict.items(part):
            tbl = f"{part_name}/{name}"
            if isinstance(value, LazyTable):
                keys = _table_changes(db, tbl, value)
                if keys is None or keys:
                    out[tbl] = keys
            elif isinstance(value, dict):
                out[tbl] = None  # not loaded lazily: nothing says which rows moved
            elif _stored_entry(db, part_name, name) != _dumps(value):
                out[tbl] = None
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
