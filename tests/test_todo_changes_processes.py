"""A claim and a cancel of the same todo from two real processes, released together todo after
todo: exactly one wins each race, the loser's write is refused and nothing is lost."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from loopx.kernel.checks import Credentials
from loopx.kernel.verify import verify_store
from loopx.work.agents import register_agent
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

WORKER = Path(__file__).resolve().parent / "workers" / "change_worker.py"
ROUNDS = 40


def start(root: Path, agent_id: str, token: str, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(WORKER), str(root), "--agent-id", agent_id,
                             "--mode", mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "LOOPX_TOKEN": token})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    return proc


def send(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def test_a_claim_and_a_cancel_race_and_exactly_one_wins(tmp_path: Path) -> None:
    workspace, owner_token = init_workspace(tmp_path, "race-cancel")
    owner = Credentials("owner", owner_token)
    ledger = workspace.ledger()
    # A proposer may claim any of its role's todos by name; the owner added them, so the owner
    # may cancel them.
    _, token = register_agent(ledger, owner, "hp-1", "hypothesis_proposer")
    todos = [f"t{n:02d}" for n in range(ROUNDS)]
    add_todos(ledger, owner, [{"todo_id": t, "title": f"todo {t}", "role": "hypothesis_proposer",
                               "action_kind": "propose_hypothesis"} for t in todos])
    before = ledger.store.head().seq
    claimer = start(tmp_path, "hp-1", token, "claim")
    canceller = start(tmp_path, "owner", owner_token, "cancel")
    outcomes: dict[str, dict[str, str]] = {}
    for todo_id in todos:
        # Both are released onto the same todo at once.
        send(claimer, todo_id)
        send(canceller, todo_id)
        outcomes[todo_id] = {}
        for name, proc in (("claim", claimer), ("cancel", canceller)):
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line.split()[1] == todo_id, line
            outcomes[todo_id][name] = line
    for proc in (claimer, canceller):
        send(proc, "")
        assert proc.wait(timeout=60) == 0

    records = [r for r, _ in find_workspace(tmp_path).store().read() if r["seq"] > before]
    claims = Counter(r["todo_id"] for r in records
                     if r["schema_version"] == "auto_research_lane_claim_v1")
    completions = Counter(r["todo_id"] for r in records if r["schema_version"] == "todo_event_v0")
    cancels = Counter(r["payload"]["todo_id"] for r in records
                      if r["schema_version"] == "todo_change_v0")
    lanes = find_workspace(tmp_path).ledger().state()["lanes"]
    for todo_id, got in outcomes.items():
        won = [name for name, line in got.items() if line.startswith("WON")]
        assert len(won) == 1, got  # exactly one winner
        loser = "cancel" if won == ["claim"] else "claim"
        assert got[loser].startswith(f"LOST {todo_id} refused"), got
        status = lanes["todos"][todo_id]["status"]
        if won == ["claim"]:
            # The cancel came too late: the todo was held, or already completed.
            assert ("held by hp-1 under a live lease" in got["cancel"]
                    or "is completed; a finished todo does not change" in got["cancel"]), got
            assert (claims[todo_id], completions[todo_id], cancels[todo_id]) == (1, 1, 0)
            assert status == "completed"
        else:
            assert f"todo {todo_id!r} is cancelled" in got["claim"], got
            assert (claims[todo_id], completions[todo_id], cancels[todo_id]) == (0, 0, 1)
            assert status == "cancelled"
    # Nothing else was written, nothing is lost: every record is a winner's.
    assert len(records) == sum(claims.values()) * 2 + sum(cancels.values())
    assert verify_store(find_workspace(tmp_path).store()).ok
