"""What the board shows beyond the story, as data read from folded state: each hypothesis'
values of the contract's metric in log order (for its chart, with the baseline it is measured
against), each live hypothesis' next action and the role that takes it (the frontier's), and
the todos: what each role has left to do, in the order it will be handed out, and what was
cancelled and why.

Every value is registered with the packet and field it came from (``results.I.value``,
``results.I.seed``, ``attempt``), every free text with its record and field, like the rest of
the story. Private hypotheses and private packets are never charted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopx.governance.state import current_contract
from loopx.narrator.reader import Reader
from loopx.research.evidence import uncounted
from loopx.research.projections import Row

View = dict[str, Any]
FINISHED = ("promoted", "retired")


def _packets(r: Reader, view: View, hid: str, metric: str) -> tuple[list[dict[str, Any]], int]:
    """A hypothesis' public packets in log order, each with its values of ``metric`` (each with
    why no judgement counts it, if none does); and how many private packets were left out."""
    out, hidden = [], 0
    for pid in view["hypotheses"][hid]["packets"]:
        p = view["packets"].get(pid)
        if p is None:
            continue
        if p.get("visibility") == "private":
            hidden += 1
            continue
        rid = r.rid(pid)
        values = [{"split": split, "seed": r.num(seed, rid, f"results.{i}.seed"),
                   "value": r.num(value, rid, f"results.{i}.value"),
                   "uncounted": uncounted(view, p, split, metric, seed)}
                  for i, (split, name, seed, value) in enumerate(p["results"])
                  if name == metric]
        if p["status"] == "scored" and not values:
            continue  # scored on other metrics only: nothing to draw on this chart
        out.append({"packet_id": rid, "seq": p["seq"], "status": p["status"],
                    "attempt": r.num(p["attempt"], rid, "attempt"), "values": values})
    return out, hidden


def charts(r: Reader, view: View, hypotheses: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per public hypothesis (tree order; the measured baseline has none of its own), its
    packets and their values of the contract's metric, and the baseline: the contract's
    scalar (assumed) or the measured baseline hypothesis' packets. None without a public
    contract."""
    contract = current_contract(view)
    if contract is None or contract.get("visibility") == "private":
        return None
    rid, metric = contract["record_id"], contract["metric"]
    name = metric["name"]
    measured = metric.get("baseline_hypothesis")
    baseline: dict[str, Any]
    if measured is None:
        baseline = {"kind": "assumed",
                    "value": r.num(metric["baseline"], rid, "metric.baseline")}
    else:
        entry = view["hypotheses"].get(measured)
        if entry is not None and entry.get("visibility") == "private":
            baseline = {"kind": "measured", "private": True, "packets": []}
        else:
            packets = _packets(r, view, measured, name)[0] if entry is not None else []
            baseline = {"kind": "measured", "private": False, "packets": packets,
                        "hypothesis_id": r.text(measured, rid, "metric.baseline_hypothesis")}
    out = []
    for h in hypotheses:
        if h["private"] or h["state"] == "baseline":
            continue
        packets, hidden = _packets(r, view, str(h["hypothesis_id"]), name)
        out.append({"key": h["key"], "hypothesis_id": h["hypothesis_id"], "title": h["title"],
                    "private": False, "state": h["state"],
                    "state_words": h.get("state_words"), "packets": packets,
                    "hidden": hidden})
    return {"metric": r.text(name, rid, "metric.name"), "direction": metric["direction"],
            "baseline": baseline, "hypotheses": out}


def next_actions(r: Reader, view: View, hypotheses: list[dict[str, Any]],
                 rows: dict[str, Row]) -> list[dict[str, Any]]:
    """Each live hypothesis (neither promoted nor retired), in tree order, with the frontier's
    next action, the role that takes it and the frontier's words on why. The measured baseline
    is listed only while an executor has a todo measuring it."""
    private = {hid for hid, e in view["hypotheses"].items() if e.get("visibility") == "private"}
    by_key = {e["record_id"]: hid for hid, e in view["hypotheses"].items()}
    out = []
    for h in hypotheses:
        if h["state"] in FINISHED:
            continue
        hid = by_key[h["key"]]
        row = rows[hid]
        if h["state"] == "baseline" and row.next_role is None:
            continue
        key = h["key"]
        item: dict[str, Any] = {
            "key": key, "hypothesis_id": h["hypothesis_id"], "title": h["title"],
            "private": h["private"], "state": h["state"], "state_words": h.get("state_words"),
            "action": r.optional(row.next_action, key, "frontier.next_action"),
            "role": r.optional(row.next_role, key, "frontier.next_role"), "detail": None}
        # The frontier's words may name todos, agents and other hypotheses: never a private one.
        if not h["private"] and row.detail and not any(p in row.detail for p in private):
            item["detail"] = r.text(row.detail, key, "frontier.detail")
        out.append(item)
    return out


