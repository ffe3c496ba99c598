"""The governance slices of folded state: contract versions, campaign status, proposals and
their approvals and results, usage and findings. (Decisions, the analysis plan and the
iteration counts the stop policy reads are folded by :mod:`loopx.research.state`.)

Like the lanes slices these are updated copy-on-write (an entry is replaced, never edited), so
the write checks can fold a batch into an overlay without touching the state underneath.
"""

from __future__ import annotations

from typing import Any

from loopx.governance.resources import RESOURCES, sum_usage
from loopx.governance.stopping import initial_iterations

SLICES = ("campaign", "proposals", "findings")
TERMINAL = ("completed", "stopped", "failed")


def initial_campaign() -> dict[str, Any]:
    """The ``campaign`` slice of a log with no governance records yet."""
    return {
        "versions": [],
        "status": {"state": "created", "since_seq": 0, "reason": None, "stop_reasons": [],
                   "by": None, "iteration": 0, "pause_reasons": [], "completion": None,
                   "since_iteration": 0},
        "usage": {"total": {r: 0 for r in RESOURCES}, "agents": {}},
        "iterations": initial_iterations(),
        # Per agent, its proposals with neither a verdict nor a result: whether one of them
        # waits for the owner depends on the contract in force, so readers judge that.
        "open_proposals": {},
        # Analysis plan versions, the size of the held-out test family and the iteration counts
        # are research's to fold (loopx.research.state) beside the contract they follow:
        # numbers every agent must agree on, so they are folded, not derived.
        "plans": [],
        "family_size": 0,
        # The packet that fixed the commit every experiment starts from (research's too).
        "base": None,
    }


def current_contract(view: dict[str, Any]) -> dict[str, Any] | None:
    """The contract version in force (payload plus ``record_id``, ``seq``, ``agent_id``)."""
    versions = view["campaign"]["versions"]
    return versions[-1] if versions else None


def approval_subjects(view: dict[str, Any]) -> dict[str, Any]:
    """The slices an ``approval_v0`` subject kind names its subject in."""
    return {"proposal": view["proposals"], "decision": view["decisions"],
            "preview": view["previews"]}


def meta(record: dict[str, Any]) -> dict[str, Any]:
    return {"record_id": record["record_id"], "seq": record["seq"], "ts": record["ts"],
            "agent_id": record["agent_id"], "visibility": record["visibility"]}


def _contract(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    campaign = view["campaign"]
    campaign["versions"] = [*campaign["versions"], {**p, **meta(record)}]


def _transition(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    # since_iteration: the decisions counted when the state began. A pause rule fires only on a
    # decision after it, so the owner's resume is not undone before anything new happened.
    view["campaign"]["status"] = {
        "state": p["to_state"], "since_seq": record["seq"], "reason": p["reason"],
        "stop_reasons": list(p["stop_reasons"]), "by": record["agent_id"],
        "iteration": p["iteration"], "pause_reasons": list(p.get("pause_reasons") or []),
        "completion": p.get("completion"),
        "since_iteration": view["campaign"]["iterations"]["count"]}


def _claim(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    # Ready -> running happens on the first claim after ready: the claim is the first action.
    status = view["campaign"]["status"]
    if status["state"] == "ready":
        view["campaign"]["status"] = {**status, "state": "running", "since_seq": record["seq"],
                                      "reason": "first claim after ready", "by": record["agent_id"],
                                      "since_iteration": view["campaign"]["iterations"]["count"]}


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
    view["proposals"][p["proposal_id"]] = {**p, **meta(record), "approval": None, "result": None}
    _set_open(view, record["agent_id"], p["proposal_id"], True)


def _approval(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    subject = p["subject"]
    verdict = {"verdict": p["verdict"], "note": p["note"], "approver": p.get("approver"),
               **meta(record)}
    if subject["kind"] == "proposal":
        proposal = view["proposals"][subject["id"]]
        view["proposals"][subject["id"]] = {**proposal, "approval": verdict}
        _set_open(view, proposal["agent_id"], subject["id"], False)


def _result(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    proposal = view["proposals"][p["proposal_id"]]
    view["proposals"][p["proposal_id"]] = {
        **proposal, "result": {"success": p["success"], "error": p.get("error"), **meta(record)}}
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
    findings[p["finding_id"]] = {**p, **meta(record), "superseded_by": None}
    old = p.get("supersedes")
    if old is not None and old in findings:
        findings[old] = {**findings[old], "superseded_by": p["finding_id"]}


FOLDS = {
    "research_contract_v0": _contract,
    "campaign_transition_v0": _transition,
    "auto_research_lane_claim_v1": _claim,
    "action_proposal_v0": _proposal,
    "approval_v0": _approval,
    "action_result_v0": _result,
    "usage_v0": _usage,
    "finding_v0": _finding,
}
