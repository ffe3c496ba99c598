"""What a contract amendment may still change once evidence exists.

Until the first evidence packet the contract may be edited freely: nothing was measured, so no
change can rescue anything. From then on an eager curator has seen results, and three things a
promotion rests on only stay or tighten:

- **the comparison** every judgement makes (rules version 4, ``comparison_changed``): the
  metric, its direction and the measured baseline hypothesis are fixed, and an assumed baseline
  and the minimum change only move against the hypotheses. A weaker comparator named after the
  results (every later hypothesis "beats" it) is another question, asked after seeing answers.
  Once anything was scored on held-out data the seeds are fixed too: other seeds measure the
  baseline there again, and a curator could change them until a low draw came up;
- **the guardrails** (rules version 4, ``guardrail_loosened``): no required gate, owner
  approval, protected path, pinned protected commit or prior-art entry is dropped, and the
  editable scope does not widen, so a hypothesis a guardrail stopped (an edit of the evaluator)
  is not promoted by moving the guardrail;
- **the campaign's error control**, once its held-out family has begun (rules version 3,
  ``campaign_control_loosened``): its level does not rise, nor does ``alpha_spending`` give way
  to ``lond``.

Every other field may change after evidence; a change to the analysis plan opens a new plan
version (:mod:`loopx.research.plan`).
"""

from __future__ import annotations

from typing import Any, NoReturn

from loopx.kernel.errors import ResearchRefused
from loopx.research.state import scored_result

View = dict[str, Any]
FIXED = ("metric.name", "metric.direction", "metric.baseline_hypothesis")
NEW_CAMPAIGN = "a different comparison, or looser guardrails, is a new campaign"


def _heldout_since(view: View) -> int | None:
    """The seq of the campaign's first scored held-out packet, if there is one."""
    return min((p["seq"] for p in view["packets"].values() if p["heldout"] and scored_result(p)),
               default=None)


def _change(field: str, before: Any, after: Any) -> dict[str, Any]:
    return {"field": field, "before": before, "after": after}


def check_comparison_kept(view: View, before: dict[str, Any], after: dict[str, Any],
                          since: int) -> None:
    """Refuse an analysis plan ``after`` (flat, as :func:`~loopx.research.plan.plan_of`) whose
    comparison differs from ``before``'s other than by tightening (the seeds are fixed from
    the first scored held-out packet)."""
    changes = [_change(f, before[f], after[f]) for f in FIXED if after[f] != before[f]]
    said = [f"{c['field']} from {c['before']!r} to {c['after']!r} (fixed)" for c in changes]
    heldout = (_heldout_since(view) if after["metric.seeds"] != before["metric.seeds"]
               else None)
    if heldout is not None:
        changes.append(_change("metric.seeds", before["metric.seeds"], after["metric.seeds"]))
        said.append(f"metric.seeds from {before['metric.seeds']} to {after['metric.seeds']} "
                    f"(fixed once anything was scored on held-out data, at seq {heldout}: "
                    "other seeds would measure the baseline there again)")
    assumed = before["metric.baseline_hypothesis"] is after["metric.baseline_hypothesis"] is None
    if assumed:
        old, new = before["metric.baseline"], after["metric.baseline"]
        up = before["metric.direction"] == "maximize"
        if old is not None and new is not None and (new < old if up else new > old):
            changes.append(_change("metric.baseline", old, new))
            said.append(f"the assumed metric.baseline from {old} to {new} (it may only "
                        f"{'rise' if up else 'fall'}: {before['metric.direction']})")
    old_delta, new_delta = before["metric.min_delta"] or 0.0, after["metric.min_delta"] or 0.0
    if new_delta < old_delta:
        changes.append(_change("metric.min_delta", old_delta, new_delta))
        said.append(f"metric.min_delta from {old_delta} to {new_delta} (it may only rise)")
    if changes:
        _refuse("comparison_changed", "changes what every judgement compares", since, said,
                changes, "keep the metric, its direction and the baseline, or tighten (a higher "
                         "min_delta, an assumed baseline harder to beat)")


def _refuse(rule: str, what: str, since: int, said: list[str], changes: list[dict[str, Any]],
            hint: str) -> NoReturn:
    raise ResearchRefused(
        rule, f"the amendment {what} after evidence was recorded (since seq {since}): "
        + "; ".join(said), detail={"changes": changes, "evidence_since": since},
        hint=f"{hint}; {NEW_CAMPAIGN}")


