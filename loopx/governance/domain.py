"""Governance as a kernel domain: the contract, proposals and approvals, usage, findings and
the campaign state machine, with the campaign's hold on the lanes' claims and selection."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

from loopx.governance import state
from loopx.governance.rules import campaign_block, pass_over
from loopx.kernel.domains import Domain, Expected, Hook
from loopx.kernel.errors import Refused
from loopx.work.extensions import CAMPAIGN_BLOCK, CLAIM_CHECK, PASS_OVER

if TYPE_CHECKING:
    from loopx.kernel.kinds import KindSpec


def kinds() -> Sequence[KindSpec]:
    """Governance's record kinds (loads their pydantic models)."""
    from loopx.governance.records import (
        ActionProposalV0,
        ActionResultV0,
        ApprovalV0,
        CampaignTransitionV0,
        FindingV0,
        ResearchContractV0,
        UsageV0,
    )
    from loopx.kernel.kinds import KindSpec

    return (
        KindSpec("research_contract_v0", ResearchContractV0, "public", "self_reported", "agents",
                 "the research contract and its amendments", secrets_checked=True),
        KindSpec("action_proposal_v0", ActionProposalV0, "private", "self_reported", "agents",
                 "an action an agent proposes through a tool, judged under the contract",
                 secrets_checked=True),
        KindSpec("approval_v0", ApprovalV0, "private", "observed", "owner",
                 "the owner approves or rejects a proposal, a decision or a preview",
                 secrets_checked=True),
        KindSpec("action_result_v0", ActionResultV0, "private", "self_reported", "agents",
                 "what came of an executed proposal, success or failure", secrets_checked=True),
        KindSpec("usage_v0", UsageV0, "private", "self_reported", "agents",
                 "resource use by the writing agent, as increments", secrets_checked=True),
        KindSpec("finding_v0", FindingV0, "public", "self_reported", "agents",
                 "a statement of one kind (fact, result, interpretation, hypothesis, ...)",
                 secrets_checked=True),
        KindSpec("campaign_transition_v0", CampaignTransitionV0, "public", "computed", "agents",
                 "a move of the campaign state machine, with its stop reasons",
                 secrets_checked=True),
    )


def owed_move(view: dict[str, Any], record: dict[str, Any]) -> list[Expected]:
    """The campaign move a decision, or the owner's approval of a promotion (already folded
    in), fires: its batch must carry exactly that transition next."""
    from loopx.governance import moves  # writes and verify only

    if record["schema_version"] == "research_decision_v0":
        move = moves.decision_move(view, record)
    else:
        move = moves.approval_move(view, record)
    if move is None:
        return []
    return [Expected(f"the {NOUNS[move['to_state']]} transition the policy fires ({_why(move)})",
                     lambda r: _check_owed(r, move))]


NOUNS = {"stopped": "stop", "paused": "pause", "completed": "completion"}


def _why(move: dict[str, Any]) -> str:
    return ", ".join(move.get("stop_reasons") or move.get("pause_reasons")
                     or [move.get("completion") or ""])


def _check_owed(record: dict[str, Any], want: dict[str, Any]) -> None:
    from pydantic import ValidationError

    from loopx.governance.records import CampaignTransitionV0

    normal = CampaignTransitionV0.model_validate(want).model_dump(mode="json")
    got = None
    if record["schema_version"] == "campaign_transition_v0":
        try:
            # Normalized too: a stop written before the pause and completion fields existed
            # lacks them, and is the same stop.
            got = CampaignTransitionV0.model_validate(record["payload"]).model_dump(mode="json")
        except ValidationError:
            got = None
    if got != normal:
        trigger = "the owner's approval" if want["reason"].startswith(
            "objective target reached with the owner's") else "this decision"
        raise Refused(f"the campaign policy fires with {trigger}: it must be followed by the "
                      f"campaign's {NOUNS[want['to_state']]} ({_why(want)}) in the same "
                      "batch")


DOMAIN = Domain(
    name="governance",
    slices={"campaign": state.initial_campaign, "proposals": dict, "findings": dict},
    folds=state.FOLDS,
    checks=lambda: import_module("loopx.governance.checks").GOVERNANCE_CHECKS,
    kinds=kinds,
    after_fold={"research_decision_v0": owed_move, "approval_v0": owed_move},
    extensions={CAMPAIGN_BLOCK: campaign_block, PASS_OVER: pass_over,
                CLAIM_CHECK: Hook("loopx.governance.checks", "check_claim")},
)
