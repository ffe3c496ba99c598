"""The governance slices of folded state: contract versions, campaign status, proposals and
approvals, usage, findings, decisions and iteration counters.

Like the lanes slices these are updated copy-on-write (an entry is replaced, never edited), so
the write checks can fold a batch into an overlay without touching the state underneath.
"""

from __future__ import annotations

from typing import Any

from loopx.research.plan import fold_contract
from loopx.research.state import heldout_mean, measured_baseline_mean
from loopx.governance.resources import RESOURCES, sum_usage
from loopx.governance.stopping import best_of, initial_iterations, next_iteration

SLICES = ("campaign", "proposals", "decisions", "hypothesis_decisions", "findings")
TERMINAL = ("completed", "stopped", "failed")


def initial_campaign() -> dict[str, Any]:
    """The ``campaign`` slice of a log with no governance records yet."""
    return {
        "versions": [],
        "status": {"state": "created", "since_seq": 0, "reason": None, "stop_reasons": [],
                   "by": None, "iteration": 0},
        "usage": {"total": {r: 0 for r in RESOURCES}, "agents": {}},
        "iterations": initial_iterations(),
        # Per agent, its proposals with neither a verdict nor a result: whether one of them
        # waits for the owner depends on the contract in force, so readers judge that.
        "open_proposals": {},
        # Analysis plan versions (loopx.research.plan) and the size of the held-out test family
        # (loopx.research.control): numbers every agent must agree on, so they are folded, not derived.
        "plans": [],
        "family_size": 0,
    }


def current_contract(view: dict[str, Any]) -> dict[str, Any] | None:
    """The contract version in force (payload plus ``record_id``, ``seq``, ``agent_id``)."""
    versions = view["campaign"]["versions"]
    return versions[-1] if versions else None


def approval_subjects(view: dict[str, Any]) -> dict[str, Any]:
    """The slices an ``approval_v0`` subject kind names its subject in."""
    return {"proposal": view["proposals"], "decision": view["decisions"],
            "preview": view["previews"]}


def apply_campaign(view: dict[str, Any], record: dict[str, Any]) -> None:
    """Fold one record into the governance slices of ``view`` (state or overlay)."""
    handler = _HANDLERS.get(record["schema_version"])
    if handler is not None:
        handler(view, record, record["payload"])


def _meta(record: dict[str, Any]) -> dict[str, Any]:
    return {"record_id": record["record_id"], "seq": record["seq"], "ts": record["ts"],
            "agent_id": record["agent_id"], "visibility": record["visibility"]}


def _contract(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    campaign = view["campaign"]
    campaign["versions"] = [*campaign["versions"], {**p, **_meta(record)}]
    campaign["plans"] = fold_contract(campaign["plans"], p, record["seq"], len(view["packets"]))


def _transition(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    view["campaign"]["status"] = {
        "state": p["to_state"], "since_seq": record["seq"], "reason": p["reason"],
        "stop_reasons": list(p["stop_reasons"]), "by": record["agent_id"],
        "iteration": p["iteration"]}


def _claim(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    # Ready -> running happens on the first claim after ready: the claim is the first action.
    status = view["campaign"]["status"]
    if status["state"] == "ready":
        view["campaign"]["status"] = {**status, "state": "running", "since_seq": record["seq"],
                                      "reason": "first claim after ready", "by": record["agent_id"]}


def _set_open(view: dict[str, Any], agent_id: str, proposal_id: str, is_open: bool) -> None:
    table = dict(view["campaign"]["open_proposals"])
    ids = [i for i in table.get(agent_id, []) if i != proposal_id]
    if is_open:
        ids.append(proposal_id)
    if ids:
        table[agent_id] = ids
    else:
        table.pop(agent_id, None)
    view["campaign"]["open_proposals"] = table


def _proposal(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    view["proposals"][p["proposal_id"]] = {**p, **_meta(record), "approval": None, "result": None}
    _set_open(view, record["agent_id"], p["proposal_id"], True)


def _approval(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    subject = p["subject"]
    verdict = {"verdict": p["verdict"], "note": p["note"], "approver": p.get("approver"),
               **_meta(record)}
    if subject["kind"] == "proposal":
        proposal = view["proposals"][subject["id"]]
        view["proposals"][subject["id"]] = {**proposal, "approval": verdict}
        _set_open(view, proposal["agent_id"], subject["id"], False)
    elif subject["kind"] == "decision":
        decision = view["decisions"][subject["id"]]
        view["decisions"][subject["id"]] = {**decision, "approval": verdict}
        if decision["outcome"] == "promoted" and p["verdict"] == "rejected":
            _standing_best(view)


def _result(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    proposal = view["proposals"][p["proposal_id"]]
    view["proposals"][p["proposal_id"]] = {
        **proposal, "result": {"success": p["success"], "error": p.get("error"), **_meta(record)}}
    _set_open(view, proposal["agent_id"], p["proposal_id"], False)


def _usage(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    usage = view["campaign"]["usage"]
    mine = usage["agents"].get(record["agent_id"], {r: 0 for r in RESOURCES})
    view["campaign"]["usage"] = {
        "total": {r: sum_usage(usage["total"][r], p[r]) for r in RESOURCES},
        "agents": {**usage["agents"],
                   record["agent_id"]: {r: sum_usage(mine[r], p[r]) for r in RESOURCES}},
    }



def _finding(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    findings = view["findings"]
    findings[p["finding_id"]] = {**p, **_meta(record), "superseded_by": None}
    old = p.get("supersedes")
    if old is not None and old in findings:
        findings[old] = {**findings[old], "superseded_by": p["finding_id"]}


def _decision(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    decisions = view["decisions"]
    decisions[p["decision_id"]] = {**p, **_meta(record), "superseded_by": None, "approval": None}
    old = p.get("supersedes")
    withdrawn = False
    if old is not None and old in decisions:
        withdrawn = decisions[old]["outcome"] == "promoted"
        decisions[old] = {**decisions[old], "superseded_by": p["decision_id"]}
    view["hypothesis_decisions"][p["hypothesis_id"]] = p["decision_id"]
    campaign = view["campaign"]
    campaign["iterations"] = next_iteration(
        campaign["iterations"], current_contract(view), p,
        heldout_mean(view, p["hypothesis_id"]), record["seq"], measured_baseline_mean(view))
    if withdrawn:
        _standing_best(view)


def _standing_best(view: dict[str, Any]) -> None:
    # A promotion the owner rejected, or a later decision withdrew, no longer counts: the best is
    # that of the promotions still standing (the iteration counts already made stay as they are).
    contract = current_contract(view)
    standing = [(mean, d["hypothesis_id"]) for d in view["decisions"].values()
                if d["outcome"] == "promoted" and d["superseded_by"] is None
                and (d["approval"] is None or d["approval"]["verdict"] == "approved")
                and (mean := heldout_mean(view, d["hypothesis_id"])) is not None]
    best = best_of(standing, contract["metric"]["direction"] if contract else "maximize")
    campaign = view["campaign"]
    campaign["iterations"] = {**campaign["iterations"], "best": best[0],
                              "best_hypothesis": best[1]}


_HANDLERS = {
    "research_contract_v0": _contract,
    "campaign_transition_v0": _transition,
    "auto_research_lane_claim_v1": _claim,
    "action_proposal_v0": _proposal,
    "approval_v0": _approval,
    "action_result_v0": _result,
    "usage_v0": _usage,
    "finding_v0": _finding,
    "research_decision_v0": _decision,
}
