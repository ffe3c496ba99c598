"""The campaign's own moves from the command line: a decision that fires a pause pauses it in
its batch, the board and should-run say why, only the owner resumes it, an invalid result is
retired as a validity failure, and a promotion that reaches the target completes the campaign.
Every refusal exits non-zero with a clear message, no traceback, and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import head_seq as head
from helpers import run_loopx as loopx

from loopx.governance.campaign import transition
from loopx.governance.contract import init_contract
from loopx.kernel.checks import Credentials
from loopx.research.projections import row
from loopx.testing.research import ResearchLoop
from loopx.workspace import find_workspace, init_workspace

CONTRACT: dict[str, Any] = {
    "contract_id": "digits",
    "objective": {"name": "digits", "prompt": "beat the linear baseline", "domain": "vision"},
    "metric": {"name": "acc", "direction": "maximize", "baseline": 0.9, "seeds": [0, 1, 2],
               "target": 0.93},
    "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout"}},
    "protected_scope": ["eval/"],
    "promotion_policy": {"required_gates": ["heldout"], "max_attempts": 1},
    "stop_policy": {"max_consecutive_failed_iterations": 1},
}
DEV, HELDOUT = [0.95, 0.96, 0.97], [0.92, 0.93, 0.94]  # held-out mean 0.93: the target


class Workspace:
    """A workspace on disk with one agent per research role and the contract, running."""

    def __init__(self, root: Path) -> None:
        self.root = root
        ws, owner_token = init_workspace(root, "moves")
        self.tokens = {"owner": owner_token}
        self.todos = 0
        ledger = ws.ledger()
        try:
            loop = ResearchLoop(ledger, Credentials("owner", owner_token))
            self.tokens.update({a: c.token or "" for a, c in loop.agents.items()})
            init_contract(ledger, loop.agents["cur"], CONTRACT)
            transition(ledger, loop.agents["cur"], "ready", "prepared")
            transition(ledger, loop.owner, "running", "go")
        finally:
            ledger.store.close()

    def api(self, fn: Callable[[ResearchLoop], Any]) -> Any:
        """Run ``fn`` on a research loop over this workspace's ledger (same agents)."""
        ledger = find_workspace(self.root).ledger()
        agents = {a: Credentials(a, t) for a, t in self.tokens.items() if a != "owner"}
        loop = ResearchLoop(ledger, Credentials("owner", self.tokens["owner"]), agents)
        loop._todo_no = self.todos  # todo ids stay unique across loops
        try:
            return fn(loop)
        finally:
            self.todos = loop._todo_no
            ledger.store.close()

    def ok(self, *args: str, agent: str = "") -> dict[str, Any]:
        """Run a command as ``agent`` (its token in the environment); its JSON answer."""
        result = loopx(self.root, *args, "--json", *(("--agent-id", agent) if agent else ()),
                       token=self.tokens.get(agent, ""))
        assert result.returncode == 0, (result.stdout, result.stderr)
        return dict(json.loads(result.stdout))

    def refused(self, code: int, needle: str, *args: str, agent: str) -> dict[str, Any]:
        """Run a command that must be refused: its exit code, its message, an unchanged log."""
        before = head(self.root)
        result = loopx(self.root, *args, "--json", "--agent-id", agent, token=self.tokens[agent])
        assert result.returncode == code, (result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        error = dict(json.loads(result.stdout))
        assert needle in error["message"], error
        if error.get("error") != "research_refused":
            assert head(self.root) == before
        return error


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    yield Workspace(tmp_path)


def test_the_campaign_pauses_resumes_and_completes_from_the_command_line(
        ws: Workspace, tmp_path: Path) -> None:
    def failed(loop: ResearchLoop) -> dict[str, Any]:
        loop.propose("h1")
        loop.run("h1", "dev", None, status="failed")
        current = row(loop.ledger.state()["lanes"], "h1")
        assert current.retirement is not None
        return {"payload": {"decision_id": "d-h1", "hypothesis_id": "h1", "outcome": "retired",
                            "reason": "retry_exhausted", "revision": current.revision,
                            "evidence_ids": current.retirement["rests_on"]}}

    bare = ws.api(failed)
    draft = tmp_path / "decision.json"
    draft.write_text(json.dumps(bare))
    # The decision alone, without the pause it fires: refused, nothing written.
    ws.refused(8, "missing: the pause transition the policy fires (consecutive_failed_iterations)",
               "append", "-f", str(draft), "--kind", "research_decision_v0", agent="ev")

    out = ws.ok("decide", "retire", "h1", "--reason", "retry_exhausted", agent="ev")
    assert (out["transition"], out["pause_reasons"], out["stopped"]) == (
        "paused", ["consecutive_failed_iterations"], False)
    text = loopx(ws.root, "campaign", "status")
    assert "campaign paused since seq" in text.stdout
    assert "(consecutive_failed_iterations)" in text.stdout
    assert "failed in a row 1" in text.stdout
    s = ws.ok("campaign", "status")
    assert (s["state"], s["pause_reasons"], s["iterations"]["failed"], s["would_pause"]) == (
        "paused", ["consecutive_failed_iterations"], 1, [])
    held = ws.ok("quota", "should-run", agent="ex")
    assert (held["run"], held["reason"], held["detail"]["pause_reasons"]) == (
        False, "campaign_paused", ["consecutive_failed_iterations"])
    board = loopx(ws.root, "board")
    assert board.returncode == 0, board.stderr
    assert "Campaign paused: iterations failed in a row" in board.stdout
    assert "(consecutive_failed_iterations)" in board.stdout

    # Only the owner resumes it.
    ws.refused(7, "may not write campaign_transition_v0 with action 'running'",
               "campaign", "transition", "running", "--reason", "back to work", agent="ev")
    resumed = ws.ok("campaign", "transition", "running", "--reason", "disk fixed", agent="owner")
    assert (resumed["from_state"], resumed["to_state"]) == ("paused", "running")
    # The rule fired with that decision; nothing new since: an agent may not pause it again.
    ws.refused(8, "a pause lists exactly the pause reasons that apply now: none apply",
               "campaign", "transition", "paused", "--reason", "again", agent="ev")

    # An improving result its executor measured invalid: never promoted, a validity failure.
    def invalid(loop: ResearchLoop) -> None:
        loop.supported("h2", DEV, None, mechanism="depth")
        loop.run("h2", "heldout", HELDOUT, violations=["mass is not conserved"])
        loop.judge("h2", "heldout")

    ws.api(invalid)
    error = ws.refused(8, "an invalid result is never promoted", "decide", "promote", "h2",
                       agent="ev")
    assert error["error"] == "research_refused"
    ws.refused(2, "--violation is for retire", "decide", "promote", "h2", "--violation", "x",
               agent="ev")
    retired = ws.ok("decide", "retire", "h2", "--reason", "invalid_result", agent="ev")
    assert (retired["valid"], retired["violations"], retired["transition"]) == (
        False, ["mass is not conserved"], None)
    s = ws.ok("campaign", "status")
    assert (s["state"], s["iterations"]["invalid"], s["iterations"]["best"]) == (
        "running", 1, None)

    # A valid promotion that reaches the target completes the campaign in its batch.
    # Tight values: under the campaign's online control a later test needs a smaller p.
    ws.api(lambda loop: loop.supported("h3", DEV, [0.929, 0.93, 0.931], mechanism="lr"))
    done = loopx(ws.root, "decide", "promote", "h3", "--agent-id", "ev", token=ws.tokens["ev"])
    assert done.returncode == 0, done.stderr
    assert "\ncampaign completed: objective_target_reached" in done.stdout
    s = ws.ok("campaign", "status")
    assert (s["state"], s["completion"], s["target_reached"], s["contract"]["target"]) == (
        "completed", "objective_target_reached", True, 0.93)
    assert ("Campaign completed: the best promoted held-out result reached the objective&#x27;s "
            "target (objective_target_reached)") in loopx(ws.root, "board").stdout
    verified = loopx(ws.root, "verify")
    assert verified.returncode == 0 and verified.stdout.startswith("ok:"), verified.stdout


def test_evaluate_completes_a_campaign_whose_target_an_amendment_lowered(ws: Workspace) -> None:
    ws.ok("contract", "amend", "--reason", "aim higher", "--set", "metric.target=0.95",
          agent="cur")
    ws.api(lambda loop: loop.supported("h1", DEV, HELDOUT, mechanism="width"))
    out = ws.ok("decide", "promote", "h1", agent="ev")
    assert out["transition"] is None  # 0.93 is short of 0.95
    ws.ok("contract", "amend", "--reason", "0.93 is enough", "--set", "metric.target=0.93",
          agent="cur")
    dry = ws.ok("campaign", "evaluate", "--dry-run")
    assert (dry["due"], dry["transition"], dry["state"]) == ("completed", None, "running")
    text = loopx(ws.root, "campaign", "evaluate", "--dry-run")
    assert "the objective's target is reached: it would complete" in text.stdout
    done = ws.ok("campaign", "evaluate", agent="ev")
    assert (done["transition"], done["state"], done["stopped"]) == ("completed", "completed",
                                                                    False)
    assert ws.ok("campaign", "status")["completion"] == "objective_target_reached"
