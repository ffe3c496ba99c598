"""Leased claims, fencing, should-run reasons, blocking and successor rules, on a moved clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lanes_support import RESULT_RULES, Campaign, Clock, campaign, record_rules

from loopx.kernel.errors import NotFound, Refused, StaleLease, Unauthorized
from loopx.kernel.store import FileStore, Store
from loopx.kernel.verify import verify_store
from loopx.work.claims import claim, complete, fail, heartbeat, release, should_run
from loopx.work.todos import todo_row


@pytest.fixture(params=["memory", "file", "postgres"])
def c(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Campaign]:
    """A campaign on each store backend (PostgreSQL needs LOOPX_TEST_PG; see conftest)."""
    if request.param == "memory":
        yield campaign()
    elif request.param == "file":
        def on_file(clock: Clock) -> Store:
            store = FileStore(tmp_path / ".loopx", clock=clock, durable=False)
            store.create()
            return store

        yield campaign(on_file)
    else:
        from loopx.kernel.store.postgres import PostgresStore

        made: list[PostgresStore] = []

        def on_postgres(clock: Clock) -> Store:
            made.append(PostgresStore(request.getfixturevalue("pg_url"), clock=clock))
            return made[-1]

        yield campaign(on_postgres)
        made[0].drop()
        made[0].close()


def claim_next(c: Campaign, creds, agent_id: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    return should_run(c.ledger, agent_id or creds.agent_id, claim=True, creds=creds)


def test_should_run_reasons(c: Campaign) -> None:
    ex = c.agent("ex-1", "research_executor", quota=2)
    assert should_run(c.ledger, "ex-1")["reason"] == "no_eligible_todo"
    c.todo("t1")
    c.todo("t2", blocked_by=["t1"])
    peek = should_run(c.ledger, "ex-1")
    assert (peek["run"], peek["reason"], peek["claimed"]) == (True, "selected", False)
    assert peek["todo"]["todo_id"] == "t1" and peek["todo"]["epoch"] == 1
    assert c.lanes["todos"]["t1"]["status"] == "open"  # asking without --claim writes nothing
    got = claim_next(c, ex)
    assert got["claimed"] and got["claim"]["lease_expires_at"] is not None
    again = claim_next(c, ex)
    assert (again["reason"], again["claimed"], again["todo"]["todo_id"]) == (
        "already_holding_lease", False, "t1")
    complete(c.ledger, ex, "t1", 1)
    assert claim_next(c, ex)["todo"]["todo_id"] == "t2"  # t1 done, so t2 unblocked
    complete(c.ledger, ex, "t2", 1)
    c.todo("t3")
    out = should_run(c.ledger, "ex-1")
    assert (out["run"], out["reason"]) == (False, "quota_exhausted")
    c.todo("t4", role="hypothesis_proposer", action_kind="propose_hypothesis")
    c.agent("prop-1", "hypothesis_proposer")
    c.todo("t5", role="hypothesis_proposer", action_kind="propose_hypothesis", blocked_by=["t3"])
    prop = should_run(c.ledger, "prop-1")
    assert prop["todo"]["todo_id"] == "t4"
    with pytest.raises(NotFound):
        should_run(c.ledger, "nobody")


def test_blocked_reason_names_the_waiting_todos(c: Campaign) -> None:
    c.agent("ex-1", "research_executor")
    c.todo("first", role="hypothesis_proposer", action_kind="propose_hypothesis")
    c.todo("second", blocked_by=["first"])
    out = should_run(c.ledger, "ex-1")
    assert (out["run"], out["reason"], out["blocked_todos"]) == (False, "blocked", ["second"])


def test_selection_order_assigned_then_priority_then_oldest(c: Campaign) -> None:
    ex = c.agent("ex-1", "research_executor")
    c.agent("ex-2", "research_executor")
    c.todo("old")
    c.todo("urgent", priority=5)
    c.todo("mine", assigned_to="ex-1")
    c.todo("theirs", assigned_to="ex-2", priority=9)
    order = []
    for _ in range(3):
        got = claim_next(c, ex)
        order.append(got["todo"]["todo_id"])
        complete(c.ledger, ex, order[-1], got["todo"]["epoch"])
    assert order == ["mine", "urgent", "old"]
    assert should_run(c.ledger, "ex-1")["reason"] == "no_eligible_todo"  # 'theirs' is ex-2's


def test_lease_expiry_is_recorded_by_the_next_claimant_and_fences_the_old_holder(c: Campaign) -> None:
    a = c.agent("ex-a", "research_executor")
    b = c.agent("ex-b", "research_executor")
    c.todo("t1", lease_ttl_seconds=30.0)
    assert claim_next(c, a)["todo"]["epoch"] == 1
    c.clock.advance(20)
    heartbeat(c.ledger, a, "t1", 1)  # extends to 20 + 30
    c.clock.advance(25)
    assert should_run(c.ledger, "ex-b")["reason"] == "no_eligible_todo"  # still a's
    c.clock.advance(10)  # 55 s: past the extended lease
    got = claim_next(c, b)
    assert (got["todo"]["todo_id"], got["todo"]["epoch"]) == ("t1", 2)
    expired = c.records("todo_event_v0")[-1]
    assert expired["payload"]["event"] == "expired"
    assert (expired["payload"]["expired_agent_id"], expired["epoch"], expired["agent_id"]) == (
        "ex-a", 1, "ex-b")
    claim_rec = c.records("auto_research_lane_claim_v1")[-1]
    assert claim_rec["batch_end"] == expired["batch_end"]  # one locked step
    head = c.head()
    for late in (lambda: complete(c.ledger, a, "t1", 1), lambda: heartbeat(c.ledger, a, "t1", 1),
                 lambda: release(c.ledger, a, "t1", 1),
                 lambda: fail(c.ledger, a, "t1", 1, "too late")):
        with pytest.raises(StaleLease, match="ex-a does not hold epoch 1"):
            late()
    assert c.head() == head
    with pytest.raises(StaleLease):  # the right agent but an old epoch is refused too
        complete(c.ledger, b, "t1", 1)
    complete(c.ledger, b, "t1", 2)
    assert verify_store(c.ledger.store).ok


def test_an_expired_holder_must_claim_again(c: Campaign) -> None:
    a = c.agent("ex-a", "research_executor")
    c.todo("t1", lease_ttl_seconds=10.0)
    claim_next(c, a)
    c.clock.advance(11)
    with pytest.raises(StaleLease, match="expired"):
        heartbeat(c.ledger, a, "t1", 1)
    with pytest.raises(StaleLease, match="expired"):
        complete(c.ledger, a, "t1", 1)
    got = claim_next(c, a)
    assert got["todo"]["epoch"] == 2
    complete(c.ledger, a, "t1", 2)
    row = todo_row(c.lanes, "t1", c.ledger.now())
    assert (row["state"], row["failures"], row["claims"]) == ("completed", 1, 2)


def test_release_reopens_and_failures_spend_attempts(c: Campaign) -> None:
    a = c.agent("ex-a", "research_executor")
    c.todo("t1", max_attempts=2)
    claim_next(c, a)
    release(c.ledger, a, "t1", 1, reason="need a bigger machine")
    assert todo_row(c.lanes, "t1", c.ledger.now())["state"] == "open"
    claim_next(c, a)
    assert fail(c.ledger, a, "t1", 2, "diverged")["state"] == "open"
    claim_next(c, a)
    assert fail(c.ledger, a, "t1", 3, "diverged again")["state"] == "failed"
    assert should_run(c.ledger, "ex-a")["reason"] == "no_eligible_todo"
    failures = [r for r in c.records("todo_event_v0") if r["payload"]["event"] == "failed"]
    assert [r["payload"]["reason"] for r in failures] == ["diverged", "diverged again"]


def test_revoked_agent_loses_its_token_and_its_lease(c: Campaign) -> None:
    from loopx.work.agents import revoke_agent

    a = c.agent("ex-a", "research_executor")
    b = c.agent("ex-b", "research_executor")
    c.todo("t1")
    claim_next(c, a)
    revoke_agent(c.ledger, c.owner, "ex-a", "misbehaving")
    with pytest.raises(Unauthorized, match="revoked"):
        complete(c.ledger, a, "t1", 1)
    got = claim_next(c, b)
    assert got["todo"]["epoch"] == 2
    assert c.records("todo_event_v0")[-1]["payload"]["reason"] == "holder revoked"


def test_explicit_claims_follow_the_profile(c: Campaign) -> None:
    record_rules(c, "research_executor", RESULT_RULES)
    ex = c.agent("ex-1", "research_executor")
    ev = c.agent("ev-1", "evaluator_promoter")
    c.todo("plain")
    with pytest.raises(Refused, match="only successor todos"):
        claim(c.ledger, ex, "plain")
    c.todo("judge", role="evaluator_promoter", action_kind="judge_evidence")
    assert claim(c.ledger, ev, "judge")["claim"]["via"] == "explicit"
    with pytest.raises(Refused, match="for role 'research_executor'"):
        claim(c.ledger, ev, "plain")
    claim_next(c, ex)
    complete(c.ledger, ex, "plain", 1, {"status": "scored", "dev": {"verdict": "supports"}})
    got = claim(c.ledger, ex, "plain.heldout_after_supported_dev")
    assert got["claimed"] and got["todo"]["action_kind"] == "run_holdout_eval"


def test_successor_rules_fire_once_in_the_completion_step(c: Campaign) -> None:
    record_rules(c, "research_executor", RESULT_RULES)
    ex = c.agent("ex-1", "research_executor")
    c.todo("dev-1", hypothesis_id="h1")
    claim_next(c, ex)
    out = complete(c.ledger, ex, "dev-1", 1, {"status": "scored", "dev": {"verdict": "supports"}})
    assert out["successors"] == ["dev-1.heldout_after_supported_dev", "dev-1.judge_dev_attempt"]
    completion, *successors = [r for r in c.records() if r["seq"] >= out["seq"]]
    assert {r["batch_end"] for r in successors} == {completion["batch_end"]}
    holdout = c.lanes["todos"]["dev-1.heldout_after_supported_dev"]
    assert (holdout["role"], holdout["action_kind"], holdout["hypothesis_id"], holdout["source"]) == (
        "research_executor", "run_holdout_eval", "h1", "dev-1")
    assert c.lanes["todos"]["dev-1.judge_dev_attempt"]["role"] == "evaluator_promoter"
    # A retried completion writes nothing and fires nothing.
    head = c.head()
    again = complete(c.ledger, ex, "dev-1", 1, {"status": "scored", "dev": {"verdict": "supports"}})
    assert again["already_completed"] and c.head() == head
    assert len(c.records("todo_item_v0")) == 3


def test_result_conditions(c: Campaign) -> None:
    """Tests of the completer's own result, for rules that ask for them (the packaged ones read
    the log instead: tests/test_successor_graph.py)."""
    record_rules(c, "research_executor", RESULT_RULES)
    ex = c.agent("ex-1", "research_executor")
    results = {
        "no-support": {"status": "scored", "dev": {"verdict": "contradicts"}},
        "has-heldout": {"status": "scored", "dev": {"verdict": "supports"}, "heldout": {"x": 1}},
        "failed-run": {"status": "failed"},
    }
    for todo_id, result in results.items():
        c.todo(todo_id)
        claim_next(c, ex)
        results[todo_id] = complete(c.ledger, ex, todo_id, 1, result)["successors"]
    assert results == {"no-support": ["no-support.judge_dev_attempt"],
                       "has-heldout": ["has-heldout.judge_dev_attempt"],
                       "failed-run": []}


def test_a_failed_then_retried_todo_fires_its_rule_once(c: Campaign) -> None:
    record_rules(c, "research_executor", RESULT_RULES)
    ex = c.agent("ex-1", "research_executor")
    c.todo("dev-1")
    claim_next(c, ex)
    fail(c.ledger, ex, "dev-1", 1, "oom")
    assert claim_next(c, ex)["todo"]["epoch"] == 2
    complete(c.ledger, ex, "dev-1", 2, {"status": "scored", "dev": {"verdict": "supports"}})
    fired = [r["payload"]["todo_id"] for r in c.records("todo_item_v0")
             if r["payload"].get("successor_rule_id")]
    assert fired == ["dev-1.heldout_after_supported_dev", "dev-1.judge_dev_attempt"]


def test_unblock_ordering_passes_through_successors(c: Campaign) -> None:
    record_rules(c, "research_executor", RESULT_RULES)
    ex = c.agent("ex-1", "research_executor")
    c.agent("prop-1", "hypothesis_proposer")
    c.todo("report", role="hypothesis_proposer", action_kind="refine_hypothesis")
    c.todo("dev-1", unblocks_todo_id="report")
    assert should_run(c.ledger, "prop-1")["reason"] == "blocked"
    claim_next(c, ex)
    complete(c.ledger, ex, "dev-1", 1, {"status": "scored", "dev": {"verdict": "supports"}})
    # Successors inherit what dev-1 unblocked, so 'report' waits for the whole chain.
    assert c.lanes["todos"]["report"]["blocked_by"] == [
        "dev-1", "dev-1.heldout_after_supported_dev", "dev-1.judge_dev_attempt"]
    assert should_run(c.ledger, "prop-1")["reason"] == "blocked"
    got = claim_next(c, ex)
    assert got["todo"]["todo_id"] == "dev-1.heldout_after_supported_dev"
    # Its own successor (judging the held-out attempt) joins the chain in turn.
    complete(c.ledger, ex, got["todo"]["todo_id"], 1, {"status": "scored"})
    ev = c.agent("ev-1", "evaluator_promoter")
    for _ in range(2):
        assert should_run(c.ledger, "prop-1")["reason"] == "blocked"
        judged = claim_next(c, ev)
        complete(c.ledger, ev, judged["todo"]["todo_id"], 1)
    assert should_run(c.ledger, "prop-1")["todo"]["todo_id"] == "report"


def test_todo_links_are_checked(c: Campaign) -> None:
    c.todo("a")
    with pytest.raises(Refused, match="unknown todos nope"):
        c.todo("b", blocked_by=["nope"])
    with pytest.raises(Refused, match="cycle"):
        c.todo("b", blocked_by=["a"], unblocks_todo_id="a")
    with pytest.raises(Refused, match="already exists"):
        c.todo("a")
    with pytest.raises(Refused, match="does not take action"):
        c.todo("c", action_kind="propose_hypothesis")
    with pytest.raises(Refused, match="no role"):
        c.todo("d", role="astrologer")
    with pytest.raises(Refused, match="not a live research_executor agent"):
        c.todo("e", assigned_to="ghost")


def test_hypothesis_needs_its_todo_holder_and_grounding(c: Campaign) -> None:
    prop = c.agent("prop-1", "hypothesis_proposer")
    c.todo("p1", role="hypothesis_proposer", action_kind="propose_hypothesis")
    hyp = {"hypothesis_id": "h1", "title": "t", "statement": "s", "mechanism_family": "reg",
           "claimed_by": "prop-1", "no_grounding_reason": "a standard baseline sweep"}
    with pytest.raises(Refused, match="must name the todo"):
        c.ledger.append({"payload": hyp}, creds=prop, kind="research_hypothesis_v0")
    got = claim_next(c, prop)
    tied = {"todo_id": "p1", "epoch": got["todo"]["epoch"]}
    with pytest.raises(Refused, match="claimed_by"):
        c.ledger.append({**tied, "payload": {**hyp, "claimed_by": "someone"}}, creds=prop,
                        kind="research_hypothesis_v0")
    ungrounded = {k: v for k, v in hyp.items() if k != "no_grounding_reason"}
    with pytest.raises(Refused, match="grounding"):
        c.ledger.append({**tied, "payload": ungrounded}, creds=prop, kind="research_hypothesis_v0")
    [record] = c.ledger.append({**tied, "payload": hyp}, creds=prop, kind="research_hypothesis_v0")
    assert (record["agent_id"], record["lane_role"], record["todo_id"]) == (
        "prop-1", "hypothesis_proposer", "p1")
    # The proposer may add executor todos under its held todo, not curator ones.
    from loopx.kernel.errors import Forbidden
    from loopx.work.todos import add_todos

    add_todos(c.ledger, prop, [{"todo_id": "run-h1", "title": "run h1", "hypothesis_id": "h1",
                                "role": "research_executor", "action_kind": "run_dev_eval"}],
              under=("p1", 1))
    with pytest.raises(Forbidden, match="'hypothesis_proposer' may not write todo_item_v0"):
        add_todos(c.ledger, prop, [{"todo_id": "x", "title": "x", "role": "research_curator",
                                    "action_kind": "define_contract"}])


def test_a_forged_successor_or_claim_is_refused(c: Campaign) -> None:
    ex = c.agent("ex-1", "research_executor")
    c.todo("t1")
    c.todo("t2")
    with pytest.raises(Refused, match="should-run selects t1"):
        c.ledger.append({"todo_id": "t2", "epoch": 1, "payload": {
            "capability_token": "research_executor", "lease_ttl_seconds": 900.0}},
            creds=ex, kind="auto_research_lane_claim_v1")
    with pytest.raises(Refused, match="successor_rule_id"):
        c.ledger.append({"payload": {"todo_id": "t9", "title": "t", "role": "research_executor",
                                     "action_kind": "run_holdout_eval", "source_todo_id": "t1",
                                     "successor_rule_id": "heldout_after_supported_dev"}},
                        creds=c.owner, kind="todo_item_v0")
    assert verify_store(c.ledger.store).ok


def test_lifecycle_records_built_under_the_lock_are_in_their_models_dumped_form(c: Campaign) -> None:
    from loopx.kernel.kinds import KINDS

    a = c.agent("ex-a", "research_executor")
    b = c.agent("ex-b", "research_executor")
    c.todo("t1", lease_ttl_seconds=5.0, hypothesis_id="h1")
    claim_next(c, a)
    c.clock.advance(6)
    claim_next(c, b)  # writes an expiry and a claim
    built = c.records("auto_research_lane_claim_v1") + c.records("todo_event_v0")
    assert len(built) == 3
    for record in built:
        model = KINDS[record["schema_version"]].model
        assert model.model_validate(record["payload"]).model_dump(mode="json") == record["payload"]


def test_the_claim_answer_is_the_packet_the_holder_sees_next(c: Campaign) -> None:
    # The answer to should-run --claim is built after the lock, from the checked view: it must
    # be exactly what the holder is shown when it asks again (epoch, lease end, via, data).
    ex = c.agent("ex-1", "research_executor")
    c.todo("t1")
    got = claim_next(c, ex)
    again = should_run(c.ledger, "ex-1")
    assert again["reason"] == "already_holding_lease"
    assert got["claimed"] and got["todo"] == again["todo"]
    assert got["claim"] == again["claim"]
    assert got["claim"]["epoch"] == 1 and got["claim"]["lease_expires_at"] is not None


def test_the_state_a_writer_folds_is_the_state_a_fresh_fold_reads(c: Campaign) -> None:
    # Folding into the state changes a role's queue in place; a batch's checks (an overlay)
    # and a refused write must leave it untouched, and the writer's state must equal a fold
    # of the log from scratch.
    from loopx.kernel.ledger import Ledger

    ex = c.agent("ex-1", "research_executor")
    for i in range(6):
        c.todo(f"t{i}")
    before = [list(entry) for entry in c.lanes["queues"]["research_executor"]]
    for _ in range(3):
        got = claim_next(c, ex)
        complete(c.ledger, ex, got["todo"]["todo_id"], got["todo"]["epoch"])
    with pytest.raises(StaleLease):
        complete(c.ledger, ex, "t4", 1)  # not held: refused under the lock
    queue = c.lanes["queues"]["research_executor"]
    assert [e[2] for e in queue] == [e[2] for e in before[3:]]
    fresh = Ledger(c.ledger.store).state()
    assert fresh.seq == c.ledger.state().seq
    assert fresh["lanes"]["queues"] == c.lanes["queues"]
    assert fresh["lanes"]["todos"] == c.lanes["todos"]
    assert fresh["lanes"]["agents"] == c.lanes["agents"]


def test_a_claim_answer_follows_the_builder_run_that_was_written(c: Campaign) -> None:
    # PostgreSQL runs the builder again when an optimistic append is overtaken. If another
    # agent took the only todo in between, the answer must be the second run's "nothing to
    # claim", not the first run's claim that was never written.
    first, second = c.agent("ex-1", "research_executor"), c.agent("ex-2", "research_executor")
    c.todo("t1")
    store = c.ledger.store
    append = store.append

    def overtaken(batch, **options):  # type: ignore[no-untyped-def]
        store.append = append  # type: ignore[method-assign]
        if callable(batch):
            assert batch(store.head(), c.ledger.now())  # this run would claim t1 ...
            claim_next(c, second)  # ... but ex-2 gets in first
        return append(batch, **options)

    store.append = overtaken  # type: ignore[method-assign]
    got = claim_next(c, first)
    assert got["claimed"] is False and got["reason"] == "no_eligible_todo"
    assert [r["agent_id"] for r in c.records("auto_research_lane_claim_v1")] == ["ex-2"]


def test_a_refusal_from_a_builder_run_that_was_not_written_is_forgotten(
        c: Campaign, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first run of the builder is refused by a research rule (its refusal record would take
    # the request's place), then the store runs it again and the request passes: what was
    # written is the request, and the caller must not be told it was refused.
    import loopx.kernel.checks as checks
    from loopx.kernel.errors import ResearchRefused

    real = checks.check_batch
    calls: list[int] = []

    def refuse_once(view, records, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:
            raise ResearchRefused("test_rule", "refused on the first run only")
        return real(view, records, *args, **kwargs)

    store = c.ledger.store
    append = store.append

    def twice(batch, **options):  # type: ignore[no-untyped-def]
        store.append = append  # type: ignore[method-assign]
        if callable(batch):
            batch(store.head(), c.ledger.now())  # refused: its refusal record is not written
        return append(batch, **options)

    monkeypatch.setattr(checks, "check_batch", refuse_once)
    store.append = twice  # type: ignore[method-assign]
    c.todo("t1")  # raises if the first run's refusal leaks
    assert c.records("research_refusal_v0") == []
    assert "t1" in c.lanes["todos"]
