"""Torn tails kept aside: the quarantine file, its ``store_repair_v0`` record, and the check that
one matches the other.

A repair record vouches that its quarantine file holds the torn bytes, so the file is made
whole and durable before the segment is cut: the bytes go to a temporary file, which is
fsynced and renamed into place, and the directory fsynced. An existing file of the right name
is trusted only if it holds exactly those bytes; anything else there (a short or empty file
left by a repairer that was killed, or that ran out of space) is replaced the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopx.kernel.canonical import sha256_hex
from loopx.kernel.store.fs import fault, fsync_dir, write_all

STORE_AGENT = "loopx-store"
SUFFIX = ".torn"
_TEMP_SUFFIX = ".tmp"


def quarantine_name(segment: str, offset: int, sha256: str) -> str:
    """The file name a torn tail of ``segment`` at byte ``offset`` with digest ``sha256`` gets."""
    return f"{segment}.{offset}.{sha256[:16]}{SUFFIX}"


def repair_record(segment: str, offset: int, torn: bytes, goal_id: str) -> dict[str, Any]:
    """The ``store_repair_v0`` record describing a torn tail about to be quarantined."""
    digest = sha256_hex(torn)
    name = quarantine_name(segment, offset, digest)
    return {
        "schema_version": "store_repair_v0",
        "record_id": f"rec_repair_{int(segment.split('.')[0])}_{offset}_{digest[:16]}",
        "goal_id": goal_id,
        "agent_id": STORE_AGENT,
        "lane_role": "store",
        "capability": None,
        "todo_id": None,
        "epoch": None,
        "visibility": "private",
        "provenance": "observed",
        "payload": {
            "segment": segment,
            "offset": offset,
            "length": len(torn),
            "sha256": digest,
            "complete_lines": torn.count(b"\n"),
            "quarantine_file": f"quarantine/{name}",
            "reason": "torn tail left by a writer that stopped mid-append",
        },
    }


def keep(directory: Path, name: str, torn: bytes) -> None:
    """Make ``directory/name`` hold exactly ``torn``, durably. Call with the store lock held.

    Raises:
        OSError: the file could not be written; nothing was renamed into place.
    """
    if not directory.is_dir():
        directory.mkdir()
        fsync_dir(directory.parent)
    path = directory / name
    if _holds(path, torn):
        fsync_dir(directory)  # its rename may not have been durable when its writer died
        return
    # Temporary files are written only under the lock, so any found now are a dead repairer's.
    for stale in directory.glob(f".*{_TEMP_SUFFIX}"):
        stale.unlink(missing_ok=True)
    tmp = directory / f".{name}{_TEMP_SUFFIX}"
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    try:
        fault("quarantine-created")
        write_all(fd, torn, "quarantine")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            tmp.unlink()
        except OSError:
            pass  # the next repairer removes it
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)
    fault("quarantine-renamed")


def _holds(path: Path, torn: bytes) -> bool:
    """Whether ``path`` exists and holds exactly ``torn``; if so, its bytes are made durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        if os.fstat(fd).st_size != len(torn):
            return False
        chunks: list[bytes] = []
        while chunk := os.read(fd, len(torn)):
            chunks.append(chunk)
        if b"".join(chunks) != torn:
            return False
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def mismatch(payload: dict[str, Any], read: Callable[[str], bytes | None]) -> str | None:
    """What is wrong with the quarantine file of a repair record's ``payload`` (``read`` gives
    a quarantine file's bytes by name, None if missing), or None when it holds exactly the
    bytes the record describes."""
    named = payload["quarantine_file"]
    expected = "quarantine/" + quarantine_name(payload["segment"], payload["offset"],
                                               payload["sha256"])
    if named != expected:
        return f"names quarantine file {named!r}, but loopx keeps those bytes as {expected!r}"
    data = read(expected.removeprefix("quarantine/"))
    if data is None:
        return (f"vouches for {payload['length']} torn bytes, but quarantine file {named} is "
                "missing")
    digest = sha256_hex(data)
    if len(data) != payload["length"] or digest != payload["sha256"]:
        return (f"says quarantine file {named} holds {payload['length']} bytes with sha256 "
                f"{payload['sha256'][:16]}..., but it holds {len(data)} bytes with sha256 "
                f"{digest[:16]}...: the torn tail it vouches for is not kept")
    return None


def kept(directory: Path, name: str) -> bytes | None:
    """The bytes of quarantine file ``name`` (no directories), or None if it does not exist."""
    if "/" in name or name.startswith("."):
        return None
    try:
        return (directory / name).read_bytes()
    except FileNotFoundError:
        return None


def kept_names(directory: Path) -> list[str]:
    """The quarantine files there are (temporary files of a repair in progress left out)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(SUFFIX) and not n.startswith("."))
