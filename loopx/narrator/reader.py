"""How the narrator reads values out of projections: every free text with the record and field it
came from (so the redaction gate can name them), every number with its record and field (or, for
a figure the narrator computes, with its formula and the recorded inputs it was computed from),
and every value it may show unscanned (record ids, sha256 digests, git commit ids) checked
against its type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

View = dict[str, Any]

# Typed values the redaction gate allow-lists by type: each is checked against its type's
# pattern here, so a value that is not of the type is quoted (and scanned) as text instead.
SAFE_TYPES = {
    "record_id": re.compile(r"^rec_[0-9a-f]{32}$"),
    "sha256": re.compile(r"^[0-9a-f]{64}$"),
    "git_commit": re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$"),
}


@dataclass(frozen=True)
class Quoted:
    """A free text the story quotes, and the record field it came from."""

    record_id: str
    field: str
    value: str


@dataclass
class Story:
    """The story document plus what it quotes: texts (scanned), typed values (allow-listed)
    and numbers (each from a record, or computed from recorded inputs)."""

    doc: dict[str, Any]
    quoted: list[Quoted] = field(default_factory=list)
    safe: set[str] = field(default_factory=set)
    numbers: list[dict[str, Any]] = field(default_factory=list)


class Reader:
    """Reads values out of projections, registering each with where it came from."""

    def __init__(self, story: Story) -> None:
        self.story = story

    def text(self, value: Any, record_id: str, name: str) -> str:
        text = str(value)
        self.story.quoted.append(Quoted(record_id, name, text))
        return text

    def optional(self, value: Any, record_id: str, name: str) -> str | None:
        return None if value is None else self.text(value, record_id, name)

    def typed(self, value: str, kind: str, record_id: str, name: str) -> str:
        if SAFE_TYPES[kind].match(value):
            self.story.safe.add(value)
            return value
        return self.text(value, record_id, name)

    def rid(self, value: str) -> str:
        return self.typed(value, "record_id", value, "record_id")

    def num(self, value: float | int | None, record_id: str, name: str) -> float | int | None:
        if value is not None:
            self.story.numbers.append({"value": value, "record_id": record_id, "field": name})
        return value

    def nums(self, values: list[Any], record_id: str, name: str) -> list[Any]:
        return [self.num(v, record_id, f"{name}.{i}") for i, v in enumerate(values)]

    def derived(self, value: float | int, name: str, formula: str, inputs: list[dict[str, Any]],
                **params: Any) -> float | int:
        """A figure the narrator computed, not a logged value: registered with its formula
        (``name`` and ``params`` say exactly how) and every recorded input, each with its record
        and field, so anyone can recompute it from the log."""
        self.story.numbers.append({"value": value, "derived": name, "formula": formula,
                                   **params, "inputs": inputs})
        return value


def number(value: float | int) -> str:
    """A recorded number for reading: integers exactly, floats to 4 significant digits (the
    exact values are in the records the story cites, and in ``--json``)."""
    return str(value) if isinstance(value, int) else format(value, ".4g")


def signed(value: float | int) -> str:
    """A recorded number with its sign (``+0.021``, ``-0.4``)."""
    return ("+" if value >= 0 else "") + number(value)


def baseline_kind(j: dict[str, Any]) -> str | None:
    """How a judgement's baseline was had: ``measured`` (a baseline hypothesis' values),
    ``assumed`` (the contract's scalar, a number typed in) or None (no baseline recorded)."""
    if j["baseline_values"]:
        return "measured"
    return None if j["baseline"] is None else "assumed"


def judgement(r: Reader, j: dict[str, Any], plans: tuple[int, int] = (1, 1)) -> dict[str, Any]:
    """A judgement summary as the story shows it. ``plans`` is (how many plan versions the
    campaign has had, the one in force): a judgement names its plan version only when there is
    more than one, and says so when an amendment replaced it."""
    rid = r.rid(j["event_id"])
    if j.get("visibility") == "private":
        return {"event_id": rid, "private": True, "split": j["split"]}
    control = j.get("control")
    return {
        "event_id": rid, "private": False, "split": j["split"], "verdict": j["verdict"],
        "metric": r.text(j["metric"], rid, "metric"), "rule": r.text(j["rule"], rid, "rule"),
        "provenance": j["provenance"],
        "baseline": r.num(j["baseline"], rid, "baseline"),
        "baseline_values": r.nums(j["baseline_values"], rid, "baseline_values"),
        "baseline_kind": baseline_kind(j),
        "seeds": r.nums(j["seeds"], rid, "seeds"),
        "values": r.nums(j["values"], rid, "values"),
        "mean_delta": r.num(j["mean_delta"], rid, "mean_delta"),
        "p_value": r.num(j["p_value"], rid, "p_value"),
        "packet_ids": [r.typed(p, "record_id", rid, "packet_ids") for p in j["packet_ids"]],
        # Judgements written before plans were versioned were made under the first.
        "plan_version": (j.get("plan_version") or 1) if plans[0] > 1 else None,
        "plan_replaced": (j.get("plan_version") or 1) != plans[1],
        "control": None if not control else {
            "rule": control["rule"], "level": r.num(control["level"], rid, "control.level"),
            "index": r.num(control["index"], rid, "control.index"),
            "looks": control.get("looks", 1),
            "threshold": r.num(control["threshold"], rid, "control.threshold"),
            "adjusted_p": r.num(control["adjusted_p"], rid, "control.adjusted_p"),
            "discovery": control["discovery"]},
    }
