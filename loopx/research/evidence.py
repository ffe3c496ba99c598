"""Evidence judgements: what the contract's rule makes of a hypothesis' scored packets on one split.

The judge tool writes exactly this payload, and the write check recomputes it from the cited
packets, so a recorded verdict is never more than the numbers support.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from loopx.governance.state import current_contract
from loopx.kernel.errors import NotFound, Refused
from loopx.kernel.rules import applies
from loopx.research.control import apply_control, family_position
from loopx.research.plan import current_plan, plan_version
from loopx.research.state import baseline_heldout_version, baseline_hypothesis, scored_result

View = dict[str, Any]
JUDGED_SPLITS = ("dev", "heldout")


def packets_for(view: View, hypothesis_id: str, split: str) -> list[str]:
    """The hypothesis' scored, non-claimed packets with results on ``split`` under the plan in
    force (held-out todos' packets for ``heldout``, the others for any other split; the measured
    baseline's held-out ones under the plan version they count from,
    :func:`~loopx.research.state.baseline_heldout_version`), oldest first: every one of them
    counts, none may be left out."""
    heldout = split == "heldout"
    version = (baseline_heldout_version(view)
               if heldout and hypothesis_id == baseline_hypothesis(view) else plan_version(view))
    out = []
    for packet_id in view["hypotheses"][hypothesis_id]["packets"]:
        packet = view["packets"][packet_id]
        # Held-out judgements read held-out todos' packets only, and dev judgements never read
        # them: dev values under a held-out claim would be attempts outside the limit.
        if (scored_result(packet) and packet["plan_version"] == version
                and packet["heldout"] == heldout
                and any(r[0] == split for r in packet["results"])):
            out.append(packet_id)
    return out


def _missing(seeds: list[int], present: Iterable[int]) -> list[int]:
    """The seeds of ``seeds`` not among ``present``, in order."""
    have = set(present)
    return [s for s in seeds if s not in have]


def _values(view: View, packet_ids: list[str], split: str, metric: dict[str, Any]
            ) -> tuple[list[int], list[float]]:
    """The contract's metric for its seeds in these packets. Under rules version 5: one value
    per seed, the mean over the packets that carry every contract seed, seeds in order of first
    appearance; before, every value pooled in seq order."""
    found = [[(seed, value) for r_split, r_metric, seed, value in view["packets"][p]["results"]
              if r_split == split and r_metric == metric["name"] and seed in metric["seeds"]]
             for p in packet_ids]
    if not applies(view, 5):
        return [s for pairs in found for s, _ in pairs], [v for pairs in found for _, v in pairs]
    # A seed is one replicate: its re-runs agree far more than seeds do, so they are averaged,
    # not counted as more seeds. And a measurement is every seed at once: averaging in packets
    # that re-ran only some seeds would let an agent re-run its worst ones.
    runs: dict[int, list[float]] = {}
    for pairs in found:
        if not _missing(metric["seeds"], (s for s, _ in pairs)):
            for seed, value in pairs:
                runs.setdefault(seed, []).append(value)
    return list(runs), [math.fsum(v) / len(v) for v in runs.values()]


def uncounted(view: View, packet: dict[str, Any], split: str, metric: str,
              seed: int) -> dict[str, Any] | None:
    """Why no judgement counts this value of ``metric`` in ``packet`` (a ``view["packets"]``
    entry), as ``{"why": ...}`` with what it needs to say so; None when a judgement on its
    split may count it, or its split is never judged (``train``)."""
    if packet["provenance"] == "claimed":
        return {"why": "claimed"}
    if packet["status"] != "scored":
        return {"why": "not_scored", "status": packet["status"]}
    if split not in JUDGED_SPLITS:
        return None
    plans = view["campaign"]["plans"]
    plan = next((p for p in plans if p["version"] == packet["plan_version"]), None)
    seeds = [] if plan is None else list(plan["plan"]["metric.seeds"] or [])
    if seed not in seeds:
        return {"why": "other_seed", "seeds": seeds}
    if applies(view, 5):
        missing = _missing(seeds, (s for r_split, r_metric, s, _ in packet["results"]
                                   if r_split == split and r_metric == metric))
        if missing:
            return {"why": "partial", "missing": missing}
    return None


def judgement_payload(view: View, hypothesis_id: str, split: str) -> dict[str, Any]:
    """The ``research_evidence_event_v0`` payload the rule gives for the hypothesis' packets on
    ``split``: all of them under the plan in force, pooled (see docs/research.md).

    Against the measured baseline's packets on the same split (Welch) when the plan names one,
    else against the contract's scalar baseline, an assumption. A held-out judgement also
    carries the campaign-level control, which decides its verdict.

    Raises:
        NotFound: no such hypothesis; Refused: no contract, a split that is not judged, no
        usable packet, the baseline itself, or a measured baseline with no values on the split.
    """
    from loopx.research.stats import RULE, judge

    contract = current_contract(view)
    plan = current_plan(view)
    if contract is None or plan is None:
        raise Refused("there is no contract: the metric, baseline and seeds come from it")
    if hypothesis_id not in view["hypotheses"]:
        raise NotFound(f"there is no hypothesis {hypothesis_id!r}")
    if split not in JUDGED_SPLITS:
        raise Refused(f"split {split!r} is not judged (dev and heldout are)")
    baseline_id = baseline_hypothesis(view)
    if hypothesis_id == baseline_id:
        raise Refused(f"{hypothesis_id!r} is the campaign's measured baseline: other hypotheses "
                      "are judged against it, it is not judged itself")
    packet_ids = packets_for(view, hypothesis_id, split)
    if not packet_ids:
        claimed = [p for p in view["hypotheses"][hypothesis_id]["packets"]
                   if view["packets"][p]["provenance"] == "claimed"]
        raise Refused(f"hypothesis {hypothesis_id!r} has no scored packet with {split} results "
                      f"under plan version {plan['version']}"
                      + (f" (claimed packets never count: {', '.join(claimed[:8])})"
                         if claimed else ""),
                      hint="an executor records one with `loopx evidence append-packet`")
    metric = contract["metric"]
    seeds, values = _values(view, packet_ids, split, metric)
    baseline_packets: list[str] = []
    baseline_values: list[float] = []
    if baseline_id is not None:
        if baseline_id in view["hypotheses"]:
            baseline_packets = packets_for(view, baseline_id, split)
        if not baseline_packets:
            raise Refused(f"the measured baseline {baseline_id!r} has no scored {split} packet "
                          f"under plan version {plan['version']} yet",
                          hint="an executor runs the baseline on this split first")
        baseline_values = _values(view, baseline_packets, split, metric)[1]
        if not baseline_values:
            raise Refused(f"the measured baseline {baseline_id!r} has no {split} packet with "
                          f"{metric['name']} for every seed under plan version "
                          f"{plan['version']} yet",
                          hint="an executor runs the baseline on this split, every seed at once")
    policy = contract["promotion_policy"]
    payload: dict[str, Any] = {
        "hypothesis_id": hypothesis_id, "packet_ids": packet_ids, "split": split,
        "metric": metric["name"], "direction": metric["direction"],
        "baseline": None if baseline_id else metric["baseline"],
        "baseline_values": baseline_values, "values": values, "seeds": seeds, "rule": RULE,
        "statistic": None, "p_value": None, "mean_delta": None, "verdict": "needs_retry",
        "notes": None, "plan_version": plan["version"], "baseline_packet_ids": baseline_packets,
        "control": None,
    }
    missing = _missing(metric["seeds"], seeds)
    if missing:
        payload["notes"] = (
            f"no packet has {metric['name']} for every seed "
            f"({', '.join(map(str, metric['seeds']))}): a measurement is every seed at once"
            if applies(view, 5) else
            f"no {metric['name']} value for seed(s) {', '.join(map(str, missing))}")
        return payload
    judged = judge(values, baseline=metric["baseline"], direction=metric["direction"],
                   min_delta=metric["min_delta"], alpha=policy["alpha"],
                   baseline_values=baseline_values or None)
    out = judged.to_json()  # an infinite statistic (a deterministic measurement) becomes None
    payload.update({k: out[k] for k in ("verdict", "p_value", "mean_delta", "statistic")})
    control = plan["plan"]["promotion_policy.campaign_control"]
    if split == "heldout" and control is not None:
        index, found = family_position(view, hypothesis_id)
        applied = apply_control(control, judged.p_value, judged.mean_delta >= metric["min_delta"],
                                index=index, discoveries_before=found,
                                looks=plan["plan"]["evaluation.heldout_read_budget"] or 1)
        payload["control"] = applied
        if applied["discovery"]:
            payload["verdict"] = "supports"
        elif judged.verdict != "contradicts":
            payload["verdict"] = "inconclusive"
    return payload
