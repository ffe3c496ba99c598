"""Todo changes through the Python API: reprioritise, block, unblock, cancel, reassign; who may
make them; how should-run and claims follow; fencing a holder out; and what an agent trying to
jump the queue or take a rival's todo gets."""

from __future__ import annotations

from typing import Any

import pytest
from lanes_support import RESULT_RULES, Campaign, campaign, record_rules

from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Forbidden, NotFound, RecordRejected, Refused, StaleLease
from loopx.kernel.ledger import Ledger
from loopx.kernel.verify import verify_store
from loopx.work.agents import revoke_agent
from loopx.work.claims import claim, complete, heartbeat, should_run
from loopx.work.todo_changes import (
    block,
    cancel,
    change_todo,
    reassign,
    reprioritise,
    unblock,
)
from loopx.work.todos import add_todos, todo_row


@pytest.fixture
def c() -> Campaign:
    return campaign()


def selects(c: Campaign, agent_id: str) -> str | None:
    todo = should_run(c.ledger, agent_id)["todo"]
    return None if todo is None else str(todo["todo_id"])


def unchanged(c: Campaign, head: int) -> None:
    assert c.head() == head, "a refused change must write nothing"


def proposer_todos(c: Campaign, prop: Credentials, *ids: str, **payload: Any) -> None:
    """Executor todos the proposer adds (so the proposer role may change them)."""
    add_todos(c.ledger, prop, [{"todo_id": t, "title": f"do {t}", "role": "research_executor",
                                "action_kind": "run_dev_eval", "hypothesis_id": "h1",
                                **payload} for t in ids])


# -- each change, and how selection follows ---------------------------------------------------

def test_reprioritise_moves_the_todo_in_its_queue(c: Campaign) -> None:
    c.agent("ex-1", "research_executor")
    for t in ("a", "b", "c"):
        c.todo(t)
    assert selects(c, "ex-1") == "a"  # same priority: the oldest first
    out = reprioritise(c.ledger, c.owner, "c", 5, reason="the big one first")
    assert (out["changed"], out["change"], out["todo"]["priority"]) == (True, "reprioritise", 5)
    assert selects(c, "ex-1") == "c"
    assert [e[2] for e in c.lanes["queues"]["research_executor"]] == ["c", "a", "b"]
    reprioritise(c.ledger, c.owner, "c", -1)
    assert [e[2] for e in c.lanes["queues"]["research_executor"]] == ["a", "b", "c"]
    # A repeat (a client retrying after a lost answer) writes nothing.
    head = c.head()
    again = reprioritise(c.ledger, c.owner, "c", -1)
    assert (again["changed"], again["seq"]) == (False, None)
    unchanged(c, head)
    [record] = [r for r in c.records("todo_change_v0") if r["payload"]["priority"] == 5]
    assert (record["todo_id"], record["epoch"], record["payload"]["reason"]) == (
        None, None, "the big one first")


def test_block_and_unblock_gate_selection_and_claims(c: Campaign) -> None:
    ex = c.agent("ex-1", "research_executor")
    hp = c.agent("hp-1", "hypothesis_proposer")
    c.todo("first", role="hypothesis_proposer", action_kind="propose_hypothesis")
    c.todo("second", role="hypothesis_proposer", action_kind="propose_hypothesis")
    c.todo("t1")
    block(c.ledger, c.owner, "t1", "first")
    out = should_run(c.ledger, "ex-1")
    assert (out["reason"], out["blocked_todos"]) == ("blocked", ["t1"])
    assert todo_row(c.lanes, "t1", c.ledger.now())["state"] == "blocked"
    block(c.ledger, c.owner, "second", "first")
    head = c.head()
    with pytest.raises(Refused, match="blocked by first"):
        claim(c.ledger, hp, "second")  # an explicit claim is gated too
    unchanged(c, head)
    unblock(c.ledger, c.owner, "t1", "first", reason="not needed after all")
    assert should_run(c.ledger, "ex-1", claim=True, creds=ex)["todo"]["todo_id"] == "t1"


