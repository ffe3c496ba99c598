"""A writer killed with SIGKILL at random moments never loses an acknowledged record."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from helpers import Acks, new_writer, release, start_writer

from loopx.verify import verify_store
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
    kinds = [r["schema_version"] for r, _ in store.read()]
    quarantined = list((store.dir / "quarantine").iterdir())
    assert kinds.count("store_repair_v0") == len(quarantined)
    report = verify_store(store)
    assert report.ok and report.notes == []
    assert len(acked) > 0
