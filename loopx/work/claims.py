"""Leased claims: should-run (with claim), explicit claims, heartbeats, release, complete, fail.

Each operation is one locked step through :meth:`Ledger.write`; the checks in
:mod:`loopx.kernel.checks` decide what is accepted, so these functions only plan the records.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.checks import Credentials, Identity, check_batch
from loopx.kernel.errors import LoopxError, Refused
from loopx.kernel.ledger import Ledger
from loopx.kernel.store.base import Encoded, Record, encode
from loopx.work.leases import lease_live
from loopx.work.should_run import (
    Decision,
    claim_fields,
    decision_json,
    select,
)
from loopx.work.state import LaneState
from loopx.work.successors import successor_todos
from loopx.work.todos import find_todo


def should_run(ledger: Ledger, agent_id: str, *, claim: bool = False,
               creds: Credentials | None = None) -> dict[str, Any]:
    """What ``agent_id`` should do next; with ``claim``, select and claim in one locked step.

    Raises:
        NotFound: no such agent; Unauthorized: with ``claim``, bad credentials.
    """
    if not claim:
        lanes = ledger.state()["lanes"]
        decision = select(lanes, agent_id, ledger.now())
        return decision_json(decision, lanes, ledger.goal_id(), claimed=False)
    if creds is None or creds.agent_id != agent_id:
        creds = Credentials(agent_id, creds.token if creds else None)
    # A store may run the builder more than once (PostgreSQL, when an optimistic append is
    # overtaken): the answer is the last run's, the one whose records were written.
    last: list[dict[str, Any] | tuple[Decision, LaneState]] = []

    def plan(lanes: LaneState, who: Identity, now: str) -> list[Record]:
        decision = select(lanes, who.agent_id, now)
        if decision.reason != "selected":
            last[:] = [decision_json(decision, lanes, ledger.goal_id(), claimed=False)]
            return []
        assert decision.todo_id is not None
        last[:] = [(decision, lanes)]  # answered once the lock is released
        return _claim_records(ledger, lanes, who, decision.todo_id, now, via="should_run")

    ledger.write(creds, plan)
    [answer] = last
    return answer if isinstance(answer, dict) else _claimed_json(ledger, *answer)


def claim(ledger: Ledger, creds: Credentials, todo_id: str) -> dict[str, Any]:
    """Claim ``todo_id`` explicitly (``loopx todo claim``), as the role's profile allows.

    Raises:
        Refused: not claimable by this agent (wrong role, blocked, held, not allowed
        explicitly); NotFound: no such todo.
    """
    claimed: list[tuple[Decision, LaneState]] = []

    def plan(lanes: LaneState, who: Identity, now: str) -> list[Record]:
        find_todo(lanes, todo_id)
        claimed.append((Decision(who.agent_id, who.role, True, "selected", todo_id), lanes))
        return _claim_records(ledger, lanes, who, todo_id, now, via="explicit")

    ledger.write(creds, plan)
    return _claimed_json(ledger, *claimed[-1])


def _claimed_json(ledger: Ledger, decision: Decision, lanes: LaneState) -> dict[str, Any]:
    """The should-run answer for a claim just written, from the view its batch was checked
    in, with the claim folded in (its epoch, lease and via): built after the lock is
    released, so the writers queued behind this one do not wait for it."""
    return decision_json(decision, lanes, ledger.goal_id(), claimed=True)


def _claim_records(ledger: Ledger, lanes: LaneState, who: Identity, todo_id: str, now: str, *,
                   via: str) -> list[Record]:
    """An expiry record for a lapsed lease (if any), then the claim with the next epoch."""
    todo = lanes["todos"][todo_id]
    records: list[Record] = []
    if todo["status"] == "claimed" and not lease_live(todo, lanes["agents"], now):
        holder = lanes["agents"].get(todo["holder"])
        why = ("holder revoked" if holder is not None and holder["revoked"]
               else f"lease expired at {todo['expires']}")
        records.append(ledger.loopx_record(who, "todo_event_v0", todo_id, todo["epoch"], {
            "event": "expired", "lease_ttl_seconds": None, "expired_agent_id": todo["holder"],
            "reason": why, "result": {}}))
    records.append(ledger.loopx_record(who, "auto_research_lane_claim_v1", todo_id,
                                    todo["epoch"] + 1, {
        **claim_fields(lanes, who.agent_id, todo_id), "context": {}, "via": via}))
    return records


def _event(ledger: Ledger, creds: Credentials, todo_id: str, epoch: int,
           payload: dict[str, Any], *, successors: bool = False,
           skip: Any = None, before: list[dict[str, Any]] | None = None) -> list[Record]:
    """Write one todo event for a held todo (checked before the lock), plus successor todos.

    ``before`` are drafts committed in the same batch ahead of the event (an attempt's evidence
    and usage with its completion or failure: all of it lands, or none). ``skip(todo, who)``,
    when it returns true under the lock, writes nothing (an idempotent repeat).
    """
    who = ledger.identify(creds)
    drafts = [{"todo_id": todo_id, "epoch": epoch, **d} for d in before or []]
    ahead = ledger.prepare(drafts, who) if drafts else []
    [event] = ledger.prepare({"todo_id": todo_id, "epoch": epoch, "payload": payload}, who,
                             kind="todo_event_v0")
    encoded = [encode(record) for record in (*ahead, event)]  # serialized before the lock

    def plan(lanes: LaneState, who_now: Identity, now: str) -> list[Record | Encoded]:
        todo = find_todo(lanes, todo_id)
        if skip is not None and skip(todo, who_now):
            return []
        records: list[Record | Encoded] = list(encoded)
        if successors and todo["holder"] == who_now.agent_id and todo["epoch"] == epoch:
            profile = lanes["profiles"].get(who_now.role, {})
            # The rules read the state the check will see at the completion: the records
            # ahead of it in this batch (the attempt's packet) folded in, at their own seqs.
            view = _ahead(ledger, lanes, ahead, now)
            drafts = [{"schema_version": "todo_item_v0", "payload": p} for p in
                      successor_todos(profile, todo_id, view["todos"][todo_id],
                                      who_now.agent_id, payload.get("result", {}), view)]
            if drafts:
                records += ledger.prepare(drafts, who_now)
        return records

    return ledger.write(creds, plan)


def _ahead(ledger: Ledger, lanes: LaneState, ahead: list[Record], now: str) -> LaneState:
    """``lanes`` with ``ahead`` checked and folded into a scratch overlay, exactly as the batch
    check will fold them ahead of the completion."""
    if not ahead:
        return lanes
    view = ledger.domains.overlay(lanes)
    try:
        check_batch(view, list(ahead), now, ledger.folded_seq() + 1, ledger.domains)
    except LoopxError:
        return lanes  # the batch check refuses them itself (and records a research refusal)
    return view


def heartbeat(ledger: Ledger, creds: Credentials, todo_id: str, epoch: int,
              ttl: float | None = None) -> dict[str, Any]:
    """Extend the lease on a held todo (by its TTL, or ``ttl`` seconds).

    Raises:
        StaleLease: the epoch is not current or the lease already expired.
    """
    payload: dict[str, Any] = {"event": "heartbeat"}
    if ttl is not None:
        payload["lease_ttl_seconds"] = ttl
    [record] = _event(ledger, creds, todo_id, epoch, payload)
    todo = ledger.state()["lanes"]["todos"][todo_id]
    return {"todo_id": todo_id, "epoch": epoch, "lease_expires_at": todo["expires"],
            "seq": record["seq"]}


def release(ledger: Ledger, creds: Credentials, todo_id: str, epoch: int,
            reason: str | None = None) -> dict[str, Any]:
    """Give a held todo back unfinished; it is open again at once (no attempt counted)."""
    payload: dict[str, Any] = {"event": "released"}
    if reason:
        payload["reason"] = reason
    [record] = _event(ledger, creds, todo_id, epoch, payload)
    return {"todo_id": todo_id, "epoch": epoch, "event": "released", "seq": record["seq"]}


def complete(ledger: Ledger, creds: Credentials, todo_id: str, epoch: int,
             result: dict[str, Any] | None = None, *,
             before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Complete a held todo with its recorded result; the role's successor rules fire with it.

    ``before``: drafts (evidence, usage) committed in the same batch, ahead of the completion.
    Repeating a completion that already landed (same agent, same epoch) writes nothing and
    reports it, so a client may retry safely.

    Raises:
        StaleLease: the epoch is not current or the lease expired; Refused: not held.
    """
    def repeat(todo: dict[str, Any], who: Identity) -> bool:
        return (todo["status"] == "completed" and todo["epoch"] == epoch
                and todo.get("last_holder") == who.agent_id)

    payload: dict[str, Any] = {"event": "completed", "result": result or {}}
    records = _event(ledger, creds, todo_id, epoch, payload, successors=True, skip=repeat,
                     before=before)
    if not records:
        return {"todo_id": todo_id, "epoch": epoch, "event": "completed", "seq": None,
                "already_completed": True, "successors": []}
    ahead = len(before or [])
    return {"todo_id": todo_id, "epoch": epoch, "event": "completed",
            "seq": records[ahead]["seq"], "already_completed": False,
            "records": [r["record_id"] for r in records[:ahead]],
            "successors": [r["payload"]["todo_id"] for r in records[ahead + 1:]]}


def fail(ledger: Ledger, creds: Credentials, todo_id: str, epoch: int, reason: str,
         result: dict[str, Any] | None = None, *,
         before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Record a failed attempt (with ``before``, its evidence and usage, in the same batch); the
    todo reopens until its max attempts are spent."""
    if not reason:
        raise Refused("a failure needs a reason")
    payload: dict[str, Any] = {"event": "failed", "reason": reason, "result": result or {}}
    *_, record = _event(ledger, creds, todo_id, epoch, payload, before=before)
    todo = ledger.state()["lanes"]["todos"][todo_id]
    return {"todo_id": todo_id, "epoch": epoch, "event": "failed", "seq": record["seq"],
            "state": todo["status"], "failures": todo["failures"]}
