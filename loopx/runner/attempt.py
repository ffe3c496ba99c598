"""One lane attempt: what happened to it and the run's report, and the command's process (why
it could not start, its stdout read without blocking, stopping it with everything it
started)."""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
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


def foreseen_failure(command: list[str], cwd: Path | None) -> str | None:
    """Why the command surely cannot start, known before any todo is claimed: a program not on
    ``PATH``, or a path that does not exist or is not executable (``cwd``: where a relative
    path is looked up, None when that place does not exist yet). None: it may start."""
    program = command[0]
    if "/" not in program:
        code = errno.ENOENT if shutil.which(program) is None else None
    elif os.path.isabs(program):
        code = _start_error(Path(program))
    elif cwd is not None:
        code = _start_error(cwd / program)
    else:
        code = None  # relative to a place that does not exist yet
    # Worded as Popen's own OSError would be, so both paths say the same.
    return None if code is None else start_failure(
        command, OSError(code, os.strerror(code), program))


def script_paths(command: list[str]) -> list[str]:
    """The relative paths a command surely reads from where it starts: the program itself,
    when given as a path, and the first argument after it that is not an option (the script
    of ``python3 train.py`` or ``bash run.sh``)."""
    program, rest = command[0], command[1:]
    named = [program] if "/" in program else []
    first = next((a for a in rest if not a.startswith("-")), None)
    if first is not None:
        named.append(first)
    return [p for p in named if p and not os.path.isabs(p)]


def _start_error(path: Path) -> int | None:
    """The errno starting ``path`` would fail with: missing, or a directory or not executable."""
    if not path.exists():
        return errno.ENOENT
    return errno.EACCES if path.is_dir() or not os.access(path, os.X_OK) else None


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
