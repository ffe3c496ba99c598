"""Research operations: propose a hypothesis, record an evidence packet, judge evidence, audit
novelty, check the protected boundary and re-run held-out packets. Decisions live in
:mod:`loopx.research.decisions`.

Each goes through the one checked write path; the judgement and the gate result are computed
by loopx (from the packets, and from git), never typed in by an agent.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx.governance.state import current_contract
from loopx.kernel.errors import (
    FieldProblem,
    NotFound,
    RecordRejected,
    Refused,
    UsageProblem,
)
from loopx.kernel.ledger import draft
from loopx.research.fingerprint import fingerprint

NO_PROTECTED_SCOPE = ("the contract names no protected scope: the boundary has nothing to hold "
                      "(the curator amends protected_scope)")

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState


def propose_hypothesis(ledger: Ledger, creds: Credentials, payload: dict[str, Any], *,
                       under: tuple[str, int], todos: list[dict[str, Any]] | None = None
                       ) -> dict[str, Any]:
    """Record a hypothesis under the held todo ``under`` (with the todos that will work on it, in
    the same batch); ``claimed_by`` defaults to the writer.

    Raises:
        ResearchRefused: a duplicate (same mechanism family and parameters) of any earlier
        hypothesis (recorded);
        RecordRejected, Refused, StaleLease, Forbidden.
    """
    drafts = [draft(t, kind="todo_item_v0", under=under) for t in todos or []]
    drafts.append(draft({"claimed_by": creds.agent_id, **payload}, kind="research_hypothesis_v0",
                        under=under))
    written = ledger.append(drafts, creds=creds)
    hypothesis = written[-1]
    return {"hypothesis_id": hypothesis["payload"]["hypothesis_id"],
            "fingerprint": fingerprint(hypothesis["payload"]),
            "record_id": hypothesis["record_id"], "seq": hypothesis["seq"],
            "todos": [r["payload"]["todo_id"] for r in written[:-1]]}


def append_packet(ledger: Ledger, creds: Credentials, payload: dict[str, Any], *,
                  under: tuple[str, int]) -> dict[str, Any]:
    """Record one attempt's evidence packet (scored or failed) under the held todo ``under``."""
    [record] = ledger.append(draft(payload, kind="auto_research_evidence_packet_v0",
                                   under=under), creds=creds)
    return {"packet_id": record["record_id"], "seq": record["seq"],
            "hypothesis_id": record["payload"]["hypothesis_id"],
            "status": record["payload"]["status"]}


def judge(ledger: Ledger, creds: Credentials, hypothesis_id: str, split: str) -> dict[str, Any]:
    """Judge every scored packet of a hypothesis on ``split`` (under the plan in force) with the
    contract's rule, against the measured or the assumed baseline, and record it. A held-out
    judgement carries the campaign-level control and is final.

    Raises:
        ResearchRefused: a second held-out judgement (recorded); NotFound, Refused: no such
        hypothesis, no usable packet, the baseline itself or a baseline not measured yet.
    """
    from loopx.research.evidence import judgement_payload

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        payload = judgement_payload(view, hypothesis_id, split)
        return ledger.prepare(draft(payload, kind="research_evidence_event_v0"), who)

    [record] = ledger.write(creds, plan)
    p = record["payload"]
    return {"event_id": record["record_id"], "seq": record["seq"], "hypothesis_id": hypothesis_id,
            "split": split, "verdict": p["verdict"], "values": p["values"], "seeds": p["seeds"],
            "mean_delta": p["mean_delta"], "p_value": p["p_value"],
            "statistic": p["statistic"], "packet_ids": p["packet_ids"], "rule": p["rule"],
            "notes": p["notes"], "baseline": p["baseline"], "baseline_values": p["baseline_values"],
            "baseline_packet_ids": p["baseline_packet_ids"], "plan_version": p["plan_version"],
            "control": p["control"]}


