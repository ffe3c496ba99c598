"""Write checks for research records: hypotheses (no duplicate of a retired idea), evidence
packets (split-aware), judgements (recomputed from their packets), novelty audits (independent),
gate results, decisions (only on the matching candidate, bound to the hypothesis' revision) and
held-out claims (within the read budget).

Refusals of research rules raise :class:`ResearchRefused`, which the write path records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopx.campaign_state import current_contract
from loopx.errors import Refused, ResearchRefused
from loopx.research_state import EVALUATION_SPLITS, HELDOUT_ACTION, content_sha256

if TYPE_CHECKING:
    from loopx.checks import Identity

View = dict[str, Any]
Record = dict[str, Any]


def _entry(view: View, hypothesis_id: str, what: str) -> dict[str, Any]:
    entry = view["hypotheses"].get(hypothesis_id)
    if entry is None:
        raise Refused(f"{what} names hypothesis {hypothesis_id!r}, which does not exist")
    return entry


def _closed(view: View, hypothesis_id: str) -> str | None:
    """How an earlier hypothesis ended, if it did: retired, or contradicted by its evidence."""
    decision_id = view["hypothesis_decisions"].get(hypothesis_id)
    if decision_id is not None and view["decisions"][decision_id]["outcome"] == "retired":
        return "retired"
    judgements = view["hypotheses"][hypothesis_id]["judgements"].values()
    if any(j["verdict"] == "contradicts" and j["provenance"] != "claimed" for j in judgements):
        return "contradicted"
    return None


def check_hypothesis(view: View, who: Identity, record: Record) -> None:
    """A new id; a superseded hypothesis exists; not a duplicate of a retired or contradicted one."""
    p = record["payload"]
    if p["hypothesis_id"] in view["hypotheses"]:
        raise Refused(f"hypothesis {p['hypothesis_id']!r} already exists")
    parent = p.get("parent_id")
    if parent is not None and parent not in view["hypotheses"]:
        raise Refused(f"hypothesis {p['hypothesis_id']!r} refines {parent!r}, which does not "
                      "exist")
    old = p.get("supersedes")
    if old is not None and old not in view["hypotheses"]:
        raise Refused(f"hypothesis {p['hypothesis_id']!r} supersedes {old!r}, which does not "
                      "exist")
    for earlier in view["content_index"].get(content_sha256(p), ()):
        how = _closed(view, earlier)
        if how is not None:
            cited = view["hypotheses"][earlier]["record_id"]
            raise ResearchRefused(
                "duplicate", f"hypothesis {p['hypothesis_id']!r} duplicates {earlier!r} "
                f"({how}; record {cited}): same mechanism family, statement and parameters",
                hypothesis_id=p["hypothesis_id"], cites=[cited],
                hint="change the mechanism or its parameters, or refine it with a parent")


def _check_packet(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    _entry(view, p["hypothesis_id"], "the packet")
    todo = view["todos"].get(record["todo_id"] or "")
    if todo is not None and todo["hypothesis_id"] not in (None, p["hypothesis_id"]):
        raise Refused(f"the packet is for {p['hypothesis_id']!r} but todo {todo['todo_id']!r} "
                      f"works on {todo['hypothesis_id']!r}")
    heldout = any(r["split"] == "heldout" for r in p["results"])
    if heldout and (todo is None or todo["action_kind"] != HELDOUT_ACTION):
        raise Refused("held-out results come only from a held-out todo "
                      f"({HELDOUT_ACTION}), whose claim packet carries the held-out location")


def _check_event(view: View, who: Identity, record: Record) -> None:
    from loopx.evidence import judgement_payload

    p = record["payload"]
    _entry(view, p["hypothesis_id"], "the judgement")
    expected = judgement_payload(view, p["hypothesis_id"], p["split"], list(p["packet_ids"]))
    mismatched = sorted(k for k, v in expected.items() if k != "notes" and p.get(k) != v)
    if mismatched:
        raise Refused(f"the judgement of {p['hypothesis_id']!r} on {p['split']} is not what the "
                      f"contract's rule gives for its packets (differs in "
                      f"{', '.join(mismatched)}); expected verdict {expected['verdict']}",
                      hint="write it with `loopx evidence judge`, which computes it")


def _check_audit(view: View, who: Identity, record: Record) -> None:
    entry = _entry(view, record["payload"]["hypothesis_id"], "the audit")
    if entry["proposer"] == who.agent_id:
        raise Refused(f"{who.agent_id} proposed {entry['hypothesis_id']!r}; a novelty audit is "
                      "never by the hypothesis' own proposer")


def _check_gate(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    entry = _entry(view, p["hypothesis_id"], "the gate result")
    if p["revision"] != entry["revision"]:
        raise Refused(f"hypothesis {entry['hypothesis_id']!r} is at revision {entry['revision']}, "
                      f"not {p['revision']}: check it again")


def check_decision(view: View, who: Identity, record: Record) -> None:
    """Bound to the hypothesis' current revision, and only on the matching candidate."""
    from loopx.projections import row

    p = record["payload"]
    hid = p["hypothesis_id"]
    entry = _entry(view, hid, "the decision")
    if p["revision"] != entry["revision"]:
        raise Refused(f"hypothesis {hid!r} is at revision {entry['revision']}, not "
                      f"{p['revision']}: it changed since (a conflicting decision, or new "
                      "evidence); decide again on what the projection shows now")
    current = row(view, hid)
    if p["outcome"] == "promoted":
        if current.promotion is None:
            raise _no_promotion(view, entry, current)
        wanted = current.promotion["rests_on"]
    else:
        reasons = (current.retirement or {}).get("reasons", [])
        if p["reason"] not in reasons:
            raise ResearchRefused(
                "no_candidate", f"hypothesis {hid!r} is not a retirement candidate for "
                f"{p['reason']}" + (f" (it is for: {', '.join(reasons)})" if reasons else ""),
                hypothesis_id=hid)
        assert current.retirement is not None
        wanted = current.retirement["rests_on"]
    if sorted(p["evidence_ids"]) != sorted(wanted):
        raise Refused(f"the decision must cite exactly the records the candidate rests on: "
                      f"{', '.join(wanted)}")


