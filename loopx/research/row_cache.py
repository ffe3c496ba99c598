"""The frontier rows and candidate entries, kept in the checkpoint file beside the state they were
computed from, so that ``frontier --json`` and ``candidates --json`` after a few new records
recompute only the hypotheses those records touched and print the rest as stored.

Each hypothesis' row is kept as the JSON text the commands print (and its promotion, retirement
and retry entries), with the rows of the state it read (:mod:`loopx.research.tracked_view`).
A save (the :data:`~loopx.kernel.checkpoint.SAVE_EXTRA` hook) recomputes the rows whose inputs
changed since the checkpoint it started from, in the same transaction as the state; a reader
recomputes those its own catch-up changed (:mod:`loopx.kernel.checkpoint_changes`). The cache
is a pure function of the log: it is used only if it names the checkpoint's own cursor and this
code's :data:`ROWS_VERSION`, otherwise everything is computed as without it.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from loopx import __version__
from loopx.kernel.checkpoint_changes import (
    Changes,
    changes_since_load,
    loaded_db,
    loaded_delta,
    saved_on_file,
)
from loopx.kernel.fold import State
from loopx.research.tracked_view import WHOLE, TrackedView

if TYPE_CHECKING:
    import sqlite3

# Bump whenever what a row or a candidate entry says changes (the package version is part of
# the stamp too, so an upgrade never reads rows an older release computed).
ROWS_VERSION = 4
STAMP = f"{ROWS_VERSION}/{__version__}"
HYPOTHESES = "lanes/hypotheses"
CANDIDATE_KINDS = ("promotion", "retirement", "retry")
FRONTIER_SCHEMA = "decentralized_research_frontier_v0"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS research_rows_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ("CREATE TABLE IF NOT EXISTS research_rows (hid TEXT PRIMARY KEY, pos INTEGER NOT NULL, "
     "frontier TEXT NOT NULL)"),
    # Apart from the rows, so that `candidates` reads only the hypotheses that have an entry.
    ("CREATE TABLE IF NOT EXISTS research_candidates (hid TEXT PRIMARY KEY, "
     "pos INTEGER NOT NULL, promotion TEXT, retirement TEXT, retry TEXT)"),
    ("CREATE TABLE IF NOT EXISTS research_deps (tbl TEXT NOT NULL, key TEXT NOT NULL, "
     "hid TEXT NOT NULL, PRIMARY KEY (tbl, key, hid)) WITHOUT ROWID"),
    "CREATE INDEX IF NOT EXISTS research_deps_hid ON research_deps (hid)",
    "CREATE INDEX IF NOT EXISTS research_rows_order ON research_rows (pos)",
    "CREATE INDEX IF NOT EXISTS research_candidates_order ON research_candidates (pos)",
)
# The cache's tables of printed text: each hypothesis' frontier row, and its candidate entries.
ROWS, CANDIDATES = "research_rows", "research_candidates"
View = dict[str, Any]
# The key of the rows a checkpoint delta keeps (in its ``extras``), and those rows: for each
# hypothesis whose row differs from the file's, [pos, frontier, promotion, retirement, retry,
# deps as [table, key] pairs], or None once it is gone.
EXTRA = "research_rows"
Kept = dict[str, "list[Any] | None"]
# A hypothesis' cached texts: its position (its seq), frontier row, and candidate entries.
Texts = tuple[int, str, "str | None", "str | None", "str | None"]


def dumps(value: Any) -> str:
    """JSON text as the ``--json`` commands print it (sorted keys, non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def texts(view: View, hypothesis_id: str) -> Texts:
    """The hypothesis' row and candidate entries as printed (``view`` may be tracked)."""
    from loopx.research.projections import row

    r = row(view, hypothesis_id)
    base = {"hypothesis_id": r.hypothesis_id, "title": r.title, "revision": r.revision}
    entries = [None if extra is None else dumps({**base, **extra})
               for extra in (r.promotion, r.retirement, r.retry)]
    return (view["hypotheses"][hypothesis_id]["seq"], dumps(r.to_json()), *entries)


# -- written with the checkpoint ------------------------------------------------------------

def save_rows(db: sqlite3.Connection, state: State, base: sqlite3.Connection | None) -> None:
    """The checkpoint hook: bring the rows in ``db`` (a copy of ``base``, if given) to
    ``state``, recomputing those whose inputs changed, or all of them."""
    lanes = state.parts.get("lanes")
    if lanes is None or "hypotheses" not in lanes:
        return  # not the installed domains' state: nothing to derive
    try:
        _save_rows(db, state, lanes, base)
    except Exception as exc:  # noqa: BLE001
        # A projection that fails must not cost every command its checkpoint: the file goes
        # without rows, and `frontier` computes (and reports the failure) as without them.
        _drop(db)
        print(f"loopx: frontier rows not kept with the checkpoint: {exc!r}", file=sys.stderr)


def _drop(db: sqlite3.Connection) -> None:
    for table in (ROWS, CANDIDATES, "research_deps", "research_rows_meta"):
        db.execute(f"DROP TABLE IF EXISTS {table}")


def _save_rows(db: sqlite3.Connection, state: State, lanes: View,
               base: sqlite3.Connection | None) -> None:
    dirty = None
    if base is not None and _valid(base):
        changes = changes_since_load(state)
        dirty = None if changes is None else _dirty(db, changes)
    if dirty is None:  # all anew, in tables of this code's making
        _drop(db)
        for statement in _SCHEMA:
            db.execute(statement)
        dirty = set(lanes["hypotheses"])
    hypotheses = lanes["hypotheses"]
    for hid in sorted(dirty):
        for table in (ROWS, CANDIDATES, "research_deps"):
            db.execute(f"DELETE FROM {table} WHERE hid = ?", (hid,))
        if hid not in hypotheses:
            continue
        tracked = TrackedView(lanes)
        pos, frontier, *entries = texts(tracked, hid)
        db.execute(f"INSERT INTO {ROWS} VALUES (?, ?, ?)", (hid, pos, frontier))
        if any(e is not None for e in entries):
            db.execute(f"INSERT INTO {CANDIDATES} VALUES (?, ?, ?, ?, ?)",
                       (hid, pos, *entries))
        db.executemany("INSERT INTO research_deps VALUES (?, ?, ?)",
                       [(tbl, str(key), hid) for tbl, key in tracked.deps])
    cursor = db.execute("SELECT value FROM meta WHERE key = 'cursor'").fetchone()[0]
    db.executemany("INSERT OR REPLACE INTO research_rows_meta VALUES (?, ?)",
                   [("cursor", cursor), ("stamp", STAMP)])


def _valid(db: sqlite3.Connection) -> bool:
    """Whether ``db`` holds rows computed from its own state by this code."""
    import sqlite3

    try:
        meta = dict(db.execute("SELECT key, value FROM research_rows_meta"))
        cursor = db.execute("SELECT value FROM meta WHERE key = 'cursor'").fetchone()
    except sqlite3.DatabaseError:
        return False
    return (cursor is not None and meta.get("cursor") == cursor[0]
            and meta.get("stamp") == STAMP)


def _dirty(db: sqlite3.Connection, changes: Changes, kept: Kept | None = None) -> set[str] | None:
    """The hypotheses whose rows read a changed row (None: possibly all of them): as the file's
    deps say, or for a hypothesis in ``kept``, as its kept deps say."""
    kept = kept or {}
    by_table: dict[str, list[tuple[str, str]]] = {}
    for hid, row in kept.items():
        for tbl, key in (row[-1] if row is not None else ()):
            by_table.setdefault(tbl, []).append((key, hid))
    out: set[str] = set()
    for tbl, keys in changes.items():
        if keys is None:
            if tbl == HYPOTHESES:
                return None
            out.update(h for (h,) in db.execute(
                "SELECT DISTINCT hid FROM research_deps WHERE tbl = ?", (tbl,)) if h not in kept)
            out.update(h for _, h in by_table.get(tbl, ()))
            continue
        if tbl == HYPOTHESES:
            out |= keys  # new ones have no row yet
        for key in (WHOLE, *keys):
            out.update(h for (h,) in db.execute(
                "SELECT hid FROM research_deps WHERE tbl = ? AND key = ?", (tbl, key))
                if h not in kept)
        out.update(h for key, h in by_table.get(tbl, ()) if key == WHOLE or key in keys)
    return out


# -- written with a checkpoint delta -------------------------------------------------------

def delta_rows(state: State) -> dict[str, Any] | None:
    """The checkpoint.delta hook: the rows that differ from the file's at ``state``, to keep in
    the delta being saved (None: the file has none to start from)."""
    lanes = state.parts.get("lanes")
    if lanes is None or "hypotheses" not in lanes:
        return None
    try:
        found = _since(state)
        if found is None:
            return None
        kept, dirty = dict(found[0]), found[1]
        hypotheses = lanes["hypotheses"]
        for hid in sorted(dirty):
            if hid not in hypotheses:
                kept[hid] = None
                continue
            tracked = TrackedView(lanes)
            row = texts(tracked, hid)  # (first: computing the texts is what records the deps)
            kept[hid] = [*row, sorted([tbl, str(key)] for tbl, key in tracked.deps)]
    except Exception as exc:  # noqa: BLE001
        # As for a whole save: the delta goes without rows, and readers compute as without.
        print(f"loopx: frontier rows not kept with the checkpoint delta: {exc!r}", file=sys.stderr)
        return None
    return {EXTRA: {"cursor": state.cursor.to_json(), "stamp": STAMP, "rows": kept}}


def _since(state: State) -> tuple[Kept, set[str]] | None:
    """The rows the state's delta keeps (none if it keeps no valid ones) and the hypotheses
    whose rows may differ from those and the file's; None when the file's rows cannot say."""
    db = loaded_db(state)
    if db is None or not saved_on_file(state) or not _valid(db):
        return None
    kept = _kept(state)
    changes = changes_since_load(state, since_delta=kept is not None)
    dirty = None if changes is None else _dirty(db, changes, kept)
    return None if dirty is None else (kept or {}, dirty)


def _kept(state: State) -> Kept | None:
    """The rows kept by the delta the state was loaded with (or last saved as), if that delta
    keeps rows computed by this code at its own cursor."""
    delta = loaded_delta(state)
    extras = None if delta is None else delta.get("extras")
    extra = extras.get(EXTRA) if isinstance(extras, dict) else None
    if (not isinstance(extra, dict) or extra.get("stamp") != STAMP
            or extra.get("cursor") != delta["cursor"]):
        return None
    return extra["rows"]


# -- read by the commands -------------------------------------------------------------------

def _rows(state: State, table: str) -> list[tuple[Any, ...]] | None:
    """Every hypothesis' texts in ``table`` (:data:`ROWS` or :data:`CANDIDATES`) as UTF-8 bytes,
    in the order proposed: from the file, but those its delta keeps (:func:`delta_rows`) and
    those the catch-up changed since; None when the state has no usable cache."""
    found = _since(state)
    if found is None:
        return None
    kept, dirty = found
    db = loaded_db(state)
    assert db is not None
    # As bytes: the texts go out as they are (see frontier_chunks), never decoded, joined and
    # encoded again (three copies of megabytes, each costing a big read more than its query).
    columns = ", ".join(f"CAST({c} AS BLOB)" for c in (
        ("frontier",) if table == ROWS else CANDIDATE_KINDS))
    # Read through a small page cache: each page of the megabytes is read once, and reusing a
    # few page buffers costs less than touching a fresh one for each (about 1 ms of 2.6 MB).
    (cache_size,) = db.execute("PRAGMA cache_size").fetchone()
    db.execute("PRAGMA cache_size = 16")
    try:
        rows = db.execute(f"SELECT hid, pos, {columns} FROM {table} ORDER BY pos").fetchall()
    finally:
        db.execute(f"PRAGMA cache_size = {int(cache_size)}")
    parts = slice(1, 2) if table == ROWS else slice(2, 5)
    newer = {hid: _printed(hid, row, parts) for hid, row in kept.items()}
    if dirty:
        view = state["lanes"]
        hypotheses = view["hypotheses"]
        newer.update((hid, _printed(hid, texts(view, hid) if hid in hypotheses else None, parts))
                     for hid in dirty)
    if newer:
        # A row keeps its place (its hypothesis' seq); only one new here needs a sort.
        rows = [newer.pop(r[0]) if r[0] in newer else r for r in rows]
        added = [r for r in newer.values() if r is not None]
        rows = [r for r in rows if r is not None] + added
        if added:
            rows.sort(key=lambda r: r[1])
    return [r[2:] for r in rows]


def _printed(hid: str, row: Any, parts: slice) -> tuple[Any, ...] | None:
    """(hid, pos, the texts ``parts`` of ``row``, as bytes); None without a row or an entry."""
    if row is None:
        return None
    printed = [None if t is None else t.encode() for t in row[parts]]
    return None if all(t is None for t in printed) else (hid, row[0], *printed)


def frontier_chunks(state: State) -> list[bytes]:
    """What ``loopx frontier --json`` prints (without the newline), as UTF-8 pieces to write in
    order: from the cache if it has one for this state's checkpoint, else computed."""
    rows = _rows(state, ROWS)
    if rows is None:
        from loopx.research.projections import frontier

        texts_ = [dumps(r.to_json()).encode() for r in frontier(state["lanes"])]
    else:
        texts_ = [r[0] for r in rows]
    return [f'{{"agent_id": null, "head_seq": {state.seq}, "hypotheses": ['.encode(),
            *_listed(texts_),
            f'], "role": null, "schema_version": "{FRONTIER_SCHEMA}"}}'.encode()]


def candidates_chunks(state: State) -> list[bytes]:
    """What ``loopx candidates --json`` prints (without the newline), as
    :func:`frontier_chunks`."""
    rows = _rows(state, CANDIDATES)
    if rows is None:
        from loopx.research.projections import candidates

        return [dumps({"head_seq": state.seq, **candidates(state["lanes"])}).encode()]
    out = [f'{{"head_seq": {state.seq}, '.encode()]
    for i, kind in enumerate(CANDIDATE_KINDS):
        out += [f'{", " if i else ""}"{kind}": ['.encode(),
                *_listed([r[i] for r in rows if r[i] is not None]), b"]"]
    out.append(b"}")
    return out


def _listed(entries: list[bytes]) -> list[bytes]:
    """``entries`` with the separator between each two, as ``json.dumps`` writes a list's."""
    out = [_SEPARATOR] * (2 * len(entries) - 1) if entries else []
    out[::2] = entries
    return out


_SEPARATOR = b", "
