"""The case story as data, built from projections only: the contract in force (public fields),
the disclosure and the analysis plan (``disclosure.py``), the research plan with each step's
status (``research_plan.py``), the hypothesis tree, each hypothesis'
judgements (every held-out one) and attempts, decisions and what they rest on, the frontier's
states, the candidates and the findings. The log itself is never read.

Every free text the story quotes is registered with the record and field it came from (so the
redaction gate can name them), every number with its record and field or, if computed, with its
formula and recorded inputs, and every value it may show unscanned (record ids, sha256 digests,
git commit ids) is checked against its type (``reader.py``). Records marked private are named by
record id and never quoted.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from loopx.governance.findings import finding_groups
from loopx.governance.state import current_contract
from loopx.narrator import board_data, disclosure, research_plan
from loopx.narrator.reader import (
    SAFE_TYPES,
    Quoted,
    Reader,
    Story,
    judgement,
    number,
    signed,
)
from loopx.research.control import first_heldout
from loopx.research.plan import evidence_since
from loopx.research.projections import Row, candidates, final_heldout, frontier
from loopx.research.state import counts

SCHEMA = "loopx_case_story_v0"
View = dict[str, Any]
_Reader = Reader  # the name tests and older callers use
__all__ = ["SAFE_TYPES", "Quoted", "Story", "build", "first_screen", "number", "signed"]


def build(view: View, head_seq: int, head_hash: str, *,
          screen: Callable[[str], bool] | None = None, rows: list[Row] | None = None,
          rules_since: list[list[int]] | None = None) -> Story:
    """The case story of the folded state at ``head_seq`` (whose record hash is ``head_hash``).

    ``screen(text)`` says whether a todo's free text may be quoted on the board (the redaction
    gate's test; without it every one is quoted and the gate judges them). ``rows``: the
    frontier of ``view``, if the caller already computed it. ``rules_since``: the kernel's
    ``[seq, version]`` pairs of the write rules the log was under."""
    story = Story({})
    r = Reader(story)
    rows = frontier(view) if rows is None else rows
    by_id = {row.hypothesis_id: row for row in rows}
    contract = _contract(r, current_contract(view), _private_ids(view))
    hypotheses = [_hypothesis(r, view, hid, by_id[hid], depth)
                  for hid, depth in _tree_order(view)]
    shown = {h["key"]: h for h in hypotheses}
    status = view["campaign"]["status"]
    disclosed = disclosure.build(r, view)
    story.doc = {
        "schema_version": SCHEMA,
        "anchor": {"head_seq": head_seq,
                   "head_hash": r.typed(head_hash, "sha256", "head", "head_hash"),
                   "rules": [{"version": v, "since_seq": seq} for seq, v in rules_since or ()]},
        "contract": contract,
        "campaign": _campaign(r, view, status),
        "disclosure": disclosed,
        "research_plan": research_plan.section(r, view),
        "hypotheses": hypotheses,
        "promoted": [_outcome(h) for h in hypotheses if h["state"] == "promoted"],
        "retired": [_outcome(h) for h in hypotheses if h["state"] == "retired"],
        "candidates": _candidates(r, view, candidates(view, rows), shown, by_id),
        "findings": _findings(r, view),
        "risks": _risks(hypotheses, status, disclosed),
        # Only the board shows these: a chart per hypothesis, who acts next, the todos.
        "charts": board_data.charts(r, view, hypotheses),
        "next_actions": board_data.next_actions(r, view, hypotheses, by_id),
        "todos": board_data.todos(r, view, screen),
    }
    story.doc["first_screen"] = first_screen(story.doc)
    return story


# -- sections ---------------------------------------------------------------------------------

def _campaign(r: Reader, view: View, status: dict[str, Any]) -> dict[str, Any]:
    """The campaign's state, why the policy stopped, paused or completed it, and its iterations
    (decisions) against the stop policy's limit when a public contract sets one."""
    contract = current_contract(view)
    limit = None
    if contract is not None and contract.get("visibility") != "private":
        limit = r.num(contract["stop_policy"]["max_iterations"], contract["record_id"],
                      "stop_policy.max_iterations")
    return {"state": status["state"], "stop_reasons": list(status["stop_reasons"]),
            "pause_reasons": list(status.get("pause_reasons") or []),
            "completion": status.get("completion"), "iteration": status["iteration"],
            "iterations": view["campaign"]["iterations"]["count"], "max_iterations": limit,
            "target": _target(r, view) if status.get("completion") else None}


