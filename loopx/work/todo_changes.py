"""Changing an existing todo: reprioritise it, add or remove a blocker, reassign or cancel it.

Each change is one ``todo_change_v0`` record written through :meth:`Ledger.write`, by the owner
or an agent of the role that added the todo (:mod:`loopx.work.change_checks` has the rules).
The fold moves the todo in its queue at once: a new priority re-sorts it, a reassignment moves
it between its role's queue and the assignee's, a cancellation takes it out for good.

A change that is already in effect (the same priority, a blocker already there, a todo already
cancelled) writes nothing and answers ``changed: false``, so a client may retry safely.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.checks import Credentials, Identity
from loopx.kernel.errors import Refused, StaleLease
from loopx.kernel.ledger import Ledger
from loopx.kernel.store.base import Record
from loopx.work.change_checks import (
    KIND,
    already_done,
    fence_problem,
    held_at,
    known_blocker,
    may_change,
)
from loopx.work.records import FENCING_CHANGES
from loopx.work.state import LaneState
from loopx.work.todos import find_todo, todo_row


def change_todo(ledger: Ledger, creds: Credentials, payload: dict[str, Any]) -> dict[str, Any]:
    """Record one change (a ``todo_change_v0`` payload) in one locked step.

    With ``fence_epoch`` and no ``fenced_agent_id``, the holder of that epoch is filled in.

    Raises:
        NotFound: no such todo; RecordRejected: a malformed change, naming the field;
        Forbidden: the role may not change todos, or not this one (another role added it);
        Refused: a finished todo, an unknown blocker, a cycle, an assignee who is not a live
        agent of the todo's role, or a live lease in the way; StaleLease: ``fence_epoch`` names
        no lease the todo is held under.
    """
    payload = dict(payload)
    who = ledger.identify(creds)
    epoch = payload.get("fence_epoch")
    if (type(epoch) is int and payload.get("fenced_agent_id") is None
            and payload.get("change") in FENCING_CHANGES):
        lanes = ledger.state()["lanes"]
        todo_id, change = str(payload.get("todo_id")), str(payload.get("change"))
        todo = find_todo(lanes, todo_id)
        may_change(lanes, who, todo_id, change)
        holder = held_at(todo, epoch)
        if holder is None:
            if todo["status"] == "cancelled" and change == "cancel":
                return _answer(ledger, todo_id, change, [], None)  # final: a repeat
            raise StaleLease(str(fence_problem(todo_id, todo, epoch)),
                             hint=f"look again: `loopx todo show {todo_id}`")
        payload["fenced_agent_id"] = holder
    [record] = ledger.prepare({"payload": payload}, who, kind=KIND)
    p = record["payload"]

    def plan(view: LaneState, who_now: Identity, now: str) -> list[Record]:
        find_todo(view, p["todo_id"])
        todo = may_change(view, who_now, p["todo_id"], p["change"])
        known_blocker(view, p["todo_id"], p)
        return [] if already_done(todo, p) else [record]

    stored = ledger.write(creds, plan)
    return _answer(ledger, p["todo_id"], p["change"], stored, p)


def _answer(ledger: Ledger, todo_id: str, change: str, stored: list[Record],
            p: dict[str, Any] | None) -> dict[str, Any]:
    """The stable JSON answer of a change: whether it was recorded, and the todo after it."""
    out: dict[str, Any] = {"todo_id": todo_id, "change": change, "changed": bool(stored),
                           "seq": None, "record_id": None, "fenced": None}
    if stored and p is not None:
        out.update(seq=stored[0]["seq"], record_id=stored[0]["record_id"])
        if p["fence_epoch"] is not None:
            out["fenced"] = {"agent_id": p["fenced_agent_id"], "epoch": p["fence_epoch"]}
    out["todo"] = todo_row(ledger.state()["lanes"], todo_id, ledger.now())
    return out


def reprioritise(ledger: Ledger, creds: Credentials, todo_id: str, priority: int, *,
                 reason: str | None = None) -> dict[str, Any]:
    """Give a todo a new priority; it moves in its queue (higher is selected first)."""
    return change_todo(ledger, creds, _payload(todo_id, "reprioritise", reason,
                                               priority=priority))


def block(ledger: Ledger, creds: Credentials, todo_id: str, blocker: str, *,
          reason: str | None = None) -> dict[str, Any]:
    """Make a todo wait for ``blocker`` to complete (refused if that would make a cycle)."""
    return change_todo(ledger, creds, _payload(todo_id, "block", reason, blocker=blocker))


def unblock(ledger: Ledger, creds: Credentials, todo_id: str, blocker: str, *,
            reason: str | None = None) -> dict[str, Any]:
    """Stop a todo waiting for ``blocker``."""
    return change_todo(ledger, creds, _payload(todo_id, "unblock", reason, blocker=blocker))


def cancel(ledger: Ledger, creds: Credentials, todo_id: str, reason: str, *,
           fence_epoch: int | None = None) -> dict[str, Any]:
    """Cancel a todo for good: never selected or claimable again. A todo held under a live
    lease is cancelled only with ``fence_epoch``, that lease's epoch, which ends it."""
    if not reason.strip():
        raise Refused("a cancellation needs a reason")
    return change_todo(ledger, creds, _payload(todo_id, "cancel", reason,
                                               fence_epoch=fence_epoch))


def reassign(ledger: Ledger, creds: Credentials, todo_id: str, assigned_to: str | None, *,
             reason: str | None = None, fence_epoch: int | None = None) -> dict[str, Any]:
    """Assign a todo to another live agent of its role, or (``None``) back to the whole role.
    Taking it from a live lease held by someone else needs ``fence_epoch``, which ends it."""
    return change_todo(ledger, creds, _payload(todo_id, "reassign", reason,
                                               assigned_to=assigned_to,
                                               fence_epoch=fence_epoch))


def _payload(todo_id: str, change: str, reason: str | None, **fields: Any) -> dict[str, Any]:
    out = {"todo_id": todo_id, "change": change, **fields}
    if reason is not None:
        out["reason"] = reason
    return {k: v for k, v in out.items() if v is not None or k == "assigned_to"}
