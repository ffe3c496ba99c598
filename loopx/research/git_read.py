"""Read-only git for the protected gate: git run against one repository with the variables
that would redirect it removed, and its diff-tree output parsed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_GIT_TIMEOUT = 300.0
_OBJECT_TYPES = frozenset({"commit", "tree", "blob", "tag"})
# Variables that would point git at another repository, object store or history than `repo`'s.
_REDIRECTING_ENV = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
    "GIT_REPLACE_REF_BASE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT", "GIT_PREFIX",
})


@dataclass(frozen=True)
class GitRun:
    """What one git command returned."""

    returncode: int | None  # None: git could not be run at all
    out: bytes
    err: str


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING_ENV
           and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}
    # Replace refs and grafts let a repository show a history other than the recorded one.
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_GRAFT_FILE"] = os.devnull
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["LC_ALL"] = "C"
    return env


def run_git(repo: Path, *args: str, input: bytes | None = None) -> GitRun:
    """Run git in `repo` (with ``input`` on its stdin, else none); a git that cannot run is a
    result, never an exception."""
    stdin = subprocess.DEVNULL if input is None else None
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False,
                              stdin=stdin, input=input, env=_git_env(), timeout=_GIT_TIMEOUT)
    except FileNotFoundError:
        return GitRun(None, b"", "the git executable was not found")
    except subprocess.TimeoutExpired:
        return GitRun(None, b"", f"git {args[0]} did not finish within {_GIT_TIMEOUT:.0f} s")
    except OSError as exc:
        return GitRun(None, b"", f"git {args[0]} could not be run: {exc}")
    return GitRun(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace").strip())


def resolve(repo: Path, names: Iterable[str]) -> dict[str, str]:
    """The object id each of ``names`` (revision expressions such as ``SHA^{tree}``) resolves
    to in ``repo``, in one git process; a name that resolves to nothing is left out."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    run = run_git(repo, "cat-file", "--batch-check=%(objecttype) %(objectname)",
                  input="".join(f"{name}\n" for name in wanted).encode())
    lines = run.out.decode().splitlines() if run.returncode == 0 else []
    found = (line.split(" ") for line in lines)
    return {name: parts[1] for name, parts in zip(wanted, found, strict=False)
            if len(parts) == 2 and parts[0] in _OBJECT_TYPES}


def git_failed(run: GitRun, what: str) -> str:
    why = run.err or f"exit status {run.returncode}"
    return f"{what} failed: {why}"


def git_text(raw: bytes) -> str:
    # surrogateescape keeps undecodable names byte-exact for matching.
    return raw.decode("utf-8", "surrogateescape")


def shown(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def repo_root(path: Path) -> Path | None:
    """The top level of the git work tree containing `path`, or None if it is in none."""
    start = Path(path)
    while not start.is_dir():
        if start.parent == start:
            return None
        start = start.parent
    run = run_git(start, "rev-parse", "--show-toplevel")
    top = git_text(run.out).rstrip("\n")
    if run.returncode != 0 or not top:
        return None
    return Path(top)


@dataclass(frozen=True)
class TreeChange:
    """One record of `git diff-tree` raw output."""

    status: str
    src_mode: str
    dst_mode: str
    dst_blob: str
    src_path: str
    dst_path: str


def diff_tree(repo: Path, args: Sequence[str], what: str) -> tuple[list[TreeChange], list[str]]:
    """``git diff-tree -r -z ARGS`` in ``repo``, parsed, and the problems met (git failed, its
    output malformed), each naming ``what`` was diffed."""
    run = run_git(repo, "diff-tree", "-r", "-z", *args)
    if run.returncode != 0:
        return [], [git_failed(run, f"diffing {what}")]
    changes, malformed = parse_diff_tree(run.out)
    return changes, [f"{what}: {malformed}"] if malformed else []


def parse_diff_tree(out: bytes) -> tuple[list[TreeChange], str | None]:
    """Parse `git diff-tree -z` raw output; the second item names a malformed record."""
    fields = out.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    changes: list[TreeChange] = []
    i = 0
    while i < len(fields):
        meta = git_text(fields[i]).split(" ")
        if len(meta) != 5 or not meta[0].startswith(":") or not meta[4]:
            return changes, f"unexpected diff-tree output {shown(git_text(fields[i]))!r}"
        two_paths = meta[4][0] in "RC"
        wanted = 3 if two_paths else 2
        if i + wanted > len(fields):
            return changes, "truncated diff-tree output"
        src = git_text(fields[i + 1])
        dst = git_text(fields[i + 2]) if two_paths else src
        changes.append(TreeChange(meta[4], meta[0][1:], meta[1], meta[3], src, dst))
        i += wanted
    return changes, None