TODO_ROWS = 100  # the board lists at most this many todos; the rest are counted
ORDER_FIELDS = ("status", "role", "priority", "seq")  # what orders the list (all scalars)


def todos(r: Reader, view: View, screen: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """The todo view: every todo not finished (open, blocked, held), then the cancelled ones
    with who cancelled them and why; by role, then as selection takes them (priority, highest
    first, then age). Completed and failed todos are counted, not listed. A private todo, or
    one that works on or names a private hypothesis, shows only its role, state and priority.
    A title or reason ``screen`` refuses is withheld (None) rather than quoted."""
    from loopx.work.should_run import blockers, passed_over

    def quote(value: str, record_id: str, name: str) -> str | None:
        return r.text(value, record_id, name) if screen is None or screen(value) else None

    from loopx.kernel.lazy_table import fields

    private = {hid for hid, e in view["hypotheses"].items() if e.get("visibility") == "private"}
    entries = view["todos"]

    def hidden(tid: str) -> bool:
        t = entries.get(tid)
        return t is not None and _private_todo(tid, t, private)

    finished = {"completed": 0, "failed": 0}
    listed = []
    # Only the four fields that order them are read of every todo (of a checkpoint's table, by
    # SQLite); the rows listed are then read whole.
    for tid, (status, role, priority, seq) in fields(entries, ORDER_FIELDS):
        if status in finished:
            finished[status] += 1
        else:
            listed.append((status == "cancelled", role, -priority, seq, tid))
    listed.sort()
    rows = []
    for *_, tid in listed[:TODO_ROWS]:
        t = entries[tid]
        state = ("blocked" if t["status"] == "open" and blockers(t, view) else t["status"])
        # An open todo should-run never hands out (a moot evaluation) is no work left to do.
        never = passed_over(view, t) if state == "open" else None
        if hidden(tid):
            rows.append({"private": True, "role": t["role"], "state": state,
                         "priority": t["priority"]})
            continue
        rid = r.rid(t.get("record_id") or "")
        cancel = t.get("cancel")
        cancelled = None
        if cancel is not None:
            crid = r.rid(cancel["record_id"])
            cancelled = {"record_id": crid, "by": r.text(cancel["agent_id"], crid, "agent_id"),
                         "reason": None if cancel.get("visibility") == "private" else
                         quote(cancel["reason"], crid, "reason"),
                         "private": cancel.get("visibility") == "private"}
        rows.append({
            "private": False, "key": rid, "todo_id": r.text(tid, rid, "todo_id"),
            "title": quote(t["title"], rid, "title"), "role": t["role"],
            "action_kind": t["action_kind"], "state": state,
            "priority": r.num(t["priority"], t.get("priority_record") or rid, "priority"),
            "assigned_to": r.optional(t["assigned_to"], rid, "assigned_to"),
            "holder": r.optional(t["holder"], rid, "holder"),
            "waiting_on": [None if hidden(b) else r.text(b, rid, "blocked_by")
                           for b in blockers(t, view)],
            "passed_over": never, "cancelled": cancelled})
    return {"rows": rows, "more": max(len(listed) - TODO_ROWS, 0), "finished": finished}


def _private_todo(todo_id: str, t: dict[str, Any], private: set[str]) -> bool:
    """Whether the board may not name a todo: a private record, or one that works on or names
    a private hypothesis (its id or title may spell it). A blocker is named only if it may be
    named itself."""
    if t.get("visibility") == "private" or t["hypothesis_id"] in private:
        return True
    return any(hid in w for hid in private for w in (todo_id, t["title"]))
