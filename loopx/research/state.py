"""The research slices of folded state: hypotheses, the evidence packets and judgements about
them, novelty audits, recorded gate results, held-out reads, each hypothesis' revision and each
idea's fingerprint, and the grounding refs ideation drew on (:mod:`loopx.research.grounding`; the
research plan's versions are folded by ``research_plan.py``).

Folded incrementally with the rest of the checked state (and checkpointed with it), so the
frontier and the candidates are computed from these compact entries, never by replaying the
log. Entries are replaced, never edited in place, like every other slice.
"""

from __future__ import annotations

import json
import math
from typing import Any

from loopx.governance.state import current_contract, meta
from loopx.governance.stopping import best_of, next_iteration
from loopx.kernel.canonical import sha256_hex
from loopx.kernel.rules import applies
from loopx.research.completeness import stated
from loopx.research.fingerprint import fingerprint
from loopx.research.grounding import compact, fold_grounding_ref, fold_hypothesis_refs
from loopx.research.plan import (
    current_plan,
    evidence_since,
    fold_contract,
    freeze,
    plan_version,
)

SLICES = ("hypotheses", "packets", "content_index", "hypothesis_todos", "decisions",
          "hypothesis_decisions", "grounding", "fingerprints")
HELDOUT_ACTION = "run_holdout_eval"
# The todo actions that evaluate a hypothesis, and the split each reads.
EVALUATION_SPLITS = {"run_dev_eval": "dev", "retry_attempt": "dev", HELDOUT_ACTION: "heldout"}
SPLITS = ("dev", "heldout")


def content_sha256(payload: dict[str, Any]) -> str:
    """The normalized content of a hypothesis: its mechanism family, its statement case-folded
    with whitespace collapsed, and its parameters as canonical JSON. Still folded
    (``content_index``); the duplicate rule uses the fingerprint, which leaves the statement
    out (:mod:`loopx.research.fingerprint`)."""
    text = " ".join(str(payload["statement"]).casefold().split())
    doc = {"mechanism_family": str(payload["mechanism_family"]).casefold(), "text": text,
           "parameters": _numbers(payload.get("parameters") or {})}
    line = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_hex(line.encode())


def _numbers(value: Any) -> Any:
    # 256 and 256.0 are one parameter value: JSON text must not make a new idea.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def scored_result(packet: dict[str, Any]) -> bool:
    """Whether a packet is a scored result a judgement may count (not of claimed provenance)."""
    return packet["status"] == "scored" and packet["provenance"] != "claimed"


def counts(view: dict[str, Any], judgement: dict[str, Any] | None) -> bool:
    """Whether a judgement counts: not of claimed provenance, and made under the plan version in
    force (an amendment of the plan never rescues, nor keeps, a judgement on the old terms)."""
    return (judgement is not None and judgement["provenance"] != "claimed"
            and (judgement["plan_version"] or 1) == plan_version(view))


def baseline_hypothesis(view: dict[str, Any]) -> str | None:
    """The hypothesis whose packets measure the baseline under the plan in force, if any."""
    plan = current_plan(view)
    return None if plan is None else plan["plan"]["metric.baseline_hypothesis"]


def campaign_base(view: dict[str, Any]) -> dict[str, Any] | None:
    """The commit every experiment starts from, and the record that fixed it: ``base_commit``,
    ``record_id``, ``seq``, and either ``contract_version`` (the contract pins it) or
    ``packet_id`` (the campaign's first scored result, not of claimed provenance, that cites
    one). Hypotheses and the measured baseline are then compared on the same code."""
    return view["campaign"].get("base")


def base_movable(view: dict[str, Any]) -> bool:
    """Whether a contract version may still set, move or drop the campaign's base: nothing
    fixed it yet, or only the contract's pin, with no evidence recorded (as the plan, it
    freezes at the first evidence packet). A base a packet fixed never moves."""
    base = view["campaign"].get("base")
    return base is None or (base["packet_id"] is None and evidence_since(view) is None)


def _fix_base(record: dict[str, Any], commit: str, *, packet: bool,
              contract_version: int | None = None) -> dict[str, Any]:
    return {"base_commit": commit, "record_id": record["record_id"], "seq": record["seq"],
            "packet_id": record["record_id"] if packet else None,
            "contract_version": contract_version}


