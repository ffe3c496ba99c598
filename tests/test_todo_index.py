"""The todo index the fold keeps: status counts and held todos read from it match counting
every todo, through claims, lapsed leases, blockers, failures, cancels and revocations, in the
caught-up state, in a fresh fold, and through a checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lanes_support import Campaign, campaign

from loopx.kernel.ledger import Ledger
from loopx.kernel.store import FileStore
from loopx.work.agents import revoke_agent
from loopx.work.claims import claim, complete, fail, release
from loopx.work.todo_changes import block, cancel, reassign
from loopx.work.todos import STATES, counts_by_state, held_rows, todo_rows, todo_state


def every_todo(lanes: dict[str, Any], now: str) -> dict[str, int]:
    """The counts by walking every todo (what the index stands in for)."""
    counts = dict.fromkeys(STATES, 0)
    for todo_id in lanes["todos"]:
        counts[todo_state(lanes, todo_id, now)] += 1
    return counts


def agrees(lanes: dict[str, Any], now: str) -> dict[str, int]:
    counts = counts_by_state(lanes, now)
    assert counts == every_todo(lanes, now)
    assert held_rows(lanes, now) == todo_rows(lanes, now, states=("claimed", "expired"))
    return counts


def busy(c: Campaign) -> None:
    """Todos through every state the index tracks."""
    ex = c.agent("ex-1", "evaluator_promoter")
    ex2 = c.agent("ex-2", "evaluator_promoter")
    for n in range(10):
        c.todo(f"t{n}", role="evaluator_promoter", action_kind="review_gate")
    block(c.ledger, c.owner, "t5", "t6")  # t5 waits on t6
    block(c.ledger, c.owner, "t7", "t0")  # t7 waits on t0, which completes
    c.todo("t10", role="evaluator_promoter", action_kind="review_gate",
           unblocks_todo_id="t8")  # t8 waits on a new todo
    claim(c.ledger, ex, "t0")
    complete(c.ledger, ex, "t0", 1)
    claim(c.ledger, ex, "t1")
    fail(c.ledger, ex, "t1", 1, "flaky")  # reopens
    claim(c.ledger, ex2, "t2")
    release(c.ledger, ex2, "t2", 1)
    claim(c.ledger, ex2, "t3")  # held by a revoked agent below: expired
    cancel(c.ledger, c.owner, "t4", "dropped")
    claim(c.ledger, ex, "t9")  # held, lapses when the clock moves
    reassign(c.ledger, c.owner, "t6", "ex-1")
    revoke_agent(c.ledger, c.owner, "ex-2")


def test_counts_match_every_todo_through_each_change() -> None:
    c = campaign()
    busy(c)
    now = c.ledger.now()
    counts = agrees(c.lanes, now)
    assert counts == {"open": 5, "blocked": 2, "claimed": 1, "expired": 1, "completed": 1,
                      "failed": 0, "cancelled": 1}
    c.clock.advance(3600)  # every lease lapses
    counts = agrees(c.lanes, c.ledger.now())
    assert (counts["claimed"], counts["expired"]) == (0, 2)
    assert Ledger(c.ledger.store).state()["lanes"]["todo_index"] == c.lanes["todo_index"]


def test_the_index_survives_a_checkpoint(tmp_path: Path) -> None:
    def store(clock: Any) -> FileStore:
        made = FileStore(tmp_path / ".loopx", clock=clock)
        made.create()
        return made

    c = campaign(store)
    busy(c)
    path = tmp_path / "state.sqlite"
    Ledger(c.ledger.store, checkpoint_path=path, checkpoint_every=1).state()
    loaded = Ledger(c.ledger.store, checkpoint_path=path)
    lanes = loaded.state()["lanes"]
    assert loaded.checkpoint_status == "checkpoint used"
    agrees(lanes, c.ledger.now())
