"""Git worktrees for executor todos: one worktree on a fresh branch per attempt.

The branch is ``loopx/<todo>/<epoch>``, so a zombie that lost its lease can only ever commit
onto its own branch, never onto its successor's. A branch name is never reused: when that
branch already exists (an earlier attempt under the same epoch, e.g. a runner that crashed and
resumed its lease), the next free ``loopx/<todo>/<epoch>-<n>`` is taken and the old branch is
kept. Evidence cites a worktree's base commit and its evaluated commit. A workspace that is not
in git gets no worktree; the caller runs in the workspace instead.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from loopx.kernel.errors import Refused, UsageProblem, WorkspaceError
from loopx.research.git_read import repo_root

WORKTREES_DIR = Path(".loopx") / "worktrees"
EXCLUDE_LINE = ".loopx/"

# Branch and directory share one spelling, so keep only characters that are safe in both.
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9._-]")
# Fresh names tried for one (todo, epoch) before giving up; each try is a git call or two.
MAX_VARIANTS = 100


@dataclass(frozen=True)
class Worktree:
    """A worktree made by :func:`create`: its directory, its branch, the commit it started from."""

    path: Path
    branch: str
    base_commit: str


def branch_name(todo_id: str, epoch: int) -> str:
    """``loopx/<todo_id>/<epoch>`` as a valid git branch name; characters other than letters,
    digits, ``.``, ``_`` and ``-`` become ``-``."""
    return f"loopx/{_safe_todo_id(todo_id)}/{epoch}"


def create(workspace_root: Path, todo_id: str, epoch: int,
           base: str | None = None) -> Worktree | None:
    """A new worktree for (todo, epoch) under ``.loopx/worktrees/``, on a new branch from
    ``base`` (the campaign's base commit, once one is fixed) or else the repository's HEAD; None
    when the workspace is not in git.

    The branch is :func:`branch_name`, or, when that branch or directory is left from an earlier
    attempt, the first free ``-<n>`` variant (n = 2, 3, ...); nothing earlier is touched.
    """
    workspace = Path(workspace_root).resolve()
    root = repo_root(workspace)
    if root is None:
        return None
    base = start_commit(root, base)
    (workspace / WORKTREES_DIR).mkdir(parents=True, exist_ok=True)
    _ensure_ignored(root, workspace / ".loopx")
    for n in range(1, MAX_VARIANTS + 1):
        suffix = "" if n == 1 else f"-{n}"
        branch = branch_name(todo_id, epoch) + suffix
        path = workspace / WORKTREES_DIR / f"{_safe_todo_id(todo_id)}.{epoch}{suffix}"
        # An existing branch may hold an earlier attempt's (or a zombie's) commits, and an
        # existing directory its files: neither is reused, and neither is deleted.
        if _branch_exists(root, branch) or path.exists():
            continue
        # Branch from the commit read above, not from HEAD again, so base_commit is exactly it.
        made = _run(root, "worktree", "add", "-b", branch, str(path), base)
        if made.returncode == 0:
            return Worktree(path=path, branch=branch, base_commit=base)
        if _branch_exists(root, branch) or path.exists():
            continue  # another runner took this name meanwhile: try the next
        raise WorkspaceError(_failure(root, ("worktree", "add", "-b", branch, str(path), base),
                                      made))
    raise Refused(f"todo {todo_id!r} epoch {epoch} already has {MAX_VARIANTS} worktree branches "
                  f"(loopx/{_safe_todo_id(todo_id)}/{epoch}-*), so no fresh one is made",
                  hint="inspect them with `git branch --list 'loopx/*'`, and delete those "
                       "no evidence cites")


def start_commit(root: Path, base: str | None) -> str:
    """The commit a worktree in the repository at ``root`` starts from: ``base`` (the
    campaign's base commit, once fixed), else HEAD.

    Raises:
        Refused: the repository lacks ``base`` (a clone that never fetched it), or has no
        commit yet.
    """
    found = _run(root, "rev-parse", "--verify", "--quiet", f"{base or 'HEAD'}^{{commit}}")
    if found.returncode == 0:
        return found.stdout.strip()
    if base:
        raise Refused(f"the campaign's base commit {base} is not in the git repository at "
                      f"{root}, so no experiment can start from it here",
                      hint=f"fetch it from the repository the other hosts use (`git fetch "
                           f"origin {base}`), then run the lane again")
    raise Refused(f"the git repository at {root} has no commit yet, so an experiment has "
                  "nothing to start from", hint="make a first commit, e.g. `git commit "
                                                "--allow-empty -m init`")


def require_committed(root: Path, commit: str, paths: list[str],
                      script: str | None = None) -> None:
    """Refuse when a file the command names is in the checkout at ``root`` but not in
    ``commit``, or ``script`` (the one an interpreter runs) is not in ``commit`` at all: a
    worktree starts there, so the command would not find it, and each todo it fails costs an
    attempt (a held-out one, its hypothesis' read).

    Raises:
        Refused: naming the first such file and the commit.
    """
    for path in paths:
        relative = Path(os.path.normpath(path)).as_posix()
        here = (root / relative).is_file()
        if relative.startswith("../") or not (here or path == script):
            continue  # outside the repository, or a word that names no file here
        if _run(root, "cat-file", "-e", f"{commit}:{relative}").returncode == 0:
            continue
        if here:
            raise Refused(
                f"the lane command's {path} is in your checkout but not in commit "
                f"{commit}, where every experiment's worktree starts: the command would not "
                "find it", hint=f"commit {path} and start from a commit that has it (a base "
                "the contract pins can move until the first evidence packet: `loopx contract "
                "amend --set base_commit=SHA`)")
        raise Refused(
            f"the lane command's script {path} is neither in commit {commit}, where every "
            "experiment's worktree starts, nor in your checkout: the command would not find it",
            hint="check the script's path in the command (relative to the repository's top "
                 "directory, where the command starts)")


def _branch_exists(root: Path, branch: str) -> bool:
    return _run(root, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode == 0


def head_commit(worktree: Worktree) -> str:
    """The worktree's current HEAD commit (the evaluated commit once the command has
    committed)."""
    _require_worktree(worktree)
    return git(worktree.path, "rev-parse", "--verify", "HEAD^{commit}").strip()


def dirty_paths(worktree: Worktree) -> list[str]:
    """Paths with uncommitted changes or untracked files in the worktree, sorted; empty when
    clean."""
    _require_worktree(worktree)
    # Untracked files are named explicitly: a status.showUntrackedFiles=no config would
    # otherwise make a worktree holding new files look clean.
    out = git(worktree.path, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
    paths: set[str] = set()
    entries = iter(out.split("\0"))
    for entry in entries:
        if not entry:
            continue
        paths.add(entry[3:])
        if entry[0] in "RC":
            # A rename or copy is followed by its source path, which changed as well.
            paths.add(next(entries, ""))
    paths.discard("")
    return sorted(paths)


def remove(worktree: Worktree) -> None:
    """Remove the worktree directory and its git administrative entry, keeping the branch
    (evidence cites its commits). Never raises for a worktree that is already gone."""
    # The worktree's parent lies in the main checkout, so git finds the repository from there
    # even when the worktree directory itself is gone.
    anchor = worktree.path.parent
    while not anchor.is_dir() and anchor != anchor.parent:
        anchor = anchor.parent
    if repo_root(anchor) is None:
        return
    removed = _run(anchor, "worktree", "remove", "--force", str(worktree.path))
    git(anchor, "worktree", "prune")
    if removed.returncode != 0 and worktree.path.exists():
        raise WorkspaceError(_failure(anchor, ("worktree", "remove", "--force",
                                               str(worktree.path)), removed),
                             hint=f"inspect {worktree.path}, delete it, then `git worktree prune`")


def _safe_todo_id(todo_id: str) -> str:
    if not todo_id:
        raise UsageProblem("a todo id is needed to name its worktree branch")
    safe = _UNSAFE_CHAR.sub("-", todo_id)
    # What is left after the substitution that git still refuses: "..", a leading or trailing
    # ".", a ".lock" suffix.
    safe = re.sub(r"\.(?=\.)", "-", safe)
    if safe.startswith("."):
        safe = "-" + safe[1:]
    if safe.endswith("."):
        safe = safe[:-1] + "-"
    if safe.endswith(".lock"):
        safe = safe[: -len(".lock")] + "-lock"
    return safe


def _ensure_ignored(root: Path, loopx_dir: Path) -> None:
    check = _run(root, "check-ignore", "-q", str(loopx_dir))
    if check.returncode == 0:
        return
    if check.returncode != 1:
        raise WorkspaceError(_failure(root, ("check-ignore", "-q", str(loopx_dir)), check))
    # info/exclude rather than .gitignore: ignoring .loopx/ must not dirty the user's tree.
    common = Path(git(root, "rev-parse", "--git-common-dir").strip())
    exclude = (root / common) / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if EXCLUDE_LINE in text.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    prefix = "\n" if text and not text.endswith("\n") else ""
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write(f"{prefix}{EXCLUDE_LINE}\n")


def _require_worktree(worktree: Worktree) -> None:
    # Without its .git file, git would walk up into the main checkout and answer for it.
    if not (worktree.path / ".git").exists():
        raise WorkspaceError(f"{worktree.path} is not a git worktree (it was removed, or never "
                             f"made) for branch {worktree.branch!r}")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, check=False,
            stdin=subprocess.DEVNULL, encoding="utf-8", errors="surrogateescape",
            env={**os.environ, "LC_ALL": "C"},  # stable messages to quote in errors
        )
    except FileNotFoundError as exc:
        raise WorkspaceError("the git executable was not found",
                             hint="install git or put it on PATH") from exc
    except OSError as exc:
        raise WorkspaceError(f"`git {shlex.join(args)}` could not be run: {exc}") from exc


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout.

    Raises:
        WorkspaceError: git is missing or the command failed (naming it and git's reason).
    """
    proc = _run(cwd, *args)
    if proc.returncode != 0:
        raise WorkspaceError(_failure(cwd, args, proc))
    return proc.stdout


def _failure(cwd: Path, args: tuple[str, ...], proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    why = lines[0] if lines else f"exit status {proc.returncode}"
    return f"`git {shlex.join(args)}` failed in {cwd}: {why}"
