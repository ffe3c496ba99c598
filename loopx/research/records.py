"""Research record kinds: hypotheses, evidence packets and judgements, novelty audits, gate
results, decisions and refusals."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from loopx.kernel.types import (
    ArtifactRef,
    Direction,
    GitCommit,
    GroundingRef,
    Identifier,
    LongText,
    Model,
    NonNegative,
    Sha256,
    ShortText,
    Split,
)


class ResearchHypothesisV0(Model):
    """A hypothesis. The backing todo is the envelope's ``todo_id``; refinements name a parent."""

    hypothesis_id: Identifier
    parent_id: Identifier | None = None
    title: ShortText
    statement: LongText
    mechanism_family: Identifier
    parameters: dict[str, JsonValue] = {}
    claimed_by: Identifier
    grounding_refs: Annotated[list[GroundingRef], Field(max_length=64)] = []
    no_grounding_reason: ShortText | None = None
    claims_novelty: bool = False
    expected_effect: ShortText | None = None
    supersedes: Identifier | None = None


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
    valid: bool = Field(
        default=True, description="false: the executor who measured it found the result "
                                  "invalid (it violates a domain constraint), whatever it scores")
    violations: Annotated[list[ShortText], Field(max_length=64)] = Field(
        default=[], description="what an invalid result violates (required when valid is false)")

    @model_validator(mode="after")
    def _validity_named(self) -> AutoResearchEvidencePacketV0:
        _check_validity(self.valid, self.violations)
        if not self.valid and self.status != "scored":
            raise ValueError("only a scored result is judged invalid (valid false); an attempt "
                             "that gave no result is recorded with its status")
        return self


def _check_validity(valid: bool, violations: list[str]) -> None:
    if not valid and not violations:
        raise ValueError("an invalid result names what it violates (violations)")
    if valid and violations:
        raise ValueError("violations are named only with valid false")


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


GateName = Literal["protected_boundary", "heldout", "novelty", "owner", "first_screen",
                   "reproduced"]


class NoveltyAuditV0(Model):
    """An independent audit of a hypothesis' novelty claim (never by the agent that proposed it)."""

    hypothesis_id: Identifier
    verdict: Literal["novel", "not_novel", "inconclusive"]
    refs: Annotated[list[GroundingRef], Field(max_length=64)] = Field(
        default=[], description="the material the audit checked (compared against). A novel "
                                "verdict names at least one source, covers the contract's "
                                "novelty boundary and shares none with the hypothesis' "
                                "ideation material (docs/research.md, the novelty gate)")
    note: LongText | None = None


class CheckedPacket(Model):
    """One evidence packet a gate looked at, and the commit range it checked."""

    packet_id: Identifier
    base_commit: GitCommit | None = None
    evaluated_commit: GitCommit | None = None
    commits: Annotated[int, Field(ge=0)] = 0


class GateViolation(Model):
    """A change the protected-boundary gate found in a checked commit range, and the rule it
    broke: ``protected`` (it touched the protected scope), ``outside_editable`` (it touched a
    path outside the contract's editable scope) or ``unscreened`` (a held-out run's code differs
    there from every dev run's, write rules 10) or ``borrowed`` (the evaluated code holds a
    change another hypothesis' packet evaluated first, write rules 11)."""

    commit: Annotated[str, Field(max_length=64)]
    path: Annotated[str, Field(max_length=1024)]
    change: ShortText
    detail: ShortText = ""
    rule: Literal["protected", "outside_editable", "unscreened", "borrowed"] = "protected"


class ReproducedValue(Model):
    """One seed of a re-run packet: the value the packet recorded and the one the re-run gave."""

    seed: int
    recorded: float
    reproduced: float


class Reproduction(Model):
    """One held-out packet re-run from the commit it cites: ``reproduced`` (every value within
    the contract's tolerance), ``differs`` (some value is not) or ``not_run`` (the re-run could
    not be made or gave no usable answer; ``detail`` says why)."""

    packet_id: Identifier
    evaluated_commit: GitCommit | None = None
    outcome: Literal["reproduced", "differs", "not_run"]
    values: Annotated[list[ReproducedValue], Field(max_length=64)] = Field(
        default=[], description="the packet's first 64 values, recorded and re-run")
    detail: ShortText = ""


class GateResultV0(Model):
    """The recorded result of a gate check that needs more than the log: the protected boundary,
    verified from git, or the held-out packets re-run (``reproduced``). Written only by loopx's
    gate tools, never appended by hand."""

    hypothesis_id: Identifier
    gate: Literal["protected_boundary", "reproduced"]
    passed: bool
    revision: Annotated[int, Field(ge=0)]
    packets: Annotated[list[CheckedPacket], Field(max_length=1024)] = []
    protected_scope: list[Annotated[str, Field(max_length=1024)]] = []
    protected_commit: GitCommit | None = None
    editable_scope: list[Annotated[str, Field(max_length=1024)]] = Field(
        default=[], description="the contract's editable scope at the time; empty: no "
                                "editable-scope rule")
    violations: Annotated[list[GateViolation], Field(max_length=256)] = []
    reasons: Annotated[list[ShortText], Field(max_length=64)] = []
    reproductions: Annotated[list[Reproduction], Field(max_length=64)] = Field(
        default=[], description="the reproduced gate: each held-out packet re-run")
    tolerance: NonNegative | None = Field(
        default=None, description="the reproduced gate: the contract's reproduce_tolerance")


