"""Write checks for research records: contract versions (a named protected scope, paths inside
the workspace's contract scopes, a measured baseline kept; what an amendment may change once
evidence exists is :mod:`loopx.research.amendments`), hypotheses (no duplicate of an
earlier idea), evidence packets (split-aware), judgements (recomputed from their packets),
novelty audits (independent), gate results, decisions (only on the matching candidate, bound to
the hypothesis' revision) and held-out claims (within the read budget). Novelty audits and
grounding refs follow the rules of :mod:`loopx.research.novelty` and
:mod:`loopx.research.grounding`.

Refusals of research rules raise :class:`ResearchRefused`, which the write path records.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from loopx.governance.state import current_contract
from loopx.kernel.domains import Check, Record, View
from loopx.kernel.errors import FieldProblem, RecordRejected, Refused, ResearchRefused
from loopx.kernel.rules import applies
from loopx.research.amendments import (
    check_comparison_kept,
    check_control_kept,
    check_guardrails_kept,
)
from loopx.research.contract_scope import (
    check_contract_paths,
    check_split_locations,
    contract_scopes,
)
from loopx.research.control import first_heldout
from loopx.research.fingerprint import (
    duplicates,
    fingerprint,
    standing,
    supersession_chain,
)
from loopx.research.gates import invalid_packets, measured_packets
from loopx.research.grounding import check_grounding_ref
from loopx.research.novelty import check_audit
from loopx.research.plan import attempt_limit, current_plan, evidence_since, plan_of
from loopx.research.state import (
    EVALUATION_SPLITS,
    HELDOUT_ACTION,
    base_movable,
    baseline_hypothesis,
    campaign_base,
    content_sha256,
    counts,
    dev_attempts,
)
from loopx.work.checks import require_todo

if TYPE_CHECKING:
    from loopx.kernel.checks import Identity


def _entry(view: View, hypothesis_id: str, what: str) -> dict[str, Any]:
    entry = view["hypotheses"].get(hypothesis_id)
    if entry is None:
        raise Refused(f"{what} names hypothesis {hypothesis_id!r}, which does not exist")
    return entry


def check_hypothesis(view: View, who: Identity, record: Record) -> None:
    """Under a held todo, written by its claimant, grounded; a new id; a superseded hypothesis
    exists; not a duplicate (by fingerprint) of any earlier hypothesis."""
    require_todo(view, who, record)
    p = record["payload"]
    if p["claimed_by"] != who.agent_id:
        raise Refused(f"hypothesis {p['hypothesis_id']!r}: claimed_by must be the writer "
                      f"{who.agent_id!r}, not {p['claimed_by']!r}")
    if not p.get("grounding_refs") and not p.get("no_grounding_reason"):
        raise Refused(f"hypothesis {p['hypothesis_id']!r} needs grounding_refs or a "
                      "no_grounding_reason")
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
    if applies(view, 2):
        _refuse_duplicate(view, p)
    else:
        _refuse_closed_duplicate(view, p)


# Rules version 1 (loopx.kernel.rules): a duplicate was a restatement, word for word, of an idea
# a retirement for cause or a contradiction had closed. Logs written then are judged by it.
CLOSING_RETIREMENTS = ("contradicted", "guardrail_failed", "operator_rejected")


def _refuse_closed_duplicate(view: View, p: dict[str, Any]) -> None:
    for earlier in view["content_index"].get(content_sha256(p), ()):
        decision_id = view["hypothesis_decisions"].get(earlier)
        decision = None if decision_id is None else view["decisions"][decision_id]
        judgements = view["hypotheses"][earlier]["judgements"].values()
        if ((decision is not None and decision["outcome"] == "retired"
             and decision["reason"] in CLOSING_RETIREMENTS)
                or any(j["verdict"] == "contradicts" and j["provenance"] != "claimed"
                       for j in judgements)):
            raise ResearchRefused(
                "duplicate", f"hypothesis {p['hypothesis_id']!r} duplicates {earlier!r} (record "
                f"{view['hypotheses'][earlier]['record_id']}): same mechanism family, statement "
                "and parameters", hypothesis_id=p["hypothesis_id"],
                cites=[view["hypotheses"][earlier]["record_id"]])


def _refuse_duplicate(view: View, p: dict[str, Any]) -> None:
    """One idea, one hypothesis: the same mechanism family and parameters as any earlier one,
    live, promoted or retired, is refused (a supersession may keep the fingerprint of what it
    supersedes only while nothing was measured on it)."""
    found = duplicates(view, p)
    if not found:
        return
    first = found[0]
    cited = [view["hypotheses"][h]["record_id"] for h in found]
    how = standing(view, first)
    if first in supersession_chain(view, p.get("supersedes")):
        how += ("; a supersession keeps the idea's fingerprint only while nothing was measured "
                "or decided on it")
    elif first == p.get("parent_id"):
        how += "; a refinement must change the parameters"
    raise ResearchRefused(
        "duplicate", f"hypothesis {p['hypothesis_id']!r} duplicates {first!r} ({how}; record "
        f"{cited[0]}): same mechanism family and parameters (the statement is not part of an "
        "idea's fingerprint)", hypothesis_id=p["hypothesis_id"], cites=cited[:64],
        detail={"fingerprint": fingerprint(p), "duplicates": found[:64]},
        hint="change the parameters (or the mechanism): rewording the statement makes no new "
             "idea")


def _check_packet(view: View, who: Identity, record: Record) -> None:
    require_todo(view, who, record)
    p = record["payload"]
    hid = p["hypothesis_id"]
    entry = _entry(view, hid, "the packet")
    todo = view["todos"].get(record["todo_id"] or "")
    if todo is not None and todo["hypothesis_id"] not in (None, hid):
        raise Refused(f"the packet is for {hid!r} but todo {record['todo_id']!r} "
                      f"works on {todo['hypothesis_id']!r}")
    if not p.get("valid", True) and (todo is None or todo["hypothesis_id"] != hid):
        # The flag speaks for the writer's own measurement of this hypothesis: under a todo
        # that works on another one (or on none), it would sink a rival's result.
        works_on = None if todo is None else todo["hypothesis_id"]
        raise Refused(f"payload.valid: only the executor measuring {hid!r} under a todo for it "
                      f"flags its result invalid; todo {record['todo_id']!r} works on "
                      + (repr(works_on) if works_on else "no hypothesis"))
    heldout_todo = todo is not None and todo["action_kind"] == HELDOUT_ACTION
    heldout = any(r["split"] == "heldout" for r in p["results"])
    if heldout and not heldout_todo:
        raise Refused("held-out results come only from a held-out todo "
                      f"({HELDOUT_ACTION}), whose claim packet carries the held-out location")
    if heldout_todo:
        _check_heldout_packet(view, entry, record)
    else:
        _check_attempts(view, entry)
    if applies(view, 5):
        _refuse_repeated_seeds(hid, p["results"])
    if applies(view, 8) and p["status"] == "scored" and record["provenance"] != "claimed":
        _check_base(view, hid, p)


def _check_base(view: View, hypothesis_id: str, p: dict[str, Any]) -> None:
    """One campaign, one base: a scored result starts from the commit the contract pins or the
    campaign's first one started from, and the measured baseline runs that commit unchanged. A
    comparison of two bases credits a hypothesis with whatever differs between them; a
    baseline with commits of its own could weaken the code every hypothesis is compared with."""
    base, evaluated = p.get("base_commit"), p.get("evaluated_commit")
    fixed = campaign_base(view)
    # A packet citing no commits is not refused here: the protected boundary gate, when the
    # contract requires it, keeps every comparison with it pending (nothing to verify).
    if base and fixed is None and applies(view, 9):
        raise ResearchRefused(
            "base_unpinned", f"the packet starts from base_commit {base}, but the contract pins "
            "no base commit: no executor's packet chooses the commit every experiment starts "
            "from (one that weakened it would make every hypothesis look better)",
            hypothesis_id=hypothesis_id, detail={"base_commit": base},
            hint="the curator pins it (`loopx contract amend --set base_commit=SHA --reason "
                 "...`), then the experiment runs from there")
    if base and fixed is not None and base != fixed["base_commit"]:
        raise ResearchRefused(
            "other_base", f"the packet starts from base_commit {base}, but the campaign's "
            f"experiments start from {fixed['base_commit']} ({fixed_by(fixed)}): results from "
            "another base are not comparable", hypothesis_id=hypothesis_id,
            cites=[fixed["record_id"]],
            detail={"base_commit": base, "campaign_base": fixed["base_commit"]},
            hint=f"run the experiment on a branch from {fixed['base_commit']} (`loopx lane run` "
                 "makes its worktrees there, and records both commits); a new base is a new "
                 "campaign")
    if base and evaluated and evaluated != base and hypothesis_id == baseline_hypothesis(view):
        raise ResearchRefused(
            "baseline_changed", f"the measured baseline {hypothesis_id!r} evaluated "
            f"{evaluated}, not its base_commit {base}: the baseline runs the base unchanged, "
            "so no commit of its own can weaken what every hypothesis is compared with",
            hypothesis_id=hypothesis_id,
            detail={"base_commit": base, "evaluated_commit": evaluated},
            hint="evaluate the base commit itself: commit nothing on the baseline's branch")


def fixed_by(base: dict[str, Any]) -> str:
    """What fixed the campaign's base, in words (for refusals)."""
    if base["packet_id"] is None:
        return f"pinned by the contract, version {base['contract_version']}, {base['record_id']}"
    return f"fixed by its first scored packet, {base['packet_id']}"