def test_blockers_are_checked_like_links_on_add(c: Campaign) -> None:
    for t in ("a", "b", "c"):
        c.todo(t)
    block(c.ledger, c.owner, "b", "a")
    block(c.ledger, c.owner, "c", "b")
    head = c.head()
    with pytest.raises(Refused, match="would make a cycle"):
        block(c.ledger, c.owner, "a", "c")  # c waits for b, which waits for a
    with pytest.raises(Refused, match="would make a cycle"):
        block(c.ledger, c.owner, "a", "b")
    with pytest.raises(Refused, match="cannot block itself"):
        block(c.ledger, c.owner, "a", "a")
    with pytest.raises(Refused, match="'nope' does not exist"):
        block(c.ledger, c.owner, "a", "nope")
    with pytest.raises(Refused, match="'nope' does not exist"):
        unblock(c.ledger, c.owner, "a", "nope")
    with pytest.raises(NotFound):
        block(c.ledger, c.owner, "ghost", "a")
    cancel(c.ledger, c.owner, "c", "dropped")
    head = c.head()
    with pytest.raises(Refused, match="is cancelled and will never complete"):
        block(c.ledger, c.owner, "a", "c")
    unchanged(c, head)
    assert block(c.ledger, c.owner, "b", "a")["changed"] is False  # already there
    assert unblock(c.ledger, c.owner, "a", "b")["changed"] is False  # not there
    unchanged(c, head)


def test_a_cancelled_todo_is_done_for_good(c: Campaign) -> None:
    ev = c.agent("ev-1", "evaluator_promoter")
    c.todo("g1", role="evaluator_promoter", action_kind="review_gate")
    c.todo("g2", role="evaluator_promoter", action_kind="review_gate")
    out = cancel(c.ledger, c.owner, "g1", "the gate was dropped from the contract")
    assert out["todo"]["state"] == "cancelled"
    assert out["todo"]["cancelled"] == {"reason": "the gate was dropped from the contract",
                                        "by": "owner", "seq": out["seq"]}
    assert [e[2] for e in c.lanes["queues"]["evaluator_promoter"]] == ["g2"]
    assert selects(c, "ev-1") == "g2"
    head = c.head()
    with pytest.raises(Refused, match="'g1' is cancelled"):
        claim(c.ledger, ev, "g1")
    for change in (lambda: reprioritise(c.ledger, c.owner, "g1", 3),
                   lambda: block(c.ledger, c.owner, "g1", "g2"),
                   lambda: reassign(c.ledger, c.owner, "g1", "ev-1")):
        with pytest.raises(Refused, match="'g1' is cancelled; a finished todo does not change"):
            change()
    assert cancel(c.ledger, c.owner, "g1", "again")["changed"] is False
    unchanged(c, head)
    counts = [row["state"] for row in [todo_row(c.lanes, t, c.ledger.now()) for t in ("g1", "g2")]]
    assert counts == ["cancelled", "open"]
    # A finished todo does not change: completed is final too.
    claim(c.ledger, ev, "g2")
    complete(c.ledger, ev, "g2", 1)
    with pytest.raises(Refused, match="'g2' is completed"):
        cancel(c.ledger, c.owner, "g2", "too late")


def test_a_cancel_needs_a_reason_naming_the_field(c: Campaign) -> None:
    c.todo("t1")
    head = c.head()
    with pytest.raises(Refused, match="needs a reason"):
        cancel(c.ledger, c.owner, "t1", "  ")
    with pytest.raises(RecordRejected) as rejected:
        change_todo(c.ledger, c.owner, {"todo_id": "t1", "change": "cancel"})
    assert "reason: required" in str(rejected.value)
    with pytest.raises(RecordRejected) as rejected:
        change_todo(c.ledger, c.owner, {"todo_id": "t1", "change": "reprioritise",
                                        "priority": "high"})
    assert rejected.value.fields == ["payload.priority"]
    with pytest.raises(RecordRejected, match="blocker: not used when change is 'reprioritise'"):
        change_todo(c.ledger, c.owner, {"todo_id": "t1", "change": "reprioritise",
                                        "priority": 1, "blocker": "t1"})
    with pytest.raises(RecordRejected, match="fence_epoch: only cancel and reassign"):
        change_todo(c.ledger, c.owner, {"todo_id": "t1", "change": "reprioritise",
                                        "priority": 1, "fence_epoch": 1,
                                        "fenced_agent_id": "ex-1"})
    with pytest.raises(RecordRejected, match="unknown field"):
        change_todo(c.ledger, c.owner, {"todo_id": "t1", "change": "cancel", "reason": "x",
                                        "status": "completed"})
    unchanged(c, head)


