"""The file store's writers' lock against other real processes: a holder that does not let go
is a ``lock_timeout`` with nothing written, in the main thread and in any other; a holder killed
with SIGKILL lets go; writers in many processes and threads lose nothing."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loopx.kernel.errors import LockTimeout
from loopx.kernel.store.file import FileStore
from loopx.kernel.verify import verify_store
from loopx.testing.store_conformance import unsealed

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("HELD", flush=True)
time.sleep(600)
"""


def record(i: int = 0) -> dict:
    """One unsealed record as a writer hands it to the store."""
    return unsealed(i=i)


def new_store(root: Path, **kwargs: float) -> FileStore:
    store = FileStore(root / ".loopx", **kwargs)
    store.create()
    store.append([record()])
    return store


@contextmanager
def held(lock: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store lock until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "HELD\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def in_thread(fn) -> BaseException | None:  # type: ignore[no-untyped-def]
    """Run ``fn`` in a thread that is not the main one; return what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001  (handed back to the test)
            raised.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return raised[0] if raised else None


def test_a_lock_held_past_the_timeout_is_a_lock_timeout_in_the_main_thread(tmp_path: Path) -> None:
    store = new_store(tmp_path, lock_timeout=0.3)
    with held(store.dir / "lock"):
        with pytest.raises(LockTimeout) as err:
            store.append([record(1)])
        assert "0.3 s" in err.value.message
        assert store.head().seq == 1  # nothing written
    # the timer and the handler it borrowed are given back
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert [r["seq"] for r in store.append([record(2)])] == [2]
    store.close()


def test_a_lock_held_past_the_timeout_is_a_lock_timeout_in_another_thread(tmp_path: Path) -> None:
    store = new_store(tmp_path, lock_timeout=0.3)
    with held(store.dir / "lock"):
        assert isinstance(in_thread(lambda: store.append([record(1)])), LockTimeout)
        assert store.head().seq == 1
        # A second try takes over the place in the queue the first one left: it times out too.
        assert isinstance(in_thread(lambda: store.append([record(2)])), LockTimeout)
        # Closing the store leaves its waiter queued on the old descriptor, bound to let go.
        store.close()
    # Once the holder is gone, the abandoned waiter passes the lock on: another process and
    # another store can both take it (with time to spare: the test asserts no timing).
    store = FileStore(tmp_path / ".loopx", lock_timeout=120)
    assert in_thread(lambda: store.append([record(3)])) is None
    other = subprocess.run([sys.executable, "-c", HOLDER.replace("time.sleep(600)", ""),
                            str(store.dir / "lock")], check=True, capture_output=True, text=True,
                           timeout=60)
    assert other.stdout == "HELD\n"
    assert [r["payload"]["detail"]["i"] for r, _ in store.read()] == [0, 3]
    store.close()


def test_a_grant_while_a_thread_starts_waiting_reaches_it(tmp_path: Path) -> None:
    """Another process lets the lock go right after a thread has started its waiter and before
    it waits for the grant: the grant is the thread's (it used to be passed on, and the thread
    waited out its timeout)."""
    store = new_store(tmp_path, lock_timeout=10)
    lock = store._lock
    holder = os.open(store.dir / "lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    caller: dict[str, object] = {}

    class LetGoOnFirstExit(threading.Condition):
        def __exit__(self, *exc: object) -> None:
            super().__exit__(*exc)
            if threading.get_ident() == caller.get("id") and caller.pop("first", False):
                # The caller has started the waiter and let the condition go: release the
                # holder's lock now, and let the waiter take it before the caller goes on.
                fcntl.flock(holder, fcntl.LOCK_UN)
                deadline = time.monotonic() + 10
                while lock._pending and time.monotonic() < deadline:
                    time.sleep(0.001)

    lock._cond = LetGoOnFirstExit(threading.Lock())

    def append() -> None:
        caller.update(id=threading.get_ident(), first=True)
        store.append([record(1)])

    try:
        assert in_thread(append) is None
        assert store.head().seq == 2
    finally:
        os.close(holder)
        store.close()


def test_a_program_that_uses_sigalrm_keeps_it(tmp_path: Path) -> None:
    """The main thread borrows SIGALRM only when nobody uses it; otherwise it waits as any
    other thread does, and the program's handler stays."""
    fired: list[int] = []

    def mine(signum: int, frame: object) -> None:
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        store = new_store(tmp_path, lock_timeout=0.3)
        with held(store.dir / "lock"), pytest.raises(LockTimeout):
            store.append([record(1)])
        assert signal.getsignal(signal.SIGALRM) is mine and fired == []
        store.close()
    finally:
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("thread", ["main", "other"])
def test_a_holder_killed_with_sigkill_lets_go(tmp_path: Path, thread: str) -> None:
    store = new_store(tmp_path, lock_timeout=120)
    with held(store.dir / "lock") as holder:
        waiting = threading.Timer(0.2, lambda: os.kill(holder.pid, signal.SIGKILL))
        waiting.start()  # killed while this writer waits for it
        try:
            if thread == "main":
                store.append([record(1)])
            else:
                assert in_thread(lambda: store.append([record(1)])) is None
        finally:
            waiting.cancel()
        holder.wait()
        assert holder.returncode == -signal.SIGKILL
    assert [r["seq"] for r, _ in store.read()] == [1, 2]
    store.close()


WRITER = """
import json, sys, threading
from loopx.kernel.kinds import new_record_id
from loopx.kernel.store.file import FileStore

path, name, appends, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.stdin.readline()
out_lock = threading.Lock()

def run(t):
    # One store per thread (a FileStore is used by one thread at a time); the main thread's
    # waits use the timer, the others' the waiter thread.
    store = FileStore(path, lock_timeout=120)
    for i in range(appends):
        batch = [{"schema_version": "rollout_event_v0", "record_id": new_record_id(),
                  "goal_id": "conformance", "agent_id": name, "lane_role": "owner",
                  "capability": None, "todo_id": None, "epoch": None,
                  "visibility": "public", "provenance": "self_reported",
                  "payload": {"event": "note", "detail": {"i": i, "j": j}}}
                 for j in range(1 + i % 3)]
        sealed = store.append(batch)
        with out_lock:
            print(json.dumps([[r["seq"], r["record_id"]] for r in sealed]), flush=True)
    store.close()

others = [threading.Thread(target=run, args=(t,)) for t in range(1, threads)]
for th in others:
    th.start()
run(0)
for th in others:
    th.join()
"""


def test_writers_in_many_processes_and_threads_lose_nothing(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.dir), f"p{i}", "30", "3"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for i in range(6)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()  # every writer starts at once
    acked: dict[int, str] = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        for line in out.splitlines():
            acked.update((seq, rid) for seq, rid in json.loads(line))
    records = [r for r, _ in store.read()]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len(records) == 1 + len(acked) == 1 + 6 * 3 * (10 + 20 + 30)
    assert all(records[seq - 1]["record_id"] == rid for seq, rid in acked.items())
    assert verify_store(store, workspace_rules=False).ok
    store.close()


def test_a_forked_child_writes_through_a_lock_of_its_own(tmp_path: Path) -> None:
    store = new_store(tmp_path)  # the parent's lock descriptor is open
    pid = os.fork()
    if pid == 0:  # the child: the same store object, which must not use the parent's lock
        try:
            store.append([record(1)])
            store.close()
        finally:
            os._exit(0 if len(list(store.read())) == 2 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.append([record(2)])
    assert [r["payload"]["detail"]["i"] for r, _ in store.read()] == [0, 1, 2]
    store.close()
