"""What a reader needs to weigh the results: how many hypotheses were tried and tested, the
campaign-level error control and what it promises, a closing Benjamini-Hochberg figure, where
the baseline came from, and the analysis plan with every amendment.

Read from folded state only. Recorded values are registered with their record and field; the two
figures computed here (the expected number of false promotions and the Benjamini-Hochberg count)
are registered as derived, with their formula and every recorded input.
"""

from __future__ import annotations

from typing import Any

from loopx.governance.state import current_contract
from loopx.narrator.reader import Reader, judgement, number
from loopx.research.control import (
    benjamini_hochberg,
    expected_false_promotions,
    first_heldout,
)
from loopx.research.evidence import packets_for
from loopx.research.state import campaign_base

View = dict[str, Any]

# The plan's fields in reading order, each with the words the story uses for it.
FIELD_WORDS = {
    "metric.name": "metric", "metric.direction": "direction",
    "metric.baseline": "assumed baseline", "metric.baseline_hypothesis": "measured baseline",
    "metric.min_delta": "minimum change", "metric.seeds": "seeds",
    "promotion_policy.rule": "test", "promotion_policy.alpha": "alpha",
    "promotion_policy.campaign_control": "campaign control",
    "promotion_policy.max_attempts": "attempt limit",
    "evaluation.heldout_read_budget": "held-out read budget",
}
FORMULAS = {
    "lond": "level x discoveries: LOND's false discovery rate bound "
            "(loopx.research.control.expected_false_promotions)",
    "alpha_spending": "sum of the thresholds spent: the union bound "
                      "(loopx.research.control.expected_false_promotions)",
    "bh": "count of Benjamini-Hochberg q-values at or below the level "
          "(loopx.research.control.benjamini_hochberg)",
}


def plan_context(view: View) -> tuple[int, int]:
    """(how many plan versions the campaign has had, the number of the one in force)."""
    plans = view["campaign"]["plans"]
    return len(plans), (plans[-1]["version"] if plans else 1)


def baseline_ids(view: View) -> set[str]:
    """Every hypothesis a plan version named as the measured baseline: never a test."""
    return {p["plan"]["metric.baseline_hypothesis"] for p in view["campaign"]["plans"]} - {None}


def build(r: Reader, view: View) -> dict[str, Any]:
    """The disclosure: counts, the held-out family, control, BH, baseline and plan versions."""
    contract = current_contract(view)
    private = contract is not None and contract.get("visibility") == "private"
    tests = _tests(r, view)
    out: dict[str, Any] = {"counts": _counts(view), "tests": tests, "private": private,
                           "control": None, "groups": [], "uncontrolled": 0, "hidden": 0,
                           "bh": None, "baseline": None, "plans": [], "contract_shown": False,
                           "base": _base(r, view)}
    if contract is None or private:
        return out
    out["contract_shown"] = True
    rid = contract["record_id"]
    control = contract["promotion_policy"].get("campaign_control")
    if control:
        out["control"] = {"rule": control["rule"], "record_id": rid, "level": r.num(
            control["level"], rid, "promotion_policy.campaign_control.level")}
    shown = [t["judgement"] for t in tests if t["judgement"] and not t["judgement"]["private"]]
    out["groups"] = _groups(r, [j for j in shown if j["control"]])
    out["uncontrolled"] = sum(1 for j in shown if not j["control"])
    out["hidden"] = sum(1 for t in tests if t["judgement"] and t["judgement"]["private"])
    out["bh"] = _bh(r, [j for j in shown if j["p_value"] is not None], contract)
    out["baseline"] = _baseline(r, view, contract)
    out["plans"] = _plans(r, view)
    return out


def _counts(view: View) -> dict[str, int]:
    hypotheses = view["hypotheses"]
    skip = baseline_ids(view)
    tried = [e for h, e in hypotheses.items() if h not in skip]
    return {
        "tried": len(tried), "baselines": len(skip & set(hypotheses)),
        "judged_dev": sum(1 for e in tried if any(ev["split"] == "dev" for ev in e["events"])),
        "family": view["campaign"]["family_size"],
        "judged_heldout": sum(1 for e in tried
                              if e["family_index"] is not None and first_heldout(e)),
    }