def _check_base_pin(view: View, p: dict[str, Any]) -> None:
    """A contract version may pin the base, or move its pin, only while nothing was measured
    from another: once evidence exists, every result was compared on the base in force."""
    pin, fixed = p.get("base_commit"), campaign_base(view)
    if fixed is None or base_movable(view) or pin == fixed["base_commit"]:
        return
    if fixed["packet_id"] is not None and pin is None:
        return  # never pinned: the packet's base stands
    what = (f"pins base_commit {pin}" if pin else "drops the pinned base_commit")
    raise ResearchRefused(
        "other_base", f"the contract version {what}, but the campaign's experiments start "
        f"from {fixed['base_commit']} ({fixed_by(fixed)}) and evidence has been recorded "
        "from it: results from two bases are not comparable", cites=[fixed["record_id"]],
        detail={"base_commit": pin, "campaign_base": fixed["base_commit"]},
        hint=f"keep base_commit {fixed['base_commit']}; a new base is a new campaign")


def _refuse_repeated_seeds(hypothesis_id: str, results: list[dict[str, Any]]) -> None:
    """A seed is one replicate: re-runs of it reported as separate values would count as more
    seeds, and the test would take their agreement for precision (pseudo-replication)."""
    times = Counter((r["split"], r["metric"], r["seed"]) for r in results)
    repeated = [{"split": split, "metric": metric, "seed": seed, "times": n}
                for (split, metric, seed), n in times.items() if n > 1]
    if not repeated:
        return
    first = repeated[0]
    raise ResearchRefused(
        "repeated_seed", f"the packet reports {first['metric']} on {first['split']} for seed "
        f"{first['seed']} {first['times']} times ({len(repeated)} seed(s) repeated): a seed is "
        "one replicate, and re-runs of it counted as more seeds would make the test "
        "overconfident", hypothesis_id=hypothesis_id, detail={"repeated": repeated[:64]},
        hint="report each seed once (the mean of its runs); more replicates are more seeds "
             "in the contract's metric.seeds")