def _target(r: Reader, view: View) -> dict[str, Any] | None:
    """The objective's target a completed campaign reached, and every change made to it after
    the first evidence packet (a target lowered to the best result so far is a completion the
    reader should know was granted, not earned): ``{"metric", "value", "moved"}``."""
    versions = view["campaign"]["versions"]
    if (not versions or versions[-1].get("visibility") == "private"
            or versions[-1]["metric"].get("target") is None):
        return None
    versions = [v for v in versions if v.get("visibility") != "private"]
    since = evidence_since(view)
    moved = []
    for before, after in pairwise(versions):
        old, new = before["metric"].get("target"), after["metric"].get("target")
        if old != new and since is not None and after["seq"] > since:
            moved.append({"from": r.num(old, before["record_id"], "metric.target"),
                          "to": r.num(new, after["record_id"], "metric.target"),
                          "seq": after["seq"], "record_id": r.rid(after["record_id"])})
    last = versions[-1]
    return {"metric": last["metric"]["name"],
            "value": r.num(last["metric"]["target"], last["record_id"], "metric.target"),
            "moved": moved}


def _contract(r: Reader, c: dict[str, Any] | None, private: set[str]) -> dict[str, Any] | None:
    if c is None:
        return None
    rid = r.rid(c["record_id"])
    if c.get("visibility") == "private":
        return {"record_id": rid, "private": True, "version": c["version"]}
    metric, policy, evaluation = c["metric"], c["promotion_policy"], c["evaluation"]
    measured = metric.get("baseline_hypothesis")
    # The splits' locations are private fields: only their names are read.
    return {
        "record_id": rid, "private": False, "version": c["version"],
        "question": r.text(c["objective"]["name"], rid, "objective.name"),
        "prompt": r.text(c["objective"]["prompt"], rid, "objective.prompt"),
        "metric": {"name": r.text(metric["name"], rid, "metric.name"),
                   "direction": metric["direction"],
                   "baseline": r.num(metric["baseline"], rid, "metric.baseline"),
                   # A private baseline hypothesis is never named, even by the contract.
                   "baseline_hypothesis": "a private hypothesis" if measured in private
                   else r.optional(measured, rid, "metric.baseline_hypothesis"),
                   "min_delta": r.num(metric["min_delta"], rid, "metric.min_delta"),
                   "seeds": r.nums(metric["seeds"], rid, "metric.seeds")},
        "rule": policy["rule"], "alpha": r.num(policy["alpha"], rid, "promotion_policy.alpha"),
        "required_gates": list(policy["required_gates"]),
        # Contracts written before the field had no reproduced gate to need it.
        "reproduce_tolerance": r.num(policy["reproduce_tolerance"], rid,
                                     "promotion_policy.reproduce_tolerance")
        if "reproduced" in policy["required_gates"] else None,
        "splits": {"dev": r.text(evaluation["dev"]["name"], rid, "evaluation.dev.name"),
                   "heldout": r.text(evaluation["heldout"]["name"], rid,
                                     "evaluation.heldout.name")},
    }


def _tree_order(view: View) -> list[tuple[str, int]]:
    """Hypotheses depth first (children under their parent), siblings in the order proposed."""
    hypotheses = view["hypotheses"]
    children: dict[str | None, list[str]] = {}
    for hid in sorted(hypotheses, key=lambda h: hypotheses[h]["seq"]):
        parent = hypotheses[hid]["parent_id"]
        children.setdefault(parent if parent in hypotheses else None, []).append(hid)
    out: list[tuple[str, int]] = []
    stack = [(hid, 0) for hid in reversed(children.get(None, []))]
    while stack:
        hid, depth = stack.pop()
        out.append((hid, depth))
        stack += [(c, depth + 1) for c in reversed(children.get(hid, []))]
    return out


