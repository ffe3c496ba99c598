"""``rollout_event_v0``: what an executor did while running a todo (worktrees, progress, exits)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from loopx.records.types import GitCommit, Identifier, Model


class RolloutEventV0(Model):
    """One step of a rollout; ``detail`` is small, public-safe structured data."""

    event: Literal[
        "started", "progress", "finished", "failed", "note", "worktree_created", "worktree_removed"
    ]
    hypothesis_id: Identifier | None = None
    branch: Annotated[str, Field(max_length=256)] | None = None
    commit: GitCommit | None = None
    detail: dict[str, JsonValue] = {}
