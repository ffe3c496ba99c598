"""Helpers shared by the process-based tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from loopx.kernel.checks import Credentials
from loopx.testing.lanes import Writer, executor_writer
from loopx.testing.research import ResearchLoop
from loopx.workspace import find_workspace, init_workspace

WORKER = Path(__file__).resolve().parent / "workers" / "append_worker.py"


@dataclass
class Acks:
    """What one writer was told was stored: seq ranges and record ids per append."""

    batches: list[tuple[int, int, list[str]]] = field(default_factory=list)

    @classmethod
    def parse(cls, output: str) -> Acks:
        acks = cls()
        for line in output.splitlines():
            parts = line.split()
            # A line cut short by SIGKILL is not an acknowledgement the writer saw completed.
            if len(parts) >= 4 and parts[0] == "ACK":
                first, last, ids = int(parts[1]), int(parts[2]), parts[3:]
                if len(ids) == last - first + 1:
                    acks.batches.append((first, last, ids))
        return acks


def new_writer(workspace: Path, owner_token: str, agent_id: str) -> Writer:
    """Register ``agent_id`` as an executor holding its own todo on a week-long lease."""
    with find_workspace(workspace).store() as store:
        from loopx.kernel.ledger import Ledger

        return executor_writer(Ledger(store), owner_token, agent_id)


def start_writer(workspace: Path, writer: Writer, *, appends: int = 0, max_batch: int = 5,
                 seed: int = 0, pad: int = 64) -> subprocess.Popen[str]:
    """Start a writer process as ``writer`` and wait until it has imported everything.

    The token travels in the environment (``LOOPX_TOKEN``), never on the command line.
    """
    assert writer.creds.token is not None
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(workspace), "--writer", writer.creds.agent_id,
         "--todo-id", writer.todo_id, "--epoch", str(writer.epoch),
         "--appends", str(appends), "--max-batch", str(max_batch), "--seed", str(seed),
         "--pad", str(pad)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "LOOPX_TOKEN": writer.creds.token})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    """Let a ready writer start appending."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def run_loopx(root: Path, *args: str, token: str = "") -> subprocess.CompletedProcess[str]:
    """Run the CLI on the workspace at ``root`` in a fresh process, with ``token`` (if any) as
    LOOPX_TOKEN and no inherited agent or token."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_TOKEN", "LOOPX_AGENT_ID")}
    if token:
        env["LOOPX_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def head_seq(root: Path) -> int:
    """The head seq of the workspace at ``root``."""
    return find_workspace(root).store().head().seq


def research_workspace(root: Path, goal_id: str) -> ResearchLoop:
    """A new file workspace at ``root`` with one agent per research role (its ledger stays open:
    close ``loop.ledger.store`` before other processes use the workspace)."""
    root.mkdir()
    workspace, owner_token = init_workspace(root, goal_id)
    return ResearchLoop(workspace.ledger(), Credentials("owner", owner_token))


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a fixed test author (no user config needed); its stdout."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


@contextmanager
def served_board(root: Path) -> Iterator[str]:
    """``loopx board --serve --port 0`` on ``root`` in a process of its own, with no token in
    its environment; yields its URL, and stops it with SIGTERM (it must exit 0)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_TOKEN", "LOOPX_AGENT_ID")}
    server = subprocess.Popen([sys.executable, "-m", "loopx.cli", "-C", str(root), "board",
                               "--serve", "--port", "0", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        yield json.loads(server.stdout.readline())["url"]
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        assert server.stdout is not None and server.stderr is not None
        server.stdout.close()
        server.stderr.close()