def audit_novelty(ledger: Ledger, creds: Credentials, hypothesis_id: str, verdict: str, *,
                  refs: list[dict[str, Any]] | None = None,
                  note: str | None = None) -> dict[str, Any]:
    """Record an independent novelty audit (never by the hypothesis' proposer's side), naming
    the material it checked in ``refs`` (:mod:`loopx.research.novelty`).

    Raises:
        RecordRejected: a novel verdict that names no material (``payload.refs``), nothing
        written; ResearchRefused: a novel verdict on the hypothesis' ideation material or short
        of the novelty boundary (recorded); Refused: the proposer's side, no such hypothesis.
    """
    if verdict == "novel" and not refs:
        # Checked here, not by the write check that `loopx verify` re-runs: audits written
        # before this rule still verify, and the gate does not count them.
        raise RecordRejected([FieldProblem(
            "payload.refs", "a novel verdict names the material it checked (at least one ref, "
            "`--ref KIND:REF`): that it is not the proposer's ideation material is what makes "
            "the audit independent")], context="novelty audit")
    payload: dict[str, Any] = {"hypothesis_id": hypothesis_id, "verdict": verdict,
                               "refs": refs or [], "note": note}
    [record] = ledger.append(draft(payload, kind="novelty_audit_v0"), creds=creds)
    return {"audit_id": record["record_id"], "seq": record["seq"],
            "hypothesis_id": hypothesis_id, "verdict": verdict,
            "refs": record["payload"]["refs"]}


def _under_contract(ledger: Ledger, hypothesis_id: str, needed: str
                    ) -> tuple[LaneState, dict[str, Any], dict[str, Any]]:
    """The lanes state, the hypothesis' entry and the contract in force, for a gate tool.

    Raises:
        NotFound: no such hypothesis; Refused: no contract (``needed`` comes from it).
    """
    view = ledger.state()["lanes"]
    entry = view["hypotheses"].get(hypothesis_id)
    if entry is None:
        raise NotFound(f"there is no hypothesis {hypothesis_id!r}")
    contract = current_contract(view)
    if contract is None:
        raise Refused(f"there is no contract, which holds {needed}")
    return view, entry, contract


def _add(result: dict[str, Any], found: list[Any], reasons: list[str]) -> None:
    """Add a git check's violations and reasons to the gate's ``result``: either fails it."""
    result["violations"] += [asdict(v) for v in found]
    result["reasons"] += reasons
    result["passed"] = result["passed"] and not found and not reasons


def _screened(view: LaneState, repo: Path, relied: list[str], result: dict[str, Any]) -> None:
    """Add to ``result`` where a held-out packet evaluated code no dev run it rests on did
    (:mod:`loopx.research.screened`)."""
    from loopx.research.screened import unscreened

    packets = sorted((view["packets"][p] for p in relied), key=lambda p: p["seq"])
    found, reasons = unscreened(repo, [p for p in packets if p["heldout"]],
                                [p for p in packets if not p["heldout"]])
    _add(result, found, reasons)


def _borrowed(view: LaneState, repo: Path, hypothesis_id: str, relied: list[str],
              result: dict[str, Any]) -> None:
    """Add to ``result`` the changes the evaluated code holds that another hypothesis' packet
    evaluated first (:mod:`loopx.research.borrowed`)."""
    from loopx.research.borrowed import Cited, borrowed
    from loopx.research.grounding import lineage
    from loopx.research.state import baseline_hypothesis, campaign_base

    mine = set(lineage(view, hypothesis_id))
    packets = [p for p in view["packets"].values() if p.get("evaluated_commit")]

    def cited(ps: list[dict[str, Any]]) -> list[Cited]:
        return [Cited(p["packet_id"], p["hypothesis_id"], p["seq"], p["evaluated_commit"],
                      p.get("base_commit")) for p in ps]

    baseline = baseline_hypothesis(view)
    others = [p for p in packets if p["hypothesis_id"] not in {*mine, baseline}]
    # The campaign's base, never what a packet says it started from: a failed packet citing
    # another hypothesis' commit as its base would otherwise hide that commit.
    fixed = campaign_base(view)
    bases = ({fixed["base_commit"]} if fixed else
             {view["packets"][p]["base_commit"] for p in relied
              if view["packets"][p].get("base_commit")})
    found, reasons = borrowed(
        repo, bases, cited([view["packets"][p] for p in relied
                            if view["packets"][p].get("evaluated_commit")]),
        cited([p for p in packets if p["hypothesis_id"] in mine]), cited(others))
    _add(result, found, reasons)