def _check_heldout_packet(view: View, entry: dict[str, Any], record: Record) -> None:
    """One held-out claim admits one held-out measurement, with every seed, before the final
    judgement: re-measuring until a test passes is optional stopping."""
    hid, todo_id = entry["hypothesis_id"], record["todo_id"]
    final = first_heldout(entry)
    if final is not None and counts(view, final):
        raise ResearchRefused(
            "heldout_final", f"hypothesis {hid!r} was judged on held-out data at seq "
            f"{final['seq']}, and that judgement is final: a re-measurement needs a new "
            "hypothesis (refine it with changed parameters)", hypothesis_id=hid, cites=[final["event_id"]])
    earlier = [view["packets"][p] for p in entry["packets"]]
    done = [p for p in earlier if p["todo_id"] == todo_id]
    if done:
        # A failed one too: otherwise a measurement that disappoints could be recorded as a
        # failure and taken again under the same claim.
        raise ResearchRefused(
            "heldout_once", f"held-out todo {todo_id!r} already recorded its attempt "
            f"({done[0]['packet_id']}, {done[0]['status']}): one held-out claim admits one "
            "held-out packet, with all of its seeds at once", hypothesis_id=hid,
            cites=[done[0]["packet_id"]],
            hint="another measurement needs another held-out read (heldout_read_budget)")
    contract = current_contract(view)
    if contract is None or record["payload"]["status"] != "scored":
        return
    metric = contract["metric"]
    reported = {r["seed"] for r in record["payload"]["results"]
                if r["split"] == "heldout" and r["metric"] == metric["name"]}
    missing = [s for s in metric["seeds"] if s not in reported]
    if missing:
        raise ResearchRefused(
            "heldout_incomplete", f"a scored held-out packet carries every contract seed at once; "
            f"{metric['name']} is missing for seed(s) {', '.join(map(str, missing))}",
            hypothesis_id=hid, detail={"missing_seeds": missing},
            hint="record a failed attempt instead (status failed, with the error)")


