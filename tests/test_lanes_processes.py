"""Real agent processes: eight racing for 2,000 todos each (on PostgreSQL; 2,000 shared on
files), and one killed with SIGKILL mid-lease."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from loopx.kernel.checks import Credentials
from loopx.kernel.verify import verify_store
from loopx.work.agents import register_agent
from loopx.work.claims import heartbeat
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

WORKER = Path(__file__).resolve().parent / "workers" / "claim_worker.py"
AGENTS = 8
# Issue 19's acceptance size, 8 x 2,000 = 16,000 todos, runs on PostgreSQL in every run (about
# 100 s on an idle 2-core machine). The file store's race shares 2,000 among the eight (its
# full size, about 50 s, adds nothing the PostgreSQL race and the store conformance suite do
# not cover); LOOPX_TEST_FULL_CLAIMS=1 runs it at the full size too.
FULL_TODOS = AGENTS * 2000


def todo_count(store: str) -> int:
    """How many todos the eight race for on ``store``."""
    full = store != "file" or os.environ.get("LOOPX_TEST_FULL_CLAIMS") == "1"
    return FULL_TODOS if full else 2000


def start(root: Path, agent_id: str, token: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LOOPX_TOKEN": token}
    proc = subprocess.Popen([sys.executable, str(WORKER), str(root), "--agent-id", agent_id,
                             *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    return proc


def go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


@pytest.fixture(params=["file", "postgres"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the workspace's log lives; on PostgreSQL every process (this one and the agents
    it starts) connects with the password-bearing URL in LOOPX_STORE."""
    if request.param == "file":
        return "file"
    url: str = request.getfixturevalue("pg_url")
    monkeypatch.setenv("LOOPX_STORE", url)
    return url


@pytest.mark.slow
def test_eight_processes_claim_2000_todos_each_exactly_once(tmp_path: Path, store: str) -> None:
    count = todo_count(store)
    workspace, owner_token = init_workspace(tmp_path, "race", store=store)
    owner = Credentials("owner", owner_token)
    ledger = workspace.ledger()
    tokens = {f"ex-{i}": register_agent(ledger, owner, f"ex-{i}", "research_executor")[1]
              for i in range(AGENTS)}
    for start_at in range(0, count, 500):
        add_todos(ledger, owner, [{"todo_id": f"t{n:05d}", "title": f"todo {n}",
                                   "role": "research_executor", "action_kind": "run_dev_eval",
                                   "hypothesis_id": f"h{n:05d}"}
                                  for n in range(start_at, start_at + 500)])
    procs = {agent: start(tmp_path, agent, token) for agent, token in tokens.items()}
    for proc in procs.values():
        go(proc)
    claimed: dict[str, list[str]] = {}
    for agent, proc in procs.items():
        out, _ = proc.communicate(timeout=400 if count <= 2000 else 1800)
        assert proc.returncode == 0, out[-500:]
        lines = out.splitlines()
        assert lines[-1].split()[2] == "no_eligible_todo"
        claimed[agent] = [line.split()[1] for line in lines if line.startswith("CLAIM")]
        assert int(lines[-1].split()[1]) == len(claimed[agent])
    every = [t for todos in claimed.values() for t in todos]
    assert len(every) == count and set(every) == {f"t{n:05d}" for n in range(count)}
    assert sum(1 for todos in claimed.values() if todos) >= 2  # the work was actually shared

    records = [r for r, _ in find_workspace(tmp_path).store().read()]
    claims = Counter(r["todo_id"] for r in records
                     if r["schema_version"] == "auto_research_lane_claim_v1")
    assert len(claims) == count and set(claims.values()) == {1}  # 0 double claims
    completions = Counter(r["todo_id"] for r in records if r["schema_version"] == "todo_event_v0"
                          and r["payload"]["event"] == "completed")
    assert set(completions.values()) == {1} and len(completions) == count
    assert not [r for r in records if r["schema_version"] == "todo_event_v0"
                and r["payload"]["event"] == "expired"]
    assert verify_store(find_workspace(tmp_path).store()).ok


def loopx(root: Path, *args: str, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(root), *args],
                          capture_output=True, text=True, env={**os.environ, "LOOPX_TOKEN": token},
                          timeout=60)


def test_sigkilled_claimant_expires_and_its_late_completion_is_refused(tmp_path: Path,
                                                                       store: str) -> None:
    workspace, owner_token = init_workspace(tmp_path, "sigkill", store=store)
    owner = Credentials("owner", owner_token)
    ledger = workspace.ledger()
    _, victim_token = register_agent(ledger, owner, "victim", "research_executor")
    _, heir_token = register_agent(ledger, owner, "heir", "research_executor")
    # Generous: the early should-run below must start well inside the victim's lease, even on a
    # loaded machine where each CLI subprocess can take a second or more.
    ttl = 6.0
    add_todos(ledger, owner, [{"todo_id": "t1", "title": "long job", "role": "research_executor",
                               "action_kind": "run_dev_eval", "hypothesis_id": "h1",
                               "lease_ttl_seconds": ttl}])
    proc = start(tmp_path, "victim", victim_token, "--hold")
    go(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().split() == ["HELD", "t1", "1"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    early = json.loads(loopx(tmp_path, "quota", "should-run", "--agent-id", "heir", "--claim",
                             "--json", token=heir_token).stdout)
    assert (early["run"], early["reason"]) == (False, "no_eligible_todo")  # lease still held
    time.sleep(ttl + 0.2)
    late = json.loads(loopx(tmp_path, "quota", "should-run", "--agent-id", "heir", "--claim",
                            "--json", token=heir_token).stdout)
    assert (late["claimed"], late["todo"]["todo_id"], late["todo"]["epoch"]) == (True, "t1", 2)
    # Extend the heir's lease at once, in-process, so the checks below cannot outlive it.
    heartbeat(ledger, Credentials("heir", heir_token), "t1", 2, ttl=600)

    records = [r for r, _ in find_workspace(tmp_path).store().read()]
    expired = [r for r in records if r["schema_version"] == "todo_event_v0"
               and r["payload"]["event"] == "expired"]
    assert len(expired) == 1
    assert (expired[0]["payload"]["expired_agent_id"], expired[0]["epoch"],
            expired[0]["agent_id"]) == ("victim", 1, "heir")

    refused = loopx(tmp_path, "todo", "complete", "t1", "--epoch", "1", "--agent-id", "victim",
                    "--json", token=victim_token)
    assert refused.returncode == 4
    error = json.loads(refused.stdout)
    assert error["error"] == "stale_lease" and "victim does not hold epoch 1" in error["message"]
    assert "Traceback" not in refused.stderr
    after = [r for r, _ in find_workspace(tmp_path).store().read()]
    assert len(after) == len(records)
    done = loopx(tmp_path, "todo", "complete", "t1", "--epoch", "2", "--agent-id", "heir",
                 token=heir_token)
    assert done.returncode == 0, done.stderr
    assert verify_store(find_workspace(tmp_path).store()).ok
