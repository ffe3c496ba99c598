"""The facts of the research graph a successor rule may require: the completed todo's
hypothesis, its packets, judgements, gates, candidacies and decision, as folded state shows them.

Registered at the lanes' :data:`~loopx.work.extensions.SUCCESSOR_CONDITIONS` by
:mod:`loopx.research.domain`. Each reads the state before the completion is folded in, never
the completer's result: what an agent types when it completes a todo cannot make or suppress
the next todo. A todo that names no hypothesis (or one not proposed) has none of these facts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopx.research.state import HELDOUT_ACTION, baseline_hypothesis, counts, scored_result
from loopx.work.extensions import SuccessorCondition

View = dict[str, Any]
Fact = Callable[[View, str, dict[str, Any], dict[str, Any]], bool]


def _of_hypothesis(fact: Fact) -> Callable[[View, str, dict[str, Any]], bool]:
    """A predicate over (view, todo id, todo) from one over the todo's hypothesis entry too."""
    def holds(view: View, todo_id: str, todo: dict[str, Any]) -> bool:
        entry = view["hypotheses"].get(todo.get("hypothesis_id") or "")
        return entry is not None and fact(view, todo_id, todo, entry)
    return holds


def _dev_verdict(view: View, entry: dict[str, Any]) -> str | None:
    dev = entry["judgements"].get("dev")
    return dev["verdict"] if dev is not None and counts(view, dev) else None


def _attempt_scored(view: View, todo_id: str, todo: dict[str, Any],
                    entry: dict[str, Any]) -> bool:
    packets = (view["packets"][p] for p in entry["packets"])
    return any(p["todo_id"] == todo_id and scored_result(p) for p in packets)


def _heldout_todo(view: View, todo_id: str, todo: dict[str, Any],
                  entry: dict[str, Any]) -> bool:
    todos = view["todos"]
    return any(t in todos and todos[t]["action_kind"] == HELDOUT_ACTION
               for t in view["hypothesis_todos"].get(entry["hypothesis_id"], ()))


def _heldout_verdict(view: View, entry: dict[str, Any]) -> str | None:
    # The projections load on first use only: the domain registers this module at import.
    from loopx.research.gates import final_heldout

    final = final_heldout(view, entry)
    return None if final is None else str(final["verdict"])


def _pending(*names: str) -> Fact:
    def fact(view: View, todo_id: str, todo: dict[str, Any], entry: dict[str, Any]) -> bool:
        from loopx.research.gates import gates

        rows = gates(view, entry)
        return any(rows[name].required and rows[name].status == "pending" for name in names)
    return fact


def _candidate(kinds: tuple[str, ...]) -> Fact:
    def fact(view: View, todo_id: str, todo: dict[str, Any], entry: dict[str, Any]) -> bool:
        from loopx.research.projections import row

        current = row(view, entry["hypothesis_id"])
        return any(getattr(current, kind) is not None for kind in kinds)
    return fact


FACTS: dict[str, tuple[str, Fact]] = {
    "attempt_scored": (
        "a scored evidence packet (provenance other than claimed) was recorded under the "
        "completed todo", _attempt_scored),
    "dev_supports": (
        "the hypothesis' dev judgement in force (the latest, under the plan in force, not "
        "claimed) supports it",
        lambda view, todo_id, todo, entry: _dev_verdict(view, entry) == "supports"),
    "dev_contradicts": (
        "the hypothesis' dev judgement in force contradicts it (significantly worse than the "
        "baseline)",
        lambda view, todo_id, todo, entry: _dev_verdict(view, entry) == "contradicts"),
    "heldout_packet": (
        "a held-out evidence packet, scored or failed, was recorded for the hypothesis (under "
        "any plan version)",
        lambda view, todo_id, todo, entry: any(view["packets"][p]["heldout"]
                                               for p in entry["packets"])),
    "heldout_todo": (
        "a run_holdout_eval todo exists for the hypothesis, in any state", _heldout_todo),
    "heldout_judged": (
        "the hypothesis has its final held-out judgement under the plan in force",
        lambda view, todo_id, todo, entry: _heldout_verdict(view, entry) is not None),
    "heldout_supports": (
        "that final held-out judgement supports it (the campaign-level control counted it a "
        "discovery)",
        lambda view, todo_id, todo, entry: _heldout_verdict(view, entry) == "supports"),
    "boundary_pending": (
        "the protected-boundary gate is required and pending: no gate result from git covers "
        "the evidence yet", _pending("protected_boundary")),
    "review_pending": (
        "a gate the evaluator checks outside the log is required and pending: the protected "
        "boundary (no gate result from git covers the evidence yet) or the reproduced gate (no "
        "re-run covers the held-out packets yet)", _pending("protected_boundary", "reproduced")),
    "promotion_candidate": (
        "`loopx candidates` lists the hypothesis for promotion", _candidate(("promotion",))),
    "retirement_candidate": (
        "`loopx candidates` lists the hypothesis for retirement", _candidate(("retirement",))),
    "retry_candidate": (
        "`loopx candidates` lists the hypothesis for a retry (attempts are left)",
        _candidate(("retry",))),
    "decidable": (
        "`loopx candidates` lists the hypothesis for promotion or for retirement",
        _candidate(("promotion", "retirement"))),
    "decided": (
        "the hypothesis has a live decision (promoted or retired)",
        lambda view, todo_id, todo, entry: entry["hypothesis_id"] in view["hypothesis_decisions"]),
    "baseline": (
        "the hypothesis is the plan's measured baseline",
        lambda view, todo_id, todo, entry: entry["hypothesis_id"] == baseline_hypothesis(view)),
}


def successor_conditions() -> dict[str, SuccessorCondition]:
    """Research's named facts, for the lanes' successor rules."""
    return {name: SuccessorCondition(summary, _of_hypothesis(fact))
            for name, (summary, fact) in FACTS.items()}
