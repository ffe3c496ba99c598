"""Creating a workspace: ``loopx init``, the log's genesis, and the owner's profile batches."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx import __version__
from loopx.kernel.errors import (
    ConflictError,
    FieldProblem,
    LoopxError,
    NotFound,
    RecordRejected,
    StorageError,
    WorkspaceError,
)
from loopx.kernel.ledger import Ledger
from loopx.kernel.store.file import FileStore
from loopx.kernel.store.fs import fault, fsync_dir
from loopx.kernel.store.location import (
    FILE,
    is_postgres,
    parse_postgres,
    redact,
    without_password,
)
from loopx.workspace.agents_file import AGENTS_FILE, write_agents_section
from loopx.workspace.directory import (
    FORMAT_VERSION,
    OWNER_AGENT,
    WORKSPACE_DIR,
    Workspace,
)
from loopx.workspace.files import (
    GITIGNORE,
    copy_profiles,
    write_atomic,
    write_settings,
    write_synced,
)
from loopx.workspace.lane_files import pull_profiles

if TYPE_CHECKING:
    from loopx.kernel.identity import Credentials, Identity
    from loopx.kernel.store.base import Store
    from loopx.work.state import LaneState

# Creating a workspace needs tokens, profiles, pydantic and shutil; opening one (every command)
# does not, so those are imported where a workspace is made.

NOTHING_CREATED = "no workspace was created"
# The owner token of an init not yet finished, with what that init was asked for (mode 600).
PENDING = "init-pending.json"


def init_workspace(root: Path, goal_id: str, *,
                   contract_scopes: list[str] | None = None,
                   store: str | None = None,
                   deliver: Callable[[Workspace, str, bool], None] | None = None
                   ) -> tuple[Workspace, str]:
    """Create a workspace with its genesis record; returns it and the owner token (show once).

    ``contract_scopes`` (default: the whole repository, ``["."]``) are the repository paths
    every contract version must stay inside; they go to ``workspace.json``. ``store`` is
    ``file`` (the default) or a postgresql:// URL (its log named by ``?log=``, else the goal
    id); ``workspace.json`` records it without the password.

    The owner token is kept in ``.loopx/`` (:data:`PENDING`, mode 600) from before the genesis
    until ``deliver(workspace, token, resumed)`` has handed it over, so an init killed at any
    point is finished by running it again with the same goal and store (``resumed`` is then
    true): a log whose genesis holds that token's digest is this init's own.

    Also adds the loopx section to ``<root>/AGENTS.md`` (:func:`write_agents_section`); if that
    file cannot be written, init says so on stderr and still succeeds.

    Raises:
        WorkspaceError: a workspace (or a half-made one) is already there, or an init that
            stopped early there named another goal or store.
        RecordRejected: the goal id is not a valid identifier, or a contract scope is not a
            path inside the repository.
        StorageError: the directory is read-only, full or not ours, or the server refused;
            what init had made is removed again so it can simply be run again, except where a
            shared log may already hold its genesis: running it again then finishes it.
    """
    _check_goal_id(goal_id)
    scopes = _check_contract_scopes(contract_scopes)
    location = FILE
    if store is not None and store != FILE:
        if not is_postgres(store):
            raise RecordRejected([FieldProblem("store", f"{redact(store)!r} is neither 'file' "
                                               "nor a postgresql:// URL")])
        location = parse_postgres(store, default_log=goal_id).conninfo_with_log()
    root, wdir, existed, pending = _fresh_directory(root, resume=True)
    recorded = without_password(location)
    if pending is not None:
        token = _resumed_token(wdir, pending, goal_id, recorded, scopes)
    else:
        from loopx.kernel.tokens import new_token

        token = new_token()
    genesis_sent = False  # from then on a shared log may hold this init's first records
    try:
        if pending is None:
            root.mkdir(parents=True, exist_ok=True)
            wdir.mkdir(exist_ok=True)
            write_atomic(wdir / ".gitignore", GITIGNORE)  # before any file holds the token
            write_atomic(wdir / PENDING, json.dumps(
                {"goal_id": goal_id, "store": recorded, "contract_scopes": scopes,
                 "owner_token": token}, indent=2) + "\n", mode=0o600)
        store = _log_store(wdir, location)
        store.create()  # type: ignore[attr-defined]
        genesis_sent = True
        workspace = _create(root, goal_id, scopes, store, recorded, token)
        if deliver is not None:
            deliver(workspace, token, pending is not None)
    except OSError as exc:
        raise StorageError.from_os(exc, "write", path=exc.filename or root,
                                   outcome=_undo(wdir, existed, location, genesis_sent)) from None
    except StorageError as exc:  # the store's own, from writing the first records
        raise exc.with_outcome(_undo(wdir, existed, location, genesis_sent)) from None
    except WorkspaceError as exc:  # a shared store's log that already has records
        undo_init(wdir, existed)
        raise WorkspaceError(f"{exc.message} ({redact(recorded)})",
                             hint="name a new log in the URL (?log=NAME), or, to work on that "
                                  "campaign from this host, `loopx init --store URL --join`"
                             ) from None
    _finish(wdir)
    _agents_section(root)
    return workspace, token


def _undo(wdir: Path, existed: bool, location: str, genesis_sent: bool) -> str:
    """Undo a failed init, unless a shared log may hold its genesis already: then what it made
    stays, its token with it, for the same command to finish (a file log goes with .loopx/)."""
    if location == FILE or not genesis_sent:
        return undo_init(wdir, existed)
    return ("the log may already hold this init's first records: run the same `loopx init` "
            "again to finish it (the owner token is kept in .loopx/ until then)")


def _resumed_token(wdir: Path, pending: dict[str, Any], goal_id: str, recorded: str,
                   scopes: list[str]) -> str:
    """The owner token an init that stopped early kept, if this one repeats it."""
    given = {"goal_id": goal_id, "store": recorded, "contract_scopes": scopes}
    differing = [name for name, value in given.items() if pending.get(name) != value]
    token = pending.get("owner_token")
    if differing or not isinstance(token, str):
        kept = ", ".join(f"{name} {redact(str(pending.get(name)))}" for name in given)
        raise WorkspaceError(f"an init that stopped early in {wdir} ({kept}) is not finished; "
                             + (f"this one differs in {', '.join(differing)}" if differing
                                else f"{PENDING} is malformed"),
                             hint="run that init again to finish it, or remove the directory "
                                  "to start over")
    return token


def pending_init(root: Path) -> bool:
    """Whether an init in ``root`` stopped before handing over its owner token, so that running
    it again finishes it."""
    return (_project_root(root) / WORKSPACE_DIR / PENDING).exists()


def _project_root(root: Path) -> Path:
    """The project directory ``root`` names (resolved; ``p/.loopx`` names ``p``)."""
    root = root.resolve()
    return root.parent if root.name == WORKSPACE_DIR else root


def _finish(wdir: Path) -> None:
    # The token is handed over: nothing may keep it now. A file left behind (unlink refused)
    # only makes the next `loopx init` here hand it over again.
    try:
        (wdir / PENDING).unlink()
        fsync_dir(wdir)
    except OSError:
        pass


def join_workspace(root: Path, store: str, *, goal_id: str | None = None,
                   contract_scopes: list[str] | None = None) -> tuple[Workspace, str]:
    """A workspace on this host for a PostgreSQL log another host initialised (``loopx init
    --join``): its settings only, no genesis, no owner token, no profile files (the profiles in
    force are in the log). ``goal_id``, when given, must be the log's. Returns the workspace
    and the log's goal id.

    Raises:
        WorkspaceError: a workspace (or a half-made one) is already here, or the log has no
            workspace record (it was never initialised), or it is another goal's.
        RecordRejected: ``store`` is not a postgresql:// URL, or a contract scope is not a path
            inside the repository.
        StorageError: the server refused, or the directory cannot be written.
    """
    scopes = _check_contract_scopes(contract_scopes)
    if not is_postgres(store):
        raise RecordRejected([FieldProblem("store", "--join needs the PostgreSQL log to join "
                                                    "(postgresql://...); a file log lives in "
                                                    "one project directory")])
    # As at init, the log is named by ?log=, else after the goal.
    parsed = (parse_postgres(store, default_log=goal_id) if goal_id is not None
              else parse_postgres(store))
    location = parsed.conninfo_with_log()
    recorded = without_password(location)
    root, wdir, existed, _ = _fresh_directory(root)
    from loopx.kernel.store.postgres import PostgresStore

    try:
        with PostgresStore(location) as log:
            first = log.get(1)
    except NotFound:
        first = None
    except StorageError as exc:
        raise exc.with_outcome(NOTHING_CREATED) from None
    if first is None or first.get("schema_version") != "workspace_v0":
        raise WorkspaceError(f"{recorded} holds no loopx log, so there is nothing to join; "
                             "nothing was created",
                             hint="name the log as the first host's init did (?log=NAME in the "
                                  "URL, else --goal-id: a log is named after its goal unless "
                                  "the URL names it), or run `loopx init --store URL` without "
                                  "--join on the first host")
    goal = first["payload"]["goal_id"]
    if goal_id is not None and goal_id != goal:
        raise WorkspaceError(f"{recorded} is the log of goal {goal!r}, not {goal_id!r}; nothing "
                             "was created", hint="drop --goal-id, or fix the URL's ?log= name")
    workspace = Workspace(root, store_location=recorded)
    try:
        wdir.mkdir(parents=True, exist_ok=True)
        write_atomic(wdir / ".gitignore", GITIGNORE)
        write_settings(wdir, {"format_version": FORMAT_VERSION, "store": recorded,
                              "contract_scopes": scopes})
        # The profiles in force as files to edit, each noted as based on its record (a join
        # killed before this leaves a usable workspace: `loopx lanes pull` writes them).
        with PostgresStore(location) as log:  # the URL given: it may carry the password
            pull_profiles(workspace, ledger=Ledger(log))
    except OSError as exc:
        raise StorageError.from_os(exc, "write", path=exc.filename or root,
                                   outcome=undo_init(wdir, existed)) from None
    except StorageError as exc:
        raise exc.with_outcome(undo_init(wdir, existed)) from None
    except LoopxError:
        undo_init(wdir, existed)
        raise
    _agents_section(root)
    return workspace, goal


def _fresh_directory(root: Path, *, resume: bool = False
                     ) -> tuple[Path, Path, bool, dict[str, Any] | None]:
    """The project directory, its ``.loopx/``, whether that existed (empty), and, with
    ``resume``, what an init that stopped early there kept (:data:`PENDING`): refused where a
    workspace, or a half-made one without that file, is already."""
    root = _project_root(root)
    wdir = root / WORKSPACE_DIR
    try:
        if resume and (wdir / PENDING).exists():
            try:
                pending = json.loads((wdir / PENDING).read_text())
            except ValueError:
                pending = None
            if not isinstance(pending, dict):
                raise WorkspaceError(f"{wdir / PENDING} is malformed",
                                     hint="remove the directory and run `loopx init` again")
            return root, wdir, True, pending
        if (wdir / "workspace.json").exists():
            raise WorkspaceError(f"{root} already holds a loopx workspace")
        existed = wdir.exists()
        if existed and any(wdir.iterdir()):
            raise WorkspaceError(
                f"{wdir} exists but is not a complete workspace (an earlier init stopped early?)",
                hint="remove that directory and run `loopx init` again")
    except OSError as exc:
        raise StorageError.from_os(exc, "look at", path=wdir, outcome=NOTHING_CREATED) from None
    return root, wdir, existed, None


def _agents_section(root: Path) -> None:
    try:
        write_agents_section(root)
    except OSError as exc:  # a convenience for agents; the workspace itself is complete
        print(f"loopx: {root / AGENTS_FILE} not written: {exc}", file=sys.stderr)


def _log_store(wdir: Path, location: str) -> Store:
    """The store an init writes: the file log in ``wdir``, or the PostgreSQL log at
    ``location``."""
    if location == FILE:
        return FileStore(wdir)
    from loopx.kernel.store.postgres import PostgresStore

    return PostgresStore(location)


def _create(root: Path, goal_id: str, scopes: list[str], store: Store, recorded: str,
            token: str) -> Workspace:
    """The part of init that writes: the genesis and profiles into ``store`` (created), then
    this host's files; ``recorded`` is the store's location as ``workspace.json`` names it."""
    from loopx.work.profiles import packaged_profiles

    wdir = root / WORKSPACE_DIR
    with store:
        ledger = Ledger(store)
        bootstrap_log(ledger, goal_id, token)
        profiles = ledger.state()["lanes"]["profiles"]
    fault("init-recorded")  # tests: the log written, this host's files not yet
    copy_profiles(packaged_profiles(), wdir / "lanes")
    write_synced(wdir, {role: p["seq"] for role, p in profiles.items()})
    write_atomic(wdir / ".gitignore", GITIGNORE)
    # Written last: a .loopx/ without it is an init that stopped early.
    write_settings(wdir, {"format_version": FORMAT_VERSION, "store": recorded,
                          "contract_scopes": scopes})
    fault("init-written")  # tests: the workspace whole, its owner token not handed over
    return Workspace(root, store_location=recorded)


def undo_init(wdir: Path, existed: bool) -> str:
    """Remove what a failed init (or copy) made in ``wdir`` (empty, or absent, when it began),
    so it can simply run again; returns what the user should know about it."""
    import shutil

    try:
        if existed:
            for child in wdir.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        elif wdir.exists():
            shutil.rmtree(wdir)
    except OSError:
        return f"remove {wdir} before running `loopx init` again"
    return NOTHING_CREATED


def bootstrap_log(ledger: Ledger, goal_id: str, token: str | None = None) -> str:
    """Write an empty log's genesis record and the packaged role profiles; returns the owner
    token (show it once; ``token`` when given). Any store backend works, so tests can bootstrap
    a memory store. A log whose genesis is this goal's with ``token``'s digest is an earlier
    bootstrap with that token that stopped part way: its missing profiles are recorded.

    Raises:
        WorkspaceError: the log already has records (of another init).
    """
    from loopx.kernel.identity import Credentials
    from loopx.kernel.tokens import new_token, token_digest
    from loopx.work.profiles import packaged_profiles, parse_profile

    token = token or new_token()
    genesis = {
        "format_version": FORMAT_VERSION,
        "goal_id": goal_id,
        "owner_token_sha256": token_digest(token),
        "loopx_version": __version__,
    }
    if not _begun_with(ledger, genesis):
        ledger.append_genesis(genesis, agent_id=OWNER_AGENT)
    record_profiles(ledger, Credentials(OWNER_AGENT, token), {
        name: parse_profile(name, data) for name, data in packaged_profiles().items()})
    return token


def _begun_with(ledger: Ledger, genesis: dict[str, Any]) -> bool:
    """Whether the log's first record is ``genesis`` (its goal and owner token digest)."""
    if ledger.store.head().seq == 0:
        return False
    first = ledger.store.get(1)["payload"]
    return all(first.get(k) == genesis[k] for k in ("goal_id", "owner_token_sha256"))