def test_reassign_moves_the_todo_between_queues(c: Campaign) -> None:
    c.agent("ex-1", "research_executor")
    c.agent("ex-2", "research_executor")
    c.agent("hp-1", "hypothesis_proposer")
    c.todo("old")
    c.todo("t1")
    reassign(c.ledger, c.owner, "t1", "ex-2")
    queues = c.lanes["queues"]
    assert [e[2] for e in queues["research_executor"]] == ["old"]
    assert [e[2] for e in queues["@ex-2"]] == ["t1"]
    assert selects(c, "ex-2") == "t1"  # its assigned todos come first, though newer
    assert selects(c, "ex-1") == "old"
    head = c.head()
    with pytest.raises(Refused, match="'hp-1' is not a live research_executor agent"):
        reassign(c.ledger, c.owner, "t1", "hp-1")
    with pytest.raises(Refused, match="'nobody' is not a live research_executor agent"):
        reassign(c.ledger, c.owner, "t1", "nobody")
    revoke_agent(c.ledger, c.owner, "ex-1")
    head = c.head()
    with pytest.raises(Refused, match="'ex-1' is not a live research_executor agent"):
        reassign(c.ledger, c.owner, "t1", "ex-1")
    unchanged(c, head)
    reassign(c.ledger, c.owner, "t1", None, reason="anyone may take it")
    assert [e[2] for e in c.lanes["queues"]["research_executor"]] == ["old", "t1"]
    assert c.lanes["queues"]["@ex-2"] == []


# -- who may -----------------------------------------------------------------------------------

def test_only_the_adding_role_or_the_owner_may_change_a_todo(c: Campaign) -> None:
    prop = c.agent("hp-1", "hypothesis_proposer")
    prop2 = c.agent("hp-2", "hypothesis_proposer")
    ev = c.agent("ev-1", "evaluator_promoter")
    ex = c.agent("ex-1", "research_executor")
    proposer_todos(c, prop, "p1")
    c.todo("o1")  # the owner's
    # Another agent of the adding role may: the role added it, not the agent.
    assert reprioritise(c.ledger, prop2, "p1", 2)["changed"]
    assert reprioritise(c.ledger, c.owner, "p1", 3)["changed"]
    head = c.head()
    # A proposer reprioritising the executors' todos someone else added.
    with pytest.raises(Forbidden) as refused:
        reprioritise(c.ledger, prop, "o1", 99)
    assert (refused.value.role, refused.value.kind, refused.value.action) == (
        "hypothesis_proposer", "todo_change_v0", "reprioritise")
    assert "added by role 'owner'" in str(refused.value)
    # The evaluator may change todos, but not the proposer's.
    with pytest.raises(Forbidden, match="added by role 'hypothesis_proposer'"):
        cancel(c.ledger, ev, "p1", "mine now")
    # An executor may change no todo at all (its profile grants no todo_change_v0), not even
    # to push its own queue ahead.
    with pytest.raises(Forbidden, match="may not write todo_change_v0 with action 'reprioritise'"):
        reprioritise(c.ledger, ex, "o1", 99)
    unchanged(c, head)


