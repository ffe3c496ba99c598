"""``completeness``: which of the fields a well-formed hypothesis carries are present.

This is the trust boundary's deterministic PROPOSAL_COMPLETENESS (seed 002), and only that: a
count of present fields over the fields checked, a pure function of folded state. It does NOT
score novelty, scientific quality, safety or performance: a complete hypothesis may be wrong,
old news or dangerous, and an incomplete one may be right. Nothing reads it to decide anything:
it never gates a claim, a judgement, a promotion or a retirement. It is shown in the frontier
rows and on the evidence graph's hypothesis nodes so that a reader sees what a proposal left out.
"""

from __future__ import annotations

from typing import Any

from loopx.research.plan import current_plan

View = dict[str, Any]

# The fields checked, in the order shown. Each is present or not; none weighs more.
FIELDS = (
    "statement",         # a statement of the idea, not only a title
    "mechanism_family",  # what kind of change it is (the schema requires it)
    "parameters",        # at least one parameter, so the idea is one concrete change
    "grounding",         # grounding refs (its own or recorded for it) or a no-grounding reason
    "expected_effect",   # what it is expected to do, so a result can bear it out or not
    "todo",              # the todo it was proposed under (capability rule 2)
    "analysis_plan",     # an analysis plan in force that its evidence will be judged under
)


def stated(payload: dict[str, Any]) -> dict[str, Any]:
    """What a ``research_hypothesis_v0`` payload states, as the fold keeps it (flags and a
    count, never the text): the part of completeness that only the record itself knows."""
    return {
        "statement": bool(str(payload.get("statement") or "").strip()),
        "parameters": bool(payload.get("parameters")),
        "expected_effect": bool(str(payload.get("expected_effect") or "").strip()),
        "grounding_refs": len(payload.get("grounding_refs") or ()),
        "no_grounding_reason": bool(str(payload.get("no_grounding_reason") or "").strip()),
    }


def completeness(view: View, entry: dict[str, Any]) -> dict[str, Any]:
    """The hypothesis' completeness: ``present`` of ``total`` fields, ``score`` (their ratio,
    rounded to 3 places), ``missing`` (the absent fields, in :data:`FIELDS` order) and
    ``fields`` (each field: present or not). Not a quality score (see the module docstring)."""
    facts = entry.get("stated") or {}
    present = {
        "statement": bool(facts.get("statement")),
        "mechanism_family": bool(entry.get("mechanism_family")),
        "parameters": bool(facts.get("parameters")),
        "grounding": _grounded(view, entry, facts),
        "expected_effect": bool(facts.get("expected_effect")),
        "todo": entry.get("todo_id") is not None,
        "analysis_plan": current_plan(view) is not None,
    }
    count = sum(present[f] for f in FIELDS)
    return {"present": count, "total": len(FIELDS), "score": round(count / len(FIELDS), 3),
            "missing": [f for f in FIELDS if not present[f]],
            "fields": {f: present[f] for f in FIELDS}}


def _grounded(view: View, entry: dict[str, Any], facts: dict[str, Any]) -> bool:
    if facts.get("grounding_refs") or facts.get("no_grounding_reason"):
        return True
    # Rare (capability rule 2 asks for one of the two at proposal): refs recorded later.
    hid = entry["hypothesis_id"]
    return any(g["hypothesis_id"] == hid for g in view.get("grounding", {}).values())
