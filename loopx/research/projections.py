"""Projections: each hypothesis' frontier row, its gates, and the promotion, retirement and retry
candidates, as pure functions of the checked state (never of the clock or the disk).

The state is folded incrementally (see :mod:`loopx.research.state`), so a projection reads
compact per-hypothesis entries: the frontier after one new record costs one catch-up step
plus one pass over the hypotheses, never a replay of the log.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from loopx.kernel.rules import applies
from loopx.research.completeness import completeness
from loopx.research.evidence import JUDGED_SPLITS, packets_for
from loopx.research.fingerprint import earlier_duplicates
from loopx.research.gates import (
    GATES,
    GUARDRAILS,
    Gate,
    compared_packets,
    control_words,
    final_heldout,
    flagged_invalid,
    gates,
    invalid_packets,
    live_decision,
    relied_packets,
)
from loopx.research.grounding import ideators
from loopx.research.plan import attempt_limit
from loopx.research.state import baseline_hypothesis, counts, dev_attempts

__all__ = ["GATES", "RETIRE_REASONS", "STATES", "Gate", "Row", "candidates", "control_words",
           "final_heldout", "frontier", "gates", "promotion_blockers", "relied_packets",
           "retirement_reasons", "row"]

View = dict[str, Any]

STATES = ("proposed", "selected", "running", "evidence_recorded", "supported", "needs_retry",
          "contradicted", "no_effect_found", "retry_exhausted", "at_promotion_gate", "promoted",
          "retired", "baseline")
RETIRE_REASONS = ("contradicted", "duplicate", "operator_rejected", "retry_exhausted",
                  "superseded", "guardrail_failed", "no_effect_found", "invalid_result")
UNSCORED = ("failed", "timeout", "invalid_output", "cancelled")


class Row(NamedTuple):
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
    # Which fields a well-formed hypothesis carries are present: not a quality, novelty,
    # safety or performance score, and never read by a gate (loopx.research.completeness).
    completeness: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON data (fresh containers, nothing shared with the view)."""
        # Built field by field: a generic deep copy of every leaf cost more than
        # computing the frontier (issue 18).
        return {
            "hypothesis_id": self.hypothesis_id, "title": self.title, "state": self.state,
            "revision": self.revision, "next_action": self.next_action,
            "next_role": self.next_role, "detail": self.detail,
            "gates": {name: {"name": g.name, "required": g.required, "status": g.status,
                             "reasons": _plain(g.reasons), "rests_on": _plain(g.rests_on)}
                      for name, g in self.gates.items()},
            "promotion": _plain(self.promotion), "retirement": _plain(self.retirement),
            "retry": _plain(self.retry), "decision": self.decision,
            "completeness": _plain(self.completeness),
        }


