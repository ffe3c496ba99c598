"""The story's research plan section: the plan in force, its steps in order, each with its status
as the log shows it (:mod:`loopx.research.research_plan`), and why each revision replanned; and
the words both renderers use for it.

Read from folded state only. Every text is registered with the plan record and field it came from
(so the redaction gate can name them); a private plan is named by record id and never quoted, and
a private hypothesis a step names is shown by its record id, never by its id.
"""

from __future__ import annotations

from typing import Any

from loopx.narrator.reader import Reader
from loopx.narrator.words import STATE_WORDS
from loopx.research.research_plan import current_research_plan, step_progress, versions

View = dict[str, Any]

STEP_WORDS = {
    "done": "done: every hypothesis it names is decided and every todo finished",
    "in_progress": "in progress",
    "pending": "not started: nothing it names has been proposed or claimed yet",
    "untracked": "not tracked in the log: it names only experiments described in words",
}
TODO_WORDS = {"not_added": "not added yet", "open": "open", "claimed": "claimed",
              "completed": "completed", "failed": "failed"}
NOT_PROPOSED = "not proposed yet"
INTRO = ("What the planner set out to try, in order, and how far each step has come by the log. "
         "It is not the analysis plan: it says what to try, never how a measurement is judged.")


def section(r: Reader, view: View) -> dict[str, Any] | None:
    """The research plan in force as the story shows it (None when none was recorded)."""
    current = current_research_plan(view)
    if current is None:
        return None
    rid = r.rid(current["record_id"])
    out: dict[str, Any] = {"record_id": rid, "version": current["version"],
                           "revisions": _revisions(r, view)}
    if current.get("visibility") == "private":
        return {**out, "private": True}
    steps = []
    for i, step in enumerate(current["steps"]):
        got = step_progress(view, step)
        where = f"steps.{i}"
        steps.append({
            "step_id": r.text(step["step_id"], rid, f"{where}.step_id"),
            "title": r.text(step["title"], rid, f"{where}.title"),
            "rationale": r.optional(step.get("rationale"), rid, f"{where}.rationale"),
            "status": got["status"],
            "hypotheses": [_hypothesis(r, view, h, rid, f"{where}.hypotheses.{j}")
                           for j, h in enumerate(got["hypotheses"])],
            "todos": [{"todo_id": r.text(t["todo_id"], rid, f"{where}.todos.{j}"),
                       "status": t["status"]} for j, t in enumerate(got["todos"])],
            "experiments": [r.text(e, rid, f"{where}.experiments.{j}")
                            for j, e in enumerate(got["experiments"])],
        })
    return {**out, "private": False, "summary": r.optional(current.get("summary"), rid, "summary"),
            "steps": steps}


def _hypothesis(r: Reader, view: View, item: dict[str, Any], rid: str,
                where: str) -> dict[str, Any]:
    entry = view["hypotheses"].get(item["hypothesis_id"])
    if entry is not None and entry.get("visibility") == "private":
        # The plan may name it, but the story never does: a private hypothesis' id is private.
        return {"private": True, "key": r.rid(entry["record_id"]), "state": item["state"]}
    return {"private": False, "hypothesis_id": r.text(item["hypothesis_id"], rid, where),
            "key": None if entry is None else r.rid(entry["record_id"]), "state": item["state"]}


def _revisions(r: Reader, view: View) -> list[dict[str, Any]]:
    """Every version after the first: its number, record and reason (a private one unquoted)."""
    out = []
    for v in versions(view)[1:]:
        rid = r.rid(v["record_id"])
        private = v.get("visibility") == "private"
        out.append({"version": v["version"], "record_id": rid, "private": private,
                    "reason": None if private else r.optional(v.get("reason"), rid, "reason")})
    return out


# -- words --------------------------------------------------------------------------------------

def lines(plan: dict[str, Any]) -> list[tuple[int, str]]:
    """The plan's lines, each with its depth: a head line, each step with its status, then (one
    level down) why, and what the log says of each hypothesis and todo it names."""
    if plan["private"]:
        return [(0, f"The research plan (version {plan['version']}, {plan['record_id']}) is "
                    "private.")]
    out = [(0, f"Research plan version {plan['version']} ({plan['record_id']})"
               + (f": {plan['summary']}" if plan["summary"] else "."))]
    for n, step in enumerate(plan["steps"], 1):
        out.append((0, f"Step {n}, {step['step_id']}: {step['title']}; "
                       f"{STEP_WORDS[step['status']]}."))
        if step["rationale"]:
            out.append((1, f"Why: {step['rationale']}"))
        out += [(1, hypothesis_line(h)) for h in step["hypotheses"]]
        out += [(1, f"Todo {t['todo_id']}: {TODO_WORDS.get(t['status'], t['status'])}")
                for t in step["todos"]]
        out += [(1, f"Experiment (described in words, not tracked): {e}")
                for e in step["experiments"]]
    return out


def hypothesis_line(h: dict[str, Any]) -> str:
    """A hypothesis a step names, and its state now."""
    state = NOT_PROPOSED if h["state"] == "not_proposed" else STATE_WORDS.get(h["state"],
                                                                                h["state"])
    name = f"private hypothesis {h['key']}" if h["private"] else f"Hypothesis {h['hypothesis_id']}"
    return f"{name}: {state}"


def revision_lines(plan: dict[str, Any]) -> list[str]:
    """Why each revision replanned."""
    return [f"Version {v['version']} ({v['record_id']}) replanned"
            + (f": {v['reason']}" if v["reason"] else " (a private record)")
            for v in plan["revisions"]]
