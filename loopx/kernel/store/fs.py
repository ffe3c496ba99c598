"""Small filesystem steps the file store shares: durable directory entries, whole writes, files
replaced durably, and the test-only fault points of its write path."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

# Test-only: a comma-separated list of ``ACTION:POINT`` (``pause``, ``enospc``, ``torn``). Never
# set it in production; tests/test_store_faults.py drives it to stop a writer at its worst
# moments.
FAULT_ENV = "LOOPX_TEST_FAULT"


def fsync_dir(path: Path) -> None:
    """Make a directory entry (a new file or a rename) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` durably: a temp file beside it, fsynced, renamed over it,
    the directory fsynced. A crash leaves the old file or the new one; a failure, no temp file.
    ``mode`` sets the new file's permission bits exactly; without it the umask decides."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # as open(): umask
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_all(fd: int, data: bytes, point: str | None = None) -> None:
    """Write all of ``data``, looping on short writes.

    At a fault ``point`` (tests only) write half of it first, then fail as a full disk does
    (``enospc``: a disk that fills up mid-write keeps what fitted) or wait to be killed
    (``torn``: a writer killed mid-write).
    """
    view = memoryview(data)
    action = fault(point) if point is not None else None
    if action in ("enospc", "torn"):
        os.write(fd, view[: len(view) // 2])
        if action == "torn":
            _pause(f"torn:{point}")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    while view:
        view = view[os.write(fd, view):]


def fault(point: str) -> str | None:
    """The test-only fault ``LOOPX_TEST_FAULT`` sets for ``point``, if any.

    ``pause`` prints ``FAULT pause:<point>`` on stdout and never returns, so a test can SIGKILL
    the process at exactly that moment; any other action is returned for the caller to act on.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    for item in spec.split(","):
        action, _, where = item.partition(":")
        if where != point:
            continue
        if action == "pause":
            _pause(item)
        return action
    return None


def _pause(item: str) -> None:
    os.write(1, f"FAULT {item}\n".encode())
    while True:
        time.sleep(3600)
