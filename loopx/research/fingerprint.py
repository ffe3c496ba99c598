"""An idea's fingerprint, and which earlier hypotheses a new one duplicates.

The fingerprint is the sha256 of a hypothesis' mechanism family and parameters in a normal
form. The statement, title, grounding and expected effect are not part of it: rewording a
statement makes no new idea. The normal form undoes what an eager proposer could change without
changing the idea: case, look-alike characters, spacing and separators in the family and in
parameter names; key order and nesting (``{"opt": {"lr": 0.1}}`` is ``{"opt.lr": 0.1}``);
numbers written otherwise (``0.10``, ``1e-1``, ``"0.1"``; ``64``, ``64.0``, ``"64"``); the case and
spacing of string values; parameters set to null or to an empty string (unset); and a list of
one value (the value itself).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from loopx.kernel.canonical import sha256_hex
from loopx.kernel.lazy_re import lazy_compile

if TYPE_CHECKING:
    from decimal import Decimal

# decimal and the deobfuscation tables load with the first fingerprint, not with the fold
# table that names this module (a read whose tail holds no hypothesis never computes one).

View = dict[str, Any]

# Characters that separate the words of a name: dropped, so lr-decay, lr_decay and LR Decay
# are one name.
SEPARATORS = lazy_compile(r"[\s_.:\-/]+")
NUMBER = lazy_compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$")
SIGNIFICANT = 12  # digits a float keeps: 0.30000000000000004 is 0.3
UNSET = ("", "null", "none")


def name_form(text: str) -> str:
    """A family or parameter name as compared: look-alikes folded, case-folded, separators
    dropped."""
    from loopx.kernel.deobfuscate import normalise

    return SEPARATORS.sub("", normalise(str(text)).casefold())


def _number(value: int | float | Decimal) -> int | float:
    """One form per number: an integral value within float precision as an int, any other as a
    float to ``SIGNIFICANT`` digits (so 64, 64.0, "64" and 0.1, 0.10, "1e-1" are each one)."""
    from decimal import Decimal

    exact = value if isinstance(value, Decimal) else Decimal(value)
    if exact.is_finite() and exact == exact.to_integral_value() and abs(exact) < 2 ** 53:
        return int(exact)  # also makes -0.0 plain 0
    as_float = float(value)
    if not math.isfinite(as_float):
        return as_float
    rounded = float(f"{as_float:.{SIGNIFICANT}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2 ** 53 else rounded


def value_form(value: Any) -> Any:
    """A parameter value as compared (None for a value that sets nothing)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        from decimal import Decimal, InvalidOperation

        from loopx.kernel.deobfuscate import normalise

        text = " ".join(normalise(value).casefold().split())
        if text in UNSET:
            return None
        if text in ("true", "false"):
            return text == "true"
        if NUMBER.match(text):
            try:
                return _number(Decimal(text))
            except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
                return text
        return text
    if isinstance(value, dict):
        return _pairs(value)
    if isinstance(value, list):
        items = [value_form(v) for v in value]
        return items[0] if len(items) == 1 else items
    return str(value)


def _flat(params: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in params.items():
        name = prefix + name_form(key)
        if isinstance(value, dict) and value:
            out += _flat(value, name)
        else:
            out.append((name, value))
    return out


def _pairs(params: dict[str, Any]) -> list[list[Any]]:
    """Parameters as sorted [name, value] pairs, nested names joined, unset ones left out."""
    pairs = [[name, form] for name, value in _flat(params)
             if (form := value_form(value)) is not None and form != []]
    return sorted(pairs, key=lambda pair: (pair[0], _canonical(pair[1])))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normal_form(payload: dict[str, Any]) -> dict[str, Any]:
    """What the fingerprint is computed from: the family's name and the parameters' pairs."""
    return {"mechanism_family": name_form(payload["mechanism_family"]),
            "parameters": _pairs(dict(payload.get("parameters") or {}))}


def fingerprint(payload: dict[str, Any]) -> str:
    """The sha256 of a hypothesis' mechanism family and parameters, in normal form."""
    return sha256_hex(_canonical(normal_form(payload)).encode())


# -- duplicates --------------------------------------------------------------------------------

def supersession_chain(view: View, hypothesis_id: str | None) -> list[str]:
    """``hypothesis_id`` and every hypothesis it supersedes, directly or through others."""
    chain: list[str] = []
    while hypothesis_id is not None and hypothesis_id in view["hypotheses"]:
        if hypothesis_id in chain:
            break
        chain.append(hypothesis_id)
        hypothesis_id = view["hypotheses"][hypothesis_id].get("supersedes")
    return chain


def untested(view: View, hypothesis_id: str) -> bool:
    """Nothing measured or decided yet: no packet, judgement or held-out read, and no decision
    but a retirement for being superseded."""
    entry = view["hypotheses"][hypothesis_id]
    decision_id = view["hypothesis_decisions"].get(hypothesis_id)
    decision = None if decision_id is None else view["decisions"][decision_id]
    return (not entry["packets"] and not entry["judgements"] and not entry["heldout_reads"]
            and (decision is None or decision["reason"] == "superseded"))


def standing(view: View, hypothesis_id: str) -> str:
    """How an earlier hypothesis stands, in a few words: its decision, a counted contradiction,
    a supersession, or live."""
    decision_id = view["hypothesis_decisions"].get(hypothesis_id)
    if decision_id is not None:
        decision = view["decisions"][decision_id]
        return "promoted" if decision["outcome"] == "promoted" else f"retired, {decision['reason']}"
    entry = view["hypotheses"][hypothesis_id]
    judgements = entry["judgements"].values()
    if any(j["verdict"] == "contradicts" and j["provenance"] != "claimed" for j in judgements):
        return "contradicted"
    if entry["superseded_by"] is not None:
        return f"superseded by {entry['superseded_by']}"
    return "live"


def duplicates(view: View, payload: dict[str, Any]) -> list[str]:
    """The hypotheses (oldest first) that a proposed one duplicates: every one with its
    fingerprint, live, promoted or retired, except those it supersedes (directly or through a
    chain of supersessions) while nothing was measured or decided on them."""
    chain = supersession_chain(view, payload.get("supersedes"))
    found = view["fingerprints"].get(fingerprint(payload), ())
    return [h for h in found if h != payload["hypothesis_id"]
            and not (h in chain and untested(view, h))]


def earlier_duplicates(view: View, entry: dict[str, Any]) -> list[str]:
    """The earlier hypotheses a written one shares its fingerprint with, outside its own chain
    of supersessions: only a log from before the rule was checked on write holds any."""
    fp = entry.get("fingerprint")
    if fp is None:
        return []
    chain = supersession_chain(view, entry.get("supersedes"))
    return [h for h in view["fingerprints"].get(fp, ())
            if h != entry["hypothesis_id"] and h not in chain
            and view["hypotheses"][h]["seq"] < entry["seq"]]
