"""Shared setup for the lane tests: a memory-backed campaign with a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopx.kernel.canonical import format_ts
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Refused
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import MemoryStore, Store
from loopx.research.projections import row
from loopx.testing.research import ResearchLoop
from loopx.work.agents import register_agent
from loopx.work.todos import add_todos
from loopx.workspace import bootstrap_log, init_workspace


@dataclass
class Clock:
    """A store clock that only moves when the test says so."""

    at: datetime = field(default_factory=lambda: datetime(2026, 12, 2, 12, 0, tzinfo=UTC))

    def __call__(self) -> str:
        return format_ts(self.at)

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


@dataclass
class Campaign:
    """A bootstrapped log, its owner credentials and the clock it runs on."""

    ledger: Ledger
    owner: Credentials
    clock: Clock
    tokens: dict[str, str] = field(default_factory=dict)

    def agent(self, agent_id: str, role: str, **options: Any) -> Credentials:
        """Register an agent and return its credentials."""
        _, token = register_agent(self.ledger, self.owner, agent_id, role, **options)
        self.tokens[agent_id] = token
        return Credentials(agent_id, token)

    def todo(self, todo_id: str, role: str = "research_executor",
             action_kind: str = "run_dev_eval", **payload: Any) -> None:
        """Add one todo as the owner (an evaluation todo names a hypothesis, h1 by default)."""
        if action_kind in ("run_dev_eval", "run_holdout_eval", "retry_attempt"):
            payload.setdefault("hypothesis_id", "h1")
        add_todos(self.ledger, self.owner, [{"todo_id": todo_id, "title": f"do {todo_id}",
                                             "role": role, "action_kind": action_kind,
                                             **payload}])

    @property
    def lanes(self) -> dict[str, Any]:
        """The lanes slice of the state, caught up."""
        return self.ledger.state()["lanes"]

    def head(self) -> int:
        """The head seq."""
        return self.ledger.store.head().seq

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every record (of one kind)."""
        return [r for r, _ in self.ledger.store.read()
                if kind is None or r["schema_version"] == kind]


# The executor's rules as loopx shipped them before successor rules read the log: tests of the
# completer's own result. An owner may still record such rules (old logs hold them); the
# packaged profiles no longer do.
RESULT_RULES: list[dict[str, Any]] = [
    {"rule_id": "heldout_after_supported_dev", "after_action": "run_dev_eval",
     "when": [{"path": "dev.verdict", "op": "eq", "value": "supports"},
              {"path": "heldout", "op": "absent"}],
     "target_role": "research_executor", "action_kind": "run_holdout_eval",
     "title": "Held-out evaluation of a hypothesis its dev evidence supports"},
    {"rule_id": "judge_dev_attempt", "after_action": "run_dev_eval",
     "when": [{"path": "status", "op": "eq", "value": "scored"}],
     "target_role": "evaluator_promoter", "action_kind": "judge_evidence",
     "title": "Judge the dev attempt's evidence"},
    {"rule_id": "judge_heldout_attempt", "after_action": "run_holdout_eval",
     "when": [{"path": "status", "op": "eq", "value": "scored"}],
     "target_role": "evaluator_promoter", "action_kind": "judge_evidence",
     "title": "Judge the held-out attempt's evidence"},
]


def record_rules(c: Campaign, role: str, rules: list[dict[str, Any]]) -> None:
    """The owner records ``role``'s packaged profile with ``rules`` as its successor rules."""
    from loopx.runner.prompt import packaged_profile
    from loopx.workspace import record_profiles

    record_profiles(c.ledger, c.owner, {f"{role}.toml": {**packaged_profile(role),
                                                         "successor_todos": rules}})


