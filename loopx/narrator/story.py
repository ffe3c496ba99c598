"""The case story as data, built from projections only: the contract in force (public fields),
the hypothesis tree, each hypothesis' judgements and attempts, decisions, the frontier's states,
the candidates and the findings. The log itself is never read.

Every free text the story quotes is registered with the record and field it came from (so the
redaction gate can name them), every metric it quotes with its record, and every value it may
show unscanned (record ids, sha256 digests, git commit ids) is checked against its type here.
Records marked private are named by record id and never quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from loopx.campaign_state import current_contract
from loopx.findings import finding_groups
from loopx.projections import Row, candidates, frontier

SCHEMA = "loopx_case_story_v0"
View = dict[str, Any]

# Typed values the redaction gate allow-lists by type: each is checked against its type's
# pattern here, so a value that is not of the type is quoted (and scanned) as text instead.
SAFE_TYPES = {
    "record_id": re.compile(r"^rec_[0-9a-f]{32}$"),
    "sha256": re.compile(r"^[0-9a-f]{64}$"),
    "git_commit": re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$"),
}


@dataclass(frozen=True)
class Quoted:
    """A free text the story quotes, and the record field it came from."""

    record_id: str
    field: str
    value: str


@dataclass
class Story:
    """The story document plus what it quotes: texts (scanned), typed values (allow-listed)
    and metrics (each from a record)."""

    doc: dict[str, Any]
    quoted: list[Quoted] = field(default_factory=list)
    safe: set[str] = field(default_factory=set)
    numbers: list[dict[str, Any]] = field(default_factory=list)


class _Reader:
    """Reads values out of projections, registering each with where it came from."""

    def __init__(self, story: Story) -> None:
        self.story = story

    def text(self, value: Any, record_id: str, name: str) -> str:
        text = str(value)
        self.story.quoted.append(Quoted(record_id, name, text))
        return text

    def optional(self, value: Any, record_id: str, name: str) -> str | None:
        return None if value is None else self.text(value, record_id, name)

    def typed(self, value: str, kind: str, record_id: str, name: str) -> str:
        if SAFE_TYPES[kind].match(value):
            self.story.safe.add(value)
            return value
        return self.text(value, record_id, name)

    def rid(self, value: str) -> str:
        return self.typed(value, "record_id", value, "record_id")

    def num(self, value: float | int | None, record_id: str, name: str) -> float | int | None:
        if value is not None:
            self.story.numbers.append({"value": value, "record_id": record_id, "field": name})
        return value

    def nums(self, values: list[Any], record_id: str, name: str) -> list[Any]:
        return [self.num(v, record_id, f"{name}.{i}") for i, v in enumerate(values)]


def build(view: View, head_seq: int, head_hash: str) -> Story:
    """The case story of the folded state at ``head_seq`` (whose record hash is ``head_hash``)."""
    story = Story({})
    r = _Reader(story)
    rows = frontier(view)
    by_id = {row.hypothesis_id: row for row in rows}
    contract = _contract(r, current_contract(view))
    hypotheses = [_hypothesis(r, view, hid, by_id[hid], depth)
                  for hid, depth in _tree_order(view)]
    shown = {h["key"]: h for h in hypotheses}
    status = view["campaign"]["status"]
    story.doc = {
        "schema_version": SCHEMA,
        "anchor": {"head_seq": head_seq,
                   "head_hash": r.typed(head_hash, "sha256", "head", "head_hash")},
        "contract": contract,
        "campaign": {"state": status["state"], "stop_reasons": list(status["stop_reasons"]),
                     "iteration": status["iteration"]},
        "hypotheses": hypotheses,
        "promoted": [_outcome(h) for h in hypotheses if h["state"] == "promoted"],
        "retired": [_outcome(h) for h in hypotheses if h["state"] == "retired"],
        "candidates": _candidates(r, view, candidates(view, rows), shown),
        "findings": _findings(r, view),
        "risks": _risks(hypotheses, status),
    }
    story.doc["first_screen"] = first_screen(story.doc)
    return story


# -- sections ---------------------------------------------------------------------------------

def _contract(r: _Reader, c: dict[str, Any] | None) -> dict[str, Any] | None:
    if c is None:
        return None
    rid = r.rid(c["record_id"])
    if c.get("visibility") == "private":
        return {"record_id": rid, "private": True, "version": c["version"]}
    metric, policy, evaluation = c["metric"], c["promotion_policy"], c["evaluation"]
    # The splits' locations are private fields: only their names are read.
    return {
        "record_id": rid, "private": False, "version": c["version"],
        "question": r.text(c["objective"]["name"], rid, "objective.name"),
        "prompt": r.text(c["objective"]["prompt"], rid, "objective.prompt"),
        "metric": {"name": r.text(metric["name"], rid, "metric.name"),
                   "direction": metric["direction"],
                   "baseline": r.num(metric["baseline"], rid, "metric.baseline"),
                   "min_delta": r.num(metric["min_delta"], rid, "metric.min_delta"),
                   "seeds": r.nums(metric["seeds"], rid, "metric.seeds")},
        "rule": policy["rule"], "alpha": r.num(policy["alpha"], rid, "promotion_policy.alpha"),
        "required_gates": list(policy["required_gates"]),
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


def _hypothesis(r: _Reader, view: View, hid: str, row: Row, depth: int) -> dict[str, Any]:
    entry = view["hypotheses"][hid]
    rid = r.rid(entry["record_id"])
    out: dict[str, Any] = {"key": rid, "record_id": rid, "depth": depth, "state": row.state,
                           "gates": {name: g.status for name, g in row.gates.items()
                                     if g.required},
                           "parent": None}
    parent = view["hypotheses"].get(entry["parent_id"] or "")
    if parent is not None:
        out["parent"] = r.rid(parent["record_id"])
    if entry.get("visibility") == "private":
        return {**out, "private": True, "hypothesis_id": None, "title": None,
                "evidence": {}, "attempts": [], "decision": None}
    decision_id = view["hypothesis_decisions"].get(hid)
    return {
        **out, "private": False,
        "hypothesis_id": r.text(hid, rid, "hypothesis_id"),
        "title": r.text(entry["title"], rid, "title"),
        "mechanism_family": r.text(entry["mechanism_family"], rid, "mechanism_family"),
        "proposed_by": r.text(entry["proposer"], rid, "agent_id"),
        "claims_novelty": entry["claims_novelty"],
        "evidence": {split: _judgement(r, j) for split, j in sorted(entry["judgements"].items())},
        "attempts": [_attempt(r, view["packets"][p]) for p in entry["packets"]
                     if p in view["packets"]],
        "decision": None if decision_id is None else _decision(r, view["decisions"][decision_id]),
    }


def _judgement(r: _Reader, j: dict[str, Any]) -> dict[str, Any]:
    rid = r.rid(j["event_id"])
    if j.get("visibility") == "private":
        return {"event_id": rid, "private": True, "split": j["split"]}
    return {
        "event_id": rid, "private": False, "split": j["split"], "verdict": j["verdict"],
        "metric": r.text(j["metric"], rid, "metric"), "rule": r.text(j["rule"], rid, "rule"),
        "provenance": j["provenance"],
        "baseline": r.num(j["baseline"], rid, "baseline"),
        "baseline_values": r.nums(j["baseline_values"], rid, "baseline_values"),
        "seeds": r.nums(j["seeds"], rid, "seeds"),
        "values": r.nums(j["values"], rid, "values"),
        "mean_delta": r.num(j["mean_delta"], rid, "mean_delta"),
        "p_value": r.num(j["p_value"], rid, "p_value"),
        "packet_ids": [r.typed(p, "record_id", rid, "packet_ids") for p in j["packet_ids"]],
    }


def _attempt(r: _Reader, p: dict[str, Any]) -> dict[str, Any]:
    rid = r.rid(p["packet_id"])
    if p.get("visibility") == "private":
        return {"packet_id": rid, "private": True}
    commit = p["evaluated_commit"]
    return {"packet_id": rid, "private": False, "attempt": p["attempt"], "status": p["status"],
            "provenance": p["provenance"], "branch": r.optional(p["branch"], rid, "branch"),
            "evaluated_commit": None if commit is None else r.typed(
                commit, "git_commit", rid, "evaluated_commit")}


def _decision(r: _Reader, d: dict[str, Any]) -> dict[str, Any]:
    rid = r.rid(d["record_id"])
    if d.get("visibility") == "private":
        return {"record_id": rid, "private": True}
    approval = d["approval"]
    return {
        "record_id": rid, "private": False,
        "decision_id": r.text(d["decision_id"], rid, "decision_id"),
        "outcome": d["outcome"], "reason": d["reason"], "revision": d["revision"],
        "note": r.optional(d.get("note"), rid, "note"),
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
            "heldout": h["evidence"].get("heldout"), "dev": h["evidence"].get("dev")}


def _candidates(r: _Reader, view: View, found: dict[str, list[dict[str, Any]]],
                shown: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, items in found.items():
        out[kind] = []
        for c in items:
            key = view["hypotheses"][c["hypothesis_id"]]["record_id"]
            h = shown[key]
            card = {"key": key, "hypothesis_id": h["hypothesis_id"], "title": h["title"],
                    "private": h["private"], "state": h["state"],
                    "rests_on": [r.typed(ref, "record_id", key, "rests_on")
                                 for ref in c["rests_on"]],
                    "heldout": h["evidence"].get("heldout"), "dev": h["evidence"].get("dev")}
            if kind == "retirement":
                card["reasons"] = list(c["reasons"])
            if kind == "retry":
                card["attempts_left"] = c["attempts_left"]
                card["packet_id"] = r.rid(c["packet_id"])
            out[kind].append(card)
    return out


def _findings(r: _Reader, view: View) -> dict[str, list[dict[str, Any]]]:
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


def _risks(hypotheses: list[dict[str, Any]], status: dict[str, Any]) -> list[dict[str, Any]]:
    """What a reader should not take for granted: gates that failed or still block a hypothesis
    near promotion, evidence of claimed provenance, and a stop on a validity failure."""
    out: list[dict[str, Any]] = []
    for h in hypotheses:
        if h["state"] in ("promoted", "retired"):
            continue
        near = h["state"] in ("supported", "at_promotion_gate")
        for gate, gate_status in h["gates"].items():
            if gate_status == "failed" or (near and gate_status == "pending"):
                out.append({"kind": "gate", "key": h["key"], "hypothesis_id": h["hypothesis_id"],
                            "gate": gate, "status": gate_status})
        for split, j in h["evidence"].items():
            if not j["private"] and j["provenance"] == "claimed":
                out.append({"kind": "claimed_evidence", "key": h["key"],
                            "hypothesis_id": h["hypothesis_id"], "split": split,
                            "event_id": j["event_id"]})
    if "persistent_validity_failure" in status["stop_reasons"]:
        out.append({"kind": "validity", "stop_reasons": list(status["stop_reasons"])})
    return out


# -- the first screen -------------------------------------------------------------------------

def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def signed(value: float | int) -> str:
    """A recorded number with its sign (``+0.021``, ``-0.4``)."""
    return ("+" if value >= 0 else "") + number(value)


def number(value: float | int) -> str:
    """A recorded number for reading: integers exactly, floats to 4 significant digits (the
    exact values are in the records the story cites, and in ``--json``)."""
    return str(value) if isinstance(value, int) else format(value, ".4g")


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
        baseline = ("" if heldout["baseline"] is None
                    else f" over the baseline {number(heldout['baseline'])}")
        p_value = "" if heldout["p_value"] is None else f" (p = {number(heldout['p_value'])})"
        headline = (f"Promoted: {_clip(best['title'], 160)}. Held-out {heldout['metric']} "
                    f"improved by {signed(heldout['mean_delta'])}{baseline}{p_value}.")
        action = {"label": "See the promoted result", "href": "#promoted"}
    elif doc["promoted"]:
        headline = "A result was promoted; its held-out evidence is private."
        action = {"label": "See the promoted result", "href": "#promoted"}
    else:
        headline = "No result has been promoted yet."
        action = {"label": "See the candidates", "href": "#candidates"}
    return {"title": title, "headline": _clip(headline, 512), "primary_action": action}
