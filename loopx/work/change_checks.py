"""The write rules of todo changes (``todo_change_v0``): who may change a todo, and which changes
are accepted.

A change is not a lifecycle step of a lease, so it is not fenced by the writer's epoch: the
owner (who holds no todos) and the role that added the todo make changes from outside. What
fencing protects is the holder: a change that would take a todo from a live lease (a cancel, a
reassignment to someone else) must name that lease's epoch and holder, and ends it; the holder's
later writes under that epoch are then refused as stale. Used by the check registered in
:mod:`loopx.work.domain` (so ``loopx verify`` re-runs it) and by :mod:`loopx.work.todo_changes`.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.checks import Identity
from loopx.kernel.errors import Forbidden, Refused, StaleLease
from loopx.work.leases import lease_live
from loopx.work.state import DONE, LaneState

KIND = "todo_change_v0"
MAX_BLOCKERS = 256  # todo_item_v0's own limit on blocked_by


def may_change(lanes: LaneState, who: Identity, todo_id: str, change: str) -> dict[str, Any]:
    """The todo, if ``who`` may change it: the owner, or an agent of the role that added it (a
    successor todo was added by the completer's role).

    Raises:
        Refused: no such todo; Forbidden: another role's todo.
    """
    todo = lanes["todos"].get(todo_id)
    if todo is None:
        raise Refused(f"todo {todo_id!r} does not exist")
    creator = todo.get("added_role")
    if not who.is_owner and who.role != creator:
        refused = Forbidden(who.role, KIND, change,
                            why=f"todo {todo_id!r} was added by role {creator!r}; only that role "
                                "or the owner may change it")
        refused.hint = f"ask the owner, or an agent of role {creator!r}"
        raise refused
    return todo  # type: ignore[no-any-return]


def already_done(todo: dict[str, Any], p: dict[str, Any]) -> bool:
    """Whether the todo already is as the change asks (a repeat writes nothing)."""
    change = p["change"]
    if change == "cancel":
        return bool(todo["status"] == "cancelled")
    if todo["status"] in DONE:
        return False
    if change == "reprioritise":
        return bool(todo["priority"] == p["priority"])
    if change == "block":
        return p["blocker"] in todo["blocked_by"]
    if change == "unblock":
        return p["blocker"] not in todo["blocked_by"]
    return bool(todo["assigned_to"] == p.get("assigned_to")) and p.get("fence_epoch") is None


def known_blocker(lanes: LaneState, todo_id: str, p: dict[str, Any]) -> None:
    """Refuse a blocker that names no todo (a typo is not a change already in effect)."""
    if p.get("blocker") is not None and p["blocker"] not in lanes["todos"]:
        raise Refused(f"todo {todo_id!r}: blocker {p['blocker']!r} does not exist")


def held_at(todo: dict[str, Any], epoch: int) -> str | None:
    """The agent holding ``todo`` at ``epoch`` (live or lapsed lease), if any."""
    if todo["status"] == "claimed" and todo["epoch"] == epoch:
        return todo["holder"]  # type: ignore[no-any-return]
    return None


def fence_problem(todo_id: str, todo: dict[str, Any], epoch: int) -> str | None:
    """Why ``epoch`` names no lease of the todo to end (None: it does)."""
    if held_at(todo, epoch) is not None:
        return None
    now = (f"held at epoch {todo['epoch']}" if todo["status"] == "claimed"
           else f"{todo['status']}, last epoch {todo['epoch']}")
    return f"todo {todo_id!r} is not held at epoch {epoch} (it is {now}); there is no lease to end"


def check_todo_change(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    """A change of an existing, unfinished todo by its adding role or the owner, that changes
    something, keeps blockers acyclic, assigns only a live agent of the todo's role, and takes
    a todo from a live lease only by naming that lease (``fence_epoch``, ``fenced_agent_id``)."""
    p, now = record["payload"], record["ts"]
    todo_id, change = p["todo_id"], p["change"]
    if record["todo_id"] is not None:
        raise Refused(f"{KIND} names the todo it changes in payload.todo_id and is not written "
                      "under a lease; leave the envelope's todo_id and epoch out")
    todo = may_change(lanes, who, todo_id, change)
    if todo["status"] in DONE:
        raise Refused(f"todo {todo_id!r} is {todo['status']}; a finished todo does not change")
    if already_done(todo, p):
        raise Refused(f"todo {todo_id!r} already is as this {change} asks; nothing to record")
    if change == "block":
        _check_blocker(lanes, todo_id, todo, p["blocker"])
    elif change == "unblock":
        known_blocker(lanes, todo_id, p)
    elif change == "reassign" and p.get("assigned_to") is not None:
        agent = lanes["agents"].get(p["assigned_to"])
        if agent is None or agent["revoked"] or agent["role"] != todo["role"]:
            raise Refused(f"todo {todo_id!r}: assigned_to {p['assigned_to']!r} is not a live "
                          f"{todo['role']} agent")
    _check_fence(lanes, todo_id, todo, p, now)


def _check_blocker(lanes: LaneState, todo_id: str, todo: dict[str, Any], blocker: str) -> None:
    todos = lanes["todos"]
    if blocker == todo_id:
        raise Refused(f"todo {todo_id!r} cannot block itself")
    target = todos.get(blocker)
    if target is None:
        raise Refused(f"todo {todo_id!r}: blocker {blocker!r} does not exist")
    if target["status"] in ("failed", "cancelled"):
        raise Refused(f"todo {todo_id!r}: blocker {blocker!r} is {target['status']} and will "
                      "never complete; it would block for ever")
    if len(todo["blocked_by"]) >= MAX_BLOCKERS:
        raise Refused(f"todo {todo_id!r} already has {MAX_BLOCKERS} blockers")
    # The same rule as adding a todo with unblocks_todo_id: no cycle, which would block both
    # for ever. Refuse if the blocker already (transitively) waits for this todo.
    stack, seen = list(target["blocked_by"]), {blocker}
    while stack:
        current = stack.pop()
        if current == todo_id:
            raise Refused(f"todo {todo_id!r}: blocking it by {blocker!r} would make a cycle "
                          f"({blocker!r} already waits for {todo_id!r})")
        if current not in seen:
            seen.add(current)
            stack += todos.get(current, {}).get("blocked_by", [])


def _check_fence(lanes: LaneState, todo_id: str, todo: dict[str, Any], p: dict[str, Any],
                 now: str) -> None:
    epoch = p.get("fence_epoch")
    if epoch is not None:
        problem = fence_problem(todo_id, todo, epoch)
        if problem is not None:
            raise StaleLease(problem, hint=f"look again: `loopx todo show {todo_id}`")
        if p.get("fenced_agent_id") != todo["holder"]:
            raise Refused(f"todo {todo_id!r}: fenced_agent_id must name the holder "
                          f"{todo['holder']!r} of epoch {epoch}")
        return
    if not lease_live(todo, lanes["agents"], now):
        return
    takes = p["change"] == "cancel" or (
        p["change"] == "reassign" and p.get("assigned_to") not in (None, todo["holder"]))
    if takes:
        raise Refused(f"todo {todo_id!r} is held by {todo['holder']} under a live lease "
                      f"(epoch {todo['epoch']}, until {todo['expires']}); to {p['change']} it "
                      f"anyway and fence {todo['holder']} out, name that lease: fence_epoch "
                      f"{todo['epoch']} (--fence {todo['epoch']})")
