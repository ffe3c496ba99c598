"""The research plan: the planner's ordered steps, each calling for hypotheses and experiments,
with each step's status derived from the log.

Not the analysis plan (:mod:`loopx.research.plan`), which is the part of the contract that decides
what a measurement means. The research plan says what to try, in which order and why; it never
changes how evidence is judged. The curator (or the owner) records it as ``research_plan_v0``;
a revision is the next version, superseding the one before, like a contract amendment. Every
version is folded into ``research_plans["versions"]``; the status of a step is a projection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.versions import check_next_version, pick_version
from loopx.kernel.errors import FieldProblem, RecordRejected, Refused

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState

View = dict[str, Any]
SLICE = "research_plans"
KIND = "research_plan_v0"
DEFAULT_PLAN_ID = "research-plan"
# Fields loopx sets on a revision: a plan file never carries them.
VERSION_FIELDS = ("version", "supersedes")
META = ("record_id", "seq", "ts", "agent_id", "visibility")
# A step's status, derived from the log.
STEP_STATUSES = ("done", "in_progress", "pending", "untracked")
# Hypothesis states that end a hypothesis' part in a plan.
DECIDED = ("promoted", "retired")
FINISHED_TODOS = ("completed", "failed")


# -- fold and check ----------------------------------------------------------------------------

def versions(view: View) -> list[dict[str, Any]]:
    """Every research plan version, oldest first (empty before the first)."""
    return list(view[SLICE].get("versions", ()))


def current_research_plan(view: View) -> dict[str, Any] | None:
    """The research plan version in force, with its record metadata (None before the first)."""
    stored = versions(view)
    return stored[-1] if stored else None


def fold_research_plan(view: View, record: dict[str, Any], p: dict[str, Any]) -> None:
    """Append one version (the entry is new; earlier ones stay as they were)."""
    entry = {**p, **{k: record[k] for k in META}}
    view[SLICE]["versions"] = [*versions(view), entry]


def _content(version: dict[str, Any]) -> dict[str, Any]:
    # What a revision must change: the steps or the summary (normalised through the model, so a
    # field left to its default equals the default written out).
    from loopx.research.records import ResearchPlanV0

    payload = {k: v for k, v in version.items() if k not in META}
    model = ResearchPlanV0.model_validate(payload).model_dump(mode="json")
    return {"summary": model["summary"], "steps": model["steps"]}


def check_research_plan(view: View, who: Identity, record: dict[str, Any]) -> None:
    """Version 1 first; then each revision keeps the plan id, is the next version, supersedes
    the version in force and changes its steps or summary."""
    p = record["payload"]
    current = current_research_plan(view)
    if current is None:
        if p["version"] != 1:
            raise Refused("there is no research plan yet: the first is version 1, superseding "
                          "nothing", hint="`loopx research-plan record FILE`")
        return
    check_next_version(current, p, what="research plan", id_key="plan_id", change="a revision",
                       how="record a revision, which supersedes it",
                       hint="`loopx research-plan record FILE --reason TEXT`")
    if _content(p) == _content(current):
        raise Refused("the revision changes nothing (its steps and summary are those of "
                      f"version {current['version']})")


# -- status of each step -----------------------------------------------------------------------

def _hypothesis_item(view: View, hypothesis_id: str) -> dict[str, Any]:
    from loopx.research.projections import row

    entry = view["hypotheses"].get(hypothesis_id)
    if entry is None:
        return {"hypothesis_id": hypothesis_id, "state": "not_proposed", "done": False,
                "started": False}
    state = row(view, hypothesis_id).state
    done = state in DECIDED
    if state == "baseline":
        # The measured baseline is never decided: its part is done once it is measured on the
        # held-out split.
        done = any(view["packets"][p]["status"] == "scored" and view["packets"][p]["heldout"]
                   for p in entry["packets"])
    return {"hypothesis_id": hypothesis_id, "state": state, "done": done, "started": True}


def _todo_item(view: View, todo_id: str) -> dict[str, Any]:
    todo = view["todos"].get(todo_id)
    if todo is None:
        return {"todo_id": todo_id, "status": "not_added", "done": False, "started": False}
    return {"todo_id": todo_id, "status": todo["status"],
            "done": todo["status"] in FINISHED_TODOS,
            "started": todo["status"] != "open" or todo["claims"] > 0}


def step_status(items: list[dict[str, Any]]) -> str:
    """``untracked`` (it names nothing the log holds), ``done`` (every hypothesis it names is
    decided and every todo finished), ``pending`` (none of them started) or ``in_progress``."""
    if not items:
        return "untracked"
    if all(i["done"] for i in items):
        return "done"
    if not any(i["started"] for i in items):
        return "pending"
    return "in_progress"


def step_progress(view: View, step: dict[str, Any]) -> dict[str, Any]:
    """One step with what the log says of each hypothesis and todo it names, and its status."""
    hypotheses = [_hypothesis_item(view, h) for h in step.get("hypotheses") or ()]
    todos = [_todo_item(view, t) for t in step.get("todos") or ()]
    return {"step_id": step["step_id"], "title": step["title"],
            "rationale": step.get("rationale"), "status": step_status([*hypotheses, *todos]),
            "hypotheses": [{k: h[k] for k in ("hypothesis_id", "state", "done")}
                           for h in hypotheses],
            "todos": [{k: t[k] for k in ("todo_id", "status", "done")} for t in todos],
            "experiments": list(step.get("experiments") or ())}


def progress(view: View, version: dict[str, Any]) -> dict[str, Any]:
    """A plan version's steps in order, each with its derived status, and the count per status."""
    steps = [step_progress(view, s) for s in version["steps"]]
    counts = {s: sum(1 for step in steps if step["status"] == s) for s in STEP_STATUSES}
    return {"steps": steps, "counts": counts}