def _no_promotion(view: View, entry: dict[str, Any], current: Any) -> ResearchRefused:
    from loopx.projections import promotion_blockers

    hid = entry["hypothesis_id"]
    if current.decision is not None:
        return ResearchRefused("no_candidate", f"hypothesis {hid!r} is already decided "
                               f"({current.decision}); a new decision supersedes it only on a "
                               "candidate", hypothesis_id=hid)
    blockers = promotion_blockers(view, entry, current.gates)
    dev = entry["judgements"].get("dev")
    dev_ok = dev is not None and dev["verdict"] == "supports"
    if any("claimed" in b for b in blockers):
        rule = "claimed_evidence"
    elif dev_ok and current.gates["heldout"].status != "passed":
        rule = "dev_only_lift"
    else:
        rule = "no_candidate"
    lead = {"dev_only_lift": "dev-only lift is never a promotion",
            "claimed_evidence": "claimed evidence never counts toward promotion"}.get(rule)
    return ResearchRefused(rule, f"hypothesis {hid!r} is not a promotion candidate"
                           + (f" ({lead})" if lead else "") + ": " + "; ".join(blockers),
                           hypothesis_id=hid,
                           hint="`loopx candidates` lists what may be decided")


def moot_evaluation(view: View, todo: dict[str, Any]) -> str | None:
    """The live decision on the hypothesis an evaluation todo works on, if there is one: the
    evaluation is moot, and handing it out would only spend data reads."""
    if todo["action_kind"] not in EVALUATION_SPLITS or todo["hypothesis_id"] is None:
        return None
    return view["hypothesis_decisions"].get(todo["hypothesis_id"])


def check_evaluation_claim(view: View, todo_id: str, todo: dict[str, Any]) -> None:
    """An evaluation todo of a decided hypothesis is not claimed; a held-out todo only while
    its hypothesis has held-out reads left."""
    decided = moot_evaluation(view, todo)
    if decided is not None:
        raise Refused(f"todo {todo_id!r} evaluates {todo['hypothesis_id']!r}, which is already "
                      f"decided ({decided})")
    over = heldout_over_budget(view, todo)
    if over is not None:
        reads, budget = over
        raise ResearchRefused(
            "heldout_budget", f"hypothesis {todo['hypothesis_id']!r} has used its held-out read "
            f"budget ({reads} of {budget}): todo {todo_id!r} would read it again",
            hypothesis_id=todo["hypothesis_id"], detail={"reads": reads, "budget": budget})


def heldout_over_budget(view: View, todo: dict[str, Any]) -> tuple[int, int] | None:
    """(reads, budget) when claiming ``todo`` would exceed its hypothesis' held-out budget."""
    if todo["action_kind"] != HELDOUT_ACTION or todo["hypothesis_id"] is None:
        return None
    entry = view["hypotheses"].get(todo["hypothesis_id"])
    contract = current_contract(view)
    if entry is None or contract is None:
        return None
    budget = contract["evaluation"]["heldout_read_budget"]
    return (entry["heldout_reads"], budget) if entry["heldout_reads"] >= budget else None


RESEARCH_CHECKS: dict[str, Callable[[View, Any, Record], None]] = {
    "auto_research_evidence_packet_v0": _check_packet,
    "research_evidence_event_v0": _check_event,
    "novelty_audit_v0": _check_audit,
    "gate_result_v0": _check_gate,
}
