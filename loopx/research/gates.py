"""Gates: what must hold before a hypothesis may be promoted, each passed, failed, pending or not
required, with its reasons and the records it rests on. A pure function of the checked state.

The held-out gate is always required (dev-only lift never promotes) and reads the final
held-out judgement, whose verdict the campaign-level control decided (:mod:`loopx.research.control`).
The protected boundary and the reproduced gate read the last result their tool recorded.
"""

from __future__ import annotations

from typing import Any

from loopx.governance.state import current_contract
from loopx.kernel.plain import Value
from loopx.kernel.rules import applies
from loopx.research.control import first_heldout
from loopx.research.novelty import standing_audits
from loopx.research.plan import plan_version
from loopx.research.state import counts, scored_result

View = dict[str, Any]
GATES = ("protected_boundary", "heldout", "reproduced", "novelty", "owner", "first_screen")
# The gates checked outside the log whose failure is a guardrail's (guardrail_failed).
GUARDRAILS = ("protected_boundary", "reproduced")
# How the protected boundary check names a packet of the measured baseline in its reasons.
BASELINE_PACKET = "the measured baseline's packet"


class Gate(Value):
    """One gate for one hypothesis: whether it applies, its status and why."""

    _fields = ("name", "required", "status", "reasons", "rests_on")
    name: str
    required: bool
    status: str  # passed, failed, pending or not_required
    reasons: list[str]
    rests_on: list[str]

    def __init__(self, name: str, required: bool, status: str, reasons: list[str] | None = None,
                 rests_on: list[str] | None = None) -> None:
        self.name, self.required, self.status = name, required, status
        self.reasons = [] if reasons is None else reasons
        self.rests_on = [] if rests_on is None else rests_on


def _cited(entry: dict[str, Any], field: str) -> list[str]:
    """The packet ids the hypothesis' latest dev and held-out judgements list in ``field``."""
    out: list[str] = []
    for split in ("dev", "heldout"):
        judgement = entry["judgements"].get(split)
        if judgement is not None:
            out += [p for p in judgement.get(field) or () if p not in out]
    return out


def relied_packets(entry: dict[str, Any]) -> list[str]:
    """The packets the hypothesis' latest dev and held-out judgements rest on."""
    return _cited(entry, "packet_ids")


def compared_packets(entry: dict[str, Any]) -> list[str]:
    """The measured baseline's packets the hypothesis' latest dev and held-out judgements
    compared it with: its comparison is only as sound as the code they ran."""
    return _cited(entry, "baseline_packet_ids")


def measured_packets(view: View, entry: dict[str, Any]) -> list[str]:
    """The hypothesis' scored packets under the plan in force that count (not claimed), oldest
    first: the results its validity is judged on."""
    version = plan_version(view)
    return [p for p in entry["packets"]
            if scored_result(packet := view["packets"][p]) and packet["plan_version"] == version]


def flagged_invalid(view: View, packet_ids: list[str]) -> list[str]:
    """Those of ``packet_ids`` that the executor who measured them flagged invalid."""
    return [p for p in packet_ids if not view["packets"][p]["valid"]]


def invalid_packets(view: View, entry: dict[str, Any]) -> list[str]:
    """The hypothesis' counted results that the executor who measured them flagged invalid."""
    return flagged_invalid(view, measured_packets(view, entry))


