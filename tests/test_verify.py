"""Tampering with the log is caught, and verify names the first bad sequence number."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from faults_support import leave_torn_tail, records, register, repairs

from loopx.cli import cli
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import FileStore
from loopx.kernel.verify import Anchor, verify_store
from loopx.testing.lanes import executor_writer
from loopx.workspace import init_workspace

Lines = list[bytes]


def build(tmp_path: Path) -> FileStore:
    """A workspace of 39 records over several small segments.

    Seq 1-6 are written by init (genesis, 5 role profiles), 7-9 set up the writer (grant, todo,
    claim), and 10-39 are ten batches of three notes (10-12, 13-15, ..., 37-39).
    """
    workspace, owner_token = init_workspace(tmp_path, "tamper")
    ledger = Ledger(FileStore(workspace.dir, segment_bytes=4000))
    writer = executor_writer(ledger, owner_token, "a")
    for n in range(10):
        ledger.append([writer.tie({"payload": {"event": "note", "detail": {"n": n, "i": i}}})
                       for i in range(3)], creds=writer.creds, kind="rollout_event_v0")
    store = FileStore(workspace.dir)
    assert store.head().seq == 39
    return store


def all_lines(store: FileStore) -> list[tuple[Path, int, bytes]]:
    out = []
    for first in store.segments():
        path = store.segment_path(first)
        for i, line in enumerate(path.read_bytes().splitlines(keepends=True)):
            out.append((path, i, line))
    return out


def rewrite(store: FileStore, seq: int, change: Callable[[Lines, int], None]) -> None:
    """Apply ``change`` to the lines of the segment holding ``seq`` (index of seq within it)."""
    for path, i, line in all_lines(store):
        if json.loads(line)["seq"] == seq:
            lines = path.read_bytes().splitlines(keepends=True)
            change(lines, i)
            path.write_bytes(b"".join(lines))
            return
    raise AssertionError(f"seq {seq} not found")


def edit_byte(lines: Lines, i: int) -> None:
    lines[i] = lines[i].replace(b'"n":', b'"m":', 1)


def remove(lines: Lines, i: int) -> None:
    del lines[i]


def swap(lines: Lines, i: int) -> None:
    lines[i], lines[i + 1] = lines[i + 1], lines[i]


def reserialize(lines: Lines, i: int) -> None:
    lines[i] = json.dumps(json.loads(lines[i])).encode() + b"\n"


def reorder_keys(lines: Lines, i: int) -> None:
    record = json.loads(lines[i])
    lines[i] = json.dumps(dict(reversed(record.items())), separators=(",", ":")).encode() + b"\n"


# Seq 19 is the first record of the fourth batch of notes (seq 11 before init wrote profiles
# and the writer was set up); seq 10 is the first note, right after the setup records.
@pytest.mark.parametrize(("change", "seq", "words"), [
    (edit_byte, 19, "edited in place"),
    (remove, 19, "removed or reordered"),
    (swap, 19, "removed or reordered"),
    (reserialize, 19, "canonical"),
    (reorder_keys, 19, "canonical"),
    (edit_byte, 10, "edited in place"),
])
def test_tampering_names_the_first_bad_seq(tmp_path: Path, change: Callable[[Lines, int], None],
                                           seq: int, words: str) -> None:
    store = build(tmp_path)
    assert verify_store(store).ok
    rewrite(store, seq, change)
    report = verify_store(FileStore(store.dir))
    assert not report.ok
    assert report.first_bad_seq == seq
    assert words in (report.problem or "")

    result = CliRunner().invoke(cli, ["-C", str(tmp_path), "verify"])
    assert result.exit_code == 5
    assert f"first bad seq {seq}" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_edit_with_recomputed_hash_breaks_the_next_link(tmp_path: Path) -> None:
    from loopx.kernel.canonical import dumps, record_hash

    store = build(tmp_path)

    def forge(lines: Lines, i: int) -> None:
        record = json.loads(lines[i])
        record["payload"]["detail"]["n"] = 999
        record["hash"] = record_hash(record)
        lines[i] = dumps(record) + b"\n"

    rewrite(store, 19, forge)
    report = verify_store(FileStore(store.dir))
    assert report.first_bad_seq == 20 and "chain is broken" in (report.problem or "")


def test_truncation_is_caught_only_with_an_anchor(tmp_path: Path) -> None:
    store = build(tmp_path)
    head = verify_store(store)
    anchor = Anchor(head.head_seq, head.head_hash)
    last = store.segment_path(store.segments()[-1])
    lines = last.read_bytes().splitlines(keepends=True)
    last.write_bytes(b"".join(lines[:-3]))  # drop the last batch of three whole records

    cut = verify_store(FileStore(store.dir))
    assert cut.ok and cut.head_seq == head.head_seq - 3
    anchored = verify_store(FileStore(store.dir), anchor)
    assert not anchored.ok and anchored.first_bad_seq == head.head_seq - 2
    assert "truncated" in (anchored.problem or "")

    runner = CliRunner()
    ok = runner.invoke(cli, ["-C", str(tmp_path), "verify", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"] is True
    bad = runner.invoke(cli, ["-C", str(tmp_path), "verify", "--json",
                              "--expect", f"{anchor.seq}:{anchor.hash}"])
    assert bad.exit_code == 5
    assert json.loads(bad.stdout)["first_bad_seq"] == head.head_seq - 2


def test_anchor_with_a_different_hash_fails(tmp_path: Path) -> None:
    store = build(tmp_path)
    report = verify_store(store, Anchor(13, "e" * 64))
    assert not report.ok and report.first_bad_seq == 13


def test_bad_anchor_syntax_is_a_usage_error(tmp_path: Path) -> None:
    build(tmp_path)
    result = CliRunner().invoke(cli, ["-C", str(tmp_path), "verify", "--expect", "five:abc"])
    assert result.exit_code == 2 and "--expect" in result.stderr


def test_verify_reports_a_pending_tail_without_failing(tmp_path: Path) -> None:
    store = build(tmp_path)
    with open(store.segment_path(store.segments()[-1]), "ab") as f:
        f.write(b'{"half a rec')
    report = verify_store(FileStore(store.dir))
    assert report.ok and report.notes and "torn tail" in report.notes[0]


def repaired(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A workspace whose log holds one repair (of a writer killed mid-write); returns the
    quarantine file and the repair record's payload."""
    _, owner_token = init_workspace(tmp_path, "repaired")
    name, _ = leave_torn_tail(tmp_path, owner_token)
    assert register(tmp_path, owner_token, "next").returncode == 0
    [payload] = repairs(tmp_path)
    assert payload["quarantine_file"] == f"quarantine/{name}"
    return tmp_path / ".loopx" / "quarantine" / name, payload


