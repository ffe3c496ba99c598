"""Governance records: action proposals, approvals, action results, usage, findings, decisions
and campaign state transitions (the seed's proposals/approvals/actions/findings/decisions
trail, as typed records in the one log)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from loopx.records.contract import ToolName
from loopx.records.types import (
    Identifier,
    LongText,
    Model,
    NonNegative,
    RiskClass,
    Sha256,
    ShortText,
)
from loopx.resources import RESOURCES

Resource = Literal["gpu_hours", "cpu_hours", "storage_gb", "download_gb", "experiments"]
CampaignState = Literal["created", "planned", "ready", "running", "paused", "completed",
                        "stopped", "failed"]
StatementKind = Literal["observed_fact", "computed_result", "interpretation", "hypothesis", "risk",
                        "negative_result", "reproducibility_note"]
StopReason = Annotated[str, Field(
    pattern=r"^(budget_exhausted:[a-z_]+(,[a-z_]+)*|maximum_iterations_reached|"
            r"insufficient_improvement|persistent_validity_failure|operator_requested)$")]
RetireReason = Literal["contradicted", "duplicate", "operator_rejected", "retry_exhausted",
                       "superseded", "guardrail_failed", "no_effect_found"]
Text = Annotated[str, Field(min_length=1, max_length=16384)]


class ActionProposalV0(Model):
    """An action an agent wants to take through a tool, judged under the contract in force.

    ``eligible`` and ``requires_approval`` are loopx's verdicts at write time (the write check
    recomputes them); ``loopx can-execute`` judges again under the contract in force then.
    """

    proposal_id: Identifier
    name: Annotated[str, Field(min_length=1, max_length=512)]
    tool: ToolName
    arguments: dict[str, JsonValue] = {}
    risk: RiskClass
    reason: Text
    estimated_cost: dict[Resource, NonNegative] = {}
    eligible: bool
    requires_approval: bool
    contract_version: Annotated[int, Field(ge=1)]


class Subject(Model):
    """What an approval is about: a proposal, a decision or a publication preview."""

    kind: Literal["proposal", "decision", "preview"]
    id: Identifier


class ApprovalV0(Model):
    """The owner's verdict on a subject. Approval never executes anything."""

    subject: Subject
    verdict: Literal["approved", "rejected"]
    note: Text
    approver: ShortText | None = Field(default=None, description="the person, for the record")


class ActionResultV0(Model):
    """What came of an executed proposal; failures are recorded, never hidden."""

    proposal_id: Identifier
    success: bool
    result: dict[str, JsonValue] = {}
    error: LongText | None = None


class UsageV0(Model):
    """Resource use by the writing agent, as non-negative increments."""

    gpu_hours: NonNegative = 0.0
    cpu_hours: NonNegative = 0.0
    storage_gb: NonNegative = 0.0
    download_gb: NonNegative = 0.0
    experiments: Annotated[int, Field(ge=0)] = 0
    proposal_id: Identifier | None = None
    note: ShortText | None = None
    wall_seconds: NonNegative | None = Field(
        default=None, description="elapsed time of the attempt; reported, not a budget")

    @model_validator(mode="after")
    def _some_increment(self) -> UsageV0:
        if not any(getattr(self, r) for r in RESOURCES) and not self.wall_seconds:
            raise ValueError("at least one increment must be positive")
        return self


class EvidenceRef(Model):
    """What a finding rests on: a record, an artifact (path and digest), a file or a URL."""

    kind: Literal["record", "artifact", "file", "url"]
    ref: Annotated[str, Field(min_length=1, max_length=2048)]
    sha256: Sha256 | None = None


# Statement kinds that state something as established need the evidence it rests on.
EVIDENCED_KINDS = ("observed_fact", "computed_result", "interpretation", "negative_result",
                   "reproducibility_note")


class FindingV0(Model):
    """A statement of one kind; hypotheses and interpretations are never established results."""

    finding_id: Identifier
    kind: StatementKind
    statement: Text
    evidence: Annotated[list[EvidenceRef], Field(max_length=64)] = []
    confidence: Literal["low", "medium", "high"] | None = None
    supersedes: Identifier | None = None

    @model_validator(mode="after")
    def _evidenced(self) -> FindingV0:
        if self.kind in EVIDENCED_KINDS and not self.evidence:
            raise ValueError(f"{self.kind} findings need at least one evidence ref")
        return self


class ResearchDecisionV0(Model):
    """The evaluator/promoter promotes or retires a hypothesis; one decision is one iteration.

    A later decision on the same hypothesis names the one it supersedes.
    """

    decision_id: Identifier
    hypothesis_id: Identifier
    outcome: Literal["promoted", "retired"]
    reason: Literal["gates_passed"] | RetireReason
    revision: Annotated[int, Field(ge=0)] = Field(
        description="seq of the last record touching the hypothesis when it was decided")
    supersedes: Identifier | None = None
    evidence_ids: Annotated[list[Identifier], Field(max_length=1024)] = []
    note: ShortText | None = None

    @model_validator(mode="after")
    def _reason_fits(self) -> ResearchDecisionV0:
        if (self.outcome == "promoted") != (self.reason == "gates_passed"):
            raise ValueError("a promotion's reason is gates_passed; a retirement's is one of "
                             "contradicted, duplicate, operator_rejected, retry_exhausted, "
                             "superseded, guardrail_failed, no_effect_found")
        return self


class CampaignTransitionV0(Model):
    """A move of the campaign state machine; a stop lists every stop reason that applied."""

    from_state: CampaignState
    to_state: CampaignState
    reason: Annotated[str, Field(min_length=1, max_length=512)]
    stop_reasons: list[StopReason] = []
    iteration: Annotated[int, Field(ge=0)] = 0
    decision_id: Identifier | None = Field(
        default=None, description="the decision in whose step the stop policy fired")
