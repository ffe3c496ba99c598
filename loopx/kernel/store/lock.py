"""The writers' lock of the file store: one ``flock`` on ``.loopx/lock``, opened once per store.

An uncontended acquire is one ``flock(LOCK_EX | LOCK_NB)`` on a descriptor kept open. A
contended one waits in the kernel's queue with a blocking ``flock``, so the lock passes to a
waiter the moment it is released (polling with ``LOCK_NB`` made most waiters sleep past the
release: with 8 writers, three flock calls in four failed and slept 1 ms). Python cannot put a deadline on a
blocking ``flock`` directly, so ``lock_timeout`` is honoured in one of two ways:

- in the main thread, when the program uses neither SIGALRM nor the real-time timer (the CLI,
  agents, benchmarks), the caller blocks in ``flock`` itself under a one-shot ``setitimer``
  whose handler raises; the handler and timer are put back afterwards. This is the cheapest
  hand-over: the kernel wakes the caller directly.
- anywhere else (other threads, where a signal only makes Python retry the call, or a program
  with its own SIGALRM), the blocking ``flock`` runs in a small waiter thread per lock (started
  on the first contention, ended after a few idle seconds) and the caller waits for it with a
  deadline. A waiter whose caller gave up keeps its place in the queue; a later acquire takes
  that place over, and if none comes, the waiter releases the lock as soon as it gets it.

Polling with ``LOCK_NB`` and short sleeps is not used at all.

The lock belongs to the open file description, so the OS releases it when the holder's process
dies, however it dies (SIGKILL included). After a ``fork`` the child opens its own descriptor:
the inherited one shares the parent's lock.

This replaces ``filelock``, whose acquire + release cost about 270 us an append (some 30
``getpid`` and 11 ``stat`` calls) against about 1 us for the ``flock`` itself. Its portability
bought nothing here: the file store is POSIX-only anyway (``fdatasync``, ``O_DIRECTORY``).
"""

from __future__ import annotations

# The C functions and constants behind ``signal``'s wrappers, which turn every handler they
# return into an enum member: a contended acquire (3 in 4 with 8 writers) saves about 4 of its
# 6 us, and a read that never locks does not build those enums at import (about 0.5 ms).
import _signal
import fcntl
import os
import threading
import time
from pathlib import Path

IDLE_SECONDS = 5.0  # a waiter thread with nothing to wait for ends after this long


class LockTimeoutExpired(Exception):
    """The lock was not granted within the timeout."""


