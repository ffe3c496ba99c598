"""Governance record kinds: the research contract, action proposals, approvals and results,
usage, findings and campaign transitions."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, ValidationInfo, field_validator, model_validator

from loopx.governance.resources import RESOURCES
from loopx.kernel.types import (
    Direction,
    GitCommit,
    GroundingRef,
    Identifier,
    LongText,
    Model,
    NonNegative,
    RiskClass,
    Sha256,
    ShortText,
)

ToolName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-*]+$")]
ScopePath = Annotated[str, Field(min_length=1, max_length=1024)]


class Objective(Model):
    """The machine-readable scientific problem; constraints hold confirmed facts only."""

    name: ShortText
    prompt: LongText
    domain: ShortText
    inputs: list[ShortText] = []
    targets: list[ShortText] = []
    generalization: list[ShortText] = []
    success_metrics: list[ShortText] = []
    constraints: dict[str, JsonValue] = {}


class Metric(Model):
    """The primary metric and how improvement over the baseline is judged.

    ``baseline_hypothesis`` names the hypothesis whose packets measure the baseline (per split,
    over the contract's seeds); judgements then compare two samples (Welch). Without it the
    scalar ``baseline`` is an assumption, labelled as such wherever it is used."""

    name: Identifier
    direction: Direction
    baseline: float
    baseline_hypothesis: Identifier | None = None
    min_delta: NonNegative = 0.0
    seeds: Annotated[list[int], Field(min_length=1, max_length=1000)]
    target: float | None = Field(
        default=None, description="the objective's target on this metric: the campaign "
                                  "completes once the standing best held-out value reaches it "
                                  "in the metric's direction (none: it never completes by itself)")

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError("seeds must be distinct")
        return seeds


class SplitSpec(Model):
    """One evaluation split. ``location`` is handed only to todos that may read it."""

    name: Identifier
    description: ShortText | None = None
    location: Annotated[str, Field(max_length=2048)] | None = Field(
        default=None, json_schema_extra={"private": True},
        description="private: handed only to the holder of a claim that reads the split, never "
                    "published")


class Evaluation(Model):
    """Dev and held-out evaluation; a hypothesis may read held-out data ``heldout_read_budget`` times."""

    dev: SplitSpec
    heldout: SplitSpec
    heldout_read_budget: Annotated[int, Field(ge=0)] = 1


class CampaignControl(Model):
    """The campaign-level error control over held-out judgements, applied online in log order:
    ``lond`` bounds the false discovery rate, ``alpha_spending`` the family-wise error rate."""

    rule: Literal["lond", "alpha_spending"] = "lond"
    level: Annotated[float, Field(gt=0, lt=1)] = 0.05


class PromotionPolicy(Model):
    """How evidence becomes a promotion: the statistical rule, gates and attempt limits."""

    rule: Literal["welch_one_sided"] = "welch_one_sided"
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    require_heldout: bool = True
    required_gates: list[
        Literal["protected_boundary", "heldout", "novelty", "owner", "first_screen",
                "reproduced"]
    ] = ["protected_boundary", "heldout"]
    max_attempts: Annotated[int, Field(ge=1)] = Field(
        default=3, description="dev attempts per hypothesis and plan version, scored or failed")
    require_owner_approval: bool = False
    campaign_control: CampaignControl = CampaignControl()
    reproduce_tolerance: NonNegative = Field(
        default=0.0, description="the reproduced gate: the largest difference between a value a "
                                 "held-out packet recorded and the value a re-run of its commit "
                                 "gives that still counts as reproduced")


class Budget(Model):
    """Hard non-negative ceilings; zero means no active limit for that resource."""

    max_gpu_hours: NonNegative = 0.0
    max_cpu_hours: NonNegative = 0.0
    max_storage_gb: NonNegative = 0.0
    max_download_gb: NonNegative = 0.0
    max_experiments: Annotated[int, Field(ge=0)] = 0


class StopPolicy(Model):
    """When the campaign stops (or pauses); evaluated with every decision record."""

    min_improvement_percent: NonNegative = 0.0
    patience_iterations: Annotated[int, Field(ge=0)] = 0
    max_iterations: Annotated[int, Field(ge=0)] = 0
    stop_on_budget_exhaustion: bool = True
    stop_on_persistent_validity_failure: bool = True
    max_consecutive_validity_failures: Annotated[int, Field(ge=1)] = Field(
        default=2, description="consecutive invalid iterations that make a failure persistent")
    max_consecutive_failed_iterations: Annotated[int, Field(ge=0)] = Field(
        default=0, description="consecutive failed iterations (retired for retry_exhausted: no "
                               "attempt gave a result either way) after which the campaign "
                               "pauses for recovery (0: it never pauses for them)")


class NoveltyBoundary(Model):
    """What a novelty claim in this campaign is judged against: the prior art a ``novel`` audit
    verdict must have checked (compared as normalised refs, like grounding refs), and the
    boundary in words. Applied to every audit of a claim, under the contract in force."""

    statement: LongText | None = Field(
        default=None, description="what counts as novel here, in words (shown, not checked)")
    prior_art: Annotated[list[GroundingRef], Field(max_length=64)] = Field(
        default=[], description="sources every novel verdict must name among what it checked; "
                                "they count as checked even when they also grounded the idea")


class Amendment(Model):
    """What an amended contract version changed, and why."""

    changed: Annotated[list[ShortText], Field(min_length=1)]
    reason: LongText


class ResearchContractV0(Model):
    """A contract version. Amendments are new records with the same ``contract_id``."""

    contract_id: Identifier
    version: Annotated[int, Field(ge=1)] = 1
    supersedes: Identifier | None = None
    amendment: Amendment | None = None
    objective: Objective
    missing_metadata: list[ShortText] = []
    metric: Metric
    editable_scope: list[ScopePath] = []
    protected_scope: list[ScopePath] = []
    protected_commit: GitCommit | None = Field(
        default=None, description="the commit whose protected scope every evaluated commit must "
                                  "match exactly (closes a base cited after a protected change)")
    base_commit: GitCommit | None = Field(
        default=None, description="the commit every experiment starts from, pinned by the "
                                  "contract: from write rules 9, a scored packet citing a "
                                  "base_commit is refused while none is pinned")
    novelty_boundary: LongText | NoveltyBoundary | None = Field(
        default=None, description="the prior art a novelty claim is judged against: a "
                                  "NoveltyBoundary, whose prior_art every novel audit verdict "
                                  "must cover, or (as before) words only, which check nothing")
    evaluation: Evaluation
    promotion_policy: PromotionPolicy = PromotionPolicy()
    budget: Budget = Budget()
    stop_policy: StopPolicy = StopPolicy()
    mode: Literal["assistant", "guided", "bounded"] = "guided"
    allowed_tools: list[ToolName] = []
    denied_tools: list[ToolName] = []
    approval_required_for: list[RiskClass] = []
    guided_auto_approve: list[Literal["write", "compute"]] = []
    tool_risks: dict[ToolName, RiskClass] = Field(
        default={}, description="the risk class of each of the campaign's own tools (keys may "
                                "be globs such as lab.*; the most restrictive matching entry "
                                "wins): a proposal must state exactly it. A tool outside "
                                "loopx that no entry matches is treated as destructive")

    @field_validator("tool_risks")
    @classmethod
    def _own_tools_only(cls, risks: dict[str, str]) -> dict[str, str]:
        # A loopx tool's risk is registered with the tool; a contract cannot lower it.
        named = sorted(t for t in risks if t.startswith("loopx."))
        if named:
            raise ValueError(f"loopx tools carry their registered risk; leave out "
                             f"{', '.join(named)}")
        return risks

    @field_validator("denied_tools")
    @classmethod
    def _tools_disjoint(cls, denied: list[str], info: ValidationInfo) -> list[str]:
        both = sorted(set(info.data.get("allowed_tools", [])) & set(denied))
        if both:
            raise ValueError(f"tools both allowed and denied: {', '.join(both)}")
        return denied


Resource = Literal["gpu_hours", "cpu_hours", "storage_gb", "download_gb", "experiments"]
CampaignState = Literal["created", "planned", "ready", "running", "paused", "completed",
                        "stopped", "failed"]
StatementKind = Literal["observed_fact", "computed_result", "interpretation", "hypothesis", "risk",
                        "negative_result", "reproducibility_note"]
StopReason = Annotated[str, Field(
    pattern=r"^(budget_exhausted:[a-z_]+(,[a-z_]+)*|maximum_iterations_reached|"
            r"insufficient_improvement|persistent_validity_failure|operator_requested)$")]
PauseReason = Literal["consecutive_failed_iterations", "target_awaits_owner_approval"]
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


class CampaignTransitionV0(Model):
    """A move of the campaign state machine; a stop lists every stop reason that applied, a
    pause its pause reasons, a completion by the policy its completion reason."""

    from_state: CampaignState
    to_state: CampaignState
    reason: Annotated[str, Field(min_length=1, max_length=512)]
    stop_reasons: list[StopReason] = []
    iteration: Annotated[int, Field(ge=0)] = 0
    decision_id: Identifier | None = Field(
        default=None, description="the decision in whose step (or whose approval's step) the "
                                  "policy fired")
    pause_reasons: list[PauseReason] = Field(
        default=[], description="why the policy paused the campaign (empty: the owner paused it)")
    completion: Literal["objective_target_reached"] | None = Field(
        default=None, description="why the policy completed the campaign (none: the owner did)")