def check_gate(ledger: Ledger, creds: Credentials, hypothesis_id: str, *,
               repo: Path | None) -> dict[str, Any]:
    """Verify the protected boundary from git for every packet the hypothesis' judgements rest
    on, and the measured baseline's they compared it with (the protected scope, and the
    editable scope when the contract sets one), and record the result (``gate_result_v0``),
    passed or failed.

    Git runs before the lock, on the hypothesis as it stands; the write is refused if the
    hypothesis changed meanwhile (check again).

    Raises:
        NotFound: no such hypothesis; Refused: no contract, or it changed during the check;
        Unauthorized, Forbidden: before git runs.
    """
    from loopx.research.gates import BASELINE_PACKET, compared_packets
    from loopx.research.projections import relied_packets
    from loopx.research.protected import check_boundary

    view, entry, contract = _under_contract(ledger, hypothesis_id, "the protected scope")
    _may_record_gate(ledger, creds, view, {"hypothesis_id": hypothesis_id,
                                           "gate": "protected_boundary", "passed": False,
                                           "revision": entry["revision"]})
    relied = relied_packets(entry) or list(entry["packets"])
    compared = [p for p in compared_packets(entry) if p not in relied]
    packets = [{"packet_id": p, "base_commit": view["packets"][p]["base_commit"],
                "evaluated_commit": view["packets"][p]["evaluated_commit"],
                **({"label": f"{BASELINE_PACKET} {p}"} if p in compared else {})}
               for p in [*relied, *compared]]
    pinned = contract.get("protected_commit")
    protected = list(contract["protected_scope"])
    editable = list(contract.get("editable_scope") or [])
    result = check_boundary(repo, packets, protected, pinned, editable).to_json()
    if repo is not None and ledger.domains.rules >= 10:  # write rules version 10
        _screened(view, repo, relied, result)
    if repo is not None and ledger.domains.rules >= 11:  # write rules version 11
        _borrowed(view, repo, hypothesis_id, relied, result)
    if not protected:
        # Only a contract written before the rule that names one can lack it: an empty scope
        # would let every commit pass, so the gate cannot pass on it.
        result["passed"] = False
        result["reasons"].insert(0, NO_PROTECTED_SCOPE)
    payload = {"hypothesis_id": hypothesis_id, "gate": "protected_boundary",
               "passed": result["passed"], "revision": entry["revision"],
               "packets": result["checked"] or [{"packet_id": p["packet_id"]} for p in packets],
               "protected_scope": protected, "protected_commit": pinned,
               "editable_scope": editable,
               "violations": [{**{k: str(v[k])[:500] for k in ("commit", "path", "change",
                                                                "detail")}, "rule": v["rule"]}
                              for v in result["violations"][:256]],
               "reasons": [r[:500] for r in result["reasons"][:64]]}

    record = _record_gate(ledger, creds, payload)
    return {"gate_id": record["record_id"], "seq": record["seq"], "hypothesis_id": hypothesis_id,
            "gate": "protected_boundary", "passed": payload["passed"],
            "revision": payload["revision"], "packets": [p["packet_id"] for p in packets],
            "violations": payload["violations"], "reasons": payload["reasons"]}


