"""Finding and opening a workspace: the ``.loopx/`` directory, its format, store and settings.

A workspace is found the way git finds its repository (the nearest ``.loopx/`` at or above the
current directory), or given by ``--workspace`` / ``LOOPX_WORKSPACE``. It holds one campaign.
Every command opens one, so this module imports only what opening needs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from loopx.kernel.errors import WorkspaceError
from loopx.kernel.ledger import Ledger
from loopx.kernel.plain import Frozen
from loopx.kernel.store.base import Store
from loopx.kernel.store.file import FileStore
from loopx.kernel.store.location import (
    ENV_STORE,
    FILE,
    is_postgres,
    parse_postgres,
    redact,
)

WORKSPACE_DIR = ".loopx"
FORMAT_VERSION = 1
SUPPORTED_FORMATS = (1,)
ENV_WORKSPACE = "LOOPX_WORKSPACE"
OWNER_AGENT = "owner"


class Workspace(Frozen):
    """An initialised workspace: ``root`` is the project directory holding ``.loopx/``."""

    _fields = ("root", "format_version", "store_location")
    root: Path
    format_version: int
    store_location: str  # ``file`` or a postgresql:// URL without its password

    def __init__(self, root: Path, format_version: int = FORMAT_VERSION,
                 store_location: str = FILE) -> None:
        self.__dict__.update(root=root, format_version=format_version,
                             store_location=store_location)

    @property
    def dir(self) -> Path:
        """The ``.loopx/`` directory."""
        return self.root / WORKSPACE_DIR

    def store(self, **options: object) -> Store:
        """The workspace's store: the file store (options as for :class:`FileStore`), or the
        PostgreSQL store recorded in ``workspace.json`` (only ``clock`` and ``lock_timeout``
        apply there), connecting with ``LOOPX_STORE`` when that is set.

        Raises:
            WorkspaceError: ``LOOPX_STORE`` names another log than the workspace's (a
                PostgreSQL one, for a workspace on a file log).
        """
        if self.store_location == FILE:
            given = os.environ.get(ENV_STORE)
            if given and given != FILE:
                # Ignoring it would leave an agent that means to share a PostgreSQL log
                # writing, unseen, to a log only this directory reads.
                raise WorkspaceError(
                    f"{ENV_STORE} is {redact(given)!r}, but this workspace's log is the file "
                    f"log in {self.dir / 'log'}",
                    hint=f"unset {ENV_STORE} to use it; `loopx store copy --to URL --use` moves "
                         "it to PostgreSQL, and `loopx init --store URL --join` in another "
                         "directory joins a campaign already there")
            return FileStore(self.dir, **options)  # type: ignore[arg-type]
        from loopx.kernel.store.postgres import PostgresStore

        kept = {k: v for k, v in options.items() if k in ("clock", "lock_timeout")}
        return PostgresStore(store_url(self.store_location), **kept)  # type: ignore[arg-type]

    @property
    def lanes_dir(self) -> Path:
        """The editable role profiles (``.loopx/lanes/``)."""
        return self.dir / "lanes"

    def ledger(self, **options: object) -> Ledger:
        """A ledger over the workspace's store, using its checkpoint and its settings."""
        return Ledger(self.store(**options),
                      checkpoint_path=self.dir / "checkpoints" / "state.sqlite",
                      settings=self.settings)

    def settings(self) -> dict[str, Any]:
        """The settings the write checks read, from ``.loopx/workspace.json``:
        ``contract_scopes``, the whole repository (``["."]``) where the file names none.

        Raises:
            WorkspaceError: the file or a setting is malformed.
        """
        from loopx.research.contract_scope import (
            CONTRACT_SCOPES,
            WHOLE_REPOSITORY,
            parse_contract_scopes,
        )

        path = os.path.join(self.root, WORKSPACE_DIR, "workspace.json")
        try:
            raw = _read_small(path)
        except OSError:
            raise self._unreadable() from None
        # Read on every write, so an edit applies to the next one; parsed again only when the
        # bytes changed.
        known = _SETTINGS_SEEN.get(path)
        if known is not None and known[0] == raw:
            return {CONTRACT_SCOPES: list(known[1])}
        try:
            data = json.loads(raw.decode())
        except ValueError:  # UnicodeDecodeError included
            raise self._unreadable() from None
        value = data.get(CONTRACT_SCOPES, list(WHOLE_REPOSITORY)) if isinstance(data, dict) else None
        try:
            scopes = parse_contract_scopes(value)
        except ValueError as exc:
            raise WorkspaceError(f"{self.dir / 'workspace.json'}: {CONTRACT_SCOPES} {exc}",
                                 hint="the owner corrects it in that file") from None
        _SETTINGS_SEEN[path] = (raw, tuple(scopes))
        return {CONTRACT_SCOPES: scopes}

    def _unreadable(self) -> WorkspaceError:
        return WorkspaceError(f"{self.dir / 'workspace.json'} is unreadable or malformed")