def _hypothesis(r: Reader, view: View, hid: str, row: Row, depth: int) -> dict[str, Any]:
    entry = view["hypotheses"][hid]
    rid = r.rid(entry["record_id"])
    # The measured baseline is run, never judged: no gate means anything for it.
    out: dict[str, Any] = {"key": rid, "record_id": rid, "depth": depth, "state": row.state,
                           "gates": {name: g.status for name, g in row.gates.items()
                                     if g.required and row.state != "baseline"},
                           "parent": None}
    parent = view["hypotheses"].get(entry["parent_id"] or "")
    if parent is not None:
        out["parent"] = r.rid(parent["record_id"])
    reasons = (row.retirement or {}).get("reasons", ["contradicted"])
    if row.state == "contradicted" and "contradicted" not in reasons:
        # The frontier's state covers three causes; the story tells them apart.
        if "guardrail_failed" not in reasons and "invalid_result" in reasons:
            out["state_words"] = "invalid_result"
        elif (row.gates["reproduced"].status == "failed"
              and row.gates["protected_boundary"].status != "failed"):
            out["state_words"] = "unreproduced"
        else:
            out["state_words"] = "guardrail_failed"
    if entry.get("visibility") == "private":
        return {**out, "private": True, "hypothesis_id": None, "title": None,
                "evidence": {}, "heldout_tests": [], "attempts": [], "decision": None}
    plans = disclosure.plan_context(view)
    final = first_heldout(entry)
    tests = []
    for j in entry["heldout_judgements"]:
        test = judgement(r, j, plans)
        tests.append({**test, "final": final is not None and j["event_id"] == final["event_id"]})
    evidence = {split: judgement(r, j, plans) for split, j in sorted(entry["judgements"].items())}
    if final is not None:
        # The first counted held-out judgement is final: it is the one that decides.
        evidence["heldout"] = judgement(r, final, plans)
    decision_id = view["hypothesis_decisions"].get(hid)
    decision = None
    if decision_id is not None:
        stored = view["decisions"][decision_id]
        decision = _decision(r, stored, _basis(r, view, entry, stored, plans))
    return {
        **out, "private": False,
        "hypothesis_id": r.text(hid, rid, "hypothesis_id"),
        "title": r.text(entry["title"], rid, "title"),
        "mechanism_family": r.text(entry["mechanism_family"], rid, "mechanism_family"),
        "proposed_by": r.text(entry["proposer"], rid, "agent_id"),
        "claims_novelty": entry["claims_novelty"],
        "evidence": evidence, "heldout_tests": tests,
        "attempts": [_attempt(r, view["packets"][p]) for p in entry["packets"]
                     if p in view["packets"]],
        "decision": decision,
    }


def _basis(r: Reader, view: View, entry: dict[str, Any], decision: dict[str, Any],
           plans: tuple[int, int]) -> list[dict[str, Any]]:
    """The judgements a decision's reason rests on: the final held-out test of a promotion,
    the significantly worse judgements of a contradiction, the null test of no effect."""
    return [judgement(r, j, plans) for j in _basis_of(view, entry,
                                                       decision["reason"], decided=True)]


def _basis_of(view: View, entry: dict[str, Any], reason: str, *,
              decided: bool) -> list[dict[str, Any]]:
    # A decision stands whatever later amendments did to the plan: judge its basis by
    # provenance alone; a candidate's basis is what counts under the plan in force.
    def ok(j: dict[str, Any] | None) -> bool:
        return j is not None and (j["provenance"] != "claimed" if decided else counts(view, j))

    judgements = entry["judgements"]
    final = first_heldout(entry) if decided else final_heldout(view, entry)
    dev = judgements.get("dev")
    if reason == "gates_passed":
        return [final] if final is not None else []
    if reason == "contradicted":
        return [j for j in judgements.values() if ok(j) and j["verdict"] == "contradicts"]
    if reason == "no_effect_found":
        if final is not None and final["verdict"] == "inconclusive":
            return [final]
        return [dev] if ok(dev) and dev["verdict"] == "inconclusive" else []
    return []