def test_a_successor_counts_as_added_by_the_completers_role(c: Campaign) -> None:
    # Rules on the completer's own result (an owner may record such rules): successors without
    # evidence to read, so the test is only about who made them.
    record_rules(c, "evaluator_promoter", [
        {"rule_id": "refine_after_supported_dev", "after_action": "judge_evidence",
         "when": [{"path": "verdict", "op": "eq", "value": "supports"}],
         "target_role": "hypothesis_proposer", "action_kind": "refine_hypothesis",
         "title": "Refine a hypothesis its dev evidence supports"}])
    record_rules(c, "research_executor", RESULT_RULES)
    ev = c.agent("ev-1", "evaluator_promoter")
    prop = c.agent("hp-1", "hypothesis_proposer")
    c.todo("judge", role="evaluator_promoter", action_kind="judge_evidence", hypothesis_id="h1")
    claim(c.ledger, ev, "judge")
    [refine] = complete(c.ledger, ev, "judge", 1, {"split": "dev", "verdict": "supports"})[
        "successors"]
    assert todo_row(c.lanes, refine, c.ledger.now())["added_role"] == "evaluator_promoter"
    head = c.head()
    # The todo is the proposer's to take, but the evaluator's rule made it.
    with pytest.raises(Forbidden, match="added by role 'evaluator_promoter'"):
        reprioritise(c.ledger, prop, refine, 9)
    unchanged(c, head)
    assert reprioritise(c.ledger, ev, refine, 9)["changed"]
    # The executor's rule made the judge todo of a dev run: not the evaluator's to change.
    ex = c.agent("ex-1", "research_executor")
    c.todo("dev-1")
    should_run(c.ledger, "ex-1", claim=True, creds=ex)
    complete(c.ledger, ex, "dev-1", 1, {"status": "scored"})
    with pytest.raises(Forbidden, match="added by role 'research_executor'"):
        cancel(c.ledger, ev, "dev-1.judge_dev_attempt", "I would rather not")
    assert cancel(c.ledger, c.owner, "dev-1.judge_dev_attempt", "rerun first")["changed"]


def test_unblocking_by_removing_a_blocker_it_may_not(c: Campaign) -> None:
    prop = c.agent("hp-1", "hypothesis_proposer")
    ev = c.agent("ev-1", "evaluator_promoter")
    ex = c.agent("ex-1", "research_executor")
    c.todo("story", role="evaluator_promoter", action_kind="decide", hypothesis_id="h1")
    # The evaluator's todo links itself in front of the owner's: unblocks_todo_id.
    add_todos(c.ledger, ev, [{"todo_id": "gate", "title": "gate", "role": "evaluator_promoter",
                              "action_kind": "review_gate", "unblocks_todo_id": "story"}])
    proposer_todos(c, prop, "run")
    block(c.ledger, prop, "run", "gate")
    head = c.head()
    # Linking a blocker in gave no right to take it out of another role's todo.
    with pytest.raises(Forbidden, match="added by role 'owner'"):
        unblock(c.ledger, ev, "story", "gate")
    # The executor waiting on its todo may not free it itself.
    with pytest.raises(Forbidden, match="may not write todo_change_v0 with action 'unblock'"):
        unblock(c.ledger, ex, "run", "gate")
    with pytest.raises(Forbidden, match="added by role 'hypothesis_proposer'"):
        unblock(c.ledger, ev, "run", "gate")
    unchanged(c, head)
    assert should_run(c.ledger, "ex-1")["reason"] == "blocked"
    unblock(c.ledger, prop, "run", "gate")
    assert selects(c, "ex-1") == "run"


# -- fencing a holder ------------------------------------------------------------------------

def held(c: Campaign, agent_id: str = "ex-1") -> tuple[Credentials, int]:
    ex = c.agent(agent_id, "research_executor")
    c.todo("t1")
    got = should_run(c.ledger, agent_id, claim=True, creds=ex)
    return ex, got["todo"]["epoch"]


