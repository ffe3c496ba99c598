"""Todos and their lifecycle: the item itself, the claim packet, and later lifecycle events."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from loopx.records.types import Identifier, LongText, Model, NonNegative, ShortText

Seconds = Annotated[float, Field(gt=0, le=7 * 24 * 3600)]


class TodoItemV0(Model):
    """A bounded piece of work for one role; the holder is derived from claim events."""

    todo_id: Identifier
    title: ShortText
    text: LongText = ""
    role: Identifier
    action_kind: Identifier
    assigned_to: Identifier | None = None
    blocked_by: Annotated[list[Identifier], Field(max_length=256)] = []
    unblocks_todo_id: Identifier | None = None
    hypothesis_id: Identifier | None = None
    priority: int = 0
    lease_ttl_seconds: Seconds | None = None
    estimated_cost: dict[str, NonNegative] = {}
    max_attempts: Annotated[int, Field(ge=1)] | None = None
    source_todo_id: Identifier | None = None
    successor_rule_id: Identifier | None = None
    context: dict[str, JsonValue] = {}


class AutoResearchLaneClaimV1(Model):
    """A claim of a todo: why this agent may take the next bounded action, and for how long.

    The envelope carries goal, role, agent, todo and epoch; the lease expires at the record's
    store timestamp plus ``lease_ttl_seconds``.
    """

    hypothesis_id: Identifier | None = None
    capability_token: Identifier
    allowed_actions: list[Identifier] = []
    write_scope: list[Identifier] = []
    blocked_by: list[Identifier] = []
    lease_ttl_seconds: Seconds
    context: dict[str, JsonValue] = {}
    via: Literal["should_run", "explicit"] = Field(
        default="should_run",
        description="should_run: the todo should-run selected for this agent in the same locked "
                    "step; explicit: `loopx todo claim ID`")


class TodoEventV0(Model):
    """A lifecycle step of a claimed todo, written by its holder (or, for expiry, the next claimant)."""

    event: Literal["heartbeat", "released", "completed", "failed", "expired"]
    lease_ttl_seconds: Seconds | None = None
    expired_agent_id: Identifier | None = None
    reason: ShortText | None = None
    result: dict[str, JsonValue] = {}
