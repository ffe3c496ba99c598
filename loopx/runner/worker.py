"""A persistent lane command (``loopx lane run --persistent``): started once, then handed one
task per line, so a command that loads something heavy (a model, a library) pays for it once
per lane instead of once per todo.

The protocol: for each claimed todo the runner writes one line to the command's stdin,
``{"schema_version": "loopx_lane_task_v0", "claim": ..., "env": {LOOPX_* of the todo},
"cwd": ...}``, and the command answers with one line on stdout, its ``loopx_lane_result_v0``.
It starts with the lane's ``LOOPX_WORKSPACE``, ``LOOPX_AGENT_ID`` and ``LOOPX_ROLE``, and sets
each task's variables and directory itself. If it exits, hangs past the
timeout or prints too much, the attempt fails as a per-todo command's would, and the next
todo starts a fresh command.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from typing import Any

from loopx.runner.attempt import MAX_OUTPUT, kill_group

TASK_SCHEMA = "loopx_lane_task_v0"
_EOF = b""


class Worker:
    """One running persistent command, with its stdout read line by line on a thread."""

    def __init__(self, command: list[str], cwd: str, env: dict[str, str]) -> None:
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      cwd=cwd, env=env, start_new_session=True)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.overflow = False
        self.served = 0  # tasks handed to it so far
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.child.stdout is not None
        while True:
            line = self.child.stdout.readline(MAX_OUTPUT + 1)
            if len(line) > MAX_OUTPUT:
                self.overflow = True
            self.lines.put(line)
            if not line:
                return

    def send(self, claim: dict[str, Any], env: dict[str, str], cwd: str) -> bool:
        """Hand the command one task; False if it is gone (its stdin is closed)."""
        task = {"schema_version": TASK_SCHEMA, "claim": claim, "env": env, "cwd": cwd}
        assert self.child.stdin is not None
        try:
            self.child.stdin.write(json.dumps(task, sort_keys=True).encode() + b"\n")
            self.child.stdin.flush()
        except (BrokenPipeError, ValueError):
            return False
        return True

    def answer(self, timeout: float) -> bytes | None:
        """The command's answer line (b"" once it has exited), or None if none came in time."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def cpu_seconds(self) -> float:
        """CPU (user + system) the command and its reaped children used so far; 0 where the
        platform has no /proc to read it from."""
        try:
            with open(f"/proc/{self.child.pid}/stat") as handle:
                # Fields after the command name, which may hold spaces: utime is field 14.
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Close its stdin (a clean end) and stop it and everything it started."""
        try:
            if self.child.stdin is not None:
                self.child.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.child.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            kill_group(self.child)
        self.thread.join(timeout=1.0)