def dev_attempts(view: dict[str, Any], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The hypothesis' attempts outside held-out todos under the plan in force, scored or not:
    each counts toward the plan's ``max_attempts``."""
    version = plan_version(view)
    packets = (view["packets"][p] for p in entry["packets"])
    return [p for p in packets if not p["heldout"] and p["plan_version"] == version]


def baseline_heldout_version(view: dict[str, Any]) -> int:
    """The plan version whose held-out packets of the measured baseline count now. From rules
    version 4: the first plan version with the seeds in force under which it was scored on
    held-out data, so the baseline is measured there once, however often the plan changes (a
    curator re-measuring it under new plan versions could otherwise keep a low draw); before,
    the plan in force."""
    version = plan_version(view)
    entry = view["hypotheses"].get(baseline_hypothesis(view) or "")
    if entry is None or not applies(view, 4):
        return version
    plans = view["campaign"]["plans"]
    seeds = plans[-1]["plan"]["metric.seeds"]
    same = {p["version"] for p in plans if p["plan"]["metric.seeds"] == seeds}
    scored = [packet["plan_version"] for packet in (view["packets"][p] for p in entry["packets"])
              if packet["heldout"] and scored_result(packet) and packet["plan_version"] in same]
    return min(scored, default=version)


def measured_baseline_mean(view: dict[str, Any]) -> float | None:
    """Before rules version 6: the measured baseline's held-out values under the plan version
    they count from, every value pooled (seeds outside the contract too), if it has any."""
    baseline = baseline_hypothesis(view)
    entry = view["hypotheses"].get(baseline or "")
    if entry is None:
        return None
    plan = current_plan(view)
    assert plan is not None  # a baseline hypothesis is named by a plan
    version = baseline_heldout_version(view)
    values = [r[3] for p in entry["packets"] for r in view["packets"][p]["results"]
              if view["packets"][p]["plan_version"] == version
              and view["packets"][p]["status"] == "scored" and r[0] == "heldout"
              and r[1] == plan["plan"]["metric.name"]]
    return sum(values) / len(values) if values else None


def _heldout_judgement(view: dict[str, Any], hypothesis_id: str) -> dict[str, Any] | None:
    """The hypothesis' latest held-out judgement if a promotion's improvement may be measured
    on it: it has values and is not of claimed provenance."""
    entry = view["hypotheses"].get(hypothesis_id)
    judgement = None if entry is None else entry["judgements"].get("heldout")
    if judgement is None or not judgement["values"] or judgement["provenance"] == "claimed":
        return None
    return judgement


def judged_baseline_mean(view: dict[str, Any], hypothesis_id: str) -> float | None:
    """The mean of the measured baseline's values that judgement compared with (None: it
    compared with the assumed baseline, or there is none)."""
    judgement = _heldout_judgement(view, hypothesis_id)
    values = [] if judgement is None else judgement["baseline_values"]
    return math.fsum(values) / len(values) if values else None


def promotion_baseline(view: dict[str, Any], hypothesis_id: str) -> float | None:
    """The measured baseline a promotion of the hypothesis improves on (None: the contract's
    assumed one). From rules version 6 the values its held-out judgement compared with: a
    number no judgement read (a baseline packet's seeds outside the contract, say) could
    otherwise move the campaign's improvement and its stop policy; before, the pooled mean."""
    if applies(view, 6):
        return judged_baseline_mean(view, hypothesis_id)
    return measured_baseline_mean(view)


def heldout_mean(view: dict[str, Any], hypothesis_id: str) -> float | None:
    """The mean of the hypothesis' latest held-out judgement, if it counts (it has values and
    is not of claimed provenance): what a promotion's improvement is measured on."""
    judgement = _heldout_judgement(view, hypothesis_id)
    return None if judgement is None else sum(judgement["values"]) / len(judgement["values"])


def _touch(view: dict[str, Any], hypothesis_id: str, record: dict[str, Any],
           **changes: Any) -> None:
    # Every research record about a hypothesis moves its revision (heartbeats do not).
    entry = view["hypotheses"].get(hypothesis_id)
    if entry is not None:
        view["hypotheses"][hypothesis_id] = {**entry, **changes, "revision": record["seq"]}


def _hypothesis(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    hid = p["hypothesis_id"]
    digest = content_sha256(p)
    view["hypotheses"][hid] = {
        "hypothesis_id": hid, "title": p["title"], "mechanism_family": p["mechanism_family"],
        "parent_id": p.get("parent_id"), "claims_novelty": p.get("claims_novelty", False),
        "proposer": record["agent_id"], "todo_id": record["todo_id"],
        "record_id": record["record_id"], "seq": record["seq"], "revision": record["seq"],
        "content_sha256": digest, "supersedes": p.get("supersedes"), "superseded_by": None,
        "packets": [], "events": [], "judgements": {}, "audits": [], "boundary": None,
        "reproduction": None, "gates": [], "heldout_reads": 0, "heldout_plan": None, "refusals": 0,
        "visibility": record["visibility"], "family_index": None, "heldout_judgements": [],
        "stated": stated(p),
    }
    view["content_index"][digest] = [*view["content_index"].get(digest, ()), hid]
    fold_hypothesis_refs(view, record, p)
    _fingerprinted(view, hid, p)
    old = p.get("supersedes")
    if old is not None:
        _touch(view, old, record, superseded_by=hid)


def _fingerprinted(view: dict[str, Any], hypothesis_id: str, p: dict[str, Any]) -> None:
    # The idea's fingerprint (family and parameters), indexed: the duplicate rule reads it.
    fp = fingerprint(p)
    view["hypotheses"][hypothesis_id] = {**view["hypotheses"][hypothesis_id], "fingerprint": fp}
    view["fingerprints"][fp] = [*view["fingerprints"].get(fp, ()), hypothesis_id]


def _packet(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    hid = p["hypothesis_id"]
    todo = view["todos"].get(record["todo_id"] or "")
    heldout = (any(r["split"] == "heldout" for r in p["results"])
               or (todo is not None and todo["action_kind"] == HELDOUT_ACTION))
    campaign = view["campaign"]
    campaign["plans"] = freeze(campaign["plans"], record["seq"])
    view["packets"][record["record_id"]] = packet = {
        "plan_version": plan_version(view), "heldout": heldout,
        "packet_id": record["record_id"], "hypothesis_id": hid, "status": p["status"],
        "attempt": p["attempt"], "branch": p.get("branch"),
        "base_commit": p.get("base_commit"), "evaluated_commit": p.get("evaluated_commit"),
        "provenance": record["provenance"], "agent_id": record["agent_id"],
        "todo_id": record["todo_id"], "seq": record["seq"], "visibility": record["visibility"],
        "results": [[r["split"], r["metric"], r["seed"], r["value"]] for r in p["results"]],
        # Packets written before the flag existed carry none: they were valid.
        "valid": p.get("valid", True), "violations": list(p.get("violations") or []),
    }
    if campaign.get("base") is None and packet["base_commit"] and scored_result(packet):
        campaign["base"] = _fix_base(record, packet["base_commit"], packet=True)
    entry = view["hypotheses"].get(hid)
    if entry is not None:
        _touch(view, hid, record, packets=[*entry["packets"], record["record_id"]])


def _event(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    hid = p["hypothesis_id"]
    entry = view["hypotheses"].get(hid)
    if entry is None:
        return
    summary = {"event_id": record["record_id"], "seq": record["seq"], "split": p["split"],
               "verdict": p["verdict"], "packet_ids": list(p["packet_ids"]),
               "values": list(p["values"]), "mean_delta": p.get("mean_delta"),
               "p_value": p.get("p_value"), "provenance": record["provenance"],
               "agent_id": record["agent_id"], "metric": p["metric"],
               "baseline": p.get("baseline"), "baseline_values": list(p["baseline_values"]),
               "seeds": list(p["seeds"]), "rule": p["rule"], "visibility": record["visibility"],
               "plan_version": p.get("plan_version"), "control": p.get("control"),
               "baseline_packet_ids": list(p.get("baseline_packet_ids") or [])}
    brief = {k: summary[k] for k in ("event_id", "seq", "split", "verdict", "packet_ids")}
    heldout = entry["heldout_judgements"]
    if p["split"] == "heldout":
        heldout = [*heldout, summary]
    _touch(view, hid, record, events=[*entry["events"], brief],
           judgements={**entry["judgements"], p["split"]: summary}, heldout_judgements=heldout)


def _audit(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    entry = view["hypotheses"].get(p["hypothesis_id"])
    if entry is not None:
        # The refs are the material it checked: the gate re-applies the novelty rules to them.
        audit = {"record_id": record["record_id"], "seq": record["seq"],
                 "agent_id": record["agent_id"], "verdict": p["verdict"],
                 "refs": [compact(r) for r in p.get("refs") or ()]}
        _touch(view, p["hypothesis_id"], record, audits=[*entry["audits"], audit])


def _violation_words(v: dict[str, Any]) -> str:
    """A gate violation in a few words, naming the rule unless it is the protected scope's."""
    if v.get("rule", "protected") == "outside_editable":
        return f"{v['path']} ({v['change']}; outside the editable scope)"
    if v.get("rule") == "unscreened":
        return f"{v['path']} ({v['change']} after the dev runs; held-out ran unscreened code)"
    if v.get("rule") == "borrowed":
        return f"{v['path']} ({v['change']}; another hypothesis' change: {v['detail']})"
    return f"{v['path']} ({v['change']})"


def _gate(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    result = {"record_id": record["record_id"], "seq": record["seq"], "passed": p["passed"],
              "revision": p["revision"], "packets": [c["packet_id"] for c in p["packets"]],
              "reasons": list(p["reasons"])}
    entry = view["hypotheses"].get(p["hypothesis_id"])
    if entry is None:
        return
    brief = {"record_id": record["record_id"], "seq": record["seq"], "gate": p["gate"],
             "passed": p["passed"]}
    if p["gate"] == "reproduced":
        # Each packet whose re-run gave other values, in words: what fails the gate. Kept from
        # every earlier re-run: one that matches later does not undo it (re-running until the
        # values match would be optional stopping).
        earlier = entry["reproduction"] or {"differs": [], "failed_by": None}
        differs = [f"packet {r['packet_id']}: {r['detail']}" for r in p.get("reproductions") or ()
                   if r["outcome"] == "differs"]
        failed_by = earlier["failed_by"] or (record["record_id"] if differs else None)
        _touch(view, p["hypothesis_id"], record, reproduction={
            **result, "differs": [*earlier["differs"], *differs], "failed_by": failed_by},
            gates=[*entry["gates"], brief])
    else:
        result["violations"] = [_violation_words(v) for v in p["violations"]]
        _touch(view, p["hypothesis_id"], record, boundary=result, gates=[*entry["gates"], brief])


def _decided(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    decisions = view["decisions"]
    decisions[p["decision_id"]] = {**p, **meta(record), "superseded_by": None, "approval": None}
    old = p.get("supersedes")
    withdrawn = False
    if old is not None and old in decisions:
        withdrawn = decisions[old]["outcome"] == "promoted"
        decisions[old] = {**decisions[old], "superseded_by": p["decision_id"]}
    view["hypothesis_decisions"][p["hypothesis_id"]] = p["decision_id"]
    campaign = view["campaign"]
    campaign["iterations"] = next_iteration(
        campaign["iterations"], current_contract(view), p,
        heldout_mean(view, p["hypothesis_id"]), record["seq"],
        promotion_baseline(view, p["hypothesis_id"]))
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


def _decision(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    _decided(view, record, p)
    _touch(view, p["hypothesis_id"], record)


def _approval(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    if p["subject"]["kind"] != "decision":
        return
    decision = view["decisions"].get(p["subject"]["id"])
    if decision is None:
        return
    view["decisions"][p["subject"]["id"]] = {**decision, "approval": {
        "verdict": p["verdict"], "note": p["note"], "approver": p.get("approver"),
        **meta(record)}}
    if decision["outcome"] == "promoted" and p["verdict"] == "rejected":
        _standing_best(view)
    _touch(view, decision["hypothesis_id"], record)


def _contract(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    # After governance appended the version: the plan versions follow the contract's.
    campaign = view["campaign"]
    # The write checks refuse a version that would move a base no longer movable.
    if base_movable(view):
        pin = p.get("base_commit")
        campaign["base"] = None if pin is None else _fix_base(
            record, pin, packet=False, contract_version=p.get("version", 1))
    campaign["plans"] = fold_contract(campaign["plans"], p, record["seq"], len(view["packets"]))


def _claim(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    # A held-out todo's claim packet carries the held-out data's location: each claim is a read.
    todo = view["todos"].get(record["todo_id"])
    if todo is None or todo["action_kind"] != HELDOUT_ACTION:
        return
    entry = view["hypotheses"].get(todo["hypothesis_id"] or "")
    if entry is None:
        return
    changes = {"heldout_reads": entry["heldout_reads"] + 1}
    if entry["heldout_plan"] is None:  # the plan version its held-out reads all belong to
        changes["heldout_plan"] = plan_version(view)
    # The first held-out claim numbers the hypothesis in the campaign's test family, before any
    # of its held-out values exist (loopx.research.control); the measured baseline is not tested.
    if entry["family_index"] is None and entry["hypothesis_id"] != baseline_hypothesis(view):
        campaign = view["campaign"]
        campaign["family_size"] = changes["family_index"] = campaign["family_size"] + 1
    view["hypotheses"][entry["hypothesis_id"]] = {**entry, **changes}


def _todo(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    # Kept apart from the hypothesis entry: a todo may come before its hypothesis in a batch.
    hid = p.get("hypothesis_id")
    if hid is not None:
        todos = view["hypothesis_todos"]
        todos[hid] = [*todos.get(hid, ()), p["todo_id"]]


def _refusal(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    entry = view["hypotheses"].get(p.get("hypothesis_id") or "")
    if entry is not None:
        view["hypotheses"][entry["hypothesis_id"]] = {**entry, "refusals": entry["refusals"] + 1}


FOLDS = {
    "research_contract_v0": _contract,
    "todo_item_v0": _todo,
    "research_hypothesis_v0": _hypothesis,
    "auto_research_evidence_packet_v0": _packet,
    "research_evidence_event_v0": _event,
    "novelty_audit_v0": _audit,
    "grounding_ref_v0": fold_grounding_ref,
    "gate_result_v0": _gate,
    "research_decision_v0": _decision,
    "approval_v0": _approval,
    "auto_research_lane_claim_v1": _claim,
    "research_refusal_v0": _refusal,
}