def _record_gate(ledger: Ledger, creds: Credentials, payload: dict[str, Any]) -> Record:
    """Write a gate result loopx computed (refused if the hypothesis moved meanwhile)."""
    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        return ledger.prepare(draft(payload, kind="gate_result_v0"), who, by_loopx=True)

    [record] = ledger.write(creds, plan)
    return record


def _may_record_gate(ledger: Ledger, creds: Credentials, view: LaneState,
                     payload: dict[str, Any]) -> None:
    """Refuse now a writer whose token or role could not record ``payload`` (the write path
    checks again under the lock).

    Raises:
        Unauthorized, Forbidden.
    """
    from loopx.work.checks import gate

    who = ledger.identify(creds)
    [record] = ledger.prepare(draft(payload, kind="gate_result_v0"), who, by_loopx=True)
    gate(view, who, record)


def reproduce_gate(ledger: Ledger, creds: Credentials, hypothesis_id: str, *,
                   repo: Path | None, command: list[str], timeout: float) -> dict[str, Any]:
    """Re-run every held-out packet the hypothesis' final held-out judgement rests on or
    compared it with, each from the commit it cites, with the evaluator's ``command``; compare
    the values with those recorded (within the contract's ``reproduce_tolerance``) and record
    the result (``gate_result_v0``, gate ``reproduced``).

    The re-runs happen before the lock, on the hypothesis as it stands; the write is refused if
    the hypothesis changed meanwhile (run it again).

    Raises:
        NotFound: no such hypothesis; Refused: no contract, no final held-out judgement yet,
        or the hypothesis changed during the re-runs; UsageProblem: an empty command or a
        timeout that is not positive; Unauthorized, Forbidden: before anything is re-run.
    """
    from loopx.research.gates import final_heldout, rerun_packets
    from loopx.research.reproduce import REPRODUCED, rerun

    if not command:
        raise UsageProblem("the re-run needs a command (`loopx gate reproduce HYP -- CMD...`)")
    if not timeout > 0:
        raise UsageProblem(f"the re-run's timeout must be positive seconds, not {timeout!r}")
    view, entry, contract = _under_contract(ledger, hypothesis_id,
                                            "the metric and the held-out split")
    final = final_heldout(view, entry)
    if final is None:
        raise Refused(f"hypothesis {hypothesis_id!r} has no final held-out judgement yet: "
                      "there is no held-out packet to re-run",
                      hint="judge its held-out packets first (`loopx evidence judge "
                           f"{hypothesis_id} --split heldout`)")
    # Whoever may not record the result learns it before any executor code runs for them.
    _may_record_gate(ledger, creds, view, {"hypothesis_id": hypothesis_id, "gate": "reproduced",
                                           "passed": False, "revision": entry["revision"]})
    tolerance = float(contract["promotion_policy"].get("reproduce_tolerance", 0.0))
    metric = contract["metric"]["name"]
    location = (contract["evaluation"].get("heldout") or {}).get("location")
    reruns = [rerun(repo, command, view["packets"][p], metric, location, tolerance, timeout)
              for p in rerun_packets(final)]
    passed = all(r.outcome == REPRODUCED for r in reruns)
    payload = {"hypothesis_id": hypothesis_id, "gate": "reproduced", "passed": passed,
               "revision": entry["revision"], "tolerance": tolerance,
               "packets": [{"packet_id": r.packet_id, "evaluated_commit": r.evaluated_commit}
                           for r in reruns],
               "reproductions": [r.to_json() for r in reruns],
               "reasons": [f"packet {r.packet_id}: {r.detail}"[:500]
                           for r in reruns if r.outcome != REPRODUCED][:64]}
    record = _record_gate(ledger, creds, payload)
    return {"gate_id": record["record_id"], "seq": record["seq"], "hypothesis_id": hypothesis_id,
            "gate": "reproduced", "passed": passed, "revision": payload["revision"],
            "tolerance": tolerance, "reproductions": payload["reproductions"],
            "reasons": payload["reasons"]}