def _attempt(r: Reader, p: dict[str, Any]) -> dict[str, Any]:
    rid = r.rid(p["packet_id"])
    if p.get("visibility") == "private":
        return {"packet_id": rid, "private": True}
    commit = p["evaluated_commit"]
    return {"packet_id": rid, "private": False, "attempt": p["attempt"], "status": p["status"],
            "provenance": p["provenance"], "branch": r.optional(p["branch"], rid, "branch"),
            "evaluated_commit": None if commit is None else r.typed(
                commit, "git_commit", rid, "evaluated_commit")}


def _decision(r: Reader, d: dict[str, Any], basis: list[dict[str, Any]]) -> dict[str, Any]:
    rid = r.rid(d["record_id"])
    if d.get("visibility") == "private":
        return {"record_id": rid, "private": True}
    approval = d["approval"]
    return {
        "record_id": rid, "private": False,
        "decision_id": r.text(d["decision_id"], rid, "decision_id"),
        "outcome": d["outcome"], "reason": d["reason"], "revision": d["revision"],
        "note": r.optional(d.get("note"), rid, "note"), "basis": basis,
        # The owner's verdict and its record id only: the approval's note is private.
        "approval": None if approval is None else {
            "verdict": approval["verdict"], "record_id": r.rid(approval["record_id"])},
    }


def _outcome(h: dict[str, Any]) -> dict[str, Any]:
    decision = h["decision"] or {}
    return {"key": h["key"], "hypothesis_id": h["hypothesis_id"], "title": h["title"],
            "private": h["private"], "state": h["state"], "decision": decision,
            "reasons": [decision["reason"]] if decision.get("reason") else [],
            "rests_on": [decision["record_id"]] if decision else [],
            "heldout": h["evidence"].get("heldout"), "dev": h["evidence"].get("dev"),
            "heldout_tests": h["heldout_tests"]}


def _candidates(r: Reader, view: View, found: dict[str, list[dict[str, Any]]],
                shown: dict[str, dict[str, Any]], rows: dict[str, Row]
                ) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    plans = disclosure.plan_context(view)
    for kind, items in found.items():
        out[kind] = []
        for c in items:
            entry = view["hypotheses"][c["hypothesis_id"]]
            key = entry["record_id"]
            h = shown[key]
            card = {"key": key, "hypothesis_id": h["hypothesis_id"], "title": h["title"],
                    "private": h["private"], "state": h["state"],
                    "state_words": h.get("state_words"),
                    "rests_on": [r.typed(ref, "record_id", key, "rests_on")
                                 for ref in c["rests_on"]],
                    "heldout": h["evidence"].get("heldout"), "dev": h["evidence"].get("dev")}
            if kind == "retirement":
                card["reasons"] = list(c["reasons"])
                card["why"] = {} if h["private"] else _why(r, view, entry, c, plans)
            if kind == "retry":
                card["attempts_left"] = c["attempts_left"]
                card["packet_id"] = r.rid(c["packet_id"])
            out[kind].append(card)
    return out


def _why(r: Reader, view: View, entry: dict[str, Any], c: dict[str, Any],
         plans: tuple[int, int]) -> dict[str, Any]:
    """Why each retirement reason applies: the judgements behind a contradiction or a null
    result (their numbers registered), else the frontier's own words for it."""
    out: dict[str, Any] = {}
    for reason in c["reasons"]:
        basis = _basis_of(view, entry, reason, decided=False)
        text = c.get("why", {}).get(reason)
        if basis:
            out[reason] = {"basis": [judgement(r, j, plans) for j in basis]}
        elif text and not any(hid in text for hid in _private_ids(view)):
            # The frontier's words may name other hypotheses: never a private one.
            out[reason] = {"text": r.text(text, entry["record_id"], f"retirement.why.{reason}")}
    return out


def _private_ids(view: View) -> set[str]:
    return {hid for hid, e in view["hypotheses"].items() if e.get("visibility") == "private"}


def _findings(r: Reader, view: View) -> dict[str, list[dict[str, Any]]]:
    groups = finding_groups(view)
    out: dict[str, list[dict[str, Any]]] = {}
    for group, items in groups.items():
        out[group] = []
        for f in items:
            stored = view["findings"][f["finding_id"]]
            rid = r.rid(stored["record_id"])
            if stored.get("visibility") == "private":
                out[group].append({"record_id": rid, "private": True, "kind": f["kind"]})
                continue
            out[group].append({"record_id": rid, "private": False, "kind": f["kind"],
                               "finding_id": r.text(f["finding_id"], rid, "finding_id"),
                               "statement": r.text(f["statement"], rid, "statement"),
                               "confidence": f["confidence"]})
    return out


