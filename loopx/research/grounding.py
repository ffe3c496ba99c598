"""Grounding refs: the sources ideation drew on, as the novelty gate reads them.

A hypothesis' ideation material is its own ``grounding_refs``, the ``grounding_ref_v0`` records
its proposer wrote for it, the same for every hypothesis it refines or supersedes (its lineage),
and the curator's campaign-wide grounding refs. All of it is folded into one slice,
``grounding``, keyed by record id (a hypothesis' own refs by ``RECORD_ID/INDEX``), so the
write check and the gate read it from state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.kernel.errors import Refused
from loopx.kernel.ledger import draft
from loopx.research.ref_identity import ref_key

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.ledger import Ledger

View = dict[str, Any]
Record = dict[str, Any]
SLICE = "grounding"


def compact(ref: dict[str, Any]) -> dict[str, Any]:
    """A ref as state keeps it: kind, ref and digest (or None)."""
    return {"kind": ref["kind"], "ref": ref["ref"], "sha256": ref.get("sha256")}


def fold_grounding_ref(view: View, record: Record, p: dict[str, Any]) -> None:
    """A ``grounding_ref_v0`` into the grounding slice."""
    view[SLICE][record["record_id"]] = {
        "id": record["record_id"], "record_id": record["record_id"], "seq": record["seq"],
        "agent_id": record["agent_id"], "hypothesis_id": p.get("hypothesis_id"),
        "source": "grounding_ref_v0", "ref": compact(p["ref"]), "note": p["ref"].get("note"),
        "visibility": record["visibility"]}


def fold_hypothesis_refs(view: View, record: Record, p: dict[str, Any]) -> None:
    """A hypothesis' own ``grounding_refs`` into the grounding slice, one entry each."""
    for index, ref in enumerate(p.get("grounding_refs") or ()):
        key = f"{record['record_id']}/{index}"
        view[SLICE][key] = {
            "id": key, "record_id": record["record_id"], "seq": record["seq"],
            "agent_id": record["agent_id"], "hypothesis_id": p["hypothesis_id"],
            "source": "research_hypothesis_v0", "ref": compact(ref), "note": ref.get("note"),
            "visibility": record["visibility"]}


def lineage(view: View, hypothesis_id: str) -> list[str]:
    """The hypothesis and every hypothesis it refines or supersedes, transitively."""
    out: list[str] = []
    todo = [hypothesis_id]
    while todo:
        hid = todo.pop()
        entry = view["hypotheses"].get(hid)
        if entry is None or hid in out:
            continue
        out.append(hid)
        todo += [h for h in (entry["parent_id"], entry["supersedes"]) if h]
    return out


def ideation_material(view: View, hypothesis_id: str,
                      before_seq: int | None = None) -> list[dict[str, Any]]:
    """The grounding refs the hypothesis' ideation drew on, recorded before ``before_seq``
    (all so far without it), in log order: its lineage's and the campaign's."""
    family = set(lineage(view, hypothesis_id))
    return sorted((g for g in view[SLICE].values()
                   if (g["hypothesis_id"] is None or g["hypothesis_id"] in family)
                   and (before_seq is None or g["seq"] < before_seq)),
                  key=lambda g: (g["seq"], g["id"]))


def ideators(view: View, hypothesis_id: str, before_seq: int | None = None) -> set[str]:
    """Agents on the ideation side of a hypothesis: its lineage's proposers and whoever recorded
    grounding refs for one of them (campaign-wide material is everyone's, so not counted)."""
    family = lineage(view, hypothesis_id)
    out = {view["hypotheses"][h]["proposer"] for h in family}
    return out | {g["agent_id"] for g in ideation_material(view, hypothesis_id, before_seq)
                  if g["hypothesis_id"] is not None}


def check_grounding_ref(view: View, who: Identity, record: Record) -> None:
    """A hypothesis' grounding ref is its proposer's, on a hypothesis that exists; the same
    source is not recorded twice for the same target."""
    p = record["payload"]
    hid = p.get("hypothesis_id")
    if hid is not None:
        entry = view["hypotheses"].get(hid)
        if entry is None:
            raise Refused(f"the grounding ref names hypothesis {hid!r}, which does not exist")
        if entry["proposer"] != who.agent_id:
            raise Refused(f"{who.agent_id} did not propose {hid!r}: a hypothesis' grounding refs "
                          f"are its proposer's ({entry['proposer']}), campaign-wide ones the "
                          "curator's")
    key = ref_key(p["ref"])
    for g in view[SLICE].values():
        if g["hypothesis_id"] == hid and ref_key(g["ref"]).same_material(key):
            target = f"hypothesis {hid!r}" if hid else "the campaign"
            raise Refused(f"{p['ref']['kind']}:{p['ref']['ref']} is already a grounding ref of "
                          f"{target} ({g['ref']['kind']}:{g['ref']['ref']}, {g['id']})")


def listing(view: View, hypothesis_id: str | None = None) -> list[dict[str, Any]]:
    """Grounding refs as ``loopx grounding list`` shows them, each with its normalised name:
    a hypothesis' ideation material, or every grounding ref of the campaign."""
    if hypothesis_id is None:
        entries = sorted(view[SLICE].values(), key=lambda g: (g["seq"], g["id"]))
    else:
        entries = ideation_material(view, hypothesis_id)
    return [{**g, "normalised": ref_key(g["ref"]).name} for g in entries]


def add_grounding_ref(ledger: Ledger, creds: Credentials, ref: dict[str, Any], *,
                      hypothesis_id: str | None = None) -> dict[str, Any]:
    """Record a grounding ref: for a hypothesis its writer proposed, or (the curator's)
    campaign-wide.

    Raises:
        RecordRejected: a malformed ref, naming the field; Forbidden: not the writer's role's
        (campaign-wide refs are the curator's); Refused: another's hypothesis, or a repeat.
    """
    payload = {"ref": ref, "hypothesis_id": hypothesis_id}

    def plan(view: View, who: Identity, now: str) -> list[Record]:
        return ledger.prepare(draft(payload, kind="grounding_ref_v0"), who)

    [record] = ledger.write(creds, plan)
    stored = record["payload"]
    return {"grounding_id": record["record_id"], "seq": record["seq"],
            "hypothesis_id": stored["hypothesis_id"], "ref": stored["ref"],
            "normalised": ref_key(stored["ref"]).name}