def _plain(value: Any) -> Any:
    """A copy of JSON-like data: new dicts, lists and tuples; leaves (immutable) shared."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _todos(view: View, hypothesis_id: str) -> list[dict[str, Any]]:
    todos = view["todos"]
    return [{**todos[t], "todo_id": t}
            for t in view["hypothesis_todos"].get(hypothesis_id, ()) if t in todos]


def promotion_blockers(view: View, entry: dict[str, Any],
                       gate_rows: dict[str, Gate]) -> list[str]:
    """Why the hypothesis is not a promotion candidate (empty: it is one)."""
    out = []
    dev = entry["judgements"].get("dev")
    if dev is None:
        out.append("no dev judgement")
    elif dev["provenance"] == "claimed":
        out.append("the dev judgement has claimed provenance")
    elif not counts(view, dev):
        out.append("the dev judgement was made under an earlier plan version")
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
    invalid = invalid_packets(view, entry)
    if invalid:
        out.append(f"an invalid result is never promoted: {_violations(view, invalid)}")
    if applies(view, 7):
        # The comparison is only as sound as the comparator: one its executor measured invalid
        # says nothing about the hypothesis.
        flagged = flagged_invalid(view, compared_packets(entry))
        if flagged:
            out.append("the measured baseline it was compared with was measured invalid: "
                       + _violations(view, flagged))
    return out


def _violations(view: View, packet_ids: list[str]) -> str:
    """Which packets were measured invalid, and what each violates."""
    return "; ".join(f"{p} violates {', '.join(view['packets'][p]['violations'])}"
                     for p in packet_ids)


def retirement_reasons(view: View, entry: dict[str, Any],
                       gate_rows: dict[str, Gate]) -> dict[str, list[str]]:
    """Each retirement reason that applies, with the records it rests on."""
    return {reason: refs for reason, (refs, _) in _retirements(view, entry, gate_rows).items()}


def _retirements(view: View, entry: dict[str, Any], gate_rows: dict[str, Gate]
                 ) -> dict[str, tuple[list[str], str]]:
    """Each retirement reason that applies: the records it rests on, and why, in words."""
    out: dict[str, tuple[list[str], str]] = {}
    judgements = entry["judgements"]
    worse = [j for j in judgements.values() if counts(view, j) and j["verdict"] == "contradicts"]
    if worse:
        out["contradicted"] = ([j["event_id"] for j in worse], "significantly worse than the "
                               "baseline on " + " and ".join(j["split"] for j in worse))
    failed = [gate_rows[name] for name in GUARDRAILS if gate_rows[name].status == "failed"]
    if failed:
        out["guardrail_failed"] = ([r for g in failed for r in g.rests_on],
                                   "; ".join(r for g in failed for r in g.reasons))
    invalid = invalid_packets(view, entry)
    if invalid:
        out["invalid_result"] = (invalid, "measured invalid by its executor: "
                                 + _violations(view, invalid))
    final = final_heldout(view, entry)
    dev = judgements.get("dev")
    dev_ok = counts(view, dev) and dev is not None and dev["verdict"] == "supports"
    if final is not None and final["verdict"] == "inconclusive":
        out["no_effect_found"] = ([final["event_id"]], "the final held-out judgement found no "
                                  f"effect{control_words(final)}")
    attempts = dev_attempts(view, entry)
    limit = attempt_limit(view)
    if len(attempts) >= limit and not dev_ok and gate_rows["heldout"].status != "passed":
        used = f"{len(attempts)} of {limit} attempt(s) used"
        refs = [p["packet_id"] for p in attempts]
        if counts(view, dev) and dev is not None and dev["verdict"] == "inconclusive":
            out.setdefault("no_effect_found", (
                [*refs, dev["event_id"]], f"{used}; the dev judgement over all of them found no "
                f"effect (p {dev['p_value']:.3g})"))
        elif "contradicted" not in out:
            kinds = ", ".join(sorted({p["status"] for p in attempts}))
            out["retry_exhausted"] = (refs, f"{used} ({kinds}) without a judgement that "
                                      "supports or contradicts it")
    earlier = earlier_duplicates(view, entry)
    if earlier:
        out["duplicate"] = ([view["hypotheses"][h]["record_id"] for h in earlier],
                            "the same idea as " + ", ".join(earlier))
    if entry["superseded_by"] is not None:
        out["superseded"] = ([view["hypotheses"][entry["superseded_by"]]["record_id"]],
                             f"superseded by {entry['superseded_by']}")
    decision = live_decision(view, entry)
    if (decision is not None and decision["outcome"] == "promoted"
            and decision["approval"] is not None
            and decision["approval"]["verdict"] == "rejected"):
        out["operator_rejected"] = ([decision["approval"]["record_id"]],
                                    "the owner rejected the promotion")
    return {reason: out[reason] for reason in RETIRE_REASONS if reason in out}


def _retry(view: View, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The next bounded dev attempt, while the plan's attempt limit leaves one: after a failed
    attempt, or a dev judgement over every attempt so far that needs one or found nothing yet.

    The candidate names the attempt to resume (its packet, ``branch`` and ``evaluated_commit``)
    and the evidence that it needs another turn (004's "branch/ref and needs_retry evidence"):
    the attempt's own unscored ``packet_status``, or the ``judgement`` (and its ``verdict``)
    over it, which it then rests on too."""
    attempts = dev_attempts(view, entry)
    if not attempts or final_heldout(view, entry) is not None:
        return None
    last = attempts[-1]
    left = attempt_limit(view) - len(attempts)
    dev = entry["judgements"].get("dev")
    judged_last = (counts(view, dev) and dev is not None
                   and dev["packet_ids"][-1:] == [last["packet_id"]]
                   and dev["verdict"] in ("needs_retry", "inconclusive"))
    if left <= 0 or not (last["status"] in UNSCORED or judged_last):
        return None
    judgement = dev if judged_last else None
    return {"packet_id": last["packet_id"], "branch": last["branch"],
            "evaluated_commit": last["evaluated_commit"], "attempts_left": left,
            "packet_status": last["status"],
            "judgement": None if judgement is None else judgement["event_id"],
            "verdict": None if judgement is None else judgement["verdict"],
            "rests_on": [last["packet_id"]] + ([] if judgement is None
                                              else [judgement["event_id"]])}


