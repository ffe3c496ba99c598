"""`loopx verify` re-runs the write checks, so records appended around the library are caught."""

from __future__ import annotations

from typing import Any

import pytest
from lanes_support import Campaign, campaign

from loopx.kernel.checks import Credentials
from loopx.kernel.kinds import new_record_id
from loopx.kernel.verify import verify_store
from loopx.research.operations import append_packet
from loopx.testing.research import ResearchLoop
from loopx.work.claims import should_run


def forge(c: Campaign, **fields: Any) -> None:
    """Append a record straight to the store, skipping the ledger's checks."""
    record = {"schema_version": "rollout_event_v0", "record_id": new_record_id(),
              "goal_id": "lanes-test", "agent_id": "ex-1", "lane_role": "research_executor",
              "capability": c.lanes["agents"]["ex-1"]["grant_id"], "todo_id": "t1", "epoch": 1,
              "visibility": "public", "provenance": "observed", "payload": {"event": "note"}}
    record.update(fields)
    c.ledger.store.append([record])


@pytest.fixture
def c() -> Campaign:
    c = campaign()
    ex = c.agent("ex-1", "research_executor")
    c.todo("t1")
    should_run(c.ledger, "ex-1", claim=True, creds=ex)
    return c


def test_an_honest_log_verifies(c: Campaign) -> None:
    forge(c)  # well-formed and within the rules, even though it skipped the ledger
    report = verify_store(c.ledger.store)
    assert report.ok, report.problem


@pytest.mark.parametrize(("fields", "problem"), [
    ({"schema_version": "research_contract_v0", "todo_id": None, "epoch": None, "payload": {
        "contract_id": "c1", "objective": {"name": "n", "prompt": "p", "domain": "d"},
        "metric": {"name": "m", "direction": "maximize", "baseline": 0.0, "seeds": [0]},
        "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "ho"}}}},
     "may not write research_contract_v0 with action 'create'"),
    ({"epoch": 7}, "does not hold epoch 7"),
    ({"agent_id": "ghost"}, "holds no live grant"),
    ({"lane_role": "research_curator"}, "writes as role 'research_executor'"),
    ({"capability": "rec_forged"}, "under grant"),
    ({"agent_id": "owner", "lane_role": "owner", "capability": "owner"},
     "may not write rollout_event_v0"),
    # Governance records are checked the same way: an approval no owner wrote, a stop no
    # policy fired, usage that names a proposal that never was.
    ({"schema_version": "approval_v0", "todo_id": None, "epoch": None, "visibility": "private",
      "payload": {"subject": {"kind": "proposal", "id": "p1"}, "verdict": "approved",
                  "note": "self-serve"}},
     "may not write approval_v0 with action 'approve'"),
    ({"schema_version": "campaign_transition_v0", "todo_id": None, "epoch": None,
      "agent_id": "owner", "lane_role": "owner", "capability": "owner",
      "payload": {"from_state": "created", "to_state": "running", "reason": "skip ahead",
                  "stop_reasons": [], "iteration": 0, "decision_id": None}},
     "cannot move from created to running"),
    ({"schema_version": "usage_v0", "todo_id": None, "epoch": None, "visibility": "private",
      "payload": {"gpu_hours": 0.0, "cpu_hours": 1.0, "storage_gb": 0.0, "download_gb": 0.0,
                  "experiments": 0, "proposal_id": "p404", "note": None}},
     "names proposal 'p404', which does not exist"),
])
def test_forged_records_are_reported(c: Campaign, fields: dict[str, Any], problem: str) -> None:
    head = c.head()
    forge(c, **fields)
    report = verify_store(c.ledger.store)
    assert not report.ok and report.first_bad_seq == head + 1
    assert "fails the write checks" in (report.problem or "") and problem in (report.problem or "")


def test_a_completion_without_its_successors_is_reported(c: Campaign) -> None:
    # t1 works on h1, and a scored packet of h1 is recorded under it: its completion owes the
    # judging todo (a fact of the log the executor's result cannot unsay).
    r = ResearchLoop(c.ledger, c.owner)
    r.contract()
    r.propose("h1")
    append_packet(c.ledger, Credentials("ex-1", c.tokens["ex-1"]), {
        "hypothesis_id": "h1", "status": "scored",
        "results": [{"split": "dev", "metric": "acc", "seed": s, "value": 0.95}
                    for s in (0, 1, 2)]}, under=("t1", 1))
    head = c.head()
    forge(c, schema_version="todo_event_v0",
          payload={"event": "completed", "result": {"status": "failed"}})
    report = verify_store(c.ledger.store)
    assert not report.ok and report.first_bad_seq == head + 1
    assert ("must follow in the same batch are missing: successor todo t1.judge_dev_attempt"
            in (report.problem or ""))


def test_a_claim_that_skips_the_queue_is_reported(c: Campaign) -> None:
    c.agent("ex-2", "research_executor")
    c.todo("t2")
    c.todo("t3")
    forge(c, schema_version="auto_research_lane_claim_v1", agent_id="ex-2",
          capability=c.lanes["agents"]["ex-2"]["grant_id"], todo_id="t3", epoch=1,
          provenance="computed",
          payload={"hypothesis_id": None, "capability_token": "research_executor",
                   "allowed_actions": [], "write_scope": [], "blocked_by": [],
                   "lease_ttl_seconds": 900.0, "context": {}, "via": "should_run"})
    report = verify_store(c.ledger.store)
    assert not report.ok and "should-run selects t2 for ex-2, not 't3'" in (report.problem or "")
