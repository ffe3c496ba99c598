"""One lane attempt: what happened to it and the run's report, and the command's process (why
it could not start, its stdout read without blocking, stopping it with everything it
started)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

MAX_OUTPUT = 16 * 1024 * 1024  # stdout bytes kept from one command; more fails the attempt
GRACE_SECONDS = 5.0


@dataclass
class Attempt:
    """What happened to one claimed todo."""

    todo_id: str
    epoch: int
    outcome: str  # completed, failed or released
    reason: str | None = None
    exit_status: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    seq: int | None = None
    started: bool = True  # false: the command could not be started at all

    def to_json(self) -> dict[str, Any]:
        """The attempt as stable JSON."""
        return {"todo_id": self.todo_id, "epoch": self.epoch, "outcome": self.outcome,
                "reason": self.reason, "exit_status": self.exit_status,
                "wall_seconds": round(self.wall_seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), "seq": self.seq}


@dataclass
class LaneReport:
    """Why the runner stopped, and its attempts."""

    agent_id: str
    role: str
    stopped_because: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    reason: str | None = None  # why it stopped before claiming anything, if it did

    def to_json(self) -> dict[str, Any]:
        """The run as stable JSON."""
        counts = {o: sum(1 for a in self.attempts if a.outcome == o)
                  for o in ("completed", "failed", "released")}
        return {"agent_id": self.agent_id, "role": self.role,
                "stopped_because": self.stopped_because, "reason": self.reason, **counts,
                "attempts": [a.to_json() for a in self.attempts]}


class OutputReader:
    """Reads a child's stdout on a thread, so a chatty command never blocks on a full pipe."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.thread = threading.Thread(target=self._read, args=(child,), daemon=True)
        self.thread.start()

    def _read(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        for chunk in iter(lambda: child.stdout.read(65536), b""):  # type: ignore[union-attr]
            self.size += len(chunk)
            if self.size <= MAX_OUTPUT:
                self.chunks.append(chunk)
            else:
                self.overflow = True

    def join(self) -> None:
        self.thread.join(timeout=GRACE_SECONDS)

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


def start_failure(command: list[str], exc: OSError) -> str:
    """Why the command could not start, naming it and the OS error."""
    why = exc.strerror or str(exc)
    if exc.filename is not None:
        why = f"{why}: {os.fsdecode(exc.filename)!r}"
    return f"cannot start the command `{shlex.join(command)}`: {why}"


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """Stop the command and everything it started: SIGTERM, then SIGKILL after a grace."""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, GRACE_SECONDS)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