@pytest.mark.parametrize(("damage", "words"), [
    (lambda f: f.write_bytes(f.read_bytes()[:-1]), "not kept"),
    (lambda f: f.write_bytes(b""), "holds 0 bytes"),
    (lambda f: f.write_bytes(f.read_bytes().replace(b"{", b"[", 1)), "not kept"),
    (lambda f: f.unlink(), "is missing"),
])
def test_a_quarantine_file_that_does_not_match_its_repair_record_fails(
        tmp_path: Path, damage: Callable[[Path], object], words: str) -> None:
    kept, payload = repaired(tmp_path)
    seq = next(r["seq"] for r in records(tmp_path) if r["schema_version"] == "store_repair_v0")
    assert verify_store(FileStore(tmp_path / ".loopx")).ok
    damage(kept)

    report = verify_store(FileStore(tmp_path / ".loopx"))
    assert not report.ok and report.first_bad_seq == seq
    assert report.where == payload["quarantine_file"] and words in (report.problem or "")

    result = CliRunner().invoke(cli, ["-C", str(tmp_path), "verify"])
    assert result.exit_code == 5
    assert f"first bad seq {seq} ({payload['quarantine_file']}): store_repair_v0" in result.stderr
    as_json = CliRunner().invoke(cli, ["-C", str(tmp_path), "verify", "--json"])
    assert as_json.exit_code == 5
    assert json.loads(as_json.stdout)["where"] == payload["quarantine_file"]


def test_a_quarantine_file_without_a_repair_record_is_a_note(tmp_path: Path) -> None:
    kept, _ = repaired(tmp_path)
    stray = kept.with_name("000000000001.jsonl.77.0123456789abcdef.torn")
    stray.write_bytes(b"bytes moved aside by a repairer that died before committing")
    (kept.parent / f".{stray.name}.tmp").write_bytes(b"")  # a copy in progress is not listed
    report = verify_store(FileStore(tmp_path / ".loopx"))
    assert report.ok
    [note] = report.notes
    assert note.startswith(f"quarantine/{stray.name} has no store_repair_v0 record: ")
