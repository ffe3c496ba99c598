"""Todos: adding them, and reading their state (open, blocked, claimed, expired, done).

Changing a todo once added (priority, blockers, assignee, cancellation) is
:mod:`loopx.work.todo_changes`.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.checks import Credentials
from loopx.kernel.errors import NotFound
from loopx.kernel.ledger import Ledger
from loopx.kernel.store.base import Record
from loopx.work import todo_index
from loopx.work.leases import lease_live
from loopx.work.should_run import blockers, passed_over
from loopx.work.state import LaneState, effective

STATES = ("open", "blocked", "claimed", "expired", "completed", "failed", "cancelled")


def add_todos(ledger: Ledger, creds: Credentials, payloads: list[dict[str, Any]], *,
              under: tuple[str, int] | None = None) -> list[Record]:
    """Add todos as one batch. ``under`` is the (todo id, epoch) the writer holds, if any.

    Raises:
        RecordRejected: a malformed todo, or an evaluation todo (``run_dev_eval``,
        ``run_holdout_eval``, ``retry_attempt``) without its ``hypothesis_id`` (nothing of the
        batch is written); Forbidden: the role may not add todos for that role;
        Refused: a duplicate id, an unknown role, action, assignee or blocker.
    """
    envelope: dict[str, Any] = {}
    if under is not None:
        envelope = {"todo_id": under[0], "epoch": under[1]}
    drafts = [{**envelope, "payload": payload} for payload in payloads]
    return ledger.append(drafts, creds=creds, kind="todo_item_v0")


def todo_state(lanes: LaneState, todo_id: str, now: str) -> str:
    """One of :data:`STATES` for a todo at ``now``."""
    todo = lanes["todos"][todo_id]
    status = todo["status"]
    if status == "claimed":
        return "claimed" if lease_live(todo, lanes["agents"], now) else "expired"
    if status == "open" and blockers(todo, lanes):
        return "blocked"
    return str(status)


def todo_row(lanes: LaneState, todo_id: str, now: str) -> dict[str, Any]:
    """A todo's stable JSON view."""
    try:
        todo = lanes["todos"][todo_id]
    except KeyError:
        raise NotFound(f"no todo {todo_id!r}") from None
    state = todo_state(lanes, todo_id, now)
    return {
        "todo_id": todo_id, "title": todo["title"], "role": todo["role"],
        "action_kind": todo["action_kind"], "state": state,
        "assigned_to": todo["assigned_to"], "holder": todo["holder"], "epoch": todo["epoch"],
        "lease_expires_at": todo["expires"], "blocked_by": todo["blocked_by"],
        "waiting_on": blockers(todo, lanes), "unblocks_todo_id": todo["unblocks"],
        "hypothesis_id": todo["hypothesis_id"], "priority": todo["priority"],
        "claims": todo["claims"], "failures": todo["failures"],
        "max_attempts": effective(todo, lanes["profiles"], "max_attempts"),
        "lease_ttl_seconds": effective(todo, lanes["profiles"], "lease_ttl_seconds"),
        "source_todo_id": todo["source"], "successor_rule_id": todo["rule"],
        "added_seq": todo["seq"], "added_by": todo["added_by"],
        "added_role": todo.get("added_role"), "changes": todo.get("changes", 0),
        "cancelled": _cancelled(todo.get("cancel")),
        "passed_over": passed_over(lanes, todo) if state == "open" else None,
    }


def _cancelled(cancel: dict[str, Any] | None) -> dict[str, Any] | None:
    """Who cancelled a todo, when (seq) and why."""
    if cancel is None:
        return None
    return {"reason": cancel["reason"], "by": cancel["agent_id"], "seq": cancel["seq"]}


def todo_rows(lanes: LaneState, now: str, *, role: str | None = None,
              states: tuple[str, ...] = (), agent: str | None = None) -> list[dict[str, Any]]:
    """Todos in the order they were added, filtered by role, state and holder/assignee."""
    rows = []
    for todo_id, todo in lanes["todos"].items():
        if role is not None and todo["role"] != role:
            continue
        if agent is not None and agent not in (todo["holder"], todo["assigned_to"]):
            continue
        if states and todo_state(lanes, todo_id, now) not in states:
            continue
        rows.append(todo_row(lanes, todo_id, now))
    return rows


def counts_by_state(lanes: LaneState, now: str) -> dict[str, int]:
    """How many todos are in each state: the fold's counts by status, corrected for the
    claimed todos whose lease lapsed and the open ones still waiting on a blocker."""
    index = lanes[todo_index.SLICE]
    counts = dict.fromkeys(STATES, 0)
    counts.update(index["counts"])
    todos = lanes["todos"]
    for todo_id in index["claimed"]:
        if not lease_live(todos[todo_id], lanes["agents"], now):
            counts["claimed"] -= 1
            counts["expired"] += 1
    for todo_id in index["waiting"]:
        todo = todos[todo_id]
        if todo["status"] == "open" and blockers(todo, lanes):
            counts["open"] -= 1
            counts["blocked"] += 1
    return counts


def held_rows(lanes: LaneState, now: str) -> list[dict[str, Any]]:
    """The claimed and expired todos (leases held or lapsed), in the order they were added:
    :func:`todo_rows` for those two states, read from the fold's index of claimed todos."""
    todos = lanes["todos"]
    held = sorted(lanes[todo_index.SLICE]["claimed"], key=lambda t: todos[t]["seq"])
    return [todo_row(lanes, todo_id, now) for todo_id in held]


def find_todo(lanes: LaneState, todo_id: str) -> dict[str, Any]:
    """A todo's state entry.

    Raises:
        NotFound: there is no such todo.
    """
    todo = lanes["todos"].get(todo_id)
    if todo is None:
        raise NotFound(f"no todo {todo_id!r}", hint="list them with `loopx todo list`")
    return todo

