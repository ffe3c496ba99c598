"""Folded state and checkpoints: a new process reads only the tail, and a bad checkpoint is rebuilt."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from loopx.domains import FOLD_VERSION
from loopx.kernel.checkpoint import load_checkpoint, save_checkpoint
from loopx.kernel.checkpoint_delta import delta_path
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import ConflictError, WorkspaceError
from loopx.kernel.fold import KernelReducer, State, advance, fold_version
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import FileStore, MemoryStore
from loopx.kernel.tokens import new_token
from loopx.testing.lanes import Writer, executor_writer
from loopx.workspace import init_workspace

# init writes the genesis record and 5 role profiles (seq 1-6); the writer's grant, its todo and
# its claim follow (seq 7-9). The notes a test appends start after these.
SETUP = 9
SETUP_KINDS = {"workspace_v0": 1, "lane_profile_v0": 5, "agent_grant_v0": 1, "todo_item_v0": 1,
               "auto_research_lane_claim_v1": 1}


class CountingStore(FileStore):
    """Counts the records handed out by read(), to prove catch-up reads only the tail."""

    served = 0

    def read(self, after=None):  # type: ignore[no-untyped-def]
        for entry in super().read(after):
            CountingStore.served += 1
            yield entry


def note(writer: Writer, n: int) -> dict[str, Any]:
    return writer.tie({"payload": {"event": "note", "detail": {"n": n}}})


def build(tmp_path: Path, records: int, *, every: int = 100) -> tuple[Path, Writer]:
    """A workspace with ``records`` notes after the setup; its .loopx dir and the writer."""
    workspace, owner_token = init_workspace(tmp_path, "ledger-test")
    ledger = Ledger(workspace.store(), checkpoint_path=workspace.dir / "checkpoints" / "state.sqlite",
                    checkpoint_every=every)
    writer = executor_writer(ledger, owner_token, "a")
    assert ledger.store.head().seq == SETUP
    for start in range(0, records, 50):
        ledger.append([note(writer, n) for n in range(start, min(start + 50, records))],
                      creds=writer.creds, kind="rollout_event_v0")
    ledger.state()
    return workspace.dir, writer


def reopen(wdir: Path, **options: Any) -> Ledger:
    return Ledger(CountingStore(wdir), checkpoint_path=wdir / "checkpoints" / "state.sqlite",
                  **options)


def test_state_counts_kinds_and_knows_the_goal(tmp_path: Path) -> None:
    wdir, _ = build(tmp_path, 120)
    state = reopen(wdir).state()
    assert state["kernel"]["goal_id"] == "ledger-test"
    assert state["kernel"]["kinds"] == {**SETUP_KINDS, "rollout_event_v0": 120}
    assert state.seq == SETUP + 120


def test_new_process_reads_only_the_tail(tmp_path: Path) -> None:
    wdir, writer = build(tmp_path, 450, every=100)
    saved = meta(wdir / "checkpoints" / "state.sqlite")["cursor"]["seq"]
    assert SETUP + 350 <= saved <= SETUP + 450
    ledger = reopen(wdir)
    ledger.append([note(writer, 1), note(writer, 2)], creds=writer.creds,
                  kind="rollout_event_v0")
    CountingStore.served = 0
    fresh = reopen(wdir, checkpoint_every=10**9)
    state = fresh.state()
    assert fresh.checkpoint_status == "checkpoint used"
    assert CountingStore.served == SETUP + 452 - saved
    assert state.seq == SETUP + 452


def full_rebuild(wdir: Path) -> State:
    state = State.initial()
    advance(state, FileStore(wdir).read())
    return state


def meta(path: Path) -> dict[str, Any]:
    """A checkpoint's meta table (the cursor parsed)."""
    with sqlite3.connect(path) as db:
        out: dict[str, Any] = dict(db.execute("SELECT key, value FROM meta"))
    db.close()
    out["cursor"] = json.loads(out["cursor"])
    return out