def _check_attempts(view: View, entry: dict[str, Any]) -> None:
    """Every attempt, scored or failed, counts toward the plan's attempt limit."""
    plan = current_plan(view)
    if plan is None:
        return
    limit = attempt_limit(view)
    used = dev_attempts(view, entry)
    if len(used) >= limit:
        raise ResearchRefused(
            "attempts_exhausted", f"hypothesis {entry['hypothesis_id']!r} has used its {limit} "
            f"attempt(s) under plan version {plan['version']}: each scored or failed attempt "
            "counts, so a further run is re-measuring until something passes",
            hypothesis_id=entry["hypothesis_id"], cites=[p["packet_id"] for p in used][:64],
            detail={"attempts": len(used), "limit": limit},
            hint="retire it, or propose a changed hypothesis (refine it with a parent)")


def _check_event(view: View, who: Identity, record: Record) -> None:
    from loopx.research.evidence import judgement_payload

    p = record["payload"]
    entry = _entry(view, p["hypothesis_id"], "the judgement")
    final = first_heldout(entry)
    if p["split"] == "heldout" and final is not None and counts(view, final):
        raise ResearchRefused(
            "heldout_final", f"hypothesis {p['hypothesis_id']!r} was judged on held-out data at "
            f"seq {final['seq']}, and the first held-out judgement is final; judging again is "
            "choosing among measurements", hypothesis_id=p["hypothesis_id"],
            cites=[final["event_id"]])
    expected = judgement_payload(view, p["hypothesis_id"], p["split"])
    for packet_id in p["packet_ids"]:
        if packet_id not in expected["packet_ids"]:
            _refuse_cited(view, p["hypothesis_id"], p["split"], packet_id)
    if list(p["packet_ids"]) != expected["packet_ids"]:
        left_out = [i for i in expected["packet_ids"] if i not in p["packet_ids"]]
        raise ResearchRefused(
            "selective_judgement", f"the judgement of {p['hypothesis_id']!r} on {p['split']} "
            f"cites {len(p['packet_ids'])} of its {len(expected['packet_ids'])} scored packet(s) "
            "under the plan in force: every packet counts, so choosing among them is refused"
            + (f" (left out: {', '.join(left_out[:8])})" if left_out else ""),
            hypothesis_id=p["hypothesis_id"], cites=left_out[:64],
            hint="write it with `loopx evidence judge`, which cites every packet")
    # Fields a judgement written before they existed does not carry are taken as they come.
    mismatched = sorted(k for k, v in expected.items()
                        if k != "notes" and k in p and p[k] != v)
    if mismatched:
        raise Refused(f"the judgement of {p['hypothesis_id']!r} on {p['split']} is not what the "
                      f"contract's rule gives for its packets (differs in "
                      f"{', '.join(mismatched)}); expected verdict {expected['verdict']}",
                      hint="write it with `loopx evidence judge`, which computes it")


def _refuse_cited(view: View, hypothesis_id: str, split: str, packet_id: str) -> None:
    """Why a cited packet is no evidence for this judgement."""
    packet = view["packets"].get(packet_id)
    if packet is None or packet["hypothesis_id"] != hypothesis_id:
        raise Refused(f"packet {packet_id!r} is not evidence for hypothesis {hypothesis_id!r}")
    if packet["provenance"] == "claimed":
        raise Refused(f"packet {packet_id!r} has claimed provenance; claimed evidence never "
                      "counts")
    raise Refused(f"packet {packet_id!r} is {packet['status']}, has no {split} results, or was "
                  f"recorded under plan version {packet['plan_version']}, not the one in force")


def _check_audit(view: View, who: Identity, record: Record) -> None:
    entry = _entry(view, record["payload"]["hypothesis_id"], "the audit")
    check_audit(view, who, entry, record["payload"])


