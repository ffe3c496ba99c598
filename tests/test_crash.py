"""A writer killed with SIGKILL at random moments never loses an acknowledged record, and a
repairer killed mid-repair never leaves a repair record its quarantine file does not match."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from faults_support import (
    assert_repairs_kept,
    kill_at,
    leave_torn_tail,
    quarantine_files,
    records,
    register,
    repairs,
    torn_tail,
    verify_ok,
)
from helpers import Acks, new_writer, release, start_writer

from loopx.kernel.verify import verify_store
from loopx.workspace import find_workspace, init_workspace

KILLS = 60


def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    _, owner_token = init_workspace(tmp_path, "crash")
    # One executor agent for every victim: a victim killed mid-lease leaves its week-long lease
    # held, so the next victim appends under the same todo and epoch.
    victim = new_writer(tmp_path, owner_token, "victim")
    rng = random.Random(20261202)
    acked: dict[int, str] = {}
    for round_ in range(KILLS):
        # Odd rounds write batches near the 1 MiB limit, so a kill can land inside write().
        big = round_ % 2 == 1
        proc = start_writer(tmp_path, victim, seed=round_,
                            max_batch=380 if big else 24, pad=2400 if big else 64)
        release(proc)
        time.sleep(rng.uniform(0.005, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        for first, last, ids in Acks.parse(out).batches:
            acked.update(zip(range(first, last + 1), ids, strict=True))

        store = find_workspace(tmp_path).store()
        records = {r["seq"]: r for r, _ in store.read()}
        missing = [seq for seq in acked if records.get(seq, {}).get("record_id") != acked[seq]]
        assert missing == [], f"round {round_}: acknowledged records lost: {missing[:5]}"
        if round_ % 10 == 9:
            report = verify_store(store)
            assert report.ok, report.problem
        # every visible batch is whole
        for record in records.values():
            assert record["batch_end"] in records

    # A last writer repairs whatever the last victim left torn; every repair is on record.
    # (the same agent, so the repair is this writer process's own first append, as before)
    proc = start_writer(tmp_path, victim, appends=1)
    release(proc)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and len(Acks.parse(out).batches) == 1
    store = find_workspace(tmp_path).store()
    # Every repair record's quarantine file holds exactly the bytes it describes (verify checks
    # it too); a torn tail kept by a victim killed before its commit is only noted.
    assert_repairs_kept(tmp_path)
    assert {f"quarantine/{name}" for name in quarantine_files(tmp_path)} >= {
        p["quarantine_file"] for p in repairs(tmp_path)}
    report = verify_store(store)
    assert report.ok and all("has no store_repair_v0 record" in n for n in report.notes)
    assert len(acked) > 0


# Each moment of a repair a repairer can die at: with its temporary quarantine file created but
# empty, with the filled file renamed into place, and with the segment already cut.
REPAIR_POINTS = ["quarantine-created", "quarantine-renamed", "repair-truncated"]


@pytest.mark.parametrize("point", REPAIR_POINTS)
def test_sigkill_mid_repair_never_leaves_a_false_repair_record(tmp_path: Path,
                                                               point: str) -> None:
    _, owner_token = init_workspace(tmp_path, "crash-repair")
    assert register(tmp_path, owner_token, "before").returncode == 0
    acked = {r["seq"]: r["record_id"] for r in records(tmp_path)}
    name, torn = leave_torn_tail(tmp_path, owner_token)  # a writer SIGKILLed mid-write()

    # The next writer starts the repair and is SIGKILLed at its worst moment.
    kill_at(tmp_path, f"pause:{point}", "agent", "register", "--agent-id", "repairer",
            "--role", "research_executor", token=owner_token)

    done = register(tmp_path, owner_token, "after")
    assert done.returncode == 0, done.stderr
    log = records(tmp_path)
    assert {r["seq"]: r["record_id"] for r in log if r["seq"] in acked} == acked
    assert [r["payload"]["agent_id"] for r in log if r["schema_version"] == "agent_grant_v0"
            ] == ["before", "after"]
    assert torn_tail(tmp_path) == b""
    # Whoever committed the repair record, its quarantine file holds the torn bytes exactly.
    assert quarantine_files(tmp_path) == [name]
    assert (tmp_path / ".loopx" / "quarantine" / name).read_bytes() == torn
    assert_repairs_kept(tmp_path)
    report = verify_ok(tmp_path)
    if point == "repair-truncated":
        # The dead repairer had cut the tail but not committed its record: the bytes are kept,
        # and verify says so.
        assert repairs(tmp_path) == []
        assert len(report["notes"]) == 1 and name in report["notes"][0]
    else:
        assert [p["quarantine_file"] for p in repairs(tmp_path)] == [f"quarantine/{name}"]
        assert report["notes"] == []
