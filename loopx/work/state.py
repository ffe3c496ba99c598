"""The lanes' slices of folded state: role profiles, agents and their grants, todos and leases,
and the per-role queues selection reads.

Updates are copy-on-write (each entry is replaced, never mutated in place), so the same
handlers fold the log and check a batch against an overlay of the state without touching it.
The one exception is a queue folded into the state itself, which changes in place (see
``_enqueue``): copying it would cost the whole backlog per claim.
``queues`` holds the todos not yet done, per role (or per assignee, ``@agent``), sorted by
(-priority, seq): selection takes the first claimable one instead of walking every todo. A todo
change (``todo_change_v0``) moves its entry: a new priority re-sorts it, a reassignment moves it
between queues, a cancellation takes it out.
"""

from __future__ import annotations

import bisect
from collections import ChainMap
from collections.abc import Callable
from typing import Any

from loopx.kernel.canonical import add_seconds
from loopx.work import todo_index
from loopx.work.todo_index import DONE

LaneState = dict[str, Any]
SLICES = ("profiles", "agents", "todos", "queues")


def fast_get(mapping: Any) -> Any:
    """A lookup function for a slice or an overlay of it (ChainMap lookups are slow)."""
    if not isinstance(mapping, ChainMap):
        return mapping.__getitem__
    front, base = mapping.maps[0], mapping.maps[1]

    def get(key: str) -> Any:
        value = front.get(key)
        return base[key] if value is None else value

    return get


def queue_name(todo: dict[str, Any]) -> str:
    """The queue a todo waits in: ``@agent`` when assigned, else its role."""
    return f"@{todo['assigned_to']}" if todo["assigned_to"] is not None else str(todo["role"])


# A queue holds every todo of its role not yet done, so copying it costs as much as the backlog.
# Folding into the state itself (its slices are dicts) changes a queue in place; folding into
# an overlay (ChainMaps over the state, for a batch's checks) copies the queue it changes,
# leaving the state's untouched. No overlay outlives a fold of the state it covers.


def _enqueue(state: LaneState, todo_id: str, todo: dict[str, Any]) -> None:
    name = queue_name(todo)
    queues = state["queues"]
    queue = queues.get(name)
    if queue is None:
        queue = []
    elif not isinstance(queues, dict):
        queue = list(queue)
    bisect.insort(queue, [-todo["priority"], todo["seq"], todo_id])
    queues[name] = queue


def _dequeue(state: LaneState, todo_id: str, todo: dict[str, Any]) -> None:
    name = queue_name(todo)
    queues = state["queues"]
    queue = queues.get(name, [])
    entry = [-todo["priority"], todo["seq"], todo_id]
    at = bisect.bisect_left(queue, entry)
    if at < len(queue) and queue[at] == entry:
        if isinstance(queues, dict):
            del queue[at]
        else:
            queues[name] = queue[:at] + queue[at + 1:]


def effective(todo: dict[str, Any], profiles: Any, field: str) -> Any:
    """A todo's own lease TTL or max attempts, else its role profile's."""
    own = todo.get(field)
    if own is not None:
        return own
    profile = profiles.get(todo["role"]) or {}
    return profile.get(field, {"lease_ttl_seconds": 300.0, "max_attempts": 3}[field])


