"""Evidence: executors' attempt packets and the evaluator's scored judgements of them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from loopx.records.types import (
    ArtifactRef,
    Direction,
    GitCommit,
    Identifier,
    LongText,
    Model,
    NonNegative,
    ShortText,
    Split,
)


class SplitResult(Model):
    """One measured value: a metric on a split for one seed."""

    split: Split
    metric: Identifier
    seed: int
    value: float


class AutoResearchEvidencePacketV0(Model):
    """One executor attempt, failed or scored; failed attempts are recorded, never hidden."""

    hypothesis_id: Identifier
    attempt: Annotated[int, Field(ge=1)] = 1
    status: Literal["scored", "failed", "timeout", "invalid_output", "cancelled"]
    results: Annotated[list[SplitResult], Field(max_length=4096)] = []
    branch: Annotated[str, Field(max_length=256)] | None = None
    base_commit: GitCommit | None = None
    evaluated_commit: GitCommit | None = None
    artifacts: Annotated[list[ArtifactRef], Field(max_length=256)] = []
    protected_scope_clean: bool | None = Field(
        default=None, description="self-reported by the executor; gates verify it from git"
    )
    exit_status: int | None = None
    error: LongText | None = None
    wall_seconds: NonNegative | None = None
    cpu_seconds: NonNegative | None = None
    notes: LongText | None = None


class ControlApplied(Model):
    """How the campaign-level control judged one held-out test: its place in the family, the
    threshold the online rule gave it, and its p-value adjusted to compare with ``level``."""

    rule: Literal["lond", "alpha_spending"]
    level: Annotated[float, Field(gt=0, lt=1)]
    index: Annotated[int, Field(ge=1)]
    discoveries_before: Annotated[int, Field(ge=0)] = 0
    looks: Annotated[int, Field(ge=1)] = 1
    threshold: Annotated[float, Field(ge=0, le=1)]
    adjusted_p: Annotated[float, Field(ge=0, le=1)]
    discovery: bool


class ResearchEvidenceEventV0(Model):
    """The evaluator/promoter's judgement of scored attempts on one split under a named rule."""

    hypothesis_id: Identifier
    packet_ids: Annotated[list[Identifier], Field(min_length=1, max_length=1024)]
    split: Split
    metric: Identifier
    direction: Direction
    baseline: float | None = None
    baseline_values: list[float] = []
    values: list[float] = []
    seeds: list[int] = []
    rule: Identifier
    statistic: float | None = None
    p_value: Annotated[float, Field(ge=0, le=1)] | None = None
    mean_delta: float | None = None
    verdict: Literal["supports", "contradicts", "inconclusive", "needs_retry", "invalid"]
    notes: ShortText | None = None
    plan_version: Annotated[int, Field(ge=1)] | None = None
    baseline_packet_ids: Annotated[list[Identifier], Field(max_length=1024)] = []
    control: ControlApplied | None = None