def _check_goal_id(goal_id: str) -> None:
    from pydantic import TypeAdapter, ValidationError

    from loopx.kernel.types import Identifier

    try:
        TypeAdapter(Identifier).validate_python(goal_id, strict=True)
    except ValidationError as exc:
        raise RecordRejected([FieldProblem("goal_id", exc.errors()[0]["msg"])]) from None


def _check_contract_scopes(scopes: list[str] | None) -> list[str]:
    from loopx.research.contract_scope import WHOLE_REPOSITORY, parse_contract_scopes

    try:
        return parse_contract_scopes(list(WHOLE_REPOSITORY) if scopes is None else list(scopes))
    except ValueError as exc:
        raise RecordRejected([FieldProblem("contract_scopes", str(exc))]) from None


@dataclass(frozen=True)
class ProfilesRecorded:
    """What :func:`record_profiles` wrote, and, for every profile it was given, the seq of the
    profile record that profile equals now (its own record, or the one already in force)."""

    records: list[dict[str, Any]]
    synced: dict[str, int]


def record_profiles(ledger: Ledger, creds: Credentials,
                    profiles: dict[str, dict[str, Any]],
                    based_on: dict[str, int] | None = None) -> ProfilesRecorded:
    """Record the profiles that differ from those in force, as one owner batch.

    ``based_on`` (role -> seq) names the profile record each one was edited from: a profile
    whose role has had another record since is refused rather than recorded over it.

    Raises:
        ConflictError: a profile would undo one recorded after the version it was based on.
        RecordRejected: a profile names a role that will not exist.
        Unauthorized, Forbidden: the writer is not the owner.
    """
    from loopx.work.profiles import check_references, normal_profile

    # The records in force that the unchanged profiles equal, read in the locked step: read
    # after the write, another host's record landing in between would be taken for one.
    equal_to: dict[str, int] = {}

    def plan(lanes: LaneState, who: Identity, now: str) -> list[dict[str, Any]]:
        current = {role: normal_profile(p) for role, p in lanes["profiles"].items()}
        check_references({p["role"]: p for p in profiles.values()}, set(current))
        changed = [p for p in profiles.values() if current.get(p["role"]) != p]
        in_force = {role: p["seq"] for role, p in lanes["profiles"].items()}
        equal_to.clear()
        equal_to.update({p["role"]: in_force[p["role"]] for p in profiles.values()
                         if current.get(p["role"]) == p})
        if not changed:
            return []
        overtaken = [(p["role"], based_on[p["role"]], in_force[p["role"]]) for p in changed
                     if based_on and p["role"] in based_on and p["role"] in in_force
                     and in_force[p["role"]] != based_on[p["role"]]]
        if overtaken:
            raise ConflictError(
                "these profile files were edited from an older version of the profile in "
                "force, and recording them would undo what was recorded since (from another "
                "host?): " + "; ".join(f"{role} (the file is based on seq {base}; the profile "
                                       f"in force was recorded at seq {seq})"
                                       for role, base, seq in overtaken),
                hint="run `loopx lanes pull`, which brings the files not edited here up to "
                     "the log (an edit made on an older version it leaves for you to redo on "
                     "the one in force, `loopx lanes show --json`), and apply again; or apply "
                     "with --force to record these files over it")
        return ledger.prepare([{"schema_version": "lane_profile_v0", "payload": p}
                               for p in sorted(changed, key=lambda p: p["role"])], who)

    records = ledger.write(creds, plan)
    return ProfilesRecorded(records, {**equal_to, **{r["payload"]["role"]: r["seq"]
                                                      for r in records}})
