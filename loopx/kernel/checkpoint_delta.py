"""Checkpoint deltas: the rows a process changed since the checkpoint file it loaded, saved
beside that file, so a checkpoint can follow the log closely without rewriting the whole file.

A delta is a small JSON file (``state.sqlite.delta`` beside ``state.sqlite``) naming the base
file it applies to (the ``base_id`` every full save writes anew), the cursor it reaches, every
plain value, and per table the rows changed (in place or replaced, or new) and the keys deleted
since the base, and what domains derive from that state (``extras``: the frontier rows, see
:mod:`loopx.research.row_cache`). It is written whole to a temp file, fsynced and renamed, like
the base. A delta for another base, fold version or format is ignored (the base alone still
holds); deleting it changes only speed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loopx.kernel.fold import State
from loopx.kernel.lazy_table import LazyTable
from loopx.kernel.store.fs import replace_file

DELTA_FORMAT = 1
# Past this a delta stops paying for itself (every load parses it whole): save the base instead.
DELTA_MAX_BYTES = 256 * 1024


def delta_path(path: Path) -> Path:
    """Where the delta of the checkpoint file ``path`` lives."""
    return path.with_name(path.name + ".delta")


def read_delta(path: Path, base_id: str | None,
               version: str) -> tuple[dict[str, Any], bytes] | None:
    """The delta of the base ``base_id`` at ``path``, if there is a usable one, and its bytes."""
    if base_id is None:
        return None
    try:
        data = delta_path(path).read_bytes()
        delta = json.loads(data)
    except (OSError, ValueError):
        return None
    if not isinstance(delta, dict) or (delta.get("delta_format"), delta.get("base_id"),
                                       delta.get("fold_version")) != (DELTA_FORMAT, base_id,
                                                                      version):
        return None
    return delta, data


def apply_delta(parts: dict[str, dict[str, Any]], delta: dict[str, Any]) -> None:
    """Put the delta's values and rows into ``parts`` as loaded from its base.

    Raises:
        KeyError, TypeError, ValueError, AttributeError: the delta does not fit the base.
    """
    for part, values in delta["entries"].items():
        for name, value in values.items():
            if isinstance(parts[part][name], dict):
                raise TypeError(f"{part}/{name} is a table")
            parts[part][name] = value
    for tbl, change in delta["tables"].items():
        part, _, name = tbl.partition("/")
        table = parts[part][name]
        if not isinstance(table, LazyTable):
            raise TypeError(f"{tbl} is not a table")
        if change.get("whole"):
            table.clear()  # the delta holds the whole table
        table.preload(dict(change["rows"]), list(change["deleted"]))


def delta_of(state: State, base_id: str | None, version: str,
             extras: Sequence[Callable[[State], dict[str, Any] | None]] = ()) -> bytes | None:
    """The delta that takes the base ``base_id`` to ``state``, encoded; None when ``state`` is
    not its base plus changed rows (a table read whole) or the delta would be too big.

    Each of ``extras`` may add what a domain derives from ``state`` (under ``extras``), kept
    only while the delta stays small enough with it.
    """
    if base_id is None:
        return None
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    entries: dict[str, dict[str, Any]] = {}
    tables: dict[str, dict[str, Any]] = {}
    for part_name, part in state.parts.items():
        for name, value in dict.items(part):
            if not isinstance(value, dict):
                entries.setdefault(part_name, {})[name] = value
                continue
            if not isinstance(value, LazyTable) or (value.complete and value.stored):
                return None  # a new table, or one read whole: only a full save says which rows
            if value.complete:  # empty in the file loaded, so small: all of it, whatever the
                # file it applies to holds by then (a whole save may have written it since)
                tables[f"{part_name}/{name}"] = {"rows": dict(dict.items(value)), "deleted": [],
                                                 "whole": True}
                continue
            rows = value.changes(dumps)
            if rows or value.deleted:
                tables[f"{part_name}/{name}"] = {"rows": rows, "deleted": sorted(value.deleted)}
    delta = {"delta_format": DELTA_FORMAT, "base_id": base_id, "fold_version": version,
             "cursor": state.cursor.to_json(), "entries": entries, "tables": tables}
    data = dumps(delta).encode()
    if len(data) > DELTA_MAX_BYTES:
        return None
    added: dict[str, Any] = {}
    for extra in extras:
        added.update(extra(state) or {})
    if added:
        with_extras = dumps({**delta, "extras": added}).encode()
        if len(with_extras) <= DELTA_MAX_BYTES:
            return with_extras
    return data


def write_delta(path: Path, data: bytes) -> None:
    """Write the delta of the checkpoint ``path`` durably: temp file, fsync, rename."""
    replace_file(delta_path(path), data)
