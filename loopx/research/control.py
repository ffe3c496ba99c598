"""Campaign-level error control: many hypotheses, one held-out set, promotions that cannot be
taken back, and no coordinator. So the rule is online and applied in log order.

The family is every hypothesis that ever claimed a held-out todo (the measured baseline
excepted), numbered by its first held-out claim: the order is fixed before any held-out value is
seen, so no agent can reorder the tests once it knows their p-values. Test ``j`` gets the share
``gamma(j) = j^-1.5 / zeta(1.5)`` of the campaign's level (the shares sum to 1), and then:

- ``alpha_spending`` (family-wise error): threshold ``level * gamma(j)``; by the union bound
  the chance of any false promotion is at most ``level``, whatever the tests' dependence.
- ``lond`` (false discovery rate, Javanmard and Montanari's LOND): threshold
  ``level * gamma(j) * (D + 1)``, capped at ``level``, where ``D`` counts the discoveries among
  tests numbered before ``j`` that were judged before it. Judging early can only lower a
  threshold. With every hypothesis null nothing is discovered, so the bound is the one above.

A hypothesis whose plan lets it read held-out data ``B`` times is tested at ``threshold / B``
(Bonferroni over the looks its budget allows), so re-measuring until a look passes gains
nothing. Every held-out test counts, retired hypotheses' included. ``adjusted_p`` is the p-value
scaled so that it compares with ``level`` directly.
"""

from __future__ import annotations

from typing import Any

ZETA_1_5 = 2.6123753486854883  # sum of j^-1.5 over j >= 1
RULES = ("lond", "alpha_spending")
RULE_WORDS = {"lond": "LOND online false discovery rate control",
              "alpha_spending": "online alpha spending (family-wise error control)"}


def gamma(index: int) -> float:
    """The share of the campaign's level that test number ``index`` (from 1) may spend."""
    if index < 1:
        raise ValueError(f"a test's index starts at 1, got {index}")
    return index ** -1.5 / ZETA_1_5


def threshold(rule: str, level: float, index: int, discoveries_before: int) -> float:
    """The online rule's threshold for test ``index`` (before dividing by the looks)."""
    if rule == "alpha_spending":
        return level * gamma(index)
    if rule == "lond":
        return min(level, level * gamma(index) * (discoveries_before + 1))
    raise ValueError(f"unknown campaign control rule {rule!r}: one of {', '.join(RULES)}")


def apply_control(control: dict[str, Any], p_value: float, effect_large_enough: bool, *,
                  index: int, discoveries_before: int, looks: int) -> dict[str, Any]:
    """The ``control`` field of a held-out judgement: threshold, adjusted p, discovery."""
    rule, level = control["rule"], float(control["level"])
    cut = threshold(rule, level, index, 0 if rule == "alpha_spending" else discoveries_before)
    looks = max(1, looks)
    adjusted = min(1.0, p_value * looks * level / cut)
    return {"rule": rule, "level": level, "index": index,
            "discoveries_before": discoveries_before if rule == "lond" else 0, "looks": looks,
            "threshold": cut / looks, "adjusted_p": adjusted,
            "discovery": bool(p_value * looks < cut and effect_large_enough)}


def family_position(view: dict[str, Any], hypothesis_id: str) -> tuple[int, int]:
    """(index, discoveries judged so far among earlier-numbered tests) of a hypothesis."""
    hypotheses = view["hypotheses"]
    index = hypotheses[hypothesis_id]["family_index"]
    if index is None:
        raise ValueError(f"hypothesis {hypothesis_id!r} never claimed a held-out todo")
    found = 0
    for entry in hypotheses.values():
        earlier = entry["family_index"]
        if earlier is not None and earlier < index:
            judgement = first_heldout(entry)
            found += bool(judgement and (judgement.get("control") or {}).get("discovery"))
    return index, found


def first_heldout(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The hypothesis' first counted held-out judgement (final for it), if any."""
    for judgement in entry["heldout_judgements"]:
        if judgement["provenance"] != "claimed":
            return judgement
    return None


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given: a closing,
    offline disclosure over every held-out test, beside the online rule."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m / rank)
        out[i] = min(1.0, running)
    return out


def expected_false_promotions(rule: str, level: float, thresholds: list[float],
                              discoveries: int) -> float:
    """What the rule promises about false promotions, as an expected count: under alpha
    spending at most the sum of the thresholds spent; under LOND at most ``level`` times the
    discoveries (its false discovery rate bound)."""
    if rule == "alpha_spending":
        return sum(thresholds)
    return level * discoveries
