"""Projections: each hypothesis' frontier row, its gates, and the promotion, retirement and retry
candidates, as pure functions of the checked state (never of the clock or the disk).

The state is folded incrementally (see :mod:`loopx.research_state`), so a projection reads
compact per-hypothesis entries: the frontier after one new record costs one catch-up step
plus one pass over the hypotheses, never a replay of the log.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from loopx.campaign_state import current_contract

View = dict[str, Any]

STATES = ("proposed", "selected", "running", "evidence_recorded", "supported", "needs_retry",
          "contradicted", "at_promotion_gate", "promoted", "retired")
GATES = ("protected_boundary", "heldout", "novelty", "owner", "first_screen")
RETIRE_REASONS = ("contradicted", "duplicate", "operator_rejected", "retry_exhausted",
                  "superseded", "guardrail_failed")
UNSCORED = ("failed", "timeout", "invalid_output", "cancelled")


@dataclass
class Gate:
    """One gate for one hypothesis: whether it applies, its status and why."""

    name: str
    required: bool
    status: str  # passed, failed, pending or not_required
    reasons: list[str] = field(default_factory=list)
    rests_on: list[str] = field(default_factory=list)


@dataclass
class Row:
    """A hypothesis as the frontier and the candidate lists see it."""

    hypothesis_id: str
    title: str
    state: str
    revision: int
    next_action: str | None
    next_role: str | None
    detail: str
    gates: dict[str, Gate]
    promotion: dict[str, Any] | None
    retirement: dict[str, Any] | None
    retry: dict[str, Any] | None
    decision: str | None

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON data."""
        return asdict(self)


def relied_packets(entry: dict[str, Any]) -> list[str]:
    """The packets the hypothesis' latest dev and held-out judgements rest on."""
    out: list[str] = []
    for split in ("dev", "heldout"):
        judgement = entry["judgements"].get(split)
        if judgement is not None:
            out += [p for p in judgement["packet_ids"] if p not in out]
    return out


def _counts(judgement: dict[str, Any] | None) -> bool:
    return judgement is not None and judgement["provenance"] != "claimed"