def _prior_art(contract: dict[str, Any]) -> list[Any]:
    boundary = contract.get("novelty_boundary")
    return list(boundary.get("prior_art") or ()) if isinstance(boundary, dict) else []


def check_guardrails_kept(before: dict[str, Any], after: dict[str, Any], since: int) -> None:
    """Refuse a contract version ``after`` that loosens a guardrail of ``before`` (the
    contract in force)."""
    old_policy = before.get("promotion_policy") or {}
    new_policy = after.get("promotion_policy") or {}
    changes: list[dict[str, Any]] = []
    said: list[str] = []

    def loosened(field: str, old: Any, new: Any, words: str) -> None:
        changes.append(_change(field, old, new))
        said.append(words)

    gates = [g for g in old_policy.get("required_gates", ()) if g not in
             new_policy.get("required_gates", ())]
    if gates:
        loosened("promotion_policy.required_gates", old_policy.get("required_gates"),
                 new_policy.get("required_gates"),
                 f"drops the required gate{'s' if len(gates) > 1 else ''} {', '.join(gates)}")
    old_tolerance = old_policy.get("reproduce_tolerance", 0.0)
    if new_policy.get("reproduce_tolerance", 0.0) > old_tolerance:
        loosened("promotion_policy.reproduce_tolerance", old_tolerance,
                 new_policy.get("reproduce_tolerance"),
                 f"widens the reproduce tolerance from {old_tolerance:g}")
    if old_policy.get("require_owner_approval") and not new_policy.get("require_owner_approval"):
        loosened("promotion_policy.require_owner_approval", True, False,
                 "no longer requires the owner's approval")
    old_scope, new_scope = list(before.get("protected_scope") or ()), list(
        after.get("protected_scope") or ())
    dropped = [e for e in old_scope if e not in new_scope]
    if dropped:
        loosened("protected_scope", old_scope, new_scope,
                 f"removes {', '.join(dropped)} from the protected scope")
    pinned = before.get("protected_commit")
    if pinned is not None and after.get("protected_commit") != pinned:
        loosened("protected_commit", pinned, after.get("protected_commit"),
                 f"moves the pinned protected commit {pinned[:12]}")
    old_edit, new_edit = list(before.get("editable_scope") or ()), list(
        after.get("editable_scope") or ())
    if old_edit and (not new_edit or any(e not in old_edit for e in new_edit)):
        loosened("editable_scope", old_edit, new_edit,
                 "widens the editable scope" + ("" if new_edit else " to everything"))
    art = [ref for ref in _prior_art(before) if ref not in _prior_art(after)]
    if art:
        loosened("novelty_boundary.prior_art", _prior_art(before), _prior_art(after),
                 f"drops {len(art)} prior-art entr{'ies' if len(art) > 1 else 'y'} from the "
                 "novelty boundary")
    if changes:
        _refuse("guardrail_loosened", "loosens what a promotion must pass", since,
                [f"it {words}" for words in said], changes,
                "keep the guardrails, or tighten them (more required gates, more protected "
                "paths, a narrower editable scope)")


def check_control_kept(view: View, before: dict[str, Any] | None,
                       after: dict[str, Any] | None) -> None:
    """Once the held-out family has begun, the campaign's control may only tighten: its
    guarantee holds for a level fixed over the whole family, and a level raised after some
    held-out p-values are known would spend more than the campaign was promised."""
    if before is None:
        return  # a contract from before the field: no control to keep
    looser = []
    if after is None:
        looser.append("removes it")
    else:
        if float(after["level"]) > float(before["level"]):
            looser.append(f"raises its level from {before['level']} to {after['level']}")
        if before["rule"] == "alpha_spending" and after["rule"] == "lond":
            looser.append("trades family-wise error control (alpha_spending) for false "
                          "discovery rate control (lond)")
    if looser:
        size = view["campaign"]["family_size"]
        raise ResearchRefused(
            "campaign_control_loosened",
            "the amendment loosens the campaign's error control after its held-out family "
            f"began ({size} hypothesis{'es' if size != 1 else ''} numbered): it "
            + " and ".join(looser),
            detail={"before": before, "after": after, "family_size": size},
            hint="keep promotion_policy.campaign_control as it is, or tighten it (a lower "
                 "level, alpha_spending instead of lond)")