def campaign(store: Callable[[Clock], Store] | None = None, rules: int | None = None) -> Campaign:
    """A fresh campaign with the packaged role profiles, on a memory store unless ``store``
    makes another one on the given clock; under an older loopx's write ``rules`` if given."""
    from loopx.domains import DOMAINS
    from loopx.kernel.domains import Domains

    clock = Clock()
    domains = DOMAINS if rules is None else Domains(DOMAINS.domains, version=DOMAINS.version,
                                                    rules=rules)
    ledger = Ledger(store(clock) if store is not None else MemoryStore(clock=clock),
                    domains=domains)
    token = bootstrap_log(ledger, "lanes-test")
    return Campaign(ledger, Credentials("owner", token), clock)


def research_loop() -> ResearchLoop:
    """A research loop (one agent per research role) on a fresh campaign, its contract written."""
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract()
    return r


def workspace_loop(root: Path, goal: str) -> tuple[Any, ResearchLoop]:
    """A file workspace at ``root`` and a research loop on its ledger, the contract written."""
    ws, owner_token = init_workspace(root, goal)
    r = ResearchLoop(ws.ledger(), Credentials("owner", owner_token))
    r.contract()
    return ws, r


def lanes(r: ResearchLoop) -> dict[str, Any]:
    """The lanes state of ``r``'s ledger now."""
    return r.ledger.state()["lanes"]


class OnCampaign:
    """A test's handle on its campaign ``c``: the ledger, the lanes view, and a refusal that
    must write nothing."""

    c: Campaign

    @property
    def ledger(self) -> Any:
        return self.c.ledger

    @property
    def view(self) -> dict[str, Any]:
        return self.c.lanes

    def unchanged(self, fn: Any, error: type[Exception], match: str) -> Exception:
        """Run ``fn``: it raises ``error`` matching ``match`` and writes nothing."""
        head = self.c.head()
        with pytest.raises(error, match=match) as caught:
            fn()
        assert self.c.head() == head
        return caught.value

    def decision_alone_refused(self, creds: Credentials, hypothesis_id: str, outcome: str,
                               reason: str, match: str) -> None:
        """A decision on the candidate ``outcome`` of ``hypothesis_id`` appended alone, without
        the campaign transition the policy fires with it: refused (``match``), nothing written."""
        current = row(self.view, hypothesis_id)
        candidate = current.promotion if outcome == "promoted" else current.retirement
        assert candidate is not None
        bare = {"payload": {"decision_id": f"d-{hypothesis_id}", "hypothesis_id": hypothesis_id,
                            "outcome": outcome, "reason": reason, "revision": current.revision,
                            "evidence_ids": candidate["rests_on"]}}
        self.unchanged(lambda: self.ledger.append(bare, creds=creds, kind="research_decision_v0"),
                       Refused, match)


# The smallest valid contract, for tests of kinds and scopes rather than of research.
MINIMAL_CONTRACT: dict[str, Any] = {
    "contract_id": "c1",
    "objective": {"name": "n", "prompt": "p", "domain": "d"},
    "metric": {"name": "acc", "direction": "maximize", "baseline": 0.5, "seeds": [0, 1]},
    "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout"}},
    "protected_scope": ["eval/"],
    "tool_risks": {"lab.inspect": "read", "lab.train": "compute"},
}


def own_packets_checked(ledger: Ledger, creds: Credentials, hypothesis_id: str) -> None:
    """A passed protected-boundary result covering the hypothesis' own packets only, as
    ``loopx gate check`` recorded it before rules version 7 (no git needed)."""
    entry = ledger.state()["lanes"]["hypotheses"][hypothesis_id]
    payload = {"hypothesis_id": hypothesis_id, "gate": "protected_boundary", "passed": True,
               "revision": entry["revision"],
               "packets": [{"packet_id": p} for p in entry["packets"]],
               "protected_scope": ["eval/"], "protected_commit": None, "editable_scope": [],
               "violations": [], "reasons": []}
    ledger.write(creds, lambda view, who, now: ledger.prepare(
        {"payload": payload}, who, kind="gate_result_v0", by_loopx=True))