def _profile(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    state["profiles"][p["role"]] = {**p, "seq": record["seq"]}


def _grant(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    old = state["agents"].get(p["agent_id"])
    state["agents"][p["agent_id"]] = {
        "role": p["role"], "grant_id": record["record_id"], "token_sha256": p["token_sha256"],
        "quota": p.get("claim_quota"), "revoked": False, "granted_seq": record["seq"],
        "claims": old["claims"] if old else 0, "holding": [],
    }


def _revoke(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    agent = state["agents"][p["agent_id"]]
    state["agents"][p["agent_id"]] = {**agent, "revoked": True, "revoked_seq": record["seq"]}


def _todo(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    todos = state["todos"]
    todo_id = p["todo_id"]
    todos[todo_id] = {
        "title": p["title"], "role": p["role"], "action_kind": p["action_kind"],
        "assigned_to": p.get("assigned_to"), "blocked_by": list(p.get("blocked_by", [])),
        "unblocks": p.get("unblocks_todo_id"), "hypothesis_id": p.get("hypothesis_id"),
        "priority": p.get("priority", 0), "lease_ttl_seconds": p.get("lease_ttl_seconds"),
        "max_attempts": p.get("max_attempts"), "rule": p.get("successor_rule_id"),
        "cost": p.get("estimated_cost") or None,
        "source": p.get("source_todo_id"), "seq": record["seq"], "added_by": record["agent_id"],
        "status": "open", "holder": None, "epoch": 0, "expires": None, "claims": 0,
        "failures": 0, "ttl": None,
        # Who may change it later (its adding role; a successor's is the completer's), and
        # where its shown values come from.
        "added_role": record["lane_role"], "record_id": record["record_id"],
        "visibility": record["visibility"], "priority_record": record["record_id"],
        "changes": 0, "cancel": None,
    }
    _enqueue(state, todo_id, todos[todo_id])
    target = p.get("unblocks_todo_id")
    if target is not None and target in todos:
        blocked = todos[target]
        todos[target] = {**blocked, "blocked_by": [*blocked["blocked_by"], todo_id]}


def _claim(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    todo_id, agent_id = record["todo_id"], record["agent_id"]
    todo = state["todos"][todo_id]
    ttl = p["lease_ttl_seconds"]
    state["todos"][todo_id] = {
        **todo, "status": "claimed", "holder": agent_id, "epoch": record["epoch"],
        "expires": add_seconds(record["ts"], ttl), "ttl": ttl, "claims": todo["claims"] + 1,
        "claimed_ts": record["ts"], "via": p.get("via", "should_run"),
    }
    agent = state["agents"][agent_id]
    state["agents"][agent_id] = {**agent, "claims": agent["claims"] + 1,
                                 "holding": [*agent["holding"], todo_id]}


def _event(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    todos, agents = state["todos"], state["agents"]
    todo_id = record["todo_id"]
    todo = todos[todo_id]
    event = p["event"]
    if event == "heartbeat":
        ttl = p.get("lease_ttl_seconds") or todo["ttl"]
        todos[todo_id] = {**todo, "expires": add_seconds(record["ts"], ttl), "ttl": ttl}
        return
    holder = todo["holder"]
    update: dict[str, Any] = {"holder": None, "expires": None, "last_event": event,
                              "last_holder": holder}
    if event == "released":
        update["status"] = "open"
    elif event == "completed":
        update["status"] = "completed"
        update["done_seq"] = record["seq"]
    else:  # failed, expired: the attempt counts against max_attempts
        failures = todo["failures"] + 1
        update["failures"] = failures
        spent = failures >= effective(todo, state["profiles"], "max_attempts")
        update["status"] = "failed" if spent else "open"
        if spent:
            update["done_seq"] = record["seq"]
    todos[todo_id] = {**todo, **update}
    if update["status"] in ("completed", "failed"):
        _dequeue(state, todo_id, todo)
    if holder is not None and holder in agents:
        agent = agents[holder]
        agents[holder] = {**agent, "holding": [t for t in agent["holding"] if t != todo_id]}


def _change(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
    """A todo_change_v0: the todo is replaced, and moved in (or out of) its queue."""
    todos, agents = state["todos"], state["agents"]
    todo_id, change = p["todo_id"], p["change"]
    todo = todos[todo_id]
    update: dict[str, Any] = {"changes": todo.get("changes", 0) + 1,
                              "changed_seq": record["seq"]}
    if change == "reprioritise":
        update.update(priority=p["priority"], priority_record=record["record_id"])
    elif change == "block":
        update["blocked_by"] = [*todo["blocked_by"], p["blocker"]]
    elif change == "unblock":
        update["blocked_by"] = [b for b in todo["blocked_by"] if b != p["blocker"]]
    elif change == "reassign":
        update["assigned_to"] = p.get("assigned_to")
    holder = todo["holder"]
    # A fenced lease ends here, like a release (no attempt counted); a cancel also ends a
    # lapsed one. The epoch stays, so the old holder's writes under it are refused.
    ends = holder is not None and (p.get("fence_epoch") is not None or change == "cancel")
    if ends:
        update.update(holder=None, expires=None, last_holder=holder, status="open",
                      last_event=change)
        if p.get("fence_epoch") is not None:
            update["fenced"] = {"agent_id": holder, "epoch": todo["epoch"], "seq": record["seq"]}
    if change == "cancel":
        update.update(status="cancelled", done_seq=record["seq"], cancel={
            "reason": p["reason"], "agent_id": record["agent_id"], "seq": record["seq"],
            "record_id": record["record_id"], "visibility": record["visibility"]})
    changed = {**todo, **update}
    if todo["status"] not in DONE:
        _dequeue(state, todo_id, todo)
    todos[todo_id] = changed
    if changed["status"] not in DONE:
        _enqueue(state, todo_id, changed)
    if ends and holder in agents:
        agent = agents[holder]
        agents[holder] = {**agent, "holding": [t for t in agent["holding"] if t != todo_id]}


Fold = Callable[[LaneState, dict[str, Any], dict[str, Any]], None]


def _indexed(fold: Fold) -> Fold:
    """``fold``, also keeping :mod:`loopx.work.todo_index` up to date for the todos it changes."""
    def keep(state: LaneState, record: dict[str, Any], p: dict[str, Any]) -> None:
        todos = state["todos"]
        # Every todo it may change: its own, and the one a new todo unblocks (in a fixed
        # order, so every process folds the same index).
        ids = (record.get("todo_id"), p.get("todo_id"), p.get("unblocks_todo_id"))
        before = {i: todos.get(i) for i in dict.fromkeys(ids) if isinstance(i, str)}
        fold(state, record, p)
        for todo_id, entry in before.items():
            todo_index.reindex(state[todo_index.SLICE], todo_id, entry, todos.get(todo_id))

    return keep


FOLDS: dict[str, Fold] = {
    "lane_profile_v0": _profile,
    "agent_grant_v0": _grant,
    "agent_revocation_v0": _revoke,
    "todo_item_v0": _todo,
    "auto_research_lane_claim_v1": _claim,
    "todo_event_v0": _event,
    "todo_change_v0": _change,
}
FOLDS.update({kind: _indexed(FOLDS[kind]) for kind in todo_index.INDEXED})
