"""The small files a workspace writes beside its log: each replaced atomically and fsynced."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from loopx.kernel.store.fs import fsync_dir, replace_file

GITIGNORE = "# loopx workspace state is not versioned with the project\n*\n"
# Per role, the seq of the profile record this host's file in lanes/ was last equal to (written
# by init and `lanes apply`): what an edit of that file was based on.
LANES_SYNCED = "lanes-synced.json"
# Per role, the digest of the profile a `lanes apply` is about to record (written before its
# record, removed once lanes-synced.json names it): a kill in between leaves the base to adopt.
LANES_APPLYING = "lanes-applying.json"


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` (surrogate escapes kept as the bytes they stand for),
    durably: a crash leaves the old file or the new one, never a part."""
    replace_file(path, text.encode("utf-8", errors="surrogateescape"), mode=mode)


def write_settings(wdir: Path, settings: dict[str, object]) -> None:
    """Write ``workspace.json`` (format, store, settings) into ``wdir``, atomically."""
    write_atomic(wdir / "workspace.json", json.dumps(settings, indent=2) + "\n")


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


def read_synced(wdir: Path) -> dict[str, int] | None:
    """The profile records this host's lane files were last equal to (role -> seq), or None
    where nothing says (a workspace made before loopx kept it, or a malformed file)."""
    try:
        data = json.loads((wdir / LANES_SYNCED).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in data.items()):
        return None
    return data


def write_synced(wdir: Path, seqs: dict[str, int]) -> None:
    """Record that this host's lane files equal the profile records ``seqs`` (role -> seq)."""
    write_atomic(wdir / LANES_SYNCED, json.dumps(seqs, indent=2, sort_keys=True) + "\n")


def read_applying(wdir: Path) -> dict[str, str]:
    """The profile digests (role -> sha256) an unfinished ``lanes apply`` was recording, or an
    empty dict (none, or a malformed file)."""
    try:
        data = json.loads((wdir / LANES_APPLYING).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return {}
    return data


def write_applying(wdir: Path, digests: dict[str, str]) -> None:
    """Note the profiles (role -> digest) about to be recorded, before recording them."""
    write_atomic(wdir / LANES_APPLYING, json.dumps(digests, indent=2, sort_keys=True) + "\n")


def clear_applying(wdir: Path) -> None:
    """Forget the note once the bases it stood for are in lanes-synced.json."""
    (wdir / LANES_APPLYING).unlink(missing_ok=True)
