"""A driver that takes hypotheses through the research loop with real agents and the checked
write path: the proposer proposes under a todo, the executor runs dev and held-out todos and
records packets, the evaluator judges. For tests and benchmarks; it asserts nothing itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopx.governance.contract import init_contract
from loopx.kernel.checks import Credentials
from loopx.kernel.ledger import Ledger
from loopx.research.operations import append_packet, judge, propose_hypothesis
from loopx.work.agents import register_agent
from loopx.work.claims import complete, should_run
from loopx.work.todos import add_todos

CONTRACT: dict[str, Any] = {
    "contract_id": "digits",
    "objective": {"name": "digits", "prompt": "beat the linear baseline", "domain": "vision"},
    "metric": {"name": "acc", "direction": "maximize", "baseline": 0.9, "seeds": [0, 1, 2]},
    "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout",
                                                       "location": "/data/heldout"}},
    "protected_scope": ["eval/"],
    "promotion_policy": {"required_gates": ["heldout"]},
}
# Seed scores against CONTRACT's baseline 0.9: dev and held-out scores that support, and
# scores that contradict.
GOOD = [0.95, 0.96, 0.97]
HELDOUT = [0.93, 0.94, 0.95]
WORSE = [0.80, 0.81, 0.82]


@dataclass
class ResearchLoop:
    """One agent per research role on ``ledger``, with the owner's credentials."""

    ledger: Ledger
    owner: Credentials
    agents: dict[str, Credentials] = field(default_factory=dict)
    _todo_no: int = 0

    def __post_init__(self) -> None:
        for agent_id, role in (("cur", "research_curator"), ("prop", "hypothesis_proposer"),
                               ("ex", "research_executor"), ("ev", "evaluator_promoter")):
            if agent_id not in self.agents:
                _, token = register_agent(self.ledger, self.owner, agent_id, role)
                self.agents[agent_id] = Credentials(agent_id, token)

    def contract(self, contract: dict[str, Any] | None = None) -> None:
        """Write the contract (the curator's)."""
        init_contract(self.ledger, self.agents["cur"], contract or CONTRACT)

    def _next(self, prefix: str) -> str:
        self._todo_no += 1
        return f"{prefix}-{self._todo_no}"

    def _claim(self, agent_id: str) -> tuple[str, int]:
        got = should_run(self.ledger, agent_id, claim=True, creds=self.agents[agent_id])
        if not got["claimed"]:
            raise RuntimeError(f"{agent_id} got nothing to claim: {got}")
        return got["todo"]["todo_id"], got["todo"]["epoch"]

    def proposer_todo(self, hypothesis_id: str) -> tuple[str, int]:
        """The owner gives the proposer a todo for ``hypothesis_id``; the proposer claims it."""
        todo_id = self._next("propose")
        add_todos(self.ledger, self.owner, [{
            "todo_id": todo_id, "title": f"propose {hypothesis_id}",
            "role": "hypothesis_proposer", "action_kind": "propose_hypothesis",
            "assigned_to": "prop"}])
        return self._claim("prop")

    def propose(self, hypothesis_id: str, *, statement: str | None = None,
                mechanism: str = "width", parameters: dict[str, Any] | None = None,
                **extra: Any) -> dict[str, Any]:
        """The proposer proposes ``hypothesis_id`` under a todo the owner gave it. Without
        ``parameters`` each hypothesis gets its own (``{"variant": hypothesis_id}``), so two
        of one mechanism are two ideas, not duplicates."""
        under = self.proposer_todo(hypothesis_id)
        out = propose_hypothesis(self.ledger, self.agents["prop"], {
            "hypothesis_id": hypothesis_id, "title": f"hypothesis {hypothesis_id}",
            "statement": statement or f"{mechanism} change {hypothesis_id} lifts accuracy",
            "mechanism_family": mechanism,
            "parameters": {"variant": hypothesis_id} if parameters is None else parameters,
            "no_grounding_reason": "a test hypothesis", **extra}, under=under)
        complete(self.ledger, self.agents["prop"], *under, {"hypotheses": [hypothesis_id]})
        return out

    def run(self, hypothesis_id: str, split: str, values: list[float] | None, *,
            status: str = "scored", commits: tuple[str, str] | None = None,
            claims_clean: bool | None = None, branch: str | None = None,
            violations: list[str] | None = None) -> str:
        """The executor runs one attempt on ``split`` (a todo the evaluator adds for it) and
        records its packet: one value per contract seed, in order; with ``violations``, a result
        it measured invalid. Returns the packet id."""
        action = "run_holdout_eval" if split == "heldout" else "run_dev_eval"
        todo_id = self._next(split)
        add_todos(self.ledger, self.agents["ev"], [{
            "todo_id": todo_id, "title": f"{split} run of {hypothesis_id}",
            "role": "research_executor", "action_kind": action, "assigned_to": "ex",
            "hypothesis_id": hypothesis_id}])
        under = self._claim("ex")
        seeds = self.ledger.state()["lanes"]["campaign"]["versions"][-1]["metric"]["seeds"]
        payload: dict[str, Any] = {
            "hypothesis_id": hypothesis_id, "status": status,
            "results": [{"split": split, "metric": "acc", "seed": s, "value": v}
                        for s, v in zip(seeds, values or [], strict=False)],
            "branch": branch or f"loopx/{todo_id}/{under[1]}"}
        if commits is not None:
            payload["base_commit"], payload["evaluated_commit"] = commits
        if claims_clean is not None:
            payload["protected_scope_clean"] = claims_clean  # self-reported; gates never read it
        if violations:
            payload["valid"], payload["violations"] = False, list(violations)
        packet = append_packet(self.ledger, self.agents["ex"], payload, under=under)
        complete(self.ledger, self.agents["ex"], *under, {"status": status})
        return str(packet["packet_id"])

    def judge(self, hypothesis_id: str, split: str) -> dict[str, Any]:
        """The evaluator judges the hypothesis' packets on ``split``."""
        return judge(self.ledger, self.agents["ev"], hypothesis_id, split)

    def supported(self, hypothesis_id: str, dev: list[float], heldout: list[float] | None,
                  **propose: Any) -> None:
        """Propose, run and judge on dev, then (if given) on held-out."""
        self.propose(hypothesis_id, **propose)
        self.run(hypothesis_id, "dev", dev)
        self.judge(hypothesis_id, "dev")
        if heldout is not None:
            self.run(hypothesis_id, "heldout", heldout)
            self.judge(hypothesis_id, "heldout")