def gates(view: View, entry: dict[str, Any]) -> dict[str, Gate]:
    """Every gate for one hypothesis under the contract in force."""
    contract = current_contract(view)
    policy = contract["promotion_policy"] if contract else {}
    required = set(policy.get("required_gates", ()))
    out: dict[str, Gate] = {}

    # Always required, whatever the contract lists: dev-only lift is never a promotion.
    heldout = entry["judgements"].get("heldout")
    if heldout is None:
        out["heldout"] = Gate("heldout", True, "pending", ["no held-out judgement yet"])
    elif not _counts(heldout):
        out["heldout"] = Gate("heldout", True, "failed",
                              ["the held-out judgement has claimed provenance"])
    elif heldout["verdict"] == "supports":
        out["heldout"] = Gate("heldout", True, "passed", rests_on=[heldout["event_id"]])
    else:
        out["heldout"] = Gate("heldout", True, "failed",
                              [f"held-out verdict {heldout['verdict']}"], [heldout["event_id"]])

    boundary = entry["boundary"]
    relied = relied_packets(entry)
    if "protected_boundary" not in required:
        out["protected_boundary"] = Gate("protected_boundary", False, "not_required")
    elif boundary is None:
        out["protected_boundary"] = Gate("protected_boundary", True, "pending",
                                         ["not checked from git yet (`loopx gate check`)"])
    elif boundary["violations"]:
        out["protected_boundary"] = Gate("protected_boundary", True, "failed",
                                         boundary["violations"], [boundary["record_id"]])
    elif not boundary["passed"]:
        # Nothing could be verified (no git, unknown commits): promotion stays blocked, but
        # that is no evidence of tampering, so it is no guardrail failure either.
        out["protected_boundary"] = Gate("protected_boundary", True, "pending",
                                         ["could not be verified: "
                                          + "; ".join(boundary["reasons"])],
                                         [boundary["record_id"]])
    else:
        missing = [p for p in relied if p not in boundary["packets"]]
        if missing:
            out["protected_boundary"] = Gate(
                "protected_boundary", True, "pending",
                [f"packets not covered by the last check: {', '.join(missing)}"],
                [boundary["record_id"]])
        else:
            out["protected_boundary"] = Gate("protected_boundary", True, "passed",
                                             rests_on=[boundary["record_id"]])

    independent = [a for a in entry["audits"] if a["agent_id"] != entry["proposer"]]
    if not (entry["claims_novelty"] or "novelty" in required):
        out["novelty"] = Gate("novelty", False, "not_required")
    elif not independent:
        out["novelty"] = Gate("novelty", True, "pending",
                              ["no novelty audit by an agent other than the proposer"])
    else:
        last = independent[-1]
        status = {"novel": "passed", "not_novel": "failed"}.get(last["verdict"], "pending")
        out["novelty"] = Gate("novelty", True, status,
                              [] if status == "passed" else [f"audit verdict {last['verdict']}"],
                              [last["record_id"]])

    decision = _live_decision(view, entry)
    if not (policy.get("require_owner_approval") or "owner" in required):
        out["owner"] = Gate("owner", False, "not_required")
    elif decision is None or decision["outcome"] != "promoted" or decision["approval"] is None:
        out["owner"] = Gate("owner", True, "pending",
                            ["the owner approves the promotion decision once it is written"])
    else:
        approval = decision["approval"]
        out["owner"] = Gate("owner", True,
                            "passed" if approval["verdict"] == "approved" else "failed",
                            [] if approval["verdict"] == "approved" else ["rejected by the owner"],
                            [approval["record_id"]])

    if "first_screen" not in required:
        out["first_screen"] = Gate("first_screen", False, "not_required")
    else:
        # The narrator's gate: passed once the owner approved a first-screen preview rendered
        # from a log that already held this hypothesis as it stands (its revision).
        reviewed = [p for p in view["previews"].values()
                    if p["head_seq"] >= entry["revision"] and p["approval"] is not None
                    and p["approval"]["verdict"] == "approved"]
        if reviewed:
            last = max(reviewed, key=lambda p: p["seq"])
            out["first_screen"] = Gate("first_screen", True, "passed",
                                       rests_on=[last["approval"]["record_id"]])
        else:
            out["first_screen"] = Gate("first_screen", True, "pending", [
                f"no approved first-screen preview since revision {entry['revision']}"])
    return {name: out[name] for name in GATES}


def _live_decision(view: View, entry: dict[str, Any]) -> dict[str, Any] | None:
    decision_id = view["hypothesis_decisions"].get(entry["hypothesis_id"])
    return None if decision_id is None else view["decisions"][decision_id]


def _todos(view: View, hypothesis_id: str) -> list[dict[str, Any]]:
    todos = view["todos"]
    return [{**todos[t], "todo_id": t}
            for t in view["hypothesis_todos"].get(hypothesis_id, ()) if t in todos]


def _max_attempts(view: View) -> int:
    contract = current_contract(view)
    return contract["promotion_policy"]["max_attempts"] if contract else 3


def promotion_blockers(view: View, entry: dict[str, Any],
                       gate_rows: dict[str, Gate]) -> list[str]:
    """Why the hypothesis is not a promotion candidate (empty: it is one)."""
    out = []
    dev = entry["judgements"].get("dev")
    if dev is None:
        out.append("no dev judgement")
    elif not _counts(dev):
        out.append("the dev judgement has claimed provenance")
    elif dev["verdict"] != "supports":
        out.append(f"dev verdict {dev['verdict']}")
    for name, gate in gate_rows.items():
        # The owner gate comes after the decision; the first-screen gate governs publication.
        if gate.required and name not in ("owner", "first_screen") and gate.status != "passed":
            out.append(f"gate {name} {gate.status}"
                       + (f": {'; '.join(gate.reasons)}" if gate.reasons else ""))
    claimed = [p for p in relied_packets(entry)
               if view["packets"].get(p, {}).get("provenance") == "claimed"]
    if claimed:
        out.append(f"claimed evidence never counts: {', '.join(claimed)}")
    return out


