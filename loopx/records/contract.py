"""``research_contract_v0``: what a campaign studies, how it is measured, and what it may do."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, ValidationInfo, field_validator

from loopx.records.types import (
    Direction,
    GitCommit,
    Identifier,
    LongText,
    Model,
    NonNegative,
    RiskClass,
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
        Literal["protected_boundary", "heldout", "novelty", "owner", "first_screen"]
    ] = ["protected_boundary", "heldout"]
    max_attempts: Annotated[int, Field(ge=1)] = Field(
        default=3, description="dev attempts per hypothesis and plan version, scored or failed")
    require_owner_approval: bool = False
    campaign_control: CampaignControl = CampaignControl()


class Budget(Model):
    """Hard non-negative ceilings; zero means no active limit for that resource."""

    max_gpu_hours: NonNegative = 0.0
    max_cpu_hours: NonNegative = 0.0
    max_storage_gb: NonNegative = 0.0
    max_download_gb: NonNegative = 0.0
    max_experiments: Annotated[int, Field(ge=0)] = 0


class StopPolicy(Model):
    """When the campaign stops; evaluated with every decision record."""

    min_improvement_percent: NonNegative = 0.0
    patience_iterations: Annotated[int, Field(ge=0)] = 0
    max_iterations: Annotated[int, Field(ge=0)] = 0
    stop_on_budget_exhaustion: bool = True
    stop_on_persistent_validity_failure: bool = True
    max_consecutive_validity_failures: Annotated[int, Field(ge=1)] = Field(
        default=2, description="consecutive invalid iterations that make a failure persistent")


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
    novelty_boundary: LongText | None = None
    evaluation: Evaluation
    promotion_policy: PromotionPolicy = PromotionPolicy()
    budget: Budget = Budget()
    stop_policy: StopPolicy = StopPolicy()
    mode: Literal["assistant", "guided", "bounded"] = "guided"
    allowed_tools: list[ToolName] = []
    denied_tools: list[ToolName] = []
    approval_required_for: list[RiskClass] = []
    guided_auto_approve: list[Literal["write", "compute"]] = []

    @field_validator("denied_tools")
    @classmethod
    def _tools_disjoint(cls, denied: list[str], info: ValidationInfo) -> list[str]:
        both = sorted(set(info.data.get("allowed_tools", [])) & set(denied))
        if both:
            raise ValueError(f"tools both allowed and denied: {', '.join(both)}")
        return denied
