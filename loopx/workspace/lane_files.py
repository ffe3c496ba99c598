"""This host's role profile files (``.loopx/lanes/``) brought up to the profiles in force:
``loopx lanes pull``, and the files ``loopx init --join`` writes.

The log holds the profiles; each host keeps files to edit, and ``lanes-synced.json`` names the
record each file was last equal to, so ``lanes apply`` can refuse an edit of an older version
(:func:`loopx.workspace.record_profiles`). Pulling rewrites a file only where that loses no
edit: it is missing, or still equal to the record it was synced with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopx.kernel.canonical import sha256_hex
from loopx.kernel.errors import ConflictError, NotFound, RecordRejected, StorageError
from loopx.kernel.ledger import Ledger
from loopx.workspace.directory import Workspace
from loopx.workspace.files import (
    clear_applying,
    read_applying,
    read_synced,
    write_atomic,
    write_synced,
)

# What a file is, against the profile in force for its role.
WRITTEN = "written"  # missing, or behind and unedited: rewritten from the log
CURRENT = "current"  # equal to the profile in force
PENDING = "pending"  # edited from the profile in force, not applied yet: left alone
EDITED_BEHIND = "edited_behind"  # edited from an older record, or from one nobody noted


def pull_profiles(workspace: Workspace, *, force: bool = False,
                  ledger: Ledger | None = None) -> dict[str, Any]:
    """Write the profiles in force into ``.loopx/lanes/`` where no edit made here is lost, and
    note each file's base. Reads the workspace's log, or ``ledger``'s. A profile TOML cannot
    express is left out (``unwritable``). Returns what ``loopx lanes pull --json`` prints.

    Raises:
        ConflictError: a file was edited from an older profile than the one in force, or its
            base is unknown (``force`` rewrites it, dropping the edit); nothing written.
        StorageError: a file could not be written.
    """
    from loopx.work.profiles import profile_toml

    wdir, lanes_dir = workspace.dir, workspace.lanes_dir
    opened = ledger is None  # a ledger given is its caller's to close
    ledger = workspace.ledger() if ledger is None else ledger
    try:
        in_force = ledger.state()["lanes"]["profiles"]
        synced = file_bases(wdir, in_force) or {}
        verdicts = {role: _verdict(ledger, lanes_dir / f"{role}.toml", profile,
                                   synced.get(role))
                    for role, profile in sorted(in_force.items())}
    finally:
        if opened:
            ledger.store.close()
    behind = sorted(role for role, v in verdicts.items() if v == EDITED_BEHIND)
    if behind and not force:
        raise ConflictError(
            "these profile files hold edits made from an older profile than the one in force "
            "(or from one this host never noted), and rewriting them would drop those edits: "
            + "; ".join(f"{role} (in force: seq {in_force[role]['seq']}; the file's base: "
                        + (f"seq {synced[role]})" if role in synced else "unknown)")
                        for role in behind),
            hint="redo those edits on the profile in force (`loopx lanes show --json`), or pull "
                 "with --force to rewrite the files from the log, dropping the edits")
    rewrite = [role for role, v in verdicts.items()
               if v == WRITTEN or (force and v in (EDITED_BEHIND, PENDING))]
    texts: dict[str, str] = {}
    unwritable: dict[str, str] = {}  # one such profile must not keep the others from a host
    for role in rewrite:
        try:
            texts[role] = profile_toml(in_force[role], in_force[role]["seq"])
        except RecordRejected as exc:
            unwritable[role] = exc.problems[0].problem
    try:
        lanes_dir.mkdir(exist_ok=True)
        for role, text in texts.items():
            write_atomic(lanes_dir / f"{role}.toml", text)
        # Every file of a role in force is now based on the record in force: rewritten from
        # it, equal to it, or (pending) edited from it already.
        write_synced(wdir, {**synced, **{role: p["seq"] for role, p in in_force.items()
                                         if role not in unwritable}})
        clear_applying(wdir)
    except OSError as exc:
        # The bases are written last: files rewritten before a failure equal the log, and
        # pulling again finishes.
        raise StorageError.from_os(exc, "write", path=exc.filename or lanes_dir,
                                   outcome="run `loopx lanes pull` again") from None
    return {"written": sorted(texts),
            "current": sorted(role for role, v in verdicts.items() if v == CURRENT),
            "pending": sorted(role for role, v in verdicts.items()
                              if v == PENDING and role not in texts),
            "unwritable": [{"role": role, "problem": why}
                           for role, why in sorted(unwritable.items())]}


def profile_digest(profile: dict[str, Any]) -> str:
    """A digest of a profile as a file parses (or a record normalises) to, for the note
    ``lanes apply`` leaves before recording."""
    return sha256_hex(json.dumps(profile, sort_keys=True).encode())


def file_bases(wdir: Path, in_force: dict[str, dict[str, Any]]) -> dict[str, int] | None:
    """The profile records this host's lane files are based on (role -> seq; None where
    nothing says): ``lanes-synced.json``, and, for a ``lanes apply`` killed between its record
    and that file, each noted profile that is the one in force now (the file held exactly it)."""
    from loopx.work.profiles import normal_profile

    synced = read_synced(wdir)
    noted = read_applying(wdir)
    if not noted:
        return synced
    adopted = {role: p["seq"] for role, p in in_force.items()
               if noted.get(role) == profile_digest(normal_profile(p))}
    return {**(synced or {}), **adopted} if adopted else synced


def _verdict(ledger: Ledger, path: Path, profile: dict[str, Any], base: int | None) -> str:
    """What the file at ``path`` is against ``profile``, the one in force for its role."""
    from loopx.work.profiles import normal_profile, parse_profile

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return WRITTEN
    try:
        parsed: dict[str, Any] | None = parse_profile(path.name, data)
    except RecordRejected:
        parsed = None  # a broken edit is still an edit
    if parsed is not None and parsed == normal_profile(profile):
        return CURRENT
    if base == profile["seq"]:
        return PENDING
    if parsed is not None and base is not None and parsed == _recorded(ledger, base,
                                                                       profile["role"]):
        return WRITTEN
    return EDITED_BEHIND


def _recorded(ledger: Ledger, seq: int, role: str) -> dict[str, Any] | None:
    """The profile recorded at ``seq`` for ``role`` (as a file would parse), or None."""
    from loopx.work.profiles import normal_profile

    try:
        record = ledger.store.get(seq)
    except NotFound:
        return None
    payload = record.get("payload") or {}
    if record.get("schema_version") != "lane_profile_v0" or payload.get("role") != role:
        return None
    return normal_profile(payload)