def _check_gate(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    entry = _entry(view, p["hypothesis_id"], "the gate result")
    if p["revision"] != entry["revision"]:
        raise Refused(f"hypothesis {entry['hypothesis_id']!r} is at revision {entry['revision']}, "
                      f"not {p['revision']}: check it again")


def check_decision(view: View, who: Identity, record: Record) -> None:
    """A new decision id superseding the live decision, bound to the hypothesis' current
    revision, and only on the matching candidate."""
    p = record["payload"]
    if p["decision_id"] in view["decisions"]:
        raise Refused(f"decision {p['decision_id']!r} already exists")
    live = view["hypothesis_decisions"].get(p["hypothesis_id"])
    if p.get("supersedes") != live:
        raise Refused(f"hypothesis {p['hypothesis_id']!r}: "
                      + (f"a new decision must cite and supersede {live!r}" if live
                         else "there is no earlier decision to supersede"))
    from loopx.research.projections import row

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
        wanted = retirement_rests_on(view, entry, current, p)
    if sorted(p["evidence_ids"]) != sorted(wanted):
        raise Refused(f"the decision must cite exactly the records the candidate rests on: "
                      f"{', '.join(wanted)}")
    flagged = invalid_packets(view, entry)
    if flagged and p.get("valid", True):
        raise ResearchRefused(
            "invalid_result", f"hypothesis {hid!r} rests on results its executor measured "
            f"invalid ({', '.join(flagged)}): its decision says so (valid false, with the "
            "violations), so the iteration counts as a validity failure", hypothesis_id=hid,
            cites=flagged[:64], hint="`loopx decide` sets it from the packets")


def retirement_rests_on(view: View, entry: dict[str, Any], current: Any,
                        p: dict[str, Any]) -> list[str]:
    """The records a retirement must cite: its candidate's, or, when the evaluator judges the
    results invalid itself (``invalid_result`` with violations named), the results it judged.

    Raises:
        ResearchRefused: not a retirement candidate for that reason.
    """
    hid = entry["hypothesis_id"]
    reasons = (current.retirement or {}).get("reasons", [])
    if p["reason"] in reasons:
        assert current.retirement is not None
        return list(current.retirement["rests_on"])
    measured = measured_packets(view, entry)
    if p["reason"] == "invalid_result" and p.get("violations") and measured:
        return measured
    raise ResearchRefused(
        "no_candidate", f"hypothesis {hid!r} is not a retirement candidate for "
        f"{p['reason']}" + (f" (it is for: {', '.join(reasons)})" if reasons else "")
        + (" and has no counted result to judge invalid" if p["reason"] == "invalid_result"
           else ""), hypothesis_id=hid)


def _no_promotion(view: View, entry: dict[str, Any], current: Any) -> ResearchRefused:
    from loopx.research.projections import promotion_blockers

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


def _check_todo(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    if p["action_kind"] in EVALUATION_SPLITS and p.get("hypothesis_id") is None:
        # An evaluation todo reads a split for one hypothesis: without one, its packet could
        # name any hypothesis and its successors (judge, held-out) would name none.
        raise RecordRejected([FieldProblem(
            "payload.hypothesis_id", f"todo {p['todo_id']!r}: a {p['action_kind']} todo "
            "evaluates a hypothesis and must name it (`loopx todo add --hypothesis ID`)")],
            context="todo")


def _check_contract(view: View, who: Identity, record: Record) -> None:
    p = record["payload"]
    # The protected boundary holds only what the contract names: an empty protected scope, or
    # scopes pointing outside what the workspace allows, would weaken the gate unseen.
    if applies(view, 2):  # rules version 2 (loopx.kernel.rules)
        check_contract_paths(p, contract_scopes(view))
    if applies(view, 4):
        check_split_locations(p)
    if applies(view, 8):
        _check_base_pin(view, p)
    plan = current_plan(view)
    measured = None if plan is None else plan["plan"]["metric.baseline_hypothesis"]
    if (plan is not None and plan["frozen_seq"] is not None and measured is not None
            and p["metric"].get("baseline_hypothesis") is None):
        raise ResearchRefused(
            "measured_baseline", f"the plan measures its baseline ({measured!r}) and evidence "
            f"has been recorded under it since seq {plan['frozen_seq']}: an amendment may never "
            "replace it with an assumed number",
            hint=f"keep metric.baseline_hypothesis {measured!r}; a different comparison is a new "
                 "campaign")
    if applies(view, 4) and plan is not None:
        since = evidence_since(view)
        if since is not None:
            check_comparison_kept(view, plan["plan"], plan_of(p), since)
            check_guardrails_kept(current_contract(view) or {}, p, since)
    if applies(view, 3) and plan is not None and view["campaign"]["family_size"]:
        check_control_kept(view, plan["plan"]["promotion_policy.campaign_control"],
                           (p.get("promotion_policy") or {}).get("campaign_control"))


RESEARCH_CHECKS: dict[str, Check] = {
    "research_contract_v0": _check_contract,
    "todo_item_v0": _check_todo,
    "research_hypothesis_v0": check_hypothesis,
    "research_decision_v0": check_decision,
    "auto_research_evidence_packet_v0": _check_packet,
    "research_evidence_event_v0": _check_event,
    "novelty_audit_v0": _check_audit,
    "grounding_ref_v0": check_grounding_ref,
    "gate_result_v0": _check_gate,
}