def _risks(hypotheses: list[dict[str, Any]], status: dict[str, Any],
           disclosed: dict[str, Any]) -> list[dict[str, Any]]:
    """What a reader should not take for granted: gates that failed or still block a hypothesis
    near promotion, evidence of claimed provenance, an assumed baseline, held-out tests without
    campaign-level control, and a stop on a validity failure."""
    out: list[dict[str, Any]] = []
    for h in hypotheses:
        if h["state"] in ("promoted", "retired", "baseline"):
            continue
        near = h["state"] in ("supported", "at_promotion_gate")
        # A failed held-out test of a null or worse result is the result itself, told among
        # the retirements; it is no open risk.
        told = h["state"] in ("no_effect_found", "contradicted")
        for gate, gate_status in h["gates"].items():
            if told and gate == "heldout":
                continue
            if gate_status == "failed" or (near and gate_status == "pending"):
                out.append({"kind": "gate", "key": h["key"], "hypothesis_id": h["hypothesis_id"],
                            "gate": gate, "status": gate_status})
        for split, j in h["evidence"].items():
            if not j["private"] and j["provenance"] == "claimed":
                out.append({"kind": "claimed_evidence", "key": h["key"],
                            "hypothesis_id": h["hypothesis_id"], "split": split,
                            "event_id": j["event_id"]})
    baseline = disclosed["baseline"]
    if baseline is not None and baseline["kind"] == "assumed":
        out.append({"kind": "assumed_baseline", "value": baseline["value"]})
    if disclosed["contract_shown"] and disclosed["control"] is None:
        out.append({"kind": "no_control", "tests": disclosed["counts"]["judged_heldout"]})
    if "persistent_validity_failure" in status["stop_reasons"]:
        out.append({"kind": "validity", "stop_reasons": list(status["stop_reasons"])})
    return out


# -- the first screen -------------------------------------------------------------------------

def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _against(heldout: dict[str, Any]) -> str:
    """What a held-out improvement was measured against, and how the campaign judged it."""
    kind = heldout["baseline_kind"]
    against = (f" over the assumed baseline {number(heldout['baseline'])}" if kind == "assumed"
               else " over the measured baseline" if kind == "measured" else "")
    control = heldout["control"]
    if heldout["p_value"] is None:
        return against
    if control is None:
        return f"{against} (p = {number(heldout['p_value'])}; no campaign-level control)"
    return (f"{against} (p = {number(heldout['p_value'])}; adjusted p "
            f"{number(control['adjusted_p'])} under {control['rule']} at level "
            f"{number(control['level'])})")


def first_screen(doc: dict[str, Any]) -> dict[str, Any]:
    """The story's own first screen: the question, the best promoted result (the largest
    held-out improvement; or that there is none yet), and where to look first."""
    contract = doc["contract"]
    title = ("Research case" if contract is None or contract["private"]
             else _clip(contract["question"], 200))
    # The best promoted result: the largest held-out improvement in the contract's direction.
    shown = [item for item in doc["promoted"] if item["heldout"]
             and not item["heldout"]["private"] and item["heldout"]["mean_delta"] is not None]
    best = max(shown, key=lambda item: item["heldout"]["mean_delta"], default=None)
    if best is not None:
        heldout = best["heldout"]
        headline = (f"Promoted: {_clip(best['title'], 160)}. Held-out {heldout['metric']} "
                    f"improved by {signed(heldout['mean_delta'])}{_against(heldout)}.")
        action = {"label": "See the promoted result", "href": "#promoted"}
    elif doc["promoted"]:
        headline = "A result was promoted; its held-out evidence is private."
        action = {"label": "See the promoted result", "href": "#promoted"}
    else:
        headline = "No result has been promoted yet."
        action = {"label": "See the candidates", "href": "#candidates"}
    return {"title": title, "headline": _clip(headline, 512), "primary_action": action}
