"""State as a fold over the log: reducers turn records into compact, JSON-ready state.

Reducers are pure: they see only records (never the clock or the disk), so any process that
folds the same log gets the same state, and a checkpoint of it is plain data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from loopx.kernel.domains import Domains, installed
from loopx.kernel.plain import Value
from loopx.kernel.store.base import Cursor, Record


class Reducer(Protocol):
    """One slice of folded state. Bump ``version`` whenever ``apply`` changes meaning."""

    name: str
    version: int

    def initial(self) -> dict[str, Any]:
        """The slice before any record."""
        ...

    def apply(self, state: dict[str, Any], record: Record) -> None:
        """Fold one record into the slice, in place."""
        ...


class KernelReducer:
    """Workspace identity and counts: goal, format, owner token digest, records per kind, and
    the write rules the log is under (``rules``: see :mod:`loopx.kernel.rules`), with the seq
    each version took effect at (``rules_since``: ``[seq, version]`` pairs, oldest first)."""

    name = "kernel"
    version = 3

    def initial(self) -> dict[str, Any]:
        return {"goal_id": None, "format_version": None, "owner_token_sha256": None,
                "records": 0, "kinds": {}, "repairs": 0, "rules": 1, "rules_since": []}

    def apply(self, state: dict[str, Any], record: Record) -> None:
        kind = record["schema_version"]
        state["records"] += 1
        state["kinds"][kind] = state["kinds"].get(kind, 0) + 1
        if kind == "workspace_v0":
            payload = record["payload"]
            state["goal_id"] = payload["goal_id"]
            state["format_version"] = payload["format_version"]
            state["owner_token_sha256"] = payload["owner_token_sha256"]
            state["rules"] = payload.get("rules_version") or 1
            state["rules_since"] = [[record["seq"], state["rules"]]]
        elif kind == "store_repair_v0":
            state["repairs"] += 1
        elif kind == "rules_upgrade_v0":
            state["rules"] = record["payload"]["to_version"]
            state["rules_since"].append([record["seq"], state["rules"]])


class DomainsReducer:
    """Every installed domain's slices, folded record by record in domain order.

    Its part of the state is called ``lanes`` (the name of the first domain's reducer, kept
    so checkpoints and every reader of ``state["lanes"]`` stay as they were).
    """

    name = "lanes"

    def __init__(self, domains: Domains) -> None:
        self.domains = domains
        self.version = domains.version
        self.apply = domains.fold  # type: ignore[method-assign]  # one call less per record

    def initial(self) -> dict[str, Any]:
        return self.domains.initial()

    def apply(self, state: dict[str, Any], record: Record) -> None:
        self.domains.fold(state, record)


def default_reducers() -> tuple[Reducer, ...]:
    """The kernel's reducer and the installed domains'."""
    return (KernelReducer(), DomainsReducer(installed()))


def fold_version(reducers: Iterable[Reducer] | None = None) -> str:
    """Identifies the fold; a checkpoint made by another fold version is discarded."""
    return ",".join(f"{r.name}:{r.version}" for r in reducers or default_reducers())


class State(Value):
    """Folded state up to ``cursor``: one dict per reducer."""

    _fields = ("cursor", "parts")

    def __init__(self, cursor: Cursor | None = None,
                 parts: dict[str, dict[str, Any]] | None = None) -> None:
        self.cursor = Cursor() if cursor is None else cursor
        self.parts = {} if parts is None else parts

    @classmethod
    def initial(cls, reducers: Iterable[Reducer] | None = None) -> State:
        """State of an empty log."""
        return cls(Cursor(), {r.name: r.initial() for r in reducers or default_reducers()})

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self.parts[name]

    @property
    def seq(self) -> int:
        """Sequence number of the last record folded in."""
        return self.cursor.seq


def advance(state: State, entries: Iterable[tuple[Record, Cursor]],
            reducers: Iterable[Reducer] | None = None) -> int:
    """Fold records (with their cursors) into ``state``; returns how many were folded."""
    # Each process folds every record every other process writes: look the reducers' slices
    # up once per call, not once per record.
    steps = [(reducer.apply, state.parts[reducer.name])
             for reducer in reducers or default_reducers()]
    count = 0
    last: Cursor | None = None
    try:
        for record, cursor in entries:
            for apply, part in steps:
                apply(part, record)
            last = cursor
            count += 1
    finally:
        if last is not None:
            state.cursor = last  # the last record folded whole, as if set after each one
    return count
