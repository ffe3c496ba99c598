"""The lanes' record kinds: role profiles, grants and revocations, todos, claims, todo events,
todo changes and rollout steps."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, model_validator

from loopx.kernel.types import (
    GitCommit,
    Identifier,
    LongText,
    Model,
    NonNegative,
    Sha256,
    ShortText,
)

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

    @model_validator(mode="before")
    @classmethod
    def _claimed_by(cls, data: Any) -> Any:
        # The lane contract calls a todo's assignee ``claimed_by``: a draft may use that name,
        # and the record stores it as ``assigned_to`` (one field, one meaning; old logs as-is).
        if not isinstance(data, dict) or "claimed_by" not in data:
            return data
        data = dict(data)
        claimed = data.pop("claimed_by")
        if claimed is None:
            return data
        if data.get("assigned_to") not in (None, claimed):
            raise ValueError("claimed_by and assigned_to name different agents (claimed_by is "
                             "the lane contract's name for assigned_to: give one)")
        data["assigned_to"] = claimed
        return data


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


TodoChange = Literal["reprioritise", "block", "unblock", "cancel", "reassign"]
# The changes that may end the lease of a todo's holder (fence it out by epoch).
FENCING_CHANGES = ("cancel", "reassign")


class TodoChangeV0(Model):
    """A recorded change of an existing todo: its priority, a blocker, its assignee, or its
    cancellation. Written by the owner or the role that added the todo, never under a lease:
    the envelope carries no todo_id, and ``todo_id`` here names the todo changed."""

    todo_id: Identifier
    change: TodoChange
    priority: int | None = Field(default=None, description="reprioritise: the new priority")
    blocker: Identifier | None = Field(
        default=None, description="block, unblock: the todo added to or removed from blocked_by")
    assigned_to: Identifier | None = Field(
        default=None, description="reassign: the new assignee (a live agent of the todo's "
                                  "role); null unassigns")
    reason: ShortText | None = Field(default=None,
                                     description="why; required (not empty) to cancel")
    fence_epoch: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="cancel, reassign: the epoch of the lease this change ends "
                                  "(the holder is fenced out); null: no live lease may hold it")
    fenced_agent_id: Identifier | None = Field(
        default=None, description="with fence_epoch: the holder whose lease it ends")

    @model_validator(mode="after")
    def _fields_fit_change(self) -> TodoChangeV0:
        wanted = {"reprioritise": "priority", "block": "blocker", "unblock": "blocker"}
        needed = wanted.get(self.change)
        if needed is not None and getattr(self, needed) is None:
            raise ValueError(f"{needed}: required when change is {self.change!r}")
        for name in ("priority", "blocker"):
            if name != needed and getattr(self, name) is not None:
                raise ValueError(f"{name}: not used when change is {self.change!r}; leave it out")
        if self.change != "reassign" and self.assigned_to is not None:
            raise ValueError(f"assigned_to: not used when change is {self.change!r}; "
                             "leave it out")
        if self.change == "cancel" and not (self.reason or "").strip():
            raise ValueError("reason: required (not empty) when change is 'cancel'")
        if self.change not in FENCING_CHANGES and (
                self.fence_epoch is not None or self.fenced_agent_id is not None):
            raise ValueError(f"fence_epoch: only cancel and reassign end a lease, not "
                             f"{self.change!r}")
        if (self.fence_epoch is None) != (self.fenced_agent_id is None):
            raise ValueError("fenced_agent_id: give it with fence_epoch (the holder whose "
                             "lease ends), or neither")
        return self


ConditionOp = Literal["eq", "ne", "gt", "ge", "lt", "le", "in", "not_in", "exists", "absent"]
RESERVED_ROLES = ("owner", "store")


class Condition(Model):
    """A test on the completion's recorded result: ``path`` is dotted into ``result``."""

    path: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")]
    op: ConditionOp
    value: JsonValue = None

    @model_validator(mode="after")
    def _value_fits_op(self) -> Condition:
        if self.op in ("in", "not_in") and not isinstance(self.value, list):
            raise ValueError(f"op {self.op!r} needs a list value")
        if self.op in ("gt", "ge", "lt", "le") and (
                isinstance(self.value, bool) or not isinstance(self.value, int | float)):
            raise ValueError(f"op {self.op!r} needs a number value")
        return self