# The last settings file read per path, with its parsed contract scopes (see Workspace.settings).
_SETTINGS_SEEN: dict[str, tuple[bytes, tuple[str, ...]]] = {}


def _read_small(path: str) -> bytes:
    """A small file's bytes with plain system calls (no buffered file object)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def store_url(recorded: str) -> str:
    """The URL to connect to a workspace's PostgreSQL store: ``LOOPX_STORE`` when set (it may
    carry the password, or a host name that resolves on this machine), else ``recorded``.

    Raises:
        WorkspaceError: ``LOOPX_STORE`` is not a postgresql:// URL or names another log.
    """
    given = os.environ.get(ENV_STORE)
    if not given:
        return recorded
    if not is_postgres(given):
        raise WorkspaceError(f"{ENV_STORE} is {redact(given)!r}, but this workspace's store is "
                             "on PostgreSQL", hint=f"unset {ENV_STORE}, or give a postgresql:// URL")
    want = parse_postgres(recorded).log
    if parse_postgres(given, default_log=want).log != want:
        raise WorkspaceError(f"{ENV_STORE} names the log {parse_postgres(given).log!r}, but this "
                             f"workspace's log is {want!r}",
                             hint=f"fix or unset {ENV_STORE}")
    return parse_postgres(given, default_log=want).conninfo_with_log()


def _read_format(config: Path, *, check: bool = True) -> tuple[int, str]:
    try:
        data = json.loads(config.read_text())
        version = data["format_version"]
        store = data["store"]
    except (OSError, ValueError, KeyError, TypeError):
        raise WorkspaceError(f"{config} is unreadable or malformed") from None
    if not isinstance(version, int):
        raise WorkspaceError(f"{config}: format_version must be an integer")
    if not isinstance(store, str) or (store != FILE and not is_postgres(store)):
        raise WorkspaceError(f"{config}: store {redact(str(store))!r} is not one this loopx has "
                             "(it has 'file' and postgresql:// URLs)")
    if is_postgres(store):
        parse_postgres(store)  # a malformed log name is refused here, naming the file
    if check and version not in SUPPORTED_FORMATS:
        raise WorkspaceError(
            f"workspace format {version!r} is not one this loopx reads "
            f"(it reads {', '.join(map(str, SUPPORTED_FORMATS))})",
            hint="run `loopx migrate`: it converts an older workspace, or says to upgrade loopx"
                 " for a newer one")
    return int(version), store


def find_workspace(explicit: str | os.PathLike[str] | None = None,
                   start: Path | None = None, *, check_format: bool = True) -> Workspace:
    """Locate the workspace from an explicit path, ``LOOPX_WORKSPACE``, or the nearest parent.

    Raises:
        WorkspaceError: none found, or its format is not supported.
    """
    given = explicit or os.environ.get(ENV_WORKSPACE)
    if given:
        path = Path(given).expanduser().resolve()
        root = path.parent if path.name == WORKSPACE_DIR else path
        config = root / WORKSPACE_DIR / "workspace.json"
        if not config.is_file():
            raise WorkspaceError(f"no loopx workspace at {root}", hint="run `loopx init` there")
        return Workspace(root, *_read_format(config, check=check_format))
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        config = candidate / WORKSPACE_DIR / "workspace.json"
        if config.is_file():
            return Workspace(candidate, *_read_format(config, check=check_format))
    raise WorkspaceError(
        f"no loopx workspace at {here} or any parent",
        hint="run `loopx init`, or pass --workspace / set LOOPX_WORKSPACE")


def migrate_workspace(explicit: str | os.PathLike[str] | None = None) -> tuple[Workspace, bool]:
    """Bring a workspace to the current format; returns it and whether anything changed.

    Raises:
        WorkspaceError: the format is newer than this loopx, or has no migration path.
    """
    workspace = find_workspace(explicit, check_format=False)
    version = workspace.format_version
    if version == FORMAT_VERSION:
        return workspace, False
    if version > FORMAT_VERSION:
        raise WorkspaceError(f"workspace format {version} is newer than this loopx "
                             f"(format {FORMAT_VERSION})", hint="upgrade loopx")
    raise WorkspaceError(f"no migration from workspace format {version} to {FORMAT_VERSION}")
