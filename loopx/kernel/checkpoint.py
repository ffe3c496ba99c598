"""Checkpoints of folded state: plain JSON, written atomically, trusted only if the log agrees.

Deleting a checkpoint changes only speed. One whose fold version differs, or whose cursor does
not name a record with that seq and hash in the log, is discarded and rebuilt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from loopx.kernel.fold import State
from loopx.kernel.store.base import Cursor, Store
from loopx.kernel.store.fs import fsync_dir

CHECKPOINT_FORMAT = 1


def load_checkpoint(path: Path, store: Store, version: str) -> tuple[State | None, str]:
    """The checkpointed state if it is usable, else None; the string says why it was not."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None, "no checkpoint"
    except (OSError, ValueError):
        return None, "checkpoint unreadable"
    try:
        if data["checkpoint_format"] != CHECKPOINT_FORMAT:
            return None, "checkpoint format differs"
        if data["fold_version"] != version:
            return None, "fold version changed"
        cursor = Cursor.from_json(data["cursor"])
        parts = data["state"]
        if not isinstance(parts, dict):
            return None, "checkpoint malformed"
    except (KeyError, TypeError, ValueError):
        return None, "checkpoint malformed"
    if not store.cursor_matches(cursor):
        return None, "checkpoint disagrees with the log"
    return State(cursor, parts), "checkpoint used"


def save_checkpoint(path: Path, state: State, version: str) -> None:
    """Write the checkpoint to a temp file, fsync, rename over the old one, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Keys stay in the fold's order (json.loads keeps it): a reloaded state must iterate its
    # dicts as the fold that made it does, or a projection listing them would read otherwise.
    body = json.dumps({
        "checkpoint_format": CHECKPOINT_FORMAT,
        "fold_version": version,
        "cursor": state.cursor.to_json(),
        "state": state.parts,
    }, separators=(",", ":")).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    try:
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        # A full disk must not leave a partial temp file behind to fill it further.
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