def retirement_reasons(view: View, entry: dict[str, Any],
                       gate_rows: dict[str, Gate]) -> dict[str, list[str]]:
    """Each retirement reason that applies, with the records it rests on."""
    out: dict[str, list[str]] = {}
    for split in ("dev", "heldout"):
        judgement = entry["judgements"].get(split)
        if _counts(judgement) and judgement["verdict"] == "contradicts":
            out.setdefault("contradicted", []).append(judgement["event_id"])
    boundary = gate_rows["protected_boundary"]
    if boundary.status == "failed":
        out["guardrail_failed"] = list(boundary.rests_on)
    packets = [view["packets"][p] for p in entry["packets"] if p in view["packets"]]
    failed = [p["packet_id"] for p in packets if p["status"] in UNSCORED]
    if len(failed) >= _max_attempts(view) and gate_rows["heldout"].status != "passed":
        out["retry_exhausted"] = failed
    earlier = [h for h in view["content_index"].get(entry["content_sha256"], ())
               if h != entry["hypothesis_id"]
               and view["hypotheses"][h]["seq"] < entry["seq"]]
    if earlier:
        out["duplicate"] = [view["hypotheses"][h]["record_id"] for h in earlier]
    if entry["superseded_by"] is not None:
        out["superseded"] = [view["hypotheses"][entry["superseded_by"]]["record_id"]]
    decision = _live_decision(view, entry)
    if (decision is not None and decision["outcome"] == "promoted"
            and decision["approval"] is not None
            and decision["approval"]["verdict"] == "rejected"):
        out["operator_rejected"] = [decision["approval"]["record_id"]]
    return {reason: out[reason] for reason in RETIRE_REASONS if reason in out}


def _retry(view: View, entry: dict[str, Any]) -> dict[str, Any] | None:
    if not entry["packets"]:
        return None
    last = view["packets"][entry["packets"][-1]]
    failed = sum(1 for p in entry["packets"] if view["packets"][p]["status"] in UNSCORED)
    left = _max_attempts(view) - failed
    needs = any(j["verdict"] == "needs_retry" and j["packet_ids"][-1:] == [last["packet_id"]]
                for j in entry["judgements"].values())
    if left <= 0 or not (last["status"] in UNSCORED or needs):
        return None
    return {"packet_id": last["packet_id"], "branch": last["branch"],
            "evaluated_commit": last["evaluated_commit"], "attempts_left": left,
            "rests_on": [last["packet_id"]]}


def row(view: View, hypothesis_id: str) -> Row:
    """The frontier row of one hypothesis: state, next action and role, gates, candidacy."""
    entry = view["hypotheses"][hypothesis_id]
    gate_rows = gates(view, entry)
    decision = _live_decision(view, entry)
    blockers = promotion_blockers(view, entry, gate_rows)
    retire = retirement_reasons(view, entry, gate_rows)
    retry = _retry(view, entry)
    promotion = None
    if decision is None and not blockers:
        rests = [entry["record_id"], *relied_packets(entry),
                 entry["judgements"]["dev"]["event_id"]]
        for gate in gate_rows.values():
            rests += [r for r in gate.rests_on if r not in rests]
        promotion = {"rests_on": rests}
    retirement = None
    undecided = decision is None or decision["outcome"] == "promoted"
    if retire and undecided:
        retirement = {"reasons": list(retire),
                      "rests_on": sorted({r for refs in retire.values() for r in refs})}
    state, action, role, detail = _state(view, entry, gate_rows, decision, blockers, retry)
    return Row(hypothesis_id, entry["title"], state, entry["revision"], action, role, detail,
               gate_rows, promotion, retirement, retry if decision is None else None,
               None if decision is None else decision["decision_id"])


