"""The file store on a hostile disk: a leftover quarantine file, a full disk, a read-only or
foreign workspace. Each ends in a ``storage`` error (exit 11, JSON with ``--json``) with
nothing written, or in a repair record its quarantine file matches byte for byte."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faults_support import (
    assert_repairs_kept,
    leave_torn_tail,
    quarantine_files,
    records,
    register,
    repairs,
    run,
    snapshot,
    storage_error,
    store_of,
    torn_tail,
    verify_ok,
)

from loopx.kernel.checks import Credentials
from loopx.kernel.errors import LoopxError, StorageError
from loopx.kernel.store.fs import FAULT_ENV
from loopx.work.agents import register_agent
from loopx.workspace import Workspace, init_workspace

NOBODY = 65534


def test_storage_errors_have_an_exit_code_of_their_own() -> None:
    def leaves(cls: type[LoopxError]) -> list[type[LoopxError]]:
        return [cls] + [c for sub in cls.__subclasses__() for c in leaves(sub)]

    others = {c.exit_code for c in leaves(LoopxError) if not issubclass(c, StorageError)}
    assert StorageError.exit_code == 11 and StorageError.exit_code not in others
    cli_doc = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    assert "\n| 11 | `storage` |" in cli_doc and "\n| `path`, `errno` | `storage` |" in cli_doc


# -- a quarantine file that is not what its name promises -------------------------------------

@pytest.mark.parametrize("leftover", ["empty", "short"])
def test_a_leftover_short_quarantine_file_is_replaced_not_trusted(tmp_path: Path,
                                                                  leftover: str) -> None:
    """What a repairer killed between creating and filling the file (or out of space there)
    left: the next repairer writes the bytes again instead of vouching for the stub."""
    _, owner_token = init_workspace(tmp_path, "leftover")
    name, torn = leave_torn_tail(tmp_path, owner_token)
    stub = b"" if leftover == "empty" else torn[: len(torn) // 3]
    quarantine = tmp_path / ".loopx" / "quarantine"
    (quarantine / name).write_bytes(stub)

    done = register(tmp_path, owner_token, "next")
    assert done.returncode == 0, done.stderr
    [repair] = repairs(tmp_path)
    assert repair["quarantine_file"] == f"quarantine/{name}"
    assert (quarantine / name).read_bytes() == torn
    assert_repairs_kept(tmp_path)
    assert quarantine_files(tmp_path) == [name]
    assert verify_ok(tmp_path)["notes"] == []


# -- a full disk, by fault injection ---------------------------------------------------------

def test_enospc_while_quarantining_writes_nothing_and_keeps_the_tail(tmp_path: Path) -> None:
    _, owner_token = init_workspace(tmp_path, "full")
    name, torn = leave_torn_tail(tmp_path, owner_token)
    before = snapshot(tmp_path / ".loopx")

    error = storage_error(register(tmp_path, owner_token, "a", fault="enospc:quarantine"))
    assert error["errno"] == "ENOSPC"
    assert error["path"] == str(tmp_path / ".loopx" / "quarantine" / name)
    assert "nothing was written" in error["message"] and "free some space" in error["hint"]
    # The torn tail is still in place for a later writer; no stub, no temporary file.
    assert snapshot(tmp_path / ".loopx") == before
    assert quarantine_files(tmp_path) == []

    text = run(tmp_path, "agent", "register", "--agent-id", "a", "--role", "research_executor",
               token=owner_token, fault="enospc:quarantine")
    assert text.returncode == 11 and text.stdout == "" and "Traceback" not in text.stderr
    assert text.stderr.startswith(f"loopx: cannot keep a torn tail in {error['path']}: ")
    assert "(ENOSPC); nothing was written\nhint: " in text.stderr

    assert register(tmp_path, owner_token, "a").returncode == 0
    assert (tmp_path / ".loopx" / "quarantine" / name).read_bytes() == torn
    assert_repairs_kept(tmp_path)
    assert verify_ok(tmp_path)["notes"] == []


def test_enospc_mid_write_takes_the_partial_write_back(tmp_path: Path) -> None:
    _, owner_token = init_workspace(tmp_path, "full")
    head = store_of(tmp_path).head()
    before = snapshot(tmp_path / ".loopx")

    error = storage_error(register(tmp_path, owner_token, "a", fault="enospc:segment"))
    assert error["errno"] == "ENOSPC"
    assert error["path"] == str(store_of(tmp_path).segment_path(1))
    assert snapshot(tmp_path / ".loopx") == before  # the half that reached the file is gone
    assert store_of(tmp_path).head() == head and torn_tail(tmp_path) == b""
    assert verify_ok(tmp_path)["notes"] == []
    assert register(tmp_path, owner_token, "a").returncode == 0


def test_the_python_api_raises_storage_error(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, owner_token = init_workspace(tmp_path, "api")
    ledger = workspace.ledger()
    owner = Credentials("owner", owner_token)
    before = snapshot(workspace.dir)
    monkeypatch.setenv(FAULT_ENV, "enospc:segment")
    with pytest.raises(StorageError) as err:
        register_agent(ledger, owner, "a", "research_executor")
    assert err.value.exit_code == 11 and err.value.errno_name == "ENOSPC"
    assert err.value.to_json()["path"] == str(workspace.store().segment_path(1))
    assert snapshot(workspace.dir) == before
    monkeypatch.delenv(FAULT_ENV)
    register_agent(ledger, owner, "a", "research_executor")  # the same ledger carries on


def test_an_unusable_lock_file_is_a_storage_error_and_leaves_no_lock_held(tmp_path: Path
                                                                          ) -> None:
    workspace, owner_token = init_workspace(tmp_path, "lock")
    ledger = workspace.ledger()
    owner = Credentials("owner", owner_token)
    lock = workspace.dir / "lock"
    lock.unlink()
    lock.mkdir()  # opening it for writing fails (EISDIR) for any user, root included
    with pytest.raises(StorageError) as err:
        register_agent(ledger, owner, "a", "research_executor")
    assert err.value.errno_name == "EISDIR" and err.value.path == str(lock)
    lock.rmdir()
    # The failed attempt left nothing held: this ledger and another process both write.
    register_agent(ledger, owner, "a", "research_executor")
    assert register(tmp_path, owner_token, "b").returncode == 0
    register_agent(ledger, owner, "c", "research_executor")
    agents = [r["payload"]["agent_id"] for r in records(tmp_path)
              if r["schema_version"] == "agent_grant_v0"]
    assert agents == ["a", "b", "c"]


# -- a full disk, for real (a small tmpfs; needs root) ---------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the fault-injection tests cover ENOSPC")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` up to the last byte; returns the file whose removal frees it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return filler
    finally:
        os.close(fd)


def test_a_full_disk_keeps_the_torn_tail_and_writes_nothing(small_disk: Path) -> None:
    root = small_disk / "project"
    _, owner_token = init_workspace(root, "tmpfs")
    name, torn = leave_torn_tail(root, owner_token)
    filler = fill(small_disk)
    before = snapshot(root / ".loopx")

    error = storage_error(register(root, owner_token, "a"))
    assert error["errno"] == "ENOSPC"
    assert error["path"] == str(root / ".loopx" / "quarantine" / name)
    assert snapshot(root / ".loopx") == before and quarantine_files(root) == []

    filler.unlink()
    assert register(root, owner_token, "a").returncode == 0
    assert (root / ".loopx" / "quarantine" / name).read_bytes() == torn
    assert_repairs_kept(root)
    assert verify_ok(root)["notes"] == []


def test_init_on_a_full_disk_leaves_nothing_behind(small_disk: Path, tmp_path: Path) -> None:
    fill(small_disk)
    root = small_disk / "project"
    token_file = tmp_path / "owner.token"
    done = run(root, "init", "--json", "--owner-token-file", str(token_file))
    error = storage_error(done)
    assert error["errno"] == "ENOSPC" and "no workspace was created" in error["message"]
    assert not (root / ".loopx").exists() and not token_file.exists()


# -- a read-only or foreign workspace -------------------------------------------------------

def _read_only_mode() -> str | None:
    """How to make a directory read-only for a child process: a read-only bind mount in a
    private mount namespace as root (root ignores permission bits), else the permission bits."""
    if os.geteuid() != 0:
        return "chmod"
    try:
        probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                               capture_output=True, check=False)
    except FileNotFoundError:
        return None
    return "bind" if probe.returncode == 0 else None


READ_ONLY = _read_only_mode()
# A read-only mount says EROFS; a directory without write permission says EACCES.
READ_ONLY_ERRNO = "EROFS" if READ_ONLY == "bind" else "EACCES"


@contextmanager
def read_only(directory: Path) -> Iterator[tuple[str, ...]]:
    """A command prefix under which ``directory`` is read-only (empty when the permission bits
    are used instead, for as long as the context lasts)."""
    if READ_ONLY is None:
        pytest.skip("cannot make a directory read-only for root here (no unshare)")
    if READ_ONLY == "bind":
        yield ("unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh", str(directory))
        return
    paths = [directory, *directory.rglob("*")]
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(modes[p] & ~0o222)
    try:
        yield ()
    finally:
        for p in paths:
            p.chmod(modes[p])


def test_a_read_only_workspace_refuses_writes_and_still_reads(tmp_path: Path) -> None:
    _, owner_token = init_workspace(tmp_path, "ro")
    before = snapshot(tmp_path / ".loopx")
    with read_only(tmp_path / ".loopx") as prefix:
        error = storage_error(register(tmp_path, owner_token, "a", prefix=prefix))
        text = run(tmp_path, "agent", "register", "--agent-id", "a", "--role",
                   "research_executor", token=owner_token, prefix=prefix)
        log = run(tmp_path, "log", "--json", prefix=prefix)
        verify = run(tmp_path, "verify", "--json", prefix=prefix)
    assert error["errno"] == READ_ONLY_ERRNO
    assert error["path"] == str(tmp_path / ".loopx" / "lock")
    assert error["message"].endswith("nothing was written")
    assert ("read-only" if READ_ONLY_ERRNO == "EROFS" else "permissions") in error["hint"]
    assert text.returncode == 11 and text.stdout == "" and "Traceback" not in text.stderr
    assert text.stderr.startswith(f"loopx: cannot take the store lock {error['path']}: ")
    assert "\nhint: " in text.stderr
    assert log.returncode == 0 and len(log.stdout.splitlines()) == 6
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True
    assert snapshot(tmp_path / ".loopx") == before


def test_init_in_a_read_only_directory_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    token_file = tmp_path / "owner.token"
    with read_only(root) as prefix:
        done = run(root, "init", "--json", "--owner-token-file", str(token_file), prefix=prefix)
    error = storage_error(done)
    assert error["errno"] == READ_ONLY_ERRNO and error["path"] == str(root / ".loopx")
    assert "no workspace was created" in error["message"]
    assert list(root.iterdir()) == [] and not token_file.exists()


def test_story_out_to_a_read_only_directory_publishes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    _, owner_token = init_workspace(root, "story")
    narrator_token = tmp_path / "narrator.token"
    done = run(root, "agent", "register", "--agent-id", "nar", "--role", "product_narrator",
               "--out-token-file", str(narrator_token), token=owner_token)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "site"
    out.mkdir()
    head = store_of(root).head()
    with read_only(out) as prefix:
        done = run(root, "story", "--out", str(out / "story.md"), "--agent-id", "nar",
                   "--token-file", str(narrator_token), "--json", prefix=prefix)
    error = storage_error(done)
    # Named by the path the user gave, not by a temporary file's name.
    assert error["errno"] == READ_ONLY_ERRNO and error["path"] == str(out / "story.md")
    assert "nothing was published" in error["message"]
    assert store_of(root).head() == head and list(out.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the read-only test covers EACCES")
def test_a_foreign_workspace_raises_storage_error_from_the_python_api() -> None:
    """As root, write to a root-owned workspace from a child process switched to nobody."""
    base = Path(tempfile.mkdtemp(prefix="loopx-foreign-"))  # under /tmp, which nobody can reach
    try:
        base.chmod(0o755)
        workspace, owner_token = init_workspace(base, "foreign")
        owner = Credentials("owner", owner_token)
        register_agent(workspace.ledger(), owner, "warm", "research_executor")  # imports done
        head = workspace.store().head()
        outcome = _as_nobody(lambda: register_agent(Workspace(base).ledger(), owner, "a",
                                                    "research_executor"))
        assert outcome == {"error": "storage", "errno": "EACCES", "exit_code": 11,
                           "path": str(workspace.dir / "lock"), "uid_in_hint": True}
        assert workspace.store().head() == head
    finally:
        shutil.rmtree(base)


def _as_nobody(action: Callable[[], object]) -> dict[str, object]:
    """Run ``action`` in a forked child as uid/gid nobody; what it raised, as plain data."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                action()
                out: dict[str, object] = {"error": None}
            except StorageError as exc:
                data = exc.to_json()
                out = {"error": data["error"], "errno": data["errno"], "path": data["path"],
                       "exit_code": exc.exit_code,
                       "uid_in_hint": f"runs as uid {NOBODY}" in str(exc.hint)}
            except BaseException as exc:  # noqa: BLE001  (reported to the parent as a failure)
                out = {"error": repr(exc)}
            os.write(write_end, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    result: dict[str, object] = json.loads(data)
    return result


def test_a_checkpoint_that_cannot_be_written_leaves_no_temp_file(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    import errno as errno_codes

    from loopx.kernel.checkpoint import save_checkpoint
    from loopx.kernel.fold import State, fold_version

    def full(fd: int) -> None:
        raise OSError(errno_codes.ENOSPC, "No space left on device")

    monkeypatch.setattr("loopx.kernel.checkpoint.os.fsync", full)
    target = tmp_path / "checkpoints" / "state.json"
    with pytest.raises(OSError):
        save_checkpoint(target, State.initial(), fold_version())
    assert list(target.parent.iterdir()) == []
