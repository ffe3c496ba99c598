"""The retry path end to end, with real lane processes and the real CLI: an inconclusive dev
judgement makes the evaluator's successor rule add a retry todo, so the frontier, the retry
candidates and the executor's should-run all offer the same retry; once the plan's attempts
are used none of them does, the frontier shows the retirement instead, and the evaluator gets
the decision todo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from helpers import run_loopx

from loopx.kernel.checks import Credentials
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.todos import add_todos
from loopx.workspace import init_workspace

# An executor whose attempts land on the baseline: scored, and never settled by the judgement.
FLAT = """
    import json, sys
    claim = json.load(sys.stdin)
    split = claim["data"]["split"]
    packet = {"hypothesis_id": claim["hypothesis_id"], "status": "scored",
              "results": [{"split": split, "metric": "acc", "seed": s, "value": v}
                          for s, v in zip((0, 1, 2), (0.899, 0.90, 0.901))]}
    print(json.dumps({"records": [{"schema_version": "auto_research_evidence_packet_v0",
                                   "payload": packet}],
                      "result": {"status": "scored", split: {"verdict": "inconclusive"}}}))
"""

# An evaluator that judges with the contract's rule and reports the verdict, deciding nothing.
JUDGE = """
    import json, os, sys
    from loopx.research.evidence import judgement_payload
    from loopx.workspace import find_workspace
    claim = json.load(sys.stdin)
    ledger = find_workspace(os.environ["LOOPX_WORKSPACE"]).ledger()
    verdict = judgement_payload(ledger.state()["lanes"], claim["hypothesis_id"], "dev")["verdict"]
    print(json.dumps({"calls": [{"tool": "evidence.judge", "args": {
                          "hypothesis_id": claim["hypothesis_id"], "split": "dev"}}],
                      "result": {"split": "dev", "verdict": verdict}}))
"""


class Campaign:
    """A workspace with a contract allowing two dev attempts, hypothesis h1 and its dev todo."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "ws"
        self.root.mkdir()
        workspace, owner_token = init_workspace(self.root, "retry")
        ledger = workspace.ledger()
        self.r = ResearchLoop(ledger, Credentials("owner", owner_token))
        self.r.contract({**CONTRACT, "promotion_policy": {**CONTRACT["promotion_policy"],
                                                          "max_attempts": 2}})
        self.r.propose("h1")
        add_todos(ledger, self.r.agents["ev"], [{
            "todo_id": "dev-h1", "title": "dev run", "role": "research_executor",
            "action_kind": "run_dev_eval", "hypothesis_id": "h1"}])
        ledger.store.close()

    def lane(self, agent: str, body: str, outcome: str = "completed") -> dict[str, Any]:
        """One attempt of ``agent``'s lane with ``body`` as its command; its report."""
        script = self.tmp / f"{agent}.py"
        script.write_text(textwrap.dedent(body))
        env = {k: v for k, v in os.environ.items() if k != "LOOPX_AGENT_ID"}
        env["LOOPX_TOKEN"] = str(self.r.agents[agent].token)
        done = subprocess.run(
            [sys.executable, "-m", "loopx.cli", "-C", str(self.root), "lane", "run",
             "--agent-id", agent, "--max-attempts", "1", "--idle-polls", "1",
             "--poll-seconds", "0", "--json", "--", sys.executable, str(script)],
            capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        assert report[outcome] == 1, report
        return report

    def cli(self, *args: str) -> dict[str, Any]:
        done = run_loopx(self.root, *args, "--json")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    def views(self) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
        """h1's frontier row, the retry candidates, and the executor's should-run answer."""
        [row] = self.cli("frontier")["hypotheses"]
        return row, self.cli("candidates")["retry"], self.cli("quota", "should-run",
                                                              "--agent-id", "ex")


def test_an_inconclusive_dev_judgement_is_retried_until_the_attempts_are_used(
        tmp_path: Path) -> None:
    c = Campaign(tmp_path)
    c.lane("ex", FLAT)
    c.lane("ev", JUDGE)
    row, retry, asked = c.views()
    # All three offer the same retry: one attempt left, for an executor, on h1.
    assert (row["state"], row["next_action"], row["next_role"]) == (
        "needs_retry", "retry_attempt", "research_executor")
    assert [(r["hypothesis_id"], r["attempts_left"]) for r in retry] == [("h1", 1)]
    assert (asked["reason"], asked["todo"]["action_kind"], asked["todo"]["hypothesis_id"]) == (
        "selected", "retry_attempt", "h1")
    retry_todo = asked["todo"]["todo_id"]
    assert retry_todo == "dev-h1.judge_dev_attempt.retry_after_inconclusive_dev"
    assert [r["hypothesis_id"] for r in c.cli("frontier", "--agent-id", "ex")["hypotheses"]
            ] == ["h1"]
    # The executor takes it (on dev), and its scored retry goes to the evaluator.
    [attempt] = c.lane("ex", FLAT)["attempts"]
    assert attempt["todo_id"] == retry_todo
    c.lane("ev", JUDGE)
    # Both attempts are used: nobody offers a retry; the frontier offers the retirement.
    row, retry, asked = c.views()
    assert (row["state"], row["next_action"], row["next_role"]) == (
        "no_effect_found", "decide", "evaluator_promoter")
    assert retry == []
    assert asked["reason"] == "no_eligible_todo" and asked["todo"] is None
    assert c.cli("frontier", "--agent-id", "ex")["hypotheses"] == []
    # The retry rule reads the candidates, so it no longer fires: the decision rule does, and
    # the evaluator that judged gets the decision todo (routed to it by should-run).
    judged = f"{retry_todo}.judge_retry_attempt"
    assert run_loopx(c.root, "todo", "show", f"{judged}.retry_after_inconclusive_dev"
                     ).returncode == 6
    decide = c.cli("todo", "show", f"{judged}.decide_after_judgement")
    assert (decide["action_kind"], decide["assigned_to"], decide["state"]) == (
        "decide", "ev", "open")
    assert c.cli("quota", "should-run", "--agent-id", "ev")["todo"]["todo_id"] == (
        f"{judged}.decide_after_judgement")


def test_a_failed_attempt_reopens_its_todo_as_the_retry_until_the_attempts_are_used(
        tmp_path: Path) -> None:
    c = Campaign(tmp_path)
    c.lane("ex", "raise SystemExit(3)", outcome="failed")
    row, retry, asked = c.views()
    assert (row["state"], row["next_action"]) == ("needs_retry", "retry_attempt")
    assert [(r["hypothesis_id"], r["attempts_left"]) for r in retry] == [("h1", 1)]
    assert (asked["reason"], asked["todo"]["todo_id"], asked["todo"]["epoch"]) == (
        "selected", "dev-h1", 2)
    c.lane("ex", "raise SystemExit(3)", outcome="failed")
    row, retry, asked = c.views()
    assert (row["state"], row["next_action"]) == ("retry_exhausted", "decide")
    assert retry == [] and asked["reason"] == "no_eligible_todo"