def test_a_held_todo_is_cancelled_only_by_naming_its_lease(c: Campaign) -> None:
    ex, epoch = held(c)
    head = c.head()
    with pytest.raises(Refused, match="held by ex-1 under a live lease .*--fence 1"):
        cancel(c.ledger, c.owner, "t1", "stop")
    with pytest.raises(StaleLease, match="not held at epoch 2"):
        cancel(c.ledger, c.owner, "t1", "stop", fence_epoch=2)
    unchanged(c, head)
    out = cancel(c.ledger, c.owner, "t1", "the idea was dropped", fence_epoch=epoch)
    assert out["fenced"] == {"agent_id": "ex-1", "epoch": 1}
    assert (out["todo"]["state"], out["todo"]["holder"]) == ("cancelled", None)
    assert c.lanes["agents"]["ex-1"]["holding"] == []
    [record] = c.records("todo_change_v0")
    assert (record["payload"]["fence_epoch"], record["payload"]["fenced_agent_id"]) == (1, "ex-1")
    # The holder's writes under that epoch are refused from now on; nothing is written.
    head = c.head()
    with pytest.raises(StaleLease, match="ex-1 does not hold epoch 1"):
        heartbeat(c.ledger, ex, "t1", epoch)
    with pytest.raises(StaleLease):
        complete(c.ledger, ex, "t1", epoch, {"status": "scored"})
    with pytest.raises(StaleLease):
        c.ledger.append({"todo_id": "t1", "epoch": 1, "payload": {"event": "note"}}, creds=ex,
                        kind="rollout_event_v0")
    unchanged(c, head)
    assert should_run(c.ledger, "ex-1")["reason"] == "no_eligible_todo"
    assert verify_store(c.ledger.store).ok


def test_a_lapsed_lease_needs_no_fence(c: Campaign) -> None:
    _, _ = held(c)
    c.clock.advance(901)
    out = cancel(c.ledger, c.owner, "t1", "nobody is on it")
    assert (out["fenced"], out["todo"]["state"], out["todo"]["holder"]) == (None, "cancelled",
                                                                            None)
    assert c.lanes["agents"]["ex-1"]["holding"] == []


def test_reassigning_a_held_todo_away_fences_the_holder(c: Campaign) -> None:
    ex1, epoch = held(c)
    ex2 = c.agent("ex-2", "research_executor")
    head = c.head()
    with pytest.raises(Refused, match="held by ex-1 under a live lease"):
        reassign(c.ledger, c.owner, "t1", "ex-2")
    unchanged(c, head)
    # Assigning it to its holder, or to the whole role, leaves the lease alone.
    reassign(c.ledger, c.owner, "t1", "ex-1")
    reassign(c.ledger, c.owner, "t1", None)
    assert todo_row(c.lanes, "t1", c.ledger.now())["holder"] == "ex-1"
    out = reassign(c.ledger, c.owner, "t1", "ex-2", fence_epoch=epoch, reason="ex-1 is stuck")
    assert out["fenced"] == {"agent_id": "ex-1", "epoch": 1}
    assert (out["todo"]["state"], out["todo"]["assigned_to"], out["todo"]["failures"]) == (
        "open", "ex-2", 0)  # taken away, not failed: no attempt is counted
    with pytest.raises(StaleLease):
        heartbeat(c.ledger, ex1, "t1", epoch)
    got = should_run(c.ledger, "ex-2", claim=True, creds=ex2)
    assert (got["todo"]["todo_id"], got["todo"]["epoch"]) == ("t1", 2)
    complete(c.ledger, ex2, "t1", 2, {"status": "failed"})
    assert verify_store(c.ledger.store).ok


