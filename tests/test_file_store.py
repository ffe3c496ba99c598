"""File backend specifics: torn tails, partial batches, corruption, segments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopx.kernel.canonical import dumps, sha256_hex
from loopx.kernel.errors import IntegrityError, NotFound, RecordRejected
from loopx.kernel.store import FileStore
from loopx.kernel.store.lines import segment_name
from loopx.kernel.verify import VerifyReport
from loopx.kernel.verify import verify_store as verify_workspace
from loopx.testing.lanes import executor_writer
from loopx.testing.store_conformance import unsealed
from loopx.workspace import init_workspace


def verify_store(store: FileStore) -> VerifyReport:
    return verify_workspace(store, workspace_rules=False)


def make_store(tmp_path: Path, **options: object) -> FileStore:
    store = FileStore(tmp_path / ".loopx", **options)  # type: ignore[arg-type]
    store.create()
    return store


def seqs(store: FileStore) -> list[int]:
    return [r["seq"] for r, _ in store.read()]


def active_segment(store: FileStore) -> Path:
    return store.segment_path(store.segments()[-1])


def test_torn_line_is_invisible_then_quarantined(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.append([unsealed(n=i) for i in range(3)])
    torn = b'{"agent_id":"dead-writer","batch_end":4,"cap'
    with open(active_segment(store), "ab") as f:
        f.write(torn)
    reader = FileStore(store.dir)
    assert seqs(reader) == [1, 2, 3]
    assert verify_store(reader).ok

    [record] = FileStore(store.dir).append([unsealed(n=99)])
    assert record["seq"] == 4
    records = [r for r, _ in store.read()]
    assert [r["schema_version"] for r in records[3:]] == ["rollout_event_v0", "store_repair_v0"]
    repair = records[4]["payload"]
    assert repair["length"] == len(torn) and repair["sha256"] == sha256_hex(torn)
    assert repair["complete_lines"] == 0
    assert (store.dir / repair["quarantine_file"]).read_bytes() == torn
    report = verify_store(store)
    assert report.ok and report.notes == [] and report.head_seq == 5


def test_partial_batch_is_invisible_then_quarantined(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.append([unsealed()])
    segment = active_segment(store)
    committed = segment.stat().st_size
    store.append([unsealed(n=i) for i in range(3)])
    # Leave only the first two lines of the three-record batch, as a writer killed mid-write would.
    batch_lines = segment.read_bytes()[committed:].splitlines(keepends=True)
    with open(segment, "r+b") as f:
        f.truncate(committed + len(batch_lines[0]) + len(batch_lines[1]))
    reader = FileStore(store.dir)
    assert seqs(reader) == [1]
    report = verify_store(reader)
    assert report.ok and "unfinished batch" in report.notes[0]

    hidden = json.loads(batch_lines[0])
    with pytest.raises(NotFound):
        reader.find(hidden["record_id"])
    with pytest.raises(NotFound):
        reader.seek(hidden["seq"])

    FileStore(store.dir).append([unsealed(n=7)])
    records = [r for r, _ in FileStore(store.dir).read()]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[2]["schema_version"] == "store_repair_v0"
    assert records[2]["payload"]["complete_lines"] == 2
    assert verify_store(store).ok


def test_corruption_mid_log_is_an_error_not_a_repair(tmp_path: Path) -> None:
    workspace, owner_token = init_workspace(tmp_path, "corrupt")
    ledger = workspace.ledger()
    writer = executor_writer(ledger, owner_token, "a")  # seq 7-9, after init's seq 1-6
    note = writer.tie({"payload": {"event": "note"}})
    [first, *_] = ledger.append([note] * 4, creds=writer.creds, kind="rollout_event_v0")
    assert first["seq"] == 10
    segment = active_segment(workspace.store())
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[10] = b"this is not json\n"  # seq 11: the second record of the batch of four
    segment.write_bytes(b"".join(lines))
    with pytest.raises(IntegrityError) as err:
        list(FileStore(workspace.dir).read())
    assert err.value.seq == 11
    with pytest.raises(IntegrityError):
        workspace.ledger().append(note, creds=writer.creds, kind="rollout_event_v0")
    assert segment.read_bytes() == b"".join(lines)
    assert list((workspace.dir / "quarantine").iterdir()) == []


def test_stored_lines_are_canonical_bytes(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.append([unsealed(text="ünï ✓", f=0.1, n=-3), unsealed()])
    lines = active_segment(store).read_bytes().splitlines(keepends=True)
    for line, (record, _) in zip(lines, store.read(), strict=True):
        assert line == dumps(record) + b"\n"


def test_broken_chain_is_an_error(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.append([unsealed(n=i) for i in range(3)])
    segment = active_segment(store)
    lines = segment.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[2])
    record["prev_hash"] = "0" * 64
    lines[2] = json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    segment.write_bytes(b"".join(lines))
    with pytest.raises(IntegrityError, match="does not chain"):
        list(FileStore(store.dir).read())


def test_segments_roll_over_and_chain_across(tmp_path: Path) -> None:
    store = make_store(tmp_path, segment_bytes=2000)
    for i in range(12):
        store.append([unsealed(n=i), unsealed(n=i)])
    assert len(store.segments()) > 3
    assert seqs(FileStore(store.dir)) == list(range(1, 25))
    for first in store.segments():
        first_record = json.loads(store.segment_path(first).read_bytes().splitlines()[0])
        assert first_record["seq"] == first
    report = verify_store(store)
    assert report.ok and report.segments == len(store.segments())
    # A reader resuming from a cursor in an old segment crosses into the new ones.
    _, cursor = next(iter(FileStore(store.dir).read()))
    assert [r["seq"] for r, _ in FileStore(store.dir).read(cursor)] == list(range(2, 25))


def test_empty_segment_left_by_a_crash_during_rollover_is_used(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.append([unsealed(), unsealed()])
    (store.log_dir / segment_name(3)).write_bytes(b'{"partial')
    assert seqs(FileStore(store.dir)) == [1, 2]
    [record] = FileStore(store.dir).append([unsealed()])
    assert record["seq"] == 3
    assert store.segments() == [1, 3]
    assert [r["schema_version"] for r, _ in store.read()][-1] == "store_repair_v0"
    assert verify_store(store).ok


def test_missing_middle_segment_is_an_error(tmp_path: Path) -> None:
    store = make_store(tmp_path, segment_bytes=1500)
    for _ in range(8):
        store.append([unsealed()])
    segments = store.segments()
    assert len(segments) >= 3
    store.segment_path(segments[1]).unlink()
    report = verify_store(FileStore(store.dir))
    assert not report.ok and report.first_bad_seq == segments[1]


def test_head_found_behind_a_large_unfinished_batch(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    [first] = store.append([unsealed()])
    segment = active_segment(store)
    committed = segment.stat().st_size
    store.append([unsealed(pad=30_000) for _ in range(20)])  # ~600 KB in one batch
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 100)  # the batch's last line is cut short
    fresh = FileStore(store.dir)
    head = fresh.head()
    assert (head.seq, head.hash) == (1, first["hash"])
    assert head.position[1] == committed
    [record] = fresh.append([unsealed(n=2)])
    assert record["seq"] == 2
    assert verify_store(FileStore(store.dir)).ok


def test_refused_batch_leaves_a_torn_tail_for_the_next_writer(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.append([unsealed()])
    segment = active_segment(store)
    with open(segment, "ab") as f:
        f.write(b'{"torn')
    before = segment.read_bytes()
    with pytest.raises(RecordRejected):
        FileStore(store.dir).append([unsealed(pad=70_000)])
    assert segment.read_bytes() == before
    assert list((store.dir / "quarantine").iterdir()) == []
    FileStore(store.dir).append([unsealed()])
    assert [r["schema_version"] for r, _ in store.read()][-1] == "store_repair_v0"


def test_a_reader_stops_at_a_missing_middle_segment_with_an_error(tmp_path: Path) -> None:
    store = make_store(tmp_path, segment_bytes=1500)
    for _ in range(8):
        store.append([unsealed()])
    store.segment_path(store.segments()[1]).unlink()
    with pytest.raises(IntegrityError, match="missing"):
        list(FileStore(store.dir).read())


def test_a_caught_up_follower_reads_on_across_a_rollover_and_appends_after_it(
        tmp_path: Path) -> None:
    store = make_store(tmp_path, segment_bytes=1500)
    store.append([unsealed()])
    follower = FileStore(store.dir)
    [(_, cursor)] = list(follower.read())
    assert list(follower.read(cursor)) == []  # caught up: nothing new
    while len(store.segments()) < 3:  # another writer rolls the log over twice
        store.append([unsealed()])
    head = store.head().seq
    assert [r["seq"] for r, _ in follower.read(cursor)] == list(range(2, head + 1))
    # The head that read reached is the follower's own next append's head.
    [record] = follower.append([unsealed()])
    assert record["seq"] == head + 1
    assert seqs(FileStore(store.dir)) == list(range(1, head + 2))
    assert verify_store(FileStore(store.dir)).ok


def test_a_moved_log_refuses_every_later_append(tmp_path: Path) -> None:
    from loopx.kernel.errors import WorkspaceError

    store = FileStore(tmp_path / ".loopx")
    store.create()
    store.append([unsealed(n=1)])
    stale = FileStore(tmp_path / ".loopx")  # a process that opened the log before the move
    stale.append([unsealed(n=2)])
    head = store.head()
    with store.locked():
        store.mark_moved("postgresql://loopx@db/loopx?log=moved", head)
    before = b"".join(data for _, _, data in store.raw_segments())
    for writer in (store, stale, FileStore(tmp_path / ".loopx")):
        with pytest.raises(WorkspaceError, match="moved to postgresql://loopx@db/loopx"
                                                 r"\?log=moved at seq 2"):
            writer.append([unsealed(n=3)])
    assert b"".join(data for _, _, data in store.raw_segments()) == before  # nothing written
    assert [r["seq"] for r, _ in stale.read()] == [1, 2]  # and it still reads
    assert verify_workspace(store, workspace_rules=False).ok


WAITER = """
import sys
from loopx.kernel.store import FileStore
store = FileStore(sys.argv[1])
print("waiting", flush=True)
print(store.wait(store.head().seq, 120.0), store.moved().to if store.moved() else None)
"""


def test_a_waiter_on_a_log_that_moves_returns_instead_of_waiting_out_its_timeout(
        tmp_path: Path) -> None:
    # A served board's long poll, a lane runner idle between polls: the head of a moved log
    # will never pass, so the wait ends on the mark (a process of its own, as they are).
    import subprocess
    import sys

    store = FileStore(tmp_path / ".loopx")
    store.create()
    store.append([unsealed(n=1)])
    waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(tmp_path / ".loopx")],
                              stdout=subprocess.PIPE, text=True)
    assert waiter.stdout is not None and waiter.stdout.readline() == "waiting\n"
    head = store.head()
    with store.locked():
        store.mark_moved("postgresql://loopx@db/loopx?log=moved", head)
    out, _ = waiter.communicate(timeout=60)  # well inside the waiter's own 120 s
    assert out.split() == ["False", "postgresql://loopx@db/loopx?log=moved"]


def test_a_file_log_copied_to_a_directory_is_the_same_log_and_never_copied_over(
        tmp_path: Path) -> None:
    from loopx.kernel.errors import ConflictError, WorkspaceError
    from loopx.kernel.store.copy import copy_log
    from loopx.workspace import copy_store

    workspace, _ = init_workspace(tmp_path / "here", "copied")
    result = copy_store(workspace, str(tmp_path / "there"))
    source, target = FileStore(workspace.dir), FileStore(tmp_path / "there" / ".loopx")
    head = source.head()
    assert (result["records"], result["resumed_from"], result["used"]) == (head.seq, 0, False)
    assert result["head"] == {"seq": head.seq, "hash": head.hash}
    assert b"".join(d for _, _, d in target.raw_segments()) == \
        b"".join(d for _, _, d in source.raw_segments())
    assert json.loads((tmp_path / "there" / ".loopx" / "workspace.json").read_text())["store"] \
        == "file"
    with pytest.raises(WorkspaceError, match="already exists; copy into a new directory"):
        copy_store(workspace, str(tmp_path / "there"))
    # A file log is never copied into once it has records, even the start of the same log.
    before = b"".join(d for _, _, d in target.raw_segments())
    with pytest.raises(ConflictError, match=f"holds {head.seq} records, and a file log"):
        copy_log(source, target)
    assert b"".join(d for _, _, d in target.raw_segments()) == before