def row(view: View, hypothesis_id: str) -> Row:
    """The frontier row of one hypothesis: state, next action and role, gates, candidacy."""
    entry = view["hypotheses"][hypothesis_id]
    gate_rows = gates(view, entry)
    if hypothesis_id == baseline_hypothesis(view):
        return _baseline_row(view, entry, gate_rows)
    c = _candidacy(view, entry, gate_rows)
    state, action, role, detail = _state(view, entry, gate_rows, c.decision, c.blockers,
                                         c.retry, c.retire)
    return Row(hypothesis_id, entry["title"], state, entry["revision"], action, role, detail,
               gate_rows, c.promotion, c.retirement, c.retry if c.decision is None else None,
               None if c.decision is None else c.decision["decision_id"],
               completeness(view, entry))


class _Candidacy(NamedTuple):
    """What a row's candidacy rests on: the live decision, the promotion blockers, the
    retirement reasons and retry, and the promotion and retirement candidates they make."""

    decision: dict[str, Any] | None
    blockers: list[str]
    retire: dict[str, tuple[list[str], str]]
    retry: dict[str, Any] | None
    promotion: dict[str, Any] | None
    retirement: dict[str, Any] | None


def _candidacy(view: View, entry: dict[str, Any], gate_rows: dict[str, Gate]) -> _Candidacy:
    decision = live_decision(view, entry)
    blockers = promotion_blockers(view, entry, gate_rows)
    retire = _retirements(view, entry, gate_rows)
    retry = _retry(view, entry)
    promotion = None
    if decision is None and not blockers:
        rests = [entry["record_id"], *relied_packets(entry),
                 entry["judgements"]["dev"]["event_id"]]
        for gate in gate_rows.values():
            rests += [r for r in gate.rests_on if r not in rests]
        final = final_heldout(view, entry)
        assert final is not None  # the held-out gate passed
        promotion = {"rests_on": rests, "heldout": {
            "event_id": final["event_id"], "p_value": final["p_value"],
            "mean_delta": final["mean_delta"], "control": final.get("control")}}
    retirement = None
    undecided = decision is None or decision["outcome"] == "promoted"
    if retire and undecided:
        retirement = {"reasons": list(retire),
                      "rests_on": sorted({r for refs, _ in retire.values() for r in refs}),
                      "why": {reason: why for reason, (_, why) in retire.items()}}
    return _Candidacy(decision, blockers, retire, retry, promotion, retirement)


def _baseline_row(view: View, entry: dict[str, Any], gate_rows: dict[str, Gate]) -> Row:
    """The measured baseline: run on each split, never judged, promoted or retired."""
    from loopx.research.evidence import packets_for

    todos = [t for t in _todos(view, entry["hypothesis_id"])
             if t["status"] in ("open", "claimed") and t["role"] == "research_executor"]
    measured = [s for s in ("dev", "heldout") if packets_for(view, entry["hypothesis_id"], s)]
    detail = ("the campaign's measured baseline; measured on "
              + (", ".join(measured) if measured else "nothing yet"))
    action = todos[0]["action_kind"] if todos else None
    return Row(entry["hypothesis_id"], entry["title"], "baseline", entry["revision"], action,
               "research_executor" if todos else None, detail, gate_rows, None, None, None, None,
               completeness(view, entry))


