"""Helpers for the store fault tests: run the CLI as a real process, stop it at a fault point of
the store's write path and SIGKILL it there, and look at a workspace's tail and quarantine.

Fault points (``LOOPX_TEST_FAULT``, see loopx/kernel/store/fs.py): ``torn:segment`` writes half of a
commit and waits to be killed (a writer killed mid-write); ``pause:quarantine-created``,
``pause:quarantine-renamed`` and ``pause:repair-truncated`` stop a repairer after it created its
temporary quarantine file, after it renamed the filled file into place, and after it cut the
segment; ``enospc:quarantine`` and ``enospc:segment`` fail those writes as a full disk does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from loopx.kernel.canonical import sha256_hex
from loopx.kernel.store import FileStore
from loopx.kernel.store.fs import FAULT_ENV
from loopx.kernel.store.lines import segment_name
from loopx.kernel.store.quarantine import quarantine_name

LOOPX = [sys.executable, "-m", "loopx.cli"]


def env_for(token: str = "", fault: str = "") -> dict[str, str]:
    """The environment of a CLI process: the token (if any) and the fault (if any), nothing
    inherited that could change who acts."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOOPX_TOKEN", "LOOPX_AGENT_ID", FAULT_ENV)}
    if token:
        env["LOOPX_TOKEN"] = token
    if fault:
        env[FAULT_ENV] = fault
    return env


def run(root: Path, *args: str, token: str = "", fault: str = "",
        prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``loopx -C root ARGS`` to completion in a fresh process."""
    return subprocess.run([*prefix, *LOOPX, "-C", str(root), *args], check=False,
                          capture_output=True,
                          text=True, env=env_for(token, fault), timeout=120)


def kill_at(root: Path, fault: str, *args: str, token: str = "") -> None:
    """Run ``loopx -C root ARGS`` until it reaches ``fault``, then SIGKILL it there."""
    proc = subprocess.Popen([*LOOPX, "-C", str(root), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env_for(token, fault))
    watchdog = threading.Timer(120, proc.kill)  # a process that never gets there fails the test
    watchdog.start()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != f"FAULT {fault}":
            _, err = proc.communicate()
            raise AssertionError(f"{args} did not reach {fault}: {line!r} {err}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    finally:
        watchdog.cancel()
    assert proc.returncode == -signal.SIGKILL


def register(root: Path, owner_token: str, agent_id: str, *, fault: str = "",
             prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``loopx agent register`` as the owner: one small commit through the checked path."""
    return run(root, "agent", "register", "--agent-id", agent_id, "--role", "research_executor",
               "--json", token=owner_token, fault=fault, prefix=prefix)


def store_of(root: Path) -> FileStore:
    return FileStore(root / ".loopx")


def active_segment(root: Path) -> Path:
    store = store_of(root)
    return store.segment_path(store.segments()[-1])


def torn_tail(root: Path) -> bytes:
    """The bytes past the committed end of the active segment (empty when there are none)."""
    store = store_of(root)
    head = store.head()
    data = store.segment_path(head.position[0]).read_bytes()
    return data[head.position[1]:]


def leave_torn_tail(root: Path, owner_token: str) -> tuple[str, bytes]:
    """Kill a writer halfway through its write; returns the name its torn bytes get in
    quarantine, and the bytes."""
    kill_at(root, "torn:segment", "agent", "register", "--agent-id", "dead-writer",
            "--role", "research_executor", token=owner_token)
    head = store_of(root).head()
    torn = torn_tail(root)
    assert torn and not torn.endswith(b"\n")
    return quarantine_name(segment_name(head.position[0]), head.position[1], sha256_hex(torn)), torn


def records(root: Path) -> list[dict[str, Any]]:
    return [record for record, _ in store_of(root).read()]


def repairs(root: Path) -> list[dict[str, Any]]:
    """The payloads of every ``store_repair_v0`` in the log."""
    return [r["payload"] for r in records(root) if r["schema_version"] == "store_repair_v0"]


def assert_repairs_kept(root: Path) -> None:
    """Every repair record's quarantine file holds exactly the bytes it describes."""
    for payload in repairs(root):
        data = (root / ".loopx" / payload["quarantine_file"]).read_bytes()
        assert (len(data), sha256_hex(data)) == (payload["length"], payload["sha256"]), payload


def quarantine_files(root: Path) -> list[str]:
    """Every file in ``quarantine/``, temporary ones included."""
    directory = root / ".loopx" / "quarantine"
    return sorted(os.listdir(directory)) if directory.is_dir() else []


def verify_ok(root: Path) -> dict[str, Any]:
    """``loopx verify --json`` in a fresh process; asserts it passes and returns the report."""
    done = run(root, "verify", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ok"] is True
    return report


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative path -> bytes), to show nothing was written."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def storage_error(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON error object a ``--json`` command printed; asserts it is a storage error."""
    assert done.returncode == 11, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    error: dict[str, Any] = json.loads(done.stdout)
    assert error["error"] == "storage"
    assert set(error) == {"error", "message", "hint", "path", "errno"}
    return error