def _state(view: View, entry: dict[str, Any], gate_rows: dict[str, Gate],
           decision: dict[str, Any] | None, blockers: list[str],
           retry: dict[str, Any] | None) -> tuple[str, str | None, str | None, str]:
    judgements = entry["judgements"]
    if decision is not None:
        if decision["outcome"] == "retired":
            return "retired", None, None, f"retired ({decision['reason']})"
        owner = gate_rows["owner"]
        if owner.status == "pending" and owner.required:
            return ("at_promotion_gate", "approve", "owner",
                    f"promotion decision {decision['decision_id']} awaits the owner")
        if owner.status == "failed":
            return ("at_promotion_gate", "decide", "evaluator_promoter",
                    "the owner rejected the promotion: retire it (operator_rejected)")
        return "promoted", None, None, f"promoted by {decision['decision_id']}"
    if any(_counts(j) and j["verdict"] == "contradicts" for j in judgements.values()):
        return "contradicted", "decide", "evaluator_promoter", "retire it (contradicted)"
    if gate_rows["protected_boundary"].status == "failed":
        return "contradicted", "decide", "evaluator_promoter", "retire it (guardrail_failed)"
    dev_ok = _counts(judgements.get("dev")) and judgements["dev"]["verdict"] == "supports"
    heldout_ok = gate_rows["heldout"].status == "passed"
    if dev_ok and heldout_ok:
        if not blockers:
            return "at_promotion_gate", "decide", "evaluator_promoter", "every gate passed"
        if gate_rows["novelty"].status == "pending" and gate_rows["novelty"].required:
            return ("at_promotion_gate", "audit_novelty", "evaluator_promoter",
                    "needs an independent novelty audit")
        if gate_rows["protected_boundary"].status == "pending":
            return ("at_promotion_gate", "review_gate", "evaluator_promoter",
                    "check the protected boundary from git (`loopx gate check`)")
        return "at_promotion_gate", None, None, "; ".join(blockers)
    todos = _todos(view, entry["hypothesis_id"])
    running = [t for t in todos if t["status"] == "claimed"]
    if running:
        return ("running", None, running[0]["role"],
                f"{running[0]['todo_id']} held by {running[0]['holder']}")
    judged = {p for j in judgements.values() for p in j["packet_ids"]}
    unjudged = [p for p in entry["packets"] if p not in judged
                and view["packets"][p]["status"] == "scored"]
    if unjudged:
        return ("evidence_recorded", "judge_evidence", "evaluator_promoter",
                f"judge packets {', '.join(unjudged)}")
    if retry is not None:
        return ("needs_retry", "retry_attempt", "research_executor",
                f"{retry['attempts_left']} attempt(s) left")
    open_todos = [t for t in todos if t["status"] == "open" and t["role"] == "research_executor"]
    if dev_ok:
        if open_todos:
            return ("supported", open_todos[0]["action_kind"], open_todos[0]["role"],
                    f"todo {open_todos[0]['todo_id']} is open")
        return ("supported", "run_holdout_eval", "research_executor",
                "dev evidence supports it; evaluate it on held-out data")
    if open_todos:
        return ("selected", open_todos[0]["action_kind"], open_todos[0]["role"],
                f"todo {open_todos[0]['todo_id']} is open")
    if judgements:
        verdicts = ", ".join(f"{s} {j['verdict']}" for s, j in sorted(judgements.items()))
        return "needs_retry", "retry_attempt", "research_executor", verdicts
    return "proposed", "add_todo", "hypothesis_proposer", "no todo works on it yet"


def frontier(view: View, role: str | None = None, agent_id: str | None = None) -> list[Row]:
    """Every hypothesis' row in the order proposed; with ``role``, only those whose next action
    that role takes (and never a novelty audit of the agent's own hypothesis)."""
    rows = [row(view, h) for h in sorted(view["hypotheses"],
                                         key=lambda h: view["hypotheses"][h]["seq"])]
    if role is None:
        return rows
    return [r for r in rows if r.next_role == role and not (
        r.next_action == "audit_novelty"
        and view["hypotheses"][r.hypothesis_id]["proposer"] == agent_id)]


def candidates(view: View, rows: list[Row] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Promotion, retirement and retry candidates, each with the records it rests on.

    ``rows`` is the unfiltered :func:`frontier` of the same view, if the caller has it already
    (the candidates are read off its rows, so both cost one pass).
    """
    out: dict[str, list[dict[str, Any]]] = {"promotion": [], "retirement": [], "retry": []}
    for r in frontier(view) if rows is None else rows:
        base = {"hypothesis_id": r.hypothesis_id, "title": r.title, "revision": r.revision}
        if r.promotion is not None:
            out["promotion"].append({**base, **r.promotion})
        if r.retirement is not None:
            out["retirement"].append({**base, **r.retirement})
        if r.retry is not None:
            out["retry"].append({**base, **r.retry})
    return out