def _state(view: View, entry: dict[str, Any], gate_rows: dict[str, Gate],
           decision: dict[str, Any] | None, blockers: list[str],
           retry: dict[str, Any] | None, retire: dict[str, tuple[list[str], str]]
           ) -> tuple[str, str | None, str | None, str]:
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
    if "contradicted" in retire:
        return "contradicted", "decide", "evaluator_promoter", "retire it (contradicted)"
    if any(gate_rows[name].status == "failed" for name in GUARDRAILS):
        return "contradicted", "decide", "evaluator_promoter", "retire it (guardrail_failed)"
    if "invalid_result" in retire:
        return ("contradicted", "decide", "evaluator_promoter",
                f"retire it (invalid_result): {retire['invalid_result'][1]}")
    for reason in ("no_effect_found", "retry_exhausted"):
        if reason in retire:
            return (reason, "decide", "evaluator_promoter",
                    f"retire it ({reason}): {retire[reason][1]}")
    dev_ok = counts(view, judgements.get("dev")) and judgements["dev"]["verdict"] == "supports"
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
        if gate_rows["reproduced"].status == "pending" and gate_rows["reproduced"].required:
            return ("at_promotion_gate", "review_gate", "evaluator_promoter",
                    "re-run the held-out packets (`loopx gate reproduce`)")
        return "at_promotion_gate", None, None, "; ".join(blockers)
    todos = _todos(view, entry["hypothesis_id"])
    running = [t for t in todos if t["status"] == "claimed"]
    if running:
        return ("running", None, running[0]["role"],
                f"{running[0]['todo_id']} held by {running[0]['holder']}")
    # Only what a judgement would cite now: a claimed packet, one under an earlier plan
    # version or one without dev or held-out values is never cited, so judging again would
    # change nothing and the hypothesis would wait here for good.
    citable = {p for split in JUDGED_SPLITS
               for p in packets_for(view, entry["hypothesis_id"], split)
               if p not in (judgements[split]["packet_ids"] if split in judgements else ())}
    unjudged = [p for p in entry["packets"] if p in citable]
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
        return "needs_retry", "add_todo", "hypothesis_proposer", verdicts
    return "proposed", "add_todo", "hypothesis_proposer", "no todo works on it yet"


def _in_order(view: View) -> list[str]:
    """The hypotheses in the order proposed."""
    hypotheses = view["hypotheses"]
    return sorted(hypotheses, key=lambda h: hypotheses[h]["seq"])


def frontier(view: View, role: str | None = None, agent_id: str | None = None) -> list[Row]:
    """Every hypothesis' row in the order proposed; with ``role``, only those whose next action
    that role takes (and never a novelty audit of a hypothesis the agent is on the ideation
    side of: its own, or a refinement of its own)."""
    rows = [row(view, h) for h in _in_order(view)]
    if role is None:
        return rows
    return [r for r in rows if r.next_role == role and not (
        r.next_action == "audit_novelty" and agent_id in ideators(view, r.hypothesis_id))]


def candidates(view: View, rows: list[Row] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Promotion, retirement and retry candidates, each with the records it rests on.

    ``rows`` is the unfiltered :func:`frontier` of the same view, if the caller has it already
    (the candidates are read off its rows, so both cost one pass). Without it, only what the
    candidates rest on is computed (no row states, details or completeness).
    """
    out: dict[str, list[dict[str, Any]]] = {"promotion": [], "retirement": [], "retry": []}
    found: list[tuple[str, str, int, dict[str, Any] | None, dict[str, Any] | None,
                      dict[str, Any] | None]] = []
    if rows is not None:
        found = [(r.hypothesis_id, r.title, r.revision, r.promotion, r.retirement, r.retry)
                 for r in rows]
    else:
        baseline = baseline_hypothesis(view)
        for hid in _in_order(view):
            entry = view["hypotheses"][hid]
            decision = live_decision(view, entry)
            if hid == baseline or (decision is not None and decision["outcome"] == "retired"):
                continue  # never a candidate: the baseline, or a hypothesis already retired
            c = _candidacy(view, entry, gates(view, entry))
            found.append((hid, entry["title"], entry["revision"], c.promotion, c.retirement,
                          c.retry if c.decision is None else None))
    for hid, title, revision, promotion, retirement, retry in found:
        base = {"hypothesis_id": hid, "title": title, "revision": revision}
        if promotion is not None:
            out["promotion"].append({**base, **promotion})
        if retirement is not None:
            out["retirement"].append({**base, **retirement})
        if retry is not None:
            out["retry"].append({**base, **retry})
    return out
