"""Todo change tools: reprioritise, block, unblock, cancel and reassign an existing todo.

Each writes one ``todo_change_v0`` (or nothing, when the todo already is as asked) and answers
the same JSON: ``todo_id``, ``change``, ``changed``, ``seq``, ``record_id``, ``fenced`` and the
todo as ``loopx todo show`` gives it after the change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx.tools.registry import ToolContext, tool


def _change(ctx: ToolContext, change: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run ``change`` of :mod:`loopx.work.todo_changes` as the caller: the answer shared by all."""
    from loopx.work import todo_changes

    return getattr(todo_changes, change)(ctx.ledger, ctx.credentials(), *args, **kwargs)


@dataclass(frozen=True)
class Reprioritise:
    todo_id: str
    priority: int
    reason: str | None = None


@tool("todo.reprioritise", params=Reprioritise, writes=True)
def todo_reprioritise(ctx: ToolContext, p: Reprioritise) -> dict[str, Any]:
    """Give a todo a new priority (its adding role or the owner); it moves in its queue."""
    return _change(ctx, "reprioritise", p.todo_id, p.priority, reason=p.reason)


@dataclass(frozen=True)
class Blocker:
    todo_id: str
    blocker: str
    reason: str | None = None


@tool("todo.block", params=Blocker, writes=True)
def todo_block(ctx: ToolContext, p: Blocker) -> dict[str, Any]:
    """Make a todo wait for another to complete (its adding role or the owner; no cycles)."""
    return _change(ctx, "block", p.todo_id, p.blocker, reason=p.reason)


@tool("todo.unblock", params=Blocker, writes=True)
def todo_unblock(ctx: ToolContext, p: Blocker) -> dict[str, Any]:
    """Remove a blocker from a todo (its adding role or the owner)."""
    return _change(ctx, "unblock", p.todo_id, p.blocker, reason=p.reason)


@dataclass(frozen=True)
class Cancel:
    todo_id: str
    reason: str
    fence_epoch: int | None = None


@tool("todo.cancel", params=Cancel, writes=True)
def todo_cancel(ctx: ToolContext, p: Cancel) -> dict[str, Any]:
    """Cancel a todo for good, with a reason; a held one only by naming its lease's epoch."""
    return _change(ctx, "cancel", p.todo_id, p.reason, fence_epoch=p.fence_epoch)


@dataclass(frozen=True)
class Reassign:
    todo_id: str
    assigned_to: str | None
    reason: str | None = None
    fence_epoch: int | None = None


@tool("todo.reassign", params=Reassign, writes=True)
def todo_reassign(ctx: ToolContext, p: Reassign) -> dict[str, Any]:
    """Assign a todo to another live agent of its role, or unassign it (null)."""
    return _change(ctx, "reassign", p.todo_id, p.assigned_to, reason=p.reason,
                   fence_epoch=p.fence_epoch)