RefusalRule = Literal["heldout_budget", "duplicate", "dev_only_lift", "claimed_evidence",
                      "no_candidate", "heldout_once", "heldout_final", "heldout_incomplete",
                      "attempts_exhausted", "measured_baseline", "selective_judgement",
                      "novelty_material", "novelty_boundary", "invalid_result",
                      "protected_scope_missing", "contract_outside_scope",
                      "campaign_control_loosened", "comparison_changed",
                      "guardrail_loosened", "heldout_within_dev", "repeated_seed",
                      "other_base", "baseline_changed", "base_unpinned"]


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
    request_sha256: Sha256 | None = Field(
        default=None, description="sha256 of the refused record's canonical payload")
    request: dict[str, JsonValue] | None = Field(
        default=None, description="a refused evidence packet's payload, so that what it "
                                  "measured is never lost (absent for other kinds, and when "
                                  "the packet was private or over 32 KiB: the digest still "
                                  "names it)")


RetireReason = Literal["contradicted", "duplicate", "operator_rejected", "retry_exhausted",
                       "superseded", "guardrail_failed", "no_effect_found", "invalid_result"]


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
    valid: bool = Field(
        default=True, description="false: the iteration's result is invalid (measured so by "
                                  "its executor, or judged so by the evaluator), a validity "
                                  "failure that never improves the best")
    violations: Annotated[list[ShortText], Field(max_length=64)] = Field(
        default=[], description="what an invalid result violates (required when valid is false)")

    @model_validator(mode="after")
    def _reason_fits(self) -> ResearchDecisionV0:
        if (self.outcome == "promoted") != (self.reason == "gates_passed"):
            raise ValueError("a promotion's reason is gates_passed; a retirement's is one of "
                             "contradicted, duplicate, operator_rejected, retry_exhausted, "
                             "superseded, guardrail_failed, no_effect_found, invalid_result")
        _check_validity(self.valid, self.violations)
        if self.outcome == "promoted" and not self.valid:
            raise ValueError("an invalid result is never promoted: retire it (invalid_result)")
        if self.reason == "invalid_result" and self.valid:
            raise ValueError("a retirement for invalid_result says valid false")
        return self


class GroundingRefV0(Model):
    """A source ideation drew on, recorded on its own: a proposer's for one of its hypotheses,
    or the curator's for the whole campaign. A novel audit verdict must rest on other material."""

    ref: GroundingRef
    hypothesis_id: Identifier | None = Field(
        default=None, description="the hypothesis it grounds (written by its proposer); null: "
                                  "the whole campaign (the curator's)")


# -- the research plan (not the analysis plan, which is folded from the contract) ---------------

StepTitle = Annotated[str, Field(min_length=1, max_length=512)]


class ResearchPlanStep(Model):
    """One step of the research plan: the hypotheses and experiments it calls for, and why.

    ``hypotheses`` and ``todos`` name records of the log (they may be named before they exist);
    their state gives the step's status. ``experiments`` describe work in words, which the log
    cannot track."""

    step_id: Identifier
    title: StepTitle
    rationale: ShortText | None = None
    hypotheses: Annotated[list[Identifier], Field(max_length=64)] = []
    todos: Annotated[list[Identifier], Field(max_length=64)] = []
    experiments: Annotated[list[StepTitle], Field(max_length=32)] = []

    @model_validator(mode="after")
    def _distinct(self) -> ResearchPlanStep:
        for name in ("hypotheses", "todos"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name} names an id twice")
        return self


class ResearchPlanV0(Model):
    """The research plan: the planner's ordered steps. A revision is a new record with the same
    ``plan_id`` and the next ``version``, superseding the version before (by record id) and
    saying why. Not the analysis plan, which the contract's metric and policy fields make."""

    plan_id: Identifier
    version: Annotated[int, Field(ge=1)] = 1
    supersedes: Identifier | None = None
    summary: LongText | None = None
    reason: LongText | None = Field(
        default=None, description="why this revision replans (required from version 2)")
    steps: Annotated[list[ResearchPlanStep], Field(min_length=1, max_length=128)]

    @field_validator("steps")
    @classmethod
    def _steps_distinct(cls, steps: list[ResearchPlanStep]) -> list[ResearchPlanStep]:
        ids = [s.step_id for s in steps]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"step ids must be distinct: {', '.join(twice)} more than once")
        return steps

    @model_validator(mode="after")
    def _versioned(self) -> ResearchPlanV0:
        if (self.version == 1) != (self.supersedes is None):
            raise ValueError("version 1 supersedes nothing; a later version supersedes the one "
                             "before it")
        if self.version > 1 and not (self.reason or "").strip():
            raise ValueError("a revision (version 2 on) must give its reason")
        return self