def test_a_rival_cannot_take_a_held_todo(c: Campaign) -> None:
    prop = c.agent("hp-1", "hypothesis_proposer")
    ev = c.agent("ev-1", "evaluator_promoter")
    ex1 = c.agent("ex-1", "research_executor")
    ex2 = c.agent("ex-2", "research_executor")
    proposer_todos(c, prop, "t1")
    epoch = should_run(c.ledger, "ex-1", claim=True, creds=ex1)["todo"]["epoch"]
    head = c.head()
    # Another executor: no right to change todos at all, fence or not.
    for attempt in (lambda: cancel(c.ledger, ex2, "t1", "mine", fence_epoch=epoch),
                    lambda: reassign(c.ledger, ex2, "t1", "ex-2", fence_epoch=epoch)):
        with pytest.raises(Forbidden):
            attempt()
    # Another role that may change todos, but did not add this one.
    with pytest.raises(Forbidden, match="added by role 'hypothesis_proposer'"):
        cancel(c.ledger, ev, "t1", "not yours either", fence_epoch=epoch)
    # The adding role, guessing at a lease: refused without writing.
    with pytest.raises(StaleLease):
        reassign(c.ledger, prop, "t1", "ex-2", fence_epoch=epoch + 1)
    # A forged fence naming the wrong holder, appended by hand.
    with pytest.raises(Refused, match="fenced_agent_id must name the holder 'ex-1'"):
        c.ledger.append({"payload": {"todo_id": "t1", "change": "cancel", "reason": "x",
                                     "fence_epoch": epoch, "fenced_agent_id": "ex-2"}},
                        creds=prop, kind="todo_change_v0")
    # Nor under another agent's lease.
    with pytest.raises(StaleLease, match="hp-1 does not hold epoch 1"):
        c.ledger.append({"todo_id": "t1", "epoch": epoch,
                         "payload": {"todo_id": "t1", "change": "reprioritise", "priority": 1}},
                        creds=prop, kind="todo_change_v0")
    unchanged(c, head)
    assert todo_row(c.lanes, "t1", c.ledger.now())["holder"] == "ex-1"


# -- the fold ----------------------------------------------------------------------------------

def test_a_fresh_fold_gives_the_same_queues(c: Campaign) -> None:
    c.agent("ex-1", "research_executor")
    c.agent("ex-2", "research_executor")
    for n in range(8):
        c.todo(f"t{n}", priority=n % 3)
    reprioritise(c.ledger, c.owner, "t0", 10)
    reassign(c.ledger, c.owner, "t1", "ex-2")
    reprioritise(c.ledger, c.owner, "t1", 4)
    cancel(c.ledger, c.owner, "t2", "dup")
    block(c.ledger, c.owner, "t3", "t4")
    reassign(c.ledger, c.owner, "t1", None)
    incremental = c.lanes
    fresh = Ledger(c.ledger.store).state()["lanes"]
    assert fresh["queues"] == incremental["queues"]
    assert fresh["todos"] == incremental["todos"]
    queue = incremental["queues"]["research_executor"]
    assert queue == sorted(queue)
    assert [e[2] for e in queue] == ["t0", "t1", "t5", "t4", "t7", "t3", "t6"]
    assert incremental["queues"]["@ex-2"] == []
    assert verify_store(c.ledger.store).ok


def test_a_change_is_never_written_under_a_lease(c: Campaign) -> None:
    prop = c.agent("hp-1", "hypothesis_proposer")
    c.todo("own", role="hypothesis_proposer", action_kind="propose_hypothesis")
    epoch = should_run(c.ledger, "hp-1", claim=True, creds=prop)["todo"]["epoch"]
    proposer_todos(c, prop, "t1")
    head = c.head()
    # Holding a lease lends no authority over other todos, and a change is not fenced by one.
    with pytest.raises(Refused, match="not written under a lease"):
        c.ledger.append({"todo_id": "own", "epoch": epoch,
                         "payload": {"todo_id": "t1", "change": "reprioritise", "priority": 1}},
                        creds=prop, kind="todo_change_v0")
    unchanged(c, head)


def test_verify_reports_a_change_appended_around_the_checks(c: Campaign) -> None:
    from loopx.kernel.kinds import new_record_id

    c.agent("hp-1", "hypothesis_proposer")
    c.todo("o1")  # the owner's: no proposer may change it
    head = c.head()
    c.ledger.store.append([{
        "schema_version": "todo_change_v0", "record_id": new_record_id(),
        "goal_id": "lanes-test", "agent_id": "hp-1", "lane_role": "hypothesis_proposer",
        "capability": c.lanes["agents"]["hp-1"]["grant_id"], "todo_id": None, "epoch": None,
        "visibility": "public", "provenance": "self_reported",
        "payload": {"todo_id": "o1", "change": "reprioritise", "priority": 99, "blocker": None,
                    "assigned_to": None, "reason": None, "fence_epoch": None,
                    "fenced_agent_id": None}}])
    report = verify_store(c.ledger.store)
    assert not report.ok and report.first_bad_seq == head + 1
    assert "added by role 'owner'" in (report.problem or "")
