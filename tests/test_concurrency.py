"""Eight real writer processes appending at once to one workspace."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from helpers import Acks, new_writer, release, start_writer

from loopx.kernel.verify import verify_store
from loopx.workspace import find_workspace, init_workspace

WRITERS = 8
APPENDS = 40


def test_eight_processes_lose_nothing_and_interleave_nothing(tmp_path: Path) -> None:
    _, owner_token = init_workspace(tmp_path, "concurrency")
    # Each writer process is its own executor agent holding its own todo.
    writers = [new_writer(tmp_path, owner_token, f"w{i}") for i in range(WRITERS)]
    with find_workspace(tmp_path).store() as store:
        setup = store.head().seq
    assert setup == 6 + 3 * WRITERS  # init (genesis + 5 profiles), then grant, todo, claim each
    procs = [start_writer(tmp_path, writer, appends=APPENDS, seed=i)
             for i, writer in enumerate(writers)]
    for proc in procs:
        release(proc)
    acks = {}
    for i, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0
        acks[f"w{i}"] = Acks.parse(out)
        assert len(acks[f"w{i}"].batches) == APPENDS

    store = find_workspace(tmp_path).store()
    records = [r for r, _ in store.read()]
    acked = sum(len(ids) for a in acks.values() for _, _, ids in a.batches)
    assert len(records) == acked + setup  # plus the records written before the writers ran
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len({r["record_id"] for r in records}) == len(records)
    by_seq = {r["seq"]: r for r in records}
    for writer, writer_acks in acks.items():
        for first, last, ids in writer_acks.batches:
            batch = [by_seq[s] for s in range(first, last + 1)]
            assert [r["record_id"] for r in batch] == ids
            assert {r["agent_id"] for r in batch} == {writer}
            assert {(r["todo_id"], r["epoch"]) for r in batch} == {(f"{writer}-work", 1)}
            assert {r["batch_end"] for r in batch} == {last}
            sizes = {r["payload"]["detail"]["size"] for r in batch}
            assert sizes == {len(batch)}
    # every batch in the log is whole and one writer's
    batches: dict[int, list[dict]] = defaultdict(list)
    for r in records[1:]:
        batches[r["batch_end"]].append(r)
    for end, members in batches.items():
        assert [m["seq"] for m in members] == list(range(end - len(members) + 1, end + 1))
        assert len({m["agent_id"] for m in members}) == 1
    ts = [r["ts"] for r in records]
    assert ts == sorted(ts)
    assert verify_store(store).ok