# A named fact of the log (registered at work.successor_conditions), or "not NAME".
ConditionRef = Annotated[str, Field(pattern=r"^(not )?[a-z][a-z0-9_]{0,63}$")]


class SuccessorRule(Model):
    """After a todo with ``after_action`` completes and every condition holds, add a todo.

    ``conditions`` name facts of the log (the completed todo's hypothesis, its evidence), which
    the completer cannot type in; ``when`` tests the completer's own result, its word only.
    """

    rule_id: Identifier
    after_action: Identifier
    conditions: Annotated[list[ConditionRef], Field(max_length=32)] = Field(
        default=[], description="named facts of the log that must all hold ('not NAME' negates)")
    when: Annotated[list[Condition], Field(max_length=32)] = Field(
        default=[], description="tests of the completer's result (self-reported, not evidence)")
    target_role: Identifier
    action_kind: Identifier
    title: ShortText
    text: LongText = ""
    claimed_by: Identifier | None = Field(
        default=None, description="the agent the successor is for (its assigned_to), if it is a "
                                  "live agent of target_role when the rule fires")
    assign_to_completer: bool = False
    priority: int = 0

    @model_validator(mode="after")
    def _one_assignee(self) -> SuccessorRule:
        if self.claimed_by is not None and self.assign_to_completer:
            raise ValueError("claimed_by and assign_to_completer both name the assignee: "
                             "give one")
        return self


class LaneProfileV0(Model):
    """A role: its capability, what it may write and take, its lease timing and successor rules."""

    role: Identifier
    capability_token: Identifier
    summary: ShortText = ""
    actions: Annotated[list[Identifier], Field(max_length=128)] = Field(
        default=[], description="todo action kinds an agent of this role may take")
    write_scope: dict[Identifier, list[Identifier]] = Field(
        default={}, description="record kind -> actions this role may append")
    adds_todos_for: list[Identifier] = Field(
        default=[], description="roles this role may add todos for (needs todo_item_v0 add)")
    explicit_claims: Literal["any", "successors_only", "none"] = Field(
        default="any", description="which todos `loopx todo claim ID` may take, besides "
                                   "what should-run selects")
    must_not: list[ShortText] = []
    lease_ttl_seconds: Seconds = 300.0
    heartbeat_seconds: Seconds = 60.0
    max_concurrent_claims: Annotated[int, Field(ge=1, le=64)] = 1
    claim_quota: Annotated[int, Field(ge=0)] = Field(
        default=0, description="claims one agent of this role may make; 0 means no limit")
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 3
    successor_todos: Annotated[list[SuccessorRule], Field(max_length=64)] = []

    @model_validator(mode="after")
    def _consistent(self) -> LaneProfileV0:
        from loopx.work.scope import scope_problems

        if self.role in RESERVED_ROLES:
            raise ValueError(f"role {self.role!r} is reserved")
        if self.heartbeat_seconds >= self.lease_ttl_seconds:
            raise ValueError("heartbeat_seconds must be shorter than lease_ttl_seconds")
        problems = scope_problems(self.write_scope)
        if problems:
            raise ValueError("; ".join(problems))
        ids = [r.rule_id for r in self.successor_todos]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"successor rule ids used twice: {', '.join(dupes)}")
        for rule in self.successor_todos:
            if rule.after_action not in self.actions:
                raise ValueError(f"successor rule {rule.rule_id!r}: after_action "
                                 f"{rule.after_action!r} is not one of this role's actions")
        return self


class AgentGrantV0(Model):
    """The owner grants an agent one role; the grant's record id is its capability id."""

    agent_id: Identifier
    role: Identifier
    token_sha256: Sha256
    claim_quota: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="overrides the role's claim_quota for this agent")
    note: ShortText | None = None


class AgentRevocationV0(Model):
    """The owner revokes an agent's grant; its token is refused from then on."""

    agent_id: Identifier
    grant_id: Identifier
    reason: ShortText = ""


class RolloutEventV0(Model):
    """One step of a rollout; ``detail`` is small, public-safe structured data."""

    event: Literal[
        "started", "progress", "finished", "failed", "note", "worktree_created", "worktree_removed"
    ]
    hypothesis_id: Identifier | None = None
    branch: Annotated[str, Field(max_length=256)] | None = None
    commit: GitCommit | None = None
    detail: dict[str, JsonValue] = {}
