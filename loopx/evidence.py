"""Evidence judgements: what the contract's rule makes of a hypothesis' scored packets on one split.

The judge tool writes exactly this payload, and the write check recomputes it from the cited
packets, so a recorded verdict is never more than the numbers support.
"""

from __future__ import annotations

from typing import Any

from loopx.campaign_state import current_contract
from loopx.errors import NotFound, Refused

View = dict[str, Any]
JUDGED_SPLITS = ("dev", "heldout")


def packets_for(view: View, hypothesis_id: str, split: str) -> list[str]:
    """The hypothesis' scored, non-claimed packets with results on ``split``, oldest first."""
    entry = view["hypotheses"][hypothesis_id]
    out = []
    for packet_id in entry["packets"]:
        packet = view["packets"][packet_id]
        if (packet["status"] == "scored" and packet["provenance"] != "claimed"
                and any(r[0] == split for r in packet["results"])):
            out.append(packet_id)
    return out


def judgement_payload(view: View, hypothesis_id: str, split: str,
                      packet_ids: list[str] | None = None) -> dict[str, Any]:
    """The ``research_evidence_event_v0`` payload the rule gives for these packets (default: all
    the hypothesis' scored packets on ``split``).

    One value per contract seed, from the latest cited packet that reports it; with a seed
    missing the verdict is ``needs_retry``, since the rule is judged over every seed.

    Raises:
        NotFound: no such hypothesis; Refused: no contract, a split that is not judged, a packet
        that is not this hypothesis' scored evidence on the split (claimed evidence never counts).
    """
    from loopx.stats import RULE, judge

    contract = current_contract(view)
    if contract is None:
        raise Refused("there is no contract: the metric, baseline and seeds come from it")
    if hypothesis_id not in view["hypotheses"]:
        raise NotFound(f"there is no hypothesis {hypothesis_id!r}")
    if split not in JUDGED_SPLITS:
        raise Refused(f"split {split!r} is not judged (dev and heldout are)")
    usable = packets_for(view, hypothesis_id, split)
    if packet_ids is None:
        packet_ids = usable
    for packet_id in packet_ids:
        _check_packet(view, hypothesis_id, split, packet_id, usable)
    if not packet_ids:
        raise Refused(f"hypothesis {hypothesis_id!r} has no scored packet with {split} results",
                      hint="an executor records one with `loopx evidence append-packet`")
    ordered = sorted(set(packet_ids), key=lambda p: view["packets"][p]["seq"])
    metric = contract["metric"]
    by_seed: dict[int, float] = {}
    for packet_id in ordered:
        for r_split, r_metric, seed, value in view["packets"][packet_id]["results"]:
            if r_split == split and r_metric == metric["name"] and seed in metric["seeds"]:
                by_seed[seed] = value
    seeds = [s for s in metric["seeds"] if s in by_seed]
    values = [by_seed[s] for s in seeds]
    policy = contract["promotion_policy"]
    payload: dict[str, Any] = {
        "hypothesis_id": hypothesis_id, "packet_ids": ordered, "split": split,
        "metric": metric["name"], "direction": metric["direction"],
        "baseline": metric["baseline"], "baseline_values": [], "values": values,
        "seeds": seeds, "rule": RULE, "statistic": None, "p_value": None, "mean_delta": None,
        "verdict": "needs_retry", "notes": None,
    }
    if len(seeds) == len(metric["seeds"]):
        judged = judge(values, baseline=metric["baseline"], direction=metric["direction"],
                       min_delta=metric["min_delta"], alpha=policy["alpha"]).to_json()
        # to_json turns an infinite statistic (a deterministic measurement) into None.
        payload.update({k: judged[k] for k in ("verdict", "p_value", "mean_delta", "statistic")})
    else:
        missing = [s for s in metric["seeds"] if s not in by_seed]
        payload["notes"] = f"no {metric['name']} value for seed(s) {', '.join(map(str, missing))}"
    return payload


def _check_packet(view: View, hypothesis_id: str, split: str, packet_id: str,
                  usable: list[str]) -> None:
    packet = view["packets"].get(packet_id)
    if packet is None or packet["hypothesis_id"] != hypothesis_id:
        raise Refused(f"packet {packet_id!r} is not evidence for hypothesis {hypothesis_id!r}")
    if packet["provenance"] == "claimed":
        raise Refused(f"packet {packet_id!r} has claimed provenance; claimed evidence never "
                      "counts")
    if packet_id not in usable:
        raise Refused(f"packet {packet_id!r} is {packet['status']} or has no {split} results")
