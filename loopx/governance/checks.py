"""Write checks for governance records: contract versions, campaign transitions, proposals,
approvals, action results and findings, and the campaign's own rules on claims. (The move a
decision's batch must carry when the policy fires is in :mod:`loopx.governance.moves`.)

Registered in :mod:`loopx.governance.domain` and called from
:func:`loopx.kernel.checks.check_batch` under the store lock (and by ``loopx verify``),
against an overlay of the checked state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.moves import (
    best_awaits_owner,
    pause_reasons,
    policy_reasons,
    target_reached,
)
from loopx.governance.rules import (
    TRANSITIONS,
    action_phrase,
    approval_required,
    campaign_block,
    todo_over_budget,
    tool_eligible,
    tool_risk,
    transition_allowed,
    unknown_tool,
)
from loopx.governance.state import approval_subjects, current_contract
from loopx.governance.versions import check_next_version
from loopx.kernel.domains import Check, Record, View
from loopx.kernel.errors import Refused
from loopx.work.extensions import Block

if TYPE_CHECKING:
    from loopx.kernel.checks import Identity


def _check_contract(view: View, who: Identity, record: Record) -> None:
    from loopx.governance.contract import changed_fields

    p = record["payload"]
    current = current_contract(view)
    if current is None:
        if p["version"] != 1 or p["supersedes"] is not None or p["amendment"] is not None:
            raise Refused("there is no contract yet: the first version is version 1, with no "
                          "supersedes and no amendment", hint="`loopx contract init`")
        return
    check_next_version(current, p, what="contract", id_key="contract_id", change="an amendment",
                       how="change it with an amendment", hint="`loopx contract amend`")
    if p["amendment"] is None:
        raise Refused("an amendment must say what changed and why (payload.amendment)")
    changed = changed_fields(current, p)
    if not changed:
        raise Refused("the amendment changes nothing")
    if sorted(p["amendment"]["changed"]) != changed:
        raise Refused(f"amendment.changed must list exactly what changed: {', '.join(changed)}")


def _check_transition(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    status = view["campaign"]["status"]
    current, target = status["state"], p["to_state"]
    if p["from_state"] != current:
        raise Refused(f"the campaign is {current}, not {p['from_state']}")
    if not transition_allowed(current, target):
        legal = ", ".join(TRANSITIONS[current]) or "none: it is finished"
        raise Refused(f"the campaign cannot move from {current} to {target} (from {current}: "
                      f"{legal})")
    if target in ("planned", "ready", "running") and current_contract(view) is None:
        raise Refused(f"a campaign without a contract cannot be {target}",
                      hint="the curator writes one with `loopx contract init`")
    if p["decision_id"] is not None:
        raise Refused("only a move the policy makes in the batch of a decision (or of its "
                      "approval) names that decision")
    pauses, completion = list(p.get("pause_reasons") or []), p.get("completion")
    if p["stop_reasons"] and target != "stopped":
        raise Refused("only a stop carries stop_reasons")
    if pauses and target != "paused":
        raise Refused("only a pause carries pause_reasons")
    if completion is not None and target != "completed":
        raise Refused("only a completion carries a completion reason")
    by_policy = {"stopped": _check_stop, "paused": _check_pause,
                 "completed": _check_completion}.get(target)
    if by_policy is not None and by_policy(view, who, p):
        count = view["campaign"]["iterations"]["count"]
        if p["iteration"] != count:
            raise Refused(f"a {target} move by the policy names the current iteration {count}")


def _check_stop(view: View, who: Identity, p: dict[str, Any]) -> bool:
    """The owner stops at will (operator_requested); anyone else only for exactly the stop
    reasons that apply now. True: a stop by the policy."""
    if who.is_owner and p["stop_reasons"] == ["operator_requested"]:
        return False
    due = policy_reasons(view)
    if not p["stop_reasons"] or p["stop_reasons"] != due:
        raise Refused("a stop lists exactly the stop reasons that apply now: "
                      + (", ".join(due) if due else "none apply")
                      + ("" if not who.is_owner else " (or operator_requested, by the owner)"))
    return True


def _check_pause(view: View, who: Identity, p: dict[str, Any]) -> bool:
    """The owner pauses at will (no pause reasons); anyone else only for exactly the pause
    rules that fire now. True: a pause by the policy."""
    pauses = list(p.get("pause_reasons") or [])
    if who.is_owner and not pauses:
        return False
    due = pause_reasons(view)
    if not due or pauses != due:
        raise Refused("a pause lists exactly the pause reasons that apply now: "
                      + (", ".join(due) if due else "none apply")
                      + ("" if not who.is_owner else " (or none, when the owner pauses it)"))
    return True


def _check_completion(view: View, who: Identity, p: dict[str, Any]) -> bool:
    """The owner completes at will (no completion reason); anyone else only once the objective's
    target is reached by a promotion that waits for no one. True: a completion by the policy."""
    if who.is_owner and p.get("completion") is None:
        return False
    if p.get("completion") is None:
        raise Refused("an agent completes the campaign only when the objective's target is "
                      "reached (completion objective_target_reached)")
    contract = current_contract(view)
    target = None if contract is None else contract["metric"].get("target")
    if target is None:
        raise Refused("the contract sets no target (metric.target): the campaign cannot "
                      "complete by reaching it")
    if not target_reached(view):
        best = view["campaign"]["iterations"]["best"]
        raise Refused(f"the objective's target {target:g} is not reached (best "
                      f"{'none' if best is None else format(best, 'g')})")
    if best_awaits_owner(view):
        raise Refused("the promotion that reached the target awaits the owner's approval, "
                      "which completes the campaign", hint="`loopx approvals`")
    return True


def _check_proposal(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    contract = current_contract(view)
    if contract is None:
        raise Refused("there is no contract to judge a proposal under",
                      hint="the curator writes one with `loopx contract init`")
    if p["proposal_id"] in view["proposals"]:
        raise Refused(f"proposal {p['proposal_id']!r} already exists")
    _check_risk(contract, p)
    eligible, _ = tool_eligible(contract, p["tool"])
    needs = approval_required(contract, p["risk"])
    if (p["eligible"], p["requires_approval"], p["contract_version"]) != (
            eligible, needs, contract["version"]):
        raise Refused(f"under contract version {contract['version']} this proposal is "
                      f"eligible={eligible} and requires_approval={needs}")
    if who.is_owner and eligible and needs:
        raise Refused(f"{action_phrase(p['risk'], contract)} needs the owner's approval, "
                      "and no one approves their own proposal",
                      hint="have an agent propose it, or amend the contract's approval rules")


def _check_risk(contract: dict[str, Any], p: dict[str, Any]) -> None:
    """A proposal states the risk loopx reconstructs for its tool (``rules.tool_risk``): a
    loopx tool's registered one, the contract's declared one, or destructive for a tool of the
    campaign's that the contract does not declare; never a lower one of the proposer's."""
    tool, stated = p["tool"], p["risk"]
    try:
        rule = tool_risk(contract, tool)
    except KeyError:
        raise Refused(unknown_tool(tool)) from None
    if rule is None or stated == rule.risk:
        return
    if rule.source == "registered":
        raise Refused(f"{tool} is a {rule.risk} tool, not {stated}")
    if rule.source == "declared":
        raise Refused(f"risk: the contract declares {tool} {rule.risk} (tool_risks entry "
                      f"{rule.pattern!r}), not {stated}")
    raise Refused(f"risk: {tool} is not in the contract's tool_risks, so it is treated as "
                  f"destructive, not {stated}",
                  hint="propose it as destructive (the owner approves it), or have the curator "
                       "declare its risk: `loopx contract amend --set 'tool_risks={...}'`")


def _check_approval(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    kind, subject_id = p["subject"]["kind"], p["subject"]["id"]
    table = approval_subjects(view).get(kind)
    subject = None if table is None else table.get(subject_id)
    if subject is None:
        raise Refused(f"there is no {kind} {subject_id!r} to approve or reject")
    if subject["agent_id"] == record["agent_id"]:
        raise Refused(f"{kind} {subject_id!r} was written by {record['agent_id']}; no one "
                      "approves their own")
    if subject["approval"] is not None:
        raise Refused(f"{kind} {subject_id!r} was already {subject['approval']['verdict']} at "
                      f"seq {subject['approval']['seq']}")
    if kind == "proposal":
        if subject["result"] is not None:
            raise Refused(f"proposal {subject_id!r} already has a result")
        contract = current_contract(view)
        if p["verdict"] == "approved" and contract is not None:
            eligible, why = tool_eligible(contract, subject["tool"])
            if not eligible:
                raise Refused(f"proposal {subject_id!r}: tool {subject['tool']!r} is {why}; "
                              "approval cannot make a tool eligible",
                              hint="the curator amends the contract's tool lists")


def _check_result(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    proposal = view["proposals"].get(p["proposal_id"])
    if proposal is None:
        raise Refused(f"there is no proposal {p['proposal_id']!r}")
    if not who.is_owner and proposal["agent_id"] != who.agent_id:
        raise Refused(f"proposal {p['proposal_id']!r} is {proposal['agent_id']}'s; only its "
                      "proposer (or the owner) records its result")
    if proposal["result"] is not None:
        raise Refused(f"proposal {p['proposal_id']!r} already has a result (seq "
                      f"{proposal['result']['seq']})")
    why = _not_runnable(current_contract(view), proposal)
    if why:
        raise Refused(f"proposal {p['proposal_id']!r} {why}; it cannot have run",
                      hint="`loopx can-execute` before executing")


def _not_runnable(contract: dict[str, Any] | None, proposal: dict[str, Any]) -> str | None:
    """Why a proposal could not have been permitted to run, or None.

    ``can-execute`` judges under the contract in force when it is asked; the result arrives
    later, perhaps after an amendment. So a result is accepted when the proposal was runnable
    under the version it was proposed under or under the one in force now, and no result of a
    permitted run is ever refused.
    """
    approval = proposal["approval"]
    if approval is not None and approval["verdict"] == "rejected":
        return f"was rejected at seq {approval['seq']}"
    now_eligible = contract is not None and tool_eligible(contract, proposal["tool"])[0]
    if not (proposal["eligible"] or now_eligible):
        return "names a tool the contract does not admit"
    now_needs = contract is None or approval_required(contract, proposal["risk"])
    if approval is None and proposal["requires_approval"] and now_needs:
        return "is still awaiting approval"
    return None


def _check_usage(view: View, who: Identity, record: Record) -> None:
    proposal_id = record["payload"].get("proposal_id")
    if proposal_id is not None and proposal_id not in view["proposals"]:
        raise Refused(f"usage names proposal {proposal_id!r}, which does not exist")


def _check_finding(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    findings = view["findings"]
    if p["finding_id"] in findings:
        raise Refused(f"finding {p['finding_id']!r} already exists")
    old = p.get("supersedes")
    if old is not None and (old not in findings or findings[old]["superseded_by"] is not None):
        raise Refused(f"finding {p['finding_id']!r} supersedes {old!r}, which is not a "
                      "current finding")


GOVERNANCE_CHECKS: dict[str, Check] = {
    "research_contract_v0": _check_contract,
    "campaign_transition_v0": _check_transition,
    "action_proposal_v0": _check_proposal,
    "approval_v0": _check_approval,
    "action_result_v0": _check_result,
    "usage_v0": _check_usage,
    "finding_v0": _check_finding,
}


def check_claim(view: View, who: Identity, todo_id: str, todo: dict[str, Any]) -> None:
    """The campaign refuses a claim while it holds the agent back, or of a todo whose
    estimated cost exceeds what the budget has left."""
    block = campaign_block(view, who.agent_id)
    if block is None:
        over = todo_over_budget(view, todo)
        block = Block("budget_exhausted", {"over_budget": over}) if over else None
    if block is not None:
        raise Refused(f"the campaign refuses claims now ({block.reason}: "
                      f"{_detail(block.detail)})")


def _detail(detail: dict[str, Any]) -> str:
    return "; ".join(f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in detail.items())