def final_heldout(view: View, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The hypothesis' final held-out judgement under the plan in force, if it has one."""
    final = first_heldout(entry)
    return final if counts(view, final) else None


def control_words(judgement: dict[str, Any]) -> str:
    """How the campaign-level control judged a held-out test, in a few words."""
    control = judgement.get("control")
    if not control:
        return ""
    return (f" (p {judgement['p_value']:.3g}, adjusted {control['adjusted_p']:.3g} under "
            f"{control['rule']} at {control['level']:g}, test {control['index']} of the "
            "campaign's held-out family)")


def gates(view: View, entry: dict[str, Any]) -> dict[str, Gate]:
    """Every gate for one hypothesis under the contract in force."""
    contract = current_contract(view)
    policy = contract["promotion_policy"] if contract else {}
    required = set(policy.get("required_gates", ()))
    out: dict[str, Gate] = {}

    # Always required, whatever the contract lists: dev-only lift is never a promotion. The
    # first counted held-out judgement is final; later ones are refused at write.
    heldout = entry["judgements"].get("heldout")
    final = final_heldout(view, entry)
    if final is not None and final["verdict"] == "supports":
        out["heldout"] = Gate("heldout", True, "passed", rests_on=[final["event_id"]])
    elif final is not None:
        out["heldout"] = Gate("heldout", True, "failed",
                              [f"held-out verdict {final['verdict']}{control_words(final)}"],
                              [final["event_id"]])
    elif heldout is None:
        out["heldout"] = Gate("heldout", True, "pending", ["no held-out judgement yet"])
    elif heldout["provenance"] == "claimed":
        out["heldout"] = Gate("heldout", True, "failed",
                              ["the held-out judgement has claimed provenance"])
    else:
        out["heldout"] = Gate("heldout", True, "pending", [
            f"judged under plan version {heldout['plan_version'] or 1}, which an amendment "
            "replaced: a new hypothesis is measured under the new plan"])

    boundary = entry["boundary"]
    relied = relied_packets(entry)
    if applies(view, 7):
        # A comparator run from a tampered evaluator would make every hypothesis look better.
        relied += [p for p in compared_packets(entry) if p not in relied]
    if "protected_boundary" not in required:
        out["protected_boundary"] = Gate("protected_boundary", False, "not_required")
    elif boundary is None:
        out["protected_boundary"] = Gate("protected_boundary", True, "pending",
                                         ["not checked from git yet (`loopx gate check`)"])
    elif boundary["violations"]:
        out["protected_boundary"] = Gate(
            "protected_boundary", True, "failed",
            [*boundary["violations"],
             *(r for r in boundary["reasons"] if r.startswith(BASELINE_PACKET))],
            [boundary["record_id"]])
    elif not boundary["passed"]:
        # Nothing could be verified (no git, unknown commits): promotion stays blocked, but
        # that is no evidence of tampering, so it is no guardrail failure either.
        out["protected_boundary"] = Gate("protected_boundary", True, "pending",
                                         ["could not be verified: "
                                          + "; ".join(boundary["reasons"])],
                                         [boundary["record_id"]])
    else:
        missing = [p for p in relied if p not in boundary["packets"]]
        if missing:
            out["protected_boundary"] = Gate(
                "protected_boundary", True, "pending",
                [f"packets not covered by the last check: {', '.join(missing)}"],
                [boundary["record_id"]])
        else:
            out["protected_boundary"] = Gate("protected_boundary", True, "passed",
                                             rests_on=[boundary["record_id"]])

    out["reproduced"] = _reproduced(entry, final, "reproduced" in required)
    out["novelty"] = _novelty(view, entry, entry["claims_novelty"] or "novelty" in required)

    decision = live_decision(view, entry)
    if not (policy.get("require_owner_approval") or "owner" in required):
        out["owner"] = Gate("owner", False, "not_required")
    elif decision is None or decision["outcome"] != "promoted" or decision["approval"] is None:
        out["owner"] = Gate("owner", True, "pending",
                            ["the owner approves the promotion decision once it is written"])
    else:
        approval = decision["approval"]
        out["owner"] = Gate("owner", True,
                            "passed" if approval["verdict"] == "approved" else "failed",
                            [] if approval["verdict"] == "approved" else ["rejected by the owner"],
                            [approval["record_id"]])

    if "first_screen" not in required:
        out["first_screen"] = Gate("first_screen", False, "not_required")
    else:
        # The narrator's gate: passed once the owner approved a first-screen preview rendered
        # from a log that already held this hypothesis as it stands (its revision).
        reviewed = [p for p in view["previews"].values()
                    if p["head_seq"] >= entry["revision"] and p["approval"] is not None
                    and p["approval"]["verdict"] == "approved"]
        if reviewed:
            last = max(reviewed, key=lambda p: p["seq"])
            out["first_screen"] = Gate("first_screen", True, "passed",
                                       rests_on=[last["approval"]["record_id"]])
        else:
            out["first_screen"] = Gate("first_screen", True, "pending", [
                f"no approved first-screen preview since revision {entry['revision']}"])
    return {name: out[name] for name in GATES}


def rerun_packets(final: dict[str, Any]) -> list[str]:
    """The held-out packets the reproduced gate re-runs: those the final held-out judgement
    rests on, then the measured baseline's it compared them with."""
    return list(dict.fromkeys([*final["packet_ids"], *final["baseline_packet_ids"]]))


def _reproduced(entry: dict[str, Any], final: dict[str, Any] | None, required: bool) -> Gate:
    """A value a re-run gave further from the recorded one than the contract allows fails the
    gate for good, required or not (values a commit does not give are no evidence, whatever
    the contract asks, and a later re-run that matches does not undo it); otherwise the last
    re-run decides, and one that could not be made proves nothing: the gate stays pending."""
    last = entry["reproduction"]
    if not required and not (last is not None and last["differs"]):
        return Gate("reproduced", False, "not_required")
    if final is None:
        return Gate("reproduced", True, "pending", ["no final held-out judgement to re-run yet"])
    if last is None:
        return Gate("reproduced", True, "pending",
                    ["the held-out packets were not re-run yet (`loopx gate reproduce`)"])
    if last["differs"]:
        return Gate("reproduced", True, "failed", list(last["differs"]), [last["failed_by"]])
    if not last["passed"]:
        return Gate("reproduced", True, "pending",
                    ["could not be re-run: " + "; ".join(last["reasons"])], [last["record_id"]])
    missing = [p for p in rerun_packets(final) if p not in last["packets"]]
    if missing:
        return Gate("reproduced", True, "pending",
                    [f"packets not covered by the last re-run: {', '.join(missing)}"],
                    [last["record_id"]])
    return Gate("reproduced", True, "passed", rests_on=[last["record_id"]])


def _novelty(view: View, entry: dict[str, Any], required: bool) -> Gate:
    """The last audit that counts decides (:mod:`loopx.research.novelty`): one by the ideation
    side, or a novel verdict that does not stand, never does."""
    if not required:
        return Gate("novelty", False, "not_required")
    counted, discounted = standing_audits(view, entry)
    if not counted:
        return Gate("novelty", True, "pending",
                    ["no novelty audit that counts", *discounted] if discounted
                    else ["no novelty audit by an agent other than the proposer"])
    last = counted[-1]
    status = {"novel": "passed", "not_novel": "failed"}.get(last["verdict"], "pending")
    return Gate("novelty", True, status,
                [] if status == "passed" else [f"audit verdict {last['verdict']}"],
                [last["record_id"]])


def live_decision(view: View, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The hypothesis' decision in force, if any."""
    decision_id = view["hypothesis_decisions"].get(entry["hypothesis_id"])
    return None if decision_id is None else view["decisions"][decision_id]
