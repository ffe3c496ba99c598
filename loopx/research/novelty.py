"""The novelty gate's rules: who may audit a novelty claim, and what a ``novel`` verdict must
rest on.

An audit is by nobody on the ideation side of the hypothesis (its lineage's proposers and the
writers of their grounding refs). A ``novel`` verdict names the material it checked; that
material covers the prior art of the contract's novelty boundary, shares no source with the
hypothesis' ideation material recorded before the audit (the boundary's prior art excepted: it
is checked whoever read it), and holds at least one source outside that material. A
``not_novel`` or ``inconclusive`` verdict may cite any source: finding an idea in the paper it
came from is a valid negative finding, and passes nothing.

The write check refuses a ``novel`` verdict that breaks these (recorded as a refusal); the gate
applies the same rules to each audit against the material recorded before it and the boundary
in force, so an audit that does not hold never counts, and grounding recorded after an audit
never reopens it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.state import current_contract
from loopx.kernel.errors import Refused, ResearchRefused
from loopx.kernel.plain import Frozen
from loopx.kernel.rules import applies
from loopx.research.grounding import ideation_material, ideators
from loopx.research.ref_identity import covered, ref_key

if TYPE_CHECKING:
    from loopx.kernel.checks import Identity

View = dict[str, Any]


class Problem(Frozen):
    """Why a novel verdict does not stand: the refusal rule, in words, and what it cites."""

    _fields = ("rule", "message", "cites", "detail", "hint")
    rule: str
    message: str
    cites: list[str]
    detail: dict[str, Any]
    hint: str | None

    def __init__(self, rule: str, message: str, cites: list[str] | None = None,
                 detail: dict[str, Any] | None = None, hint: str | None = None) -> None:
        self.__dict__.update(rule=rule, message=message, cites=[] if cites is None else cites,
                             detail={} if detail is None else detail, hint=hint)


def boundary(view: View) -> dict[str, Any]:
    """The novelty boundary of the contract in force: its statement, its prior art (empty for
    a boundary in words only, or none) and the contract version that set it."""
    contract = current_contract(view)
    value = None if contract is None else contract.get("novelty_boundary")
    if isinstance(value, dict):
        statement, prior_art = value.get("statement"), list(value.get("prior_art") or ())
    else:
        statement, prior_art = value, []
    return {"statement": statement, "prior_art": prior_art,
            "contract_version": None if contract is None else contract["version"],
            "record_id": None if contract is None else contract.get("record_id")}


def _spelled(ref: dict[str, Any]) -> str:
    return f"{ref['kind']}:{ref['ref']}"


def novel_problems(view: View, hypothesis_id: str, refs: list[dict[str, Any]],
                   before_seq: int | None = None) -> list[Problem]:
    """Why a novel verdict on ``hypothesis_id`` naming ``refs`` as its checked material does
    not stand, against the ideation material recorded before ``before_seq`` and the boundary
    in force (empty: it stands)."""
    hint = f"`loopx grounding list --hypothesis {hypothesis_id}` shows its ideation material"
    if not refs:
        return [Problem("novelty_material", "it names no material it checked", hint=hint)]
    out: list[Problem] = []
    material = ideation_material(view, hypothesis_id, before_seq)
    fence = boundary(view)
    prior_art = fence["prior_art"]
    missing = [b for b in prior_art if not covered(refs, b)]
    if missing:
        out.append(Problem(
            "novelty_boundary", f"it does not cover the novelty boundary of contract version "
            f"{fence['contract_version']}: it names none of "
            f"{', '.join(_spelled(b) for b in missing)}, which every novel verdict checks",
            [fence["record_id"]] if fence["record_id"] else [],
            {"missing": [_spelled(b) for b in missing]},
            "name the boundary's prior art among the refs it checked, or record not_novel or "
            "inconclusive"))
    shared = [(r, g) for r in refs if not covered(prior_art, r) for g in material
              if ref_key(r).same_material(ref_key(g["ref"]))]
    if shared:
        pairs = "; ".join(f"{_spelled(r)} is {_spelled(g['ref'])} ({_where(g)}, compared as "
                          f"{ref_key(g['ref']).name})" for r, g in shared[:8])
        out.append(Problem(
            "novelty_material", f"it checked the hypothesis' own ideation material: {pairs}. "
            "An audit on the same material is no independent audit",
            sorted({g["record_id"] for _, g in shared})[:64],
            {"shared": [{"audit_ref": _spelled(r), "grounding_ref": _spelled(g["ref"]),
                         "grounding_id": g["id"]} for r, g in shared[:64]]}, hint))
    elif not [r for r in refs if not covered([g["ref"] for g in material], r)]:
        out.append(Problem(
            "novelty_material", "every source it names is ideation material of the hypothesis "
            "(the boundary's prior art included): a novel verdict also checks at least one "
            "source the idea did not come from", sorted({g["record_id"] for g in material})[:64],
            hint=hint))
    return out


def _where(g: dict[str, Any]) -> str:
    if g["hypothesis_id"] is None:
        return f"campaign grounding {g['id']}"
    if g["source"] == "research_hypothesis_v0":
        return f"grounding_refs of {g['hypothesis_id']}"
    return f"grounding ref {g['id']} of {g['hypothesis_id']}"


def check_audit(view: View, who: Identity, entry: dict[str, Any],
                payload: dict[str, Any]) -> None:
    """The write rules of a novelty audit of ``entry`` (the checks call it)."""
    hid = entry["hypothesis_id"]
    if who.agent_id == entry["proposer"]:
        raise Refused(f"{who.agent_id} proposed {hid!r}; a novelty audit is never by the "
                      "hypothesis' own proposer")
    if who.agent_id in ideators(view, hid):
        raise Refused(f"{who.agent_id} is on the ideation side of {hid!r} (it proposed or "
                      "grounded it or a hypothesis it refines): grounded ideation and novelty "
                      "audit stay separate lanes")
    refs = list(payload.get("refs") or ())
    if payload["verdict"] != "novel" or not refs or not applies(view, 2):
        # A novel verdict naming nothing is refused by `loopx novelty audit` (the operation)
        # and never counts at the gate; refusing it here would fail logs written before.
        return
    for problem in novel_problems(view, hid, refs):
        raise ResearchRefused(problem.rule, f"the novel verdict on {hid!r} does not stand: "
                              f"{problem.message}", hypothesis_id=hid, cites=problem.cites,
                              detail=problem.detail, hint=problem.hint)


def standing_audits(view: View, entry: dict[str, Any]
                    ) -> tuple[list[dict[str, Any]], list[str]]:
    """The hypothesis' audits that count toward the novelty gate, in log order, and why each
    other one does not."""
    hid = entry["hypothesis_id"]
    counted: list[dict[str, Any]] = []
    reasons: list[str] = []
    for audit in entry["audits"]:
        if audit["agent_id"] in ideators(view, hid, audit["seq"]):
            reasons.append(f"audit {audit['record_id']} is by {audit['agent_id']}, on the "
                           "ideation side")
            continue
        problems = ([] if audit["verdict"] != "novel"
                    else novel_problems(view, hid, audit["refs"], audit["seq"]))
        if problems:
            reasons.append(f"audit {audit['record_id']} (novel) does not count: "
                           + "; ".join(p.message for p in problems))
        else:
            counted.append(audit)
    return counted, reasons