def _tests(r: Reader, view: View) -> list[dict[str, Any]]:
    """The held-out family in its fixed order: each member and its final held-out test."""
    members = sorted((e for e in view["hypotheses"].values() if e["family_index"] is not None),
                     key=lambda e: e["family_index"])
    out = []
    for entry in members:
        key = r.rid(entry["record_id"])
        private = entry.get("visibility") == "private"
        final = first_heldout(entry)
        out.append({"index": entry["family_index"], "key": key, "private": private,
                    "hypothesis_id": None if private else r.text(entry["hypothesis_id"], key,
                                                                 "hypothesis_id"),
                    "judgement": None if final is None else judgement(r, final,
                                                                      plan_context(view))})
    return out


def _groups(r: Reader, judged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (rule, level) the tests were judged under: tests, discoveries, and the expected
    number of false promotions the rule promises, computed from the recorded tests."""
    keys = sorted({(j["control"]["rule"], j["control"]["level"]) for j in judged})
    out = []
    for rule, level in keys:
        mine = [j for j in judged if (j["control"]["rule"], j["control"]["level"]) == (rule, level)]
        thresholds = [j["control"]["threshold"] for j in mine]
        found = sum(1 for j in mine if j["control"]["discovery"])
        inputs = [{"record_id": j["event_id"], "field": f"control.{name}",
                   "value": j["control"][name]}
                  for j in mine for name in ("level", "threshold", "discovery")]
        expected = r.derived(expected_false_promotions(rule, level, thresholds, found),
                             "expected_false_promotions", FORMULAS[rule], inputs, rule=rule)
        out.append({"rule": rule, "level": level, "tests": len(mine), "discoveries": found,
                    "expected_false": expected})
    return out


def _bh(r: Reader, judged: list[dict[str, Any]], contract: dict[str, Any]) -> dict[str, Any]:
    """How many of the held-out p-values pass Benjamini-Hochberg at the campaign's level (the
    alpha when the contract sets no control): a closing, offline disclosure."""
    rid, policy = contract["record_id"], contract["promotion_policy"]
    control = policy.get("campaign_control")
    field = "promotion_policy.campaign_control.level" if control else "promotion_policy.alpha"
    level = control["level"] if control else policy["alpha"]
    p_values = [j["p_value"] for j in judged]
    passes = sum(1 for q in benjamini_hochberg(p_values) if q <= level)
    inputs = [{"record_id": rid, "field": field, "value": level}]
    inputs += [{"record_id": j["event_id"], "field": "p_value", "value": j["p_value"]}
               for j in judged]
    return {"level": r.num(level, rid, field), "tests": len(p_values),
            "passes": r.derived(passes, "benjamini_hochberg_passes", FORMULAS["bh"], inputs)}


def _base(r: Reader, view: View) -> dict[str, Any] | None:
    """The commit every experiment starts from, and the contract or packet that fixed it (its
    commit is not shown when that packet is private)."""
    fixed = campaign_base(view)
    if fixed is None:
        return None
    pid = fixed["packet_id"]
    if pid is not None and view["packets"][pid]["visibility"] == "private":
        return {"private": True, "seq": fixed["seq"]}
    key = r.rid(fixed["record_id"])
    return {"private": False, "seq": fixed["seq"], "record_id": key,
            "contract_version": fixed["contract_version"],
            "commit": r.typed(fixed["base_commit"], "git_commit", key, "base_commit")}


def _baseline(r: Reader, view: View, contract: dict[str, Any]) -> dict[str, Any]:
    """Where the baseline comes from: a hypothesis measured per split, or an assumed number."""
    rid, metric = contract["record_id"], contract["metric"]
    measured = metric.get("baseline_hypothesis")
    if measured is None:
        return {"kind": "assumed", "value": r.num(metric["baseline"], rid, "metric.baseline")}
    entry = view["hypotheses"].get(measured)
    if entry is not None and entry.get("visibility") == "private":
        return {"kind": "measured", "private": True, "key": r.rid(entry["record_id"])}
    out: dict[str, Any] = {"kind": "measured", "private": False, "values": {},
                           "hypothesis_id": r.text(measured, rid, "metric.baseline_hypothesis")}
    if entry is None:
        return out
    for split in ("dev", "heldout"):
        out["values"][split] = sum(
            1 for p in packets_for(view, measured, split)
            for s, m, seed, _ in view["packets"][p]["results"]
            if s == split and m == metric["name"] and seed in metric["seeds"])
    return out


def _plans(r: Reader, view: View) -> list[dict[str, Any]]:
    """Every plan version: the first as it was frozen, the later ones by what changed, each
    with pre-freeze edits. Values are read from the contract versions that hold them."""
    values = _PlanValues(r, view)
    plans = view["campaign"]["plans"]
    out = []
    for i, plan in enumerate(plans):
        last = plan["edits"][-1]["contract_version"] if plan["edits"] else plan["contract_version"]
        out.append({
            "version": plan["version"], "contract_version": plan["contract_version"],
            "seq": plan["seq"], "packets_before": plan["packets_before"],
            "frozen_seq": plan["frozen_seq"],
            "record_id": r.rid(values.versions[plan["contract_version"]]["record_id"]),
            "current": i == len(plans) - 1,
            "plan": [(_words(f, plan["plan"]), values.shown(last, f, v, plan["plan"]))
                     for f, v in plan["plan"].items() if f in FIELD_WORDS] if i == 0 else [],
            "changes": values.changes(plan, plan["contract_version"], plan["changes"]),
            "edits": [{"contract_version": e["contract_version"], "seq": e["seq"],
                       "record_id": r.rid(values.versions[e["contract_version"]]["record_id"]),
                       "changes": values.changes(plan, e["contract_version"], e["changes"])}
                      for e in plan["edits"]],
        })
    return out


def _words(field: str, plan: dict[str, Any]) -> str:
    """A plan field in words; the scalar baseline is an assumption unless a hypothesis
    measures the baseline (and is then not used)."""
    if field == "metric.baseline" and plan.get("metric.baseline_hypothesis"):
        return "scalar baseline"
    return FIELD_WORDS.get(field, field)


class _PlanValues:
    """Plan values in words, each registered with the contract version that holds it."""

    def __init__(self, r: Reader, view: View) -> None:
        self.r = r
        self.versions = {v["version"]: v for v in view["campaign"]["versions"]}
        self.private = {h for h, e in view["hypotheses"].items()
                        if e.get("visibility") == "private"}

    def changes(self, plan: dict[str, Any], contract_version: int,
                changes: list[dict[str, Any]]) -> list[dict[str, str]]:
        # The value before is the one the contract version just before this one held.
        before = contract_version - 1
        return [{"field": c["field"], "words": _words(c["field"], plan["plan"]),
                 "before": (self.shown(before, c["field"], c["before"])
                            if before in self.versions else "not set"),
                 "after": self.shown(contract_version, c["field"], c["after"], plan["plan"])}
                for c in changes]

    def shown(self, contract_version: int, field: str, value: Any,
              plan: dict[str, Any] | None = None) -> str:
        contract = self.versions[contract_version]
        rid, r = contract["record_id"], self.r
        if contract.get("visibility") == "private":
            return "private"
        if field == "metric.baseline_hypothesis" and value in self.private:
            return "a private hypothesis"  # never named, even by the contract
        if field == "metric.baseline" and (plan or {}).get("metric.baseline_hypothesis"):
            return self.shown(contract_version, field, value) + " (not used: it is measured)"
        if value is None:
            return {"promotion_policy.campaign_control": "none (no campaign-level control)",
                    "metric.baseline_hypothesis": "none (the scalar baseline, assumed)"
                    }.get(field, "not set")
        if field == "promotion_policy.campaign_control":
            level = r.num(value["level"], rid, field + ".level")
            return f"{value['rule']} at level {number(level)}"  # type: ignore[arg-type]
        if isinstance(value, list):
            return "[" + ", ".join(number(v) for v in r.nums(value, rid, field)) + "]"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return r.text(value, rid, field)
        return number(value) if r.num(value, rid, field) is not None else "not set"
