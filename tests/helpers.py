"""Helpers shared by the process-based tests."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

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


def start_writer(workspace: Path, writer: str, *, appends: int = 0, max_batch: int = 5,
                 seed: int = 0, pad: int = 64) -> subprocess.Popen[str]:
    """Start a writer process and wait until it has imported everything."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(workspace), "--writer", writer,
         "--appends", str(appends), "--max-batch", str(max_batch), "--seed", str(seed),
         "--pad", str(pad)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    """Let a ready writer start appending."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