class FileLockPath:
    """An exclusive lock on one file, shared with every process of the host that takes it."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._pid = 0
        self._cond = threading.Condition(threading.Lock())
        self._waiter: threading.Thread | None = None
        self._pending = False  # the waiter thread is in (or about to enter) a blocking flock
        self._wanted = False  # a caller is waiting for that flock to be granted
        self._granted = False  # the flock returned while wanted: the caller now holds the lock
        self._error: OSError | None = None
        self._generation = 0  # bumped when the descriptor is closed: older waiters are stale

    def acquire(self) -> None:
        """Take the lock, waiting at most ``timeout`` seconds.

        Raises:
            LockTimeoutExpired: not granted in time.
            OSError: the lock file cannot be opened or locked.
        """
        main = False
        with self._cond:
            fd = self._descriptor()
            if not self._pending:
                # A pending waiter must not race this call: a flock it is blocked in would
                # return "granted" once this descriptor holds the lock, and then release it.
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    pass
                main = _timer_free()
            if not main:
                # Wanted before the condition is let go: a waiter whose flock returns in
                # between would otherwise see nobody wanting it, pass the lock on, and leave
                # this caller waiting for a grant that never comes.
                self._wanted, self._granted, self._error = True, False, None
                if not self._pending:
                    self._pending = True
                    self._start_waiter()
        if main:
            # Not under the condition: a stale waiter may need it to pass the lock on.
            _wait_with_timer(fd, self.timeout)
            return
        with self._cond:
            deadline = time.monotonic() + self.timeout
            try:
                while not self._granted and self._error is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LockTimeoutExpired
                    self._cond.wait(left)
                if self._error is not None:
                    raise self._error
            finally:
                self._wanted = False
            self._granted = False

    def release(self) -> None:
        """Release the lock this store holds."""
        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the descriptor (a later acquire opens it again); a waiter left in the queue
        releases the lock as soon as it gets it and ends."""
        with self._cond:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None
            self._detach()

    def _detach(self) -> None:
        # A waiter still queued on the old descriptor must not grant the next one: it would
        # hold the lock through a descriptor no release() reaches.
        self._generation += 1
        self._waiter, self._pending = None, False
        self._cond.notify_all()

    def _descriptor(self) -> int:
        pid = os.getpid()
        if self._fd is None or self._pid != pid:
            # A fresh descriptor after a fork: the inherited one shares the parent's lock (and
            # the waiter thread did not survive the fork). Closing the inherited copy lets the
            # lock go with the parent's, should the parent die holding it.
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError:
                    pass
            self._detach()
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._pid = pid
        return self._fd

    def _start_waiter(self) -> None:
        if self._waiter is not None and self._waiter.is_alive():
            self._cond.notify_all()
            return
        assert self._fd is not None
        # The waiter locks through its own duplicate of the descriptor (the same open file
        # description, so the same lock): closing the store cannot recycle the number it uses.
        self._waiter = threading.Thread(target=self._wait_loop,
                                        args=(os.dup(self._fd), self._generation),
                                        name="loopx-store-lock", daemon=True)
        self._waiter.start()

    def _wait_loop(self, fd: int, generation: int) -> None:
        try:
            while True:
                with self._cond:
                    while self._generation == generation and not self._pending:
                        if (not self._cond.wait(IDLE_SECONDS) and not self._pending
                                and self._generation == generation):
                            self._waiter = None  # idle for a while: the next contention starts one
                            return
                    if self._generation != generation:
                        return
                error = None
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError as exc:
                    error = exc
                with self._cond:
                    if self._generation != generation:
                        if error is None:
                            fcntl.flock(fd, fcntl.LOCK_UN)  # the store closed meanwhile
                        return
                    self._pending = False
                    if error is not None:
                        self._error = error
                    elif self._wanted:
                        self._granted = True
                    else:
                        fcntl.flock(fd, fcntl.LOCK_UN)  # its caller gave up: pass it on
                    self._cond.notify_all()
        finally:
            os.close(fd)


class _Alarm(Exception):
    """The timer of a main-thread wait went off."""


_alarm_armed = False


def _on_alarm(signum: int, frame: object) -> None:
    if _alarm_armed:  # a late alarm, after the wait ended, is ignored
        raise _Alarm


def _timer_free() -> bool:
    """Whether this thread can bound a wait with SIGALRM: it is the main thread (the only one
    a Python signal handler runs in) and nobody else uses SIGALRM or the real-time timer."""
    return (threading.current_thread() is threading.main_thread()
            and _signal.getsignal(_signal.SIGALRM) == _signal.SIG_DFL
            and _signal.getitimer(_signal.ITIMER_REAL) == (0.0, 0.0))


def _wait_with_timer(fd: int, timeout: float) -> None:
    """Wait for the lock in a blocking flock bounded by a SIGALRM timer (main thread only);
    the handler and the timer are given back however the wait ends.

    Raises:
        LockTimeoutExpired: the timer went off first.
    """
    global _alarm_armed
    previous = _signal.signal(_signal.SIGALRM, _on_alarm)
    try:
        _alarm_armed = True
        _signal.setitimer(_signal.ITIMER_REAL, timeout)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _alarm_armed = False
        except _Alarm:
            _alarm_armed = False
            # The alarm may have gone off just after flock returned: a non-blocking try (a
            # no-op on a descriptor that holds the lock) tells which.
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockTimeoutExpired from None
    finally:
        _alarm_armed = False
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _signal.signal(_signal.SIGALRM, previous)
