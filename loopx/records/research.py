"""Research judgements beside the evidence: novelty audits, recorded gate results and recorded
refusals of research rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from loopx.records.types import GitCommit, GroundingRef, Identifier, LongText, Model, ShortText

GateName = Literal["protected_boundary", "heldout", "novelty", "owner", "first_screen"]


class NoveltyAuditV0(Model):
    """An independent audit of a hypothesis' novelty claim (never by the agent that proposed it)."""

    hypothesis_id: Identifier
    verdict: Literal["novel", "not_novel", "inconclusive"]
    refs: Annotated[list[GroundingRef], Field(max_length=64)] = []
    note: LongText | None = None


class CheckedPacket(Model):
    """One evidence packet a gate looked at, and the commit range it checked."""

    packet_id: Identifier
    base_commit: GitCommit | None = None
    evaluated_commit: GitCommit | None = None
    commits: Annotated[int, Field(ge=0)] = 0


class GateViolation(Model):
    """A change the protected-boundary gate found in a checked commit range."""

    commit: Annotated[str, Field(max_length=64)]
    path: Annotated[str, Field(max_length=1024)]
    change: ShortText
    detail: ShortText = ""


class GateResultV0(Model):
    """The recorded result of a gate check that needs more than the log (the protected boundary,
    verified from git). Written only by loopx's gate tool, never appended by hand."""

    hypothesis_id: Identifier
    gate: Literal["protected_boundary"]
    passed: bool
    revision: Annotated[int, Field(ge=0)]
    packets: Annotated[list[CheckedPacket], Field(max_length=1024)] = []
    protected_scope: list[Annotated[str, Field(max_length=1024)]] = []
    protected_commit: GitCommit | None = None
    violations: Annotated[list[GateViolation], Field(max_length=256)] = []
    reasons: Annotated[list[ShortText], Field(max_length=64)] = []


RefusalRule = Literal["heldout_budget", "duplicate", "dev_only_lift", "claimed_evidence",
                      "no_candidate", "heldout_once", "heldout_final", "heldout_incomplete",
                      "attempts_exhausted", "measured_baseline", "selective_judgement"]


class ResearchRefusalV0(Model):
    """A well-formed, authorised request a research rule refused, kept for the audit trail.
    Written only by loopx, in place of what was refused."""

    rule: RefusalRule
    requested_kind: Identifier
    requested_action: Identifier
    hypothesis_id: Identifier | None = None
    todo_id: Identifier | None = None
    reason: LongText
    cites: Annotated[list[Identifier], Field(max_length=64)] = []
    detail: dict[str, JsonValue] = {}
