"""A writer killed with SIGKILL at random moments never loses an acknowledged record, and a
repairer killed mid-repair never leaves a repair record its quarantine file does not match."""

from __future__ import annotations

import json
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
    run,
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


@pytest.mark.parametrize("point", ["init-recorded", "init-written"])
@pytest.mark.parametrize("store", ["file", "postgres"])
def test_an_init_killed_anywhere_is_finished_by_running_it_again(
        tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        store: str, point: str) -> None:
    # Killed once its log is written (on a shared server, a genesis nobody else can undo),
    # before the owner token was handed over: the same command again hands over the token that
    # log was made for, instead of leaving a campaign nobody can ever act in.
    root = tmp_path / "project"
    where = []
    if store == "postgres":
        url = request.getfixturevalue("pg_url")
        monkeypatch.setenv("LOOPX_STORE", url)  # its password, for this process and the CLI's
        where = ["--store", url]
    token_file = tmp_path / "owner.token"
    init = ["init", "--goal-id", "kept", "--owner-token-file", str(token_file), *where, "--json"]
    kill_at(root, f"pause:{point}", *init)
    assert token_file.read_text() == ""  # created by the killed run, never filled
    pending = root / ".loopx" / "init-pending.json"
    assert pending.stat().st_mode & 0o077 == 0

    # Asked for another goal, it refuses and leaves everything as it was.
    other = run(root, "init", "--goal-id", "other", *where, "--json")
    assert other.returncode == 3, other.stdout + other.stderr
    assert "stopped early" in json.loads(other.stdout)["message"]
    assert pending.exists()

    again = run(root, *init)
    assert again.returncode == 0, again.stdout + again.stderr
    made = json.loads(again.stdout)
    assert made["resumed"] is True and made["goal_id"] == "kept"
    owner = token_file.read_text().strip()
    assert owner.startswith("lpx_") and not pending.exists()
    # One genesis, one profile batch: the log the killed run began, finished, not begun twice.
    workspace = find_workspace(root)
    with workspace.store() as log:
        kinds = [r["schema_version"] for r, _ in log.read()]
        assert kinds == ["workspace_v0"] + ["lane_profile_v0"] * 5
    assert register(root, owner, "first-agent").returncode == 0  # the token is the owner's
    assert run(root, "verify", "--json").returncode == 0
    done = run(root, "init", "--goal-id", "kept", *where, "--json")  # finished: nothing to do
    assert done.returncode == 3 and "already holds" in json.loads(done.stdout)["message"]


@pytest.mark.parametrize("store", ["file", "postgres"])
def test_a_failed_init_is_undone_unless_a_shared_log_may_hold_its_genesis(
        tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        store: str) -> None:
    import errno

    from loopx.kernel.errors import StorageError
    from loopx.kernel.store.postgres import PostgresStore
    from loopx.kernel.tokens import token_digest
    from loopx.workspace import create

    url = request.getfixturevalue("pg_url") if store == "postgres" else None

    def full_disk(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:  # the disk fills after the log was written
        patched.setattr(create, "copy_profiles", full_disk)
        with pytest.raises(StorageError) as failed:
            init_workspace(tmp_path, "undone", store=url)
    if store == "file":  # the log went with .loopx/: nothing to finish, nothing left
        assert failed.value.outcome == "no workspace was created"
        assert not (tmp_path / ".loopx").exists()
    else:  # the server holds the genesis: undoing here would orphan it
        assert "run the same `loopx init` again" in failed.value.outcome
        assert (tmp_path / ".loopx" / "init-pending.json").exists()
    workspace, token = init_workspace(tmp_path, "undone", store=url)
    with workspace.store() if url is None else PostgresStore(url) as log:
        first = log.get(1)["payload"]
        assert log.head().seq == 6
    assert first["owner_token_sha256"] == token_digest(token)
    assert not (tmp_path / ".loopx" / "init-pending.json").exists()


def test_a_resumed_init_writes_its_token_only_into_the_private_empty_file_it_left(
        tmp_path: Path) -> None:
    # Someone who can write the token file's directory plants a file there for the finishing
    # run to fill: one that others may read, or one that already holds something, is refused.
    root = tmp_path / "project"
    token_file = tmp_path / "owner.token"
    init = ["init", "--goal-id", "kept", "--owner-token-file", str(token_file), "--json"]
    kill_at(root, "pause:init-recorded", *init)
    for planted, mode in (("", 0o644), ("planted\n", 0o600)):
        token_file.write_text(planted)
        token_file.chmod(mode)
        refused = run(root, *init)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "already exists" in json.loads(refused.stdout)["message"]
        assert token_file.read_text() == planted
        assert (root / ".loopx" / "init-pending.json").exists()
    token_file.write_text("")
    token_file.chmod(0o600)
    done = run(root, *init)
    assert done.returncode == 0 and json.loads(done.stdout)["resumed"] is True
    assert token_file.read_text().startswith("lpx_")


def test_a_lanes_apply_killed_after_its_record_leaves_the_next_edit_its_base(
        tmp_path: Path) -> None:
    # Killed between recording the profiles and noting what the files are now based on, the
    # file's next edit looked as if it had been made on an older profile: refused until
    # --force, and `lanes pull` called it a conflict. The note written before the record tells
    # the next run that the file held exactly the profile now in force.
    root = tmp_path / "ws"
    root.mkdir()
    _, owner = init_workspace(root, "lanes-kill")
    lanes = root / ".loopx" / "lanes"
    executor = lanes / "research_executor.toml"
    synced = json.loads((root / ".loopx" / "lanes-synced.json").read_text())
    executor.write_text(executor.read_text().replace("max_attempts = 3", "max_attempts = 5"))
    kill_at(root, "pause:lanes-recorded", "lanes", "apply", "--json", token=owner)
    shown = json.loads(run(root, "lanes", "show", "--json").stdout)["profiles"]
    [recorded] = [p for p in shown if p["role"] == "research_executor"]
    assert recorded["max_attempts"] == 5 and recorded["seq"] > synced["research_executor"]
    # The bases were never written: still the old record's.
    assert json.loads((root / ".loopx" / "lanes-synced.json").read_text()) == synced

    executor.write_text(executor.read_text().replace("max_attempts = 5", "max_attempts = 6"))
    pulled = run(root, "lanes", "pull", "--json")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert json.loads(pulled.stdout)["pending"] == ["research_executor"]
    assert "max_attempts = 6" in executor.read_text()  # the edit is kept
    applied = run(root, "lanes", "apply", "--json", token=owner)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert [r["role"] for r in json.loads(applied.stdout)["recorded"]] == ["research_executor"]
    assert not (root / ".loopx" / "lanes-applying.json").exists()
    bases = json.loads((root / ".loopx" / "lanes-synced.json").read_text())
    assert bases["research_executor"] == json.loads(applied.stdout)["recorded"][0]["seq"]