def plan_version(view: View, number: int | None = None) -> dict[str, Any]:
    """A research plan version (the one in force by default), with its record metadata.

    Raises:
        NotFound: no research plan yet, or no such version.
    """
    return pick_version(versions(view), number, "research plan",
                        "the curator records one with `loopx research-plan record FILE`")


def show(view: View, number: int | None = None) -> dict[str, Any]:
    """The research plan as ``loopx research-plan show --json`` prints it: a version, its steps'
    status now, and every version's change note."""
    shown = plan_version(view, number)
    head = {k: shown.get(k) for k in ("plan_id", "version", "supersedes", "summary", "reason",
                                      *META)}
    history = [{"version": v["version"], "record_id": v["record_id"], "seq": v["seq"],
                "ts": v["ts"], "agent_id": v["agent_id"], "reason": v.get("reason"),
                "steps": len(v["steps"])} for v in versions(view)]
    return {"plan": head, "in_force": history[-1]["version"], **progress(view, shown),
            "versions": history}


# -- recording a version -------------------------------------------------------------------------

def record_plan(ledger: Ledger, creds: Credentials, plan: dict[str, Any], *,
                reason: str | None = None) -> Record:
    """Record the research plan: version 1, or the next version superseding the one in force
    (``reason`` says why; it overrides a ``reason`` in ``plan``).

    Raises:
        RecordRejected: a malformed plan, or one that sets ``version`` or ``supersedes``
        (loopx's); Refused: another plan id, or a revision that changes nothing or gives no
        reason; Forbidden: the writer may not record it.
    """
    set_by_loopx = [f for f in VERSION_FIELDS if f in plan]
    if set_by_loopx:
        raise RecordRejected([FieldProblem(
            f"payload.{f}", "is set by loopx (the next version, superseding the one in force); "
            "leave it out of the plan") for f in set_by_loopx], context="research plan")
    payload = dict(plan)
    if reason is not None:
        payload["reason"] = reason

    def build(view: LaneState, who: Identity, now: str) -> list[Record]:
        current = current_research_plan(view)
        draft = {**payload, "plan_id": payload.get("plan_id") or (
            current["plan_id"] if current else DEFAULT_PLAN_ID)}
        if current is not None:
            if not (draft.get("reason") or "").strip():
                raise RecordRejected([FieldProblem(
                    "payload.reason", f"a revision of research plan version "
                    f"{current['version']} must say why it replans (--reason)")],
                    context="research plan")
            draft.update(version=current["version"] + 1, supersedes=current["record_id"])
        return ledger.prepare({"schema_version": KIND, "payload": draft}, who)

    return ledger.write(creds, build)[0]
