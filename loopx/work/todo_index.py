"""Todo counts kept by the fold, so ``status`` reads a few rows instead of every todo.

The ``todo_index`` slice holds three rows: ``counts`` (todos per folded status), ``claimed``
(ids of claimed todos, whose lease may have lapsed by ``now``) and ``waiting`` (ids of todos not
done that name blockers). A todo's state at ``now`` differs from its folded status only for
those two lists, so counting every state reads the index and the todos it names. Like every
slice it is a pure function of the log, and updates are copy-on-write (overlay-safe).
"""

from __future__ import annotations

from typing import Any

SLICE = "todo_index"
# The kinds whose fold changes a todo's status or blockers (loopx.work.state calls
# :func:`reindex` for every todo such a record names).
INDEXED = ("todo_item_v0", "auto_research_lane_claim_v1", "todo_event_v0", "todo_change_v0")

# A todo in one of these statuses is done for good.
DONE = ("completed", "failed", "cancelled")


def initial() -> dict[str, Any]:
    """The index of a log with no todos."""
    return {"counts": {}, "claimed": [], "waiting": []}


def reindex(index: dict[str, Any], todo_id: str, before: dict[str, Any] | None,
            after: dict[str, Any] | None) -> None:
    """Move ``todo_id`` in ``index`` from its entry ``before`` a record to ``after`` it."""
    was = None if before is None else before["status"]
    now = None if after is None else after["status"]
    if was != now:
        counts = dict(index["counts"])
        if was is not None:
            counts[was] -= 1
        if now is not None:
            counts[now] = counts.get(now, 0) + 1
        index["counts"] = counts
    _member(index, "claimed", todo_id, now == "claimed")
    _member(index, "waiting", todo_id,
            after is not None and bool(after["blocked_by"]) and now not in DONE)


def _member(index: dict[str, Any], row: str, todo_id: str, wanted: bool) -> None:
    ids = index[row]
    if (todo_id in ids) != wanted:
        index[row] = [*ids, todo_id] if wanted else [i for i in ids if i != todo_id]
