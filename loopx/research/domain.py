"""Research as a kernel domain: hypotheses, evidence, judgements, audits, gates, decisions,
refusals and the research plan, with research's rules on the lanes' claims and selection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loopx.kernel.checkpoint import DELTA_EXTRA, SAVE_EXTRA
from loopx.kernel.domains import Domain, Hook
from loopx.kernel.errors import ResearchRefused
from loopx.research import claims, research_plan, state
from loopx.work.extensions import (
    CLAIM_CHECK,
    CLAIM_DATA,
    PASS_OVER,
    SUCCESSOR_CONDITIONS,
)
from loopx.work.scope import action_of

if TYPE_CHECKING:
    from loopx.kernel.checks import Identity
    from loopx.kernel.kinds import KindSpec

LONG_TEXT = 16384  # a refusal's reason is the error message, cut to the LongText limit
# A refused payload is kept whole up to this size, so the refusal stays under the 64 KiB a
# record may hold with its reason beside it.
KEPT_REQUEST_BYTES = 32 * 1024


def kinds() -> Sequence[KindSpec]:
    """Research's record kinds (loads their pydantic models)."""
    from loopx.kernel.kinds import KindSpec
    from loopx.research.records import (
        AutoResearchEvidencePacketV0,
        GateResultV0,
        GroundingRefV0,
        NoveltyAuditV0,
        ResearchDecisionV0,
        ResearchEvidenceEventV0,
        ResearchHypothesisV0,
        ResearchPlanV0,
        ResearchRefusalV0,
    )

    return (
        KindSpec("research_hypothesis_v0", ResearchHypothesisV0, "public", "self_reported", "agents",
                 "a todo-backed hypothesis, optionally refining a parent"),
        KindSpec("auto_research_evidence_packet_v0", AutoResearchEvidencePacketV0, "public",
                 "observed", "agents", "an executor attempt with per-split results"),
        KindSpec("research_evidence_event_v0", ResearchEvidenceEventV0, "public", "computed", "agents",
                 "the evaluator's scored judgement of attempts"),
        KindSpec("research_decision_v0", ResearchDecisionV0, "public", "computed", "agents",
                 "the evaluator/promoter promotes or retires a hypothesis (one iteration)",
                 secrets_checked=True),
        KindSpec("novelty_audit_v0", NoveltyAuditV0, "public", "self_reported", "agents",
                 "an independent audit of a hypothesis' novelty claim", secrets_checked=True),
        KindSpec("grounding_ref_v0", GroundingRefV0, "public", "self_reported", "agents",
                 "a source ideation drew on: a proposer's for its hypothesis, the curator's "
                 "for the campaign", secrets_checked=True),
        KindSpec("gate_result_v0", GateResultV0, "public", "computed", "loopx",
                 "a gate check verified outside the log (the protected boundary, from git)"),
        KindSpec("research_refusal_v0", ResearchRefusalV0, "public", "computed", "loopx",
                 "a request a research rule refused, recorded for the audit trail"),
        KindSpec(research_plan.KIND, ResearchPlanV0, "public", "self_reported", "agents",
                 "the research plan: ordered steps naming hypotheses and experiments "
                 "(not the analysis plan)", secrets_checked=True),
    )


def checks() -> dict[str, Any]:
    """Research's write checks by kind (loaded by the first write)."""
    from loopx.research.checks import RESEARCH_CHECKS

    return {**RESEARCH_CHECKS, research_plan.KIND: research_plan.check_research_plan}


def refusal(who: Identity, exc: Exception) -> tuple[str, dict[str, Any]]:
    """The ``research_refusal_v0`` that takes a refused request's place in the log."""
    assert isinstance(exc, ResearchRefused)
    from loopx.kernel.canonical import dumps, sha256_hex

    request = exc.request or {}
    payload = request.get("payload")
    encoded = dumps(payload) if isinstance(payload, dict) else None
    # Only a packet's: it holds what was measured. Other requests can hold what a rule keeps
    # out of the log's public records (a refused contract's held-out location).
    kept = (request.get("schema_version") == "auto_research_evidence_packet_v0"
            and encoded is not None and len(encoded) <= KEPT_REQUEST_BYTES
            and request.get("visibility") != "private")
    return "research_refusal_v0", {
        "rule": exc.rule, "requested_kind": request.get("schema_version", "unknown"),
        "requested_action": action_of(request) if request else "unknown",
        "hypothesis_id": exc.hypothesis_id, "todo_id": request.get("todo_id"),
        "reason": exc.message[:LONG_TEXT], "cites": exc.cites, "detail": exc.detail,
        "request_sha256": None if encoded is None else sha256_hex(encoded),
        "request": payload if kept else None}


DOMAIN = Domain(
    name="research",
    slices={name: dict for name in (*state.SLICES, research_plan.SLICE)},
    folds={**state.FOLDS, research_plan.KIND: research_plan.fold_research_plan},
    checks=checks,
    kinds=kinds,
    refusal=refusal,
    extensions={PASS_OVER: claims.pass_over, CLAIM_CHECK: claims.check_claim,
                CLAIM_DATA: claims.split_data,
                SUCCESSOR_CONDITIONS: Hook("loopx.research.conditions", "successor_conditions"),
                # The frontier rows and candidates, kept with each checkpoint and delta.
                SAVE_EXTRA: Hook("loopx.research.row_cache", "save_rows"),
                DELTA_EXTRA: Hook("loopx.research.row_cache", "delta_rows")},
)
