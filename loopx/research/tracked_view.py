"""A view of the lanes state that records what a reader looked at: each table key it asked for
(present or not), and ``*`` for a table it iterated or sized. What a pure function of the view
computed can change only if one of those rows does (:mod:`loopx.research.row_cache`).

A table is handed out as a read-only :class:`~collections.abc.Mapping`, not a dict: code that
would read a dict's storage directly (``dict(t)``, ``json.dumps(t)``) goes through the tracked
methods or fails loudly, never silently reads an empty table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

WHOLE = "*"  # the key a dependency on the whole table (iteration, size) is recorded under

Deps = set[tuple[str, str]]


class TrackedTable(Mapping[str, Any]):
    """One table of the view; every lookup and iteration is recorded in ``deps``."""

    __slots__ = ("deps", "name", "table")

    def __init__(self, name: str, table: Mapping[str, Any], deps: Deps) -> None:
        self.name = name
        self.table = table
        self.deps = deps

    def __getitem__(self, key: str) -> Any:
        self.deps.add((self.name, key))
        return self.table[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.deps.add((self.name, key))
        return self.table.get(key, default)

    def __contains__(self, key: object) -> bool:
        self.deps.add((self.name, str(key)))
        return key in self.table

    def __iter__(self) -> Iterator[str]:
        self.deps.add((self.name, WHOLE))
        return iter(self.table)

    def __len__(self) -> int:
        self.deps.add((self.name, WHOLE))
        return len(self.table)


class TrackedView(Mapping[str, Any]):
    """The lanes view (a dict of tables) whose tables record their reads in ``deps``, named
    ``prefix + table`` (the checkpoint's table names, ``lanes/hypotheses``)."""

    __slots__ = ("deps", "prefix", "tables", "view")

    def __init__(self, view: Mapping[str, Any], prefix: str = "lanes/") -> None:
        self.view = view
        self.prefix = prefix
        self.deps: Deps = set()
        self.tables: dict[str, TrackedTable] = {}

    def __getitem__(self, name: str) -> Any:
        tracked = self.tables.get(name)
        if tracked is None:
            value = self.view[name]
            if not isinstance(value, Mapping):
                self.deps.add((self.prefix + name, WHOLE))
                return value
            tracked = self.tables[name] = TrackedTable(self.prefix + name, value, self.deps)
        return tracked

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self.view else default

    def __contains__(self, name: object) -> bool:
        return name in self.view

    def __iter__(self) -> Iterator[str]:
        return iter(self.view)

    def __len__(self) -> int:
        return len(self.view)
