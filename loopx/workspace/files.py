"""The small files a workspace writes beside its log: each replaced atomically and fsynced."""

from __future__ import annotations

import stat
from pathlib import Path

from loopx.kernel.store.fs import fsync_dir, replace_file

GITIGNORE = "# loopx workspace state is not versioned with the project\n*\n"


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` (surrogate escapes kept as the bytes they stand for),
    durably: a crash leaves the old file or the new one, never a part."""
    replace_file(path, text.encode("utf-8", errors="surrogateescape"), mode=mode)


def mode_of(path: Path) -> int | None:
    """The permission bits of ``path``, or None when it does not exist."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def copy_profiles(profiles: dict[str, bytes], target: Path) -> None:
    """Write role profiles (file name -> bytes) into ``target``, made if need be."""
    target.mkdir(exist_ok=True)
    for name, data in profiles.items():
        (target / name).write_bytes(data)
    fsync_dir(target)