def edit(path: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    db = sqlite3.connect(path)
    with db:
        for sql, args in statements:
            db.execute(sql, args)
    db.close()


@pytest.mark.parametrize("damage", ["delete", "wrong_hash", "wrong_version", "wrong_format",
                                    "garbage", "beyond_head"])
def test_checkpoint_that_disagrees_is_rebuilt(tmp_path: Path, damage: str) -> None:
    wdir, _ = build(tmp_path, 300)
    path = wdir / "checkpoints" / "state.sqlite"
    cursor = meta(path)["cursor"]
    lie = ("UPDATE entries SET body = '999999' WHERE part = 'kernel' AND name = 'records'", ())
    set_meta = "UPDATE meta SET value = ? WHERE key = ?"
    if damage == "delete":
        path.unlink()
    elif damage == "wrong_hash":
        edit(path, lie, (set_meta, (json.dumps({**cursor, "hash": "f" * 64}), "cursor")))
    elif damage == "wrong_version":
        edit(path, lie, (set_meta, ("kernel:0", "fold_version")))
    elif damage == "wrong_format":
        edit(path, lie, (set_meta, ("1", "checkpoint_format")))
    elif damage == "garbage":
        path.write_text("{not json")
    elif damage == "beyond_head":
        edit(path, lie, (set_meta, (json.dumps({**cursor, "seq": cursor["seq"] + 10}),
                                    "cursor")))
    fresh = reopen(wdir, checkpoint_every=10**9)
    state = fresh.state()
    assert fresh.checkpoint_status != "checkpoint used"
    assert state.parts == full_rebuild(wdir).parts
    assert state["kernel"]["records"] == SETUP + 300


def test_checkpoint_is_sqlite_with_fold_version(tmp_path: Path) -> None:
    store = MemoryStore()
    ledger = Ledger(store)
    ledger.append_genesis({"format_version": 1, "goal_id": "g", "owner_token_sha256": "0" * 64,
                           "loopx_version": "t"}, agent_id="owner")
    state = ledger.state()
    path = tmp_path / "cp.sqlite"
    save_checkpoint(path, state, fold_version())
    assert meta(path)["fold_version"] == fold_version() == (
        f"kernel:{KernelReducer.version},lanes:{FOLD_VERSION}")
    loaded, status = load_checkpoint(path, store, fold_version())
    assert status == "checkpoint used" and loaded is not None
    assert loaded.parts == state.parts and loaded.cursor == state.cursor


def test_a_reloaded_state_lists_what_the_fold_lists_in_its_order(tmp_path: Path) -> None:
    wdir, writer = build(tmp_path, 120, every=50)
    # A ledger that loaded the checkpoint lazily folds more records and saves again: the rows
    # it changed, as a delta beside the file; then (a table read whole) a copy of the loaded
    # file with those rows written.
    path = wdir / "checkpoints" / "state.sqlite"
    ledger = reopen(wdir, checkpoint_every=10)
    ledger.append([note(writer, n) for n in range(80)], creds=writer.creds,
                  kind="rollout_event_v0")
    ledger.state()
    assert ledger.checkpoint_status == "checkpoint used"
    assert meta(path)["cursor"]["seq"] < SETUP + 200
    assert json.loads(delta_path(path).read_bytes())["cursor"]["seq"] == SETUP + 200
    for whole in (False, True):
        loaded = reopen(wdir, checkpoint_every=10**9)
        state = loaded.state()
        assert loaded.checkpoint_status == "checkpoint used" and state.seq == SETUP + 200
        assert json.dumps(state.parts) == json.dumps(full_rebuild(wdir).parts)
        if not whole:
            save_checkpoint(path, state, loaded.version)  # read whole by the line above
            assert meta(path)["cursor"]["seq"] == SETUP + 200 and not delta_path(path).exists()


def test_append_needs_a_genesis_record_and_genesis_only_once() -> None:
    ledger = Ledger(MemoryStore())
    with pytest.raises(WorkspaceError):
        ledger.append({"payload": {"event": "note"}}, creds=Credentials("owner", new_token()),
                      kind="rollout_event_v0")
    genesis = {"format_version": 1, "goal_id": "g", "owner_token_sha256": "0" * 64,
               "loopx_version": "t"}
    ledger.append_genesis(genesis, agent_id="owner")
    with pytest.raises(WorkspaceError):
        ledger.append_genesis(genesis, agent_id="owner")


def test_expect_seq_through_the_ledger(tmp_path: Path) -> None:
    wdir, writer = build(tmp_path, 3)
    ledger = reopen(wdir)
    with pytest.raises(ConflictError):
        ledger.append(note(writer, 9), creds=writer.creds, kind="rollout_event_v0",
                      expect_seq=1)
    [record] = ledger.append(note(writer, 9), creds=writer.creds, kind="rollout_event_v0",
                             expect_seq=SETUP + 3)
    assert record["seq"] == SETUP + 4
