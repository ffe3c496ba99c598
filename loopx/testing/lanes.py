"""Test and bench helpers: an executor agent holding a long lease, ready to append records.

Kernel-level tests and benches need a writer that passes every write check; this sets one up
through the same public operations a user runs (register, add todo, should-run --claim).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx.kernel.checks import Credentials
from loopx.kernel.ledger import Ledger

LONG_LEASE = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Writer:
    """An executor agent with a claimed todo: stamp drafts with :meth:`tie` and append."""

    creds: Credentials
    todo_id: str
    epoch: int

    def tie(self, draft: dict[str, Any]) -> dict[str, Any]:
        """The draft tied to this writer's todo and epoch (as todo-bound kinds must be)."""
        return {**draft, "todo_id": self.todo_id, "epoch": self.epoch}


def executor_writer(ledger: Ledger, owner_token: str, agent_id: str) -> Writer:
    """Register ``agent_id`` as an executor, give it its own todo with a week-long lease, claim it."""
    from loopx.work.agents import register_agent
    from loopx.work.claims import should_run
    from loopx.work.todos import add_todos

    owner = Credentials("owner", owner_token)
    _, token = register_agent(ledger, owner, agent_id, "research_executor")
    todo_id = f"{agent_id}-work"
    add_todos(ledger, owner, [{"todo_id": todo_id, "title": f"work of {agent_id}",
                               "role": "research_executor", "action_kind": "run_dev_eval",
                               "hypothesis_id": "h1", "assigned_to": agent_id,
                               "lease_ttl_seconds": LONG_LEASE}])
    creds = Credentials(agent_id, token)
    decision = should_run(ledger, agent_id, claim=True, creds=creds)
    assert decision["claimed"] and decision["todo"]["todo_id"] == todo_id, decision
    return Writer(creds, todo_id, decision["todo"]["epoch"])
