"""The protected boundary gate: verify from git that no experiment changed the protected scope.

A research contract's ``protected_scope`` lists repository-relative paths or glob patterns that no
experiment may change (the evaluator, held-out data, lock files). Evidence packets cite
``base_commit`` (where the executor's branch started) and ``evaluated_commit``; the gate reads the
history between them from git and never trusts a packet's own ``protected_scope_clean`` flag.

Pattern semantics (``is_protected``):

- Paths and entries are repository-relative POSIX paths and are normalised first: a leading ``./``
  or ``/``, repeated slashes, ``.`` segments and a trailing ``/`` are dropped, so ``./eval/`` is
  ``eval``. An entry that normalises to ``.`` protects the whole repository. An empty entry, or one
  that leaves the repository (``../x``), protects nothing, and the gate fails because of it.
- An entry protects a path when it matches that path or any directory containing it. A directory
  entry therefore protects the directory and everything below it, with or without the trailing
  slash: ``eval/`` and ``eval`` both protect ``eval/score.py``, but ``eval`` protects neither
  ``evaluation.py`` nor ``eval.py``.
- An entry is always compared literally; one containing ``*``, ``?`` or ``[`` is also matched with
  ``fnmatch.fnmatchcase`` against the whole path. fnmatch knows nothing of ``/``: ``*`` and ``**``
  both match across directories, so ``*.lock`` protects ``poetry.lock`` and ``web/yarn.lock``,
  and ``data/heldout/**`` everything below ``data/heldout/``. A ``**/`` at the start or after a
  ``/`` also matches no directory at all (``**/secret.txt`` protects ``secret.txt``), and a
  trailing ``/**`` also matches the directory itself.
- Matching is case-sensitive, as git is.

What the gate counts as a change (``check_range``): every commit in ``base..evaluated`` is diffed
on its own against each of its parents, so a change made and later reverted inside the range is
still caught, and a merge fails if a protected path differs from any one of its parents. A
protected path that is added, modified, deleted or changes type is a violation; a rename counts on
both its old and its new path; a copy counts only on its destination. A symlink added or changed
anywhere is followed, through other symlinks, in the tree of the commit that made it; it is a
violation when it resolves to a protected path or to a directory holding the fixed leading
directories of a protected entry, when it leaves the repository (an absolute target, or ``..``
above the root), or when it cannot be resolved. Anything the gate cannot verify (no git
repository, a commit that is not a hexadecimal object name of this repository, a base that is not
an ancestor, shallow history) fails it, with a reason.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

NOT_IN_GIT = ("the workspace is not inside a git repository: "
              "the protected boundary cannot be verified")
NO_EVIDENCE = "no evidence to check"

_GLOB_CHARS = frozenset("*?[")
# Packets must cite object names: a ref such as "main" or "HEAD" moves after the evaluation.
_COMMIT_RE = re.compile(r"[0-9a-fA-F]{4,64}")
_SYMLINK = "120000"
_MAX_SYMLINK_HOPS = 40  # the Linux limit on nested symlinks
_MAX_GLOB_VARIANTS = 64
_GIT_TIMEOUT = 300.0
_MAX_LISTED = 5
_CHANGE_NAMES = {"A": "added", "D": "deleted", "M": "modified", "T": "type changed"}
# Variables that would point git at another repository, object store or history than `repo`'s.
_REDIRECTING_ENV = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
    "GIT_REPLACE_REF_BASE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT", "GIT_PREFIX",
})


@dataclass(frozen=True)
class Violation:
    """One change to the protected scope, found in one commit."""

    commit: str
    path: str
    change: str
    detail: str


@dataclass(frozen=True)
class BoundaryResult:
    """The gate's verdict: passed only with no reasons and no violations."""

    passed: bool
    reasons: list[str]
    violations: list[Violation]
    checked: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able data, in the result's own (deterministic) order."""
        return {
            "passed": self.passed,
            "reasons": list(self.reasons),
            "violations": [asdict(v) for v in self.violations],
            "checked": [dict(c) for c in self.checked],
        }


# --- pattern matching -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    raw: str
    norm: str
    variants: tuple[str, ...]  # empty for a literal entry
    fixed_dir: str  # the leading directories before any glob character ("" for the root)


def _normalise(path: str) -> str:
    norm = posixpath.normpath(path).lstrip("/")
    return norm or "."


def _glob_variants(pattern: str) -> tuple[str, ...]:
    """The pattern plus every spelling where a `**/` or a trailing `/**` matches nothing."""
    seen = {pattern}
    todo = [pattern]
    while todo and len(seen) < _MAX_GLOB_VARIANTS:
        current = todo.pop()
        shorter = [current[: i] + current[i + 3:] for i in range(len(current))
                   if current.startswith("**/", i) and (i == 0 or current[i - 1] == "/")]
        if current.endswith("/**") and len(current) > 3:
            shorter.append(current[:-3])
        for candidate in shorter:
            if candidate and candidate not in seen:
                seen.add(candidate)
                todo.append(candidate)
    return tuple(sorted(seen))


def _compile(protected: Sequence[object]) -> tuple[list[_Entry], list[str]]:
    entries: list[_Entry] = []
    problems: list[str] = []
    for raw in protected:
        if not isinstance(raw, str) or not raw:
            problems.append(f"protected scope entry {raw!r} is not a path or pattern")
            continue
        norm = _normalise(raw)
        if norm == ".." or norm.startswith("../"):
            problems.append(f"protected scope entry {raw!r} is outside the repository")
            continue
        glob_at = next((i for i, ch in enumerate(norm) if ch in _GLOB_CHARS), None)
        if glob_at is None:
            entries.append(_Entry(raw, norm, (), "" if norm == "." else norm))
        else:
            fixed = norm[:glob_at].rpartition("/")[0]
            entries.append(_Entry(raw, norm, _glob_variants(norm), fixed))
    return entries, problems


def _match(path: str, entries: Sequence[_Entry]) -> _Entry | None:
    for entry in entries:
        if entry.norm == "." or path == entry.norm or path.startswith(entry.norm + "/"):
            return entry
        candidate = path
        while entry.variants:
            if any(fnmatch.fnmatchcase(candidate, v) for v in entry.variants):
                return entry
            if "/" not in candidate:
                break
            candidate = candidate.rpartition("/")[0]
    return None


def _holds_protected(directory: str, entries: Sequence[_Entry]) -> _Entry | None:
    """The first entry whose fixed leading directories lie at or below `directory`."""
    for entry in entries:
        if directory == "." or (entry.fixed_dir and (
                entry.fixed_dir == directory or entry.fixed_dir.startswith(directory + "/"))):
            return entry
    return None


def is_protected(path: str, protected: list[str]) -> bool:
    """Whether the repository-relative `path` falls in the protected scope (see module docs)."""
    if isinstance(protected, str):
        raise TypeError("protected must be a list of paths or patterns, not one string")
    entries, _ = _compile(protected)
    norm = _normalise(path) if path else "."
    return _match(norm, entries) is not None


# --- git --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
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


def _git(repo: Path, *args: str) -> _Run:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False,
                              stdin=subprocess.DEVNULL, env=_git_env(), timeout=_GIT_TIMEOUT)
    except FileNotFoundError:
        return _Run(None, b"", "the git executable was not found")
    except subprocess.TimeoutExpired:
        return _Run(None, b"", f"git {args[0]} did not finish within {_GIT_TIMEOUT:.0f} s")
    except OSError as exc:
        return _Run(None, b"", f"git {args[0]} could not be run: {exc}")
    return _Run(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace").strip())


def _failed(run: _Run, what: str) -> str:
    why = run.err or f"exit status {run.returncode}"
    return f"{what} failed: {why}"


def _text(raw: bytes) -> str:
    # surrogateescape keeps undecodable names byte-exact for matching.
    return raw.decode("utf-8", "surrogateescape")


def _shown(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def repo_root(path: Path) -> Path | None:
    """The top level of the git work tree containing `path`, or None if it is in none."""
    start = Path(path)
    while not start.is_dir():
        if start.parent == start:
            return None
        start = start.parent
    run = _git(start, "rev-parse", "--show-toplevel")
    top = _text(run.out).rstrip("\n")
    if run.returncode != 0 or not top:
        return None
    return Path(top)


@dataclass(frozen=True)
class _Change:
    status: str
    src_mode: str
    dst_mode: str
    dst_blob: str
    src_path: str
    dst_path: str


def _parse_raw(out: bytes) -> tuple[list[_Change], str | None]:
    """Parse `git diff-tree -z` raw output; the second item names a malformed record."""
    fields = out.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    changes: list[_Change] = []
    i = 0
    while i < len(fields):
        meta = _text(fields[i]).split(" ")
        if len(meta) != 5 or not meta[0].startswith(":") or not meta[4]:
            return changes, f"unexpected diff-tree output {_shown(_text(fields[i]))!r}"
        two_paths = meta[4][0] in "RC"
        wanted = 3 if two_paths else 2
        if i + wanted > len(fields):
            return changes, "truncated diff-tree output"
        src = _text(fields[i + 1])
        dst = _text(fields[i + 2]) if two_paths else src
        changes.append(_Change(meta[4], meta[0][1:], meta[1], meta[3], src, dst))
        i += wanted
    return changes, None


def _absolute(target: str) -> bool:
    return target.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", target) is not None


@dataclass
class _Inspector:
    """Checks ranges of one repository against one scope, sharing work between packets."""

    repo: Path
    entries: list[_Entry]
    _commits: dict[str, tuple[list[Violation], list[str]]] = field(default_factory=dict)
    _links: dict[str, dict[str, str] | str] = field(default_factory=dict)
    _blobs: dict[str, str | None] = field(default_factory=dict)

    def check(self, base: object,
              evaluated: object) -> tuple[list[Violation], list[str], int | None]:
        """(violations, problems, number of commits inspected or None if the range is unknown)."""
        problems: list[str] = []
        shas: list[str] = []
        for label, value in (("base_commit", base), ("evaluated_commit", evaluated)):
            if not isinstance(value, str) or not _COMMIT_RE.fullmatch(value):
                problems.append(f"{label} {value!r} is not a commit id (a hexadecimal object name)")
                continue
            run = _git(self.repo, "rev-parse", "--verify", "--quiet", f"{value}^{{commit}}")
            sha = _text(run.out).strip()
            if run.returncode == 1 or (run.returncode == 0 and not _COMMIT_RE.fullmatch(sha)):
                problems.append(f"{label} {value} is not a commit in this repository "
                                "(unknown or ambiguous)")
            elif run.returncode != 0:
                problems.append(_failed(run, f"looking up {label} {value}"))
            else:
                shas.append(sha)
        if problems:
            return [], problems, None
        base_sha, evaluated_sha = shas
        run = _git(self.repo, "merge-base", "--is-ancestor", base_sha, evaluated_sha)
        if run.returncode == 1:
            why = f"base_commit {base} is not an ancestor of evaluated_commit {evaluated}"
            return [], [why], None
        if run.returncode != 0:
            return [], [_failed(run, "checking that base_commit is an ancestor")], None
        run = _git(self.repo, "rev-list", "--reverse", "--topo-order", "--parents",
                   f"{base_sha}..{evaluated_sha}")
        if run.returncode != 0:
            return [], [_failed(run, f"listing the commits in {base}..{evaluated}")], None
        commits = [_text(line).split() for line in run.out.splitlines() if line.strip()]
        violations: list[Violation] = []
        for commit, *parents in commits:
            found, trouble = self._commit(commit, parents)
            violations.extend(found)
            problems.extend(trouble)
        return violations, problems, len(commits)

    def compare(self, pinned: str, evaluated: str) -> tuple[list[Violation], list[str]]:
        """Protected paths whose content differs between ``pinned`` and ``evaluated`` (net):
        what a range check cannot see when a packet cites a base after a protected change."""
        where = f"against the contract's protected_commit {pinned}"
        run = _git(self.repo, "rev-parse", "--verify", "--quiet", f"{pinned}^{{commit}}")
        if run.returncode != 0:
            return [], [f"protected_commit {pinned} is not a commit in this repository"]
        run = _git(self.repo, "diff-tree", "-r", "-z", "-M", "-C", "--no-commit-id", pinned,
                   evaluated)
        if run.returncode != 0:
            return [], [_failed(run, f"diffing {evaluated} {where}")]
        changes, malformed = _parse_raw(run.out)
        problems = [f"{evaluated} {where}: {malformed}"] if malformed else []
        violations: list[Violation] = []
        for change in changes:
            violations += self._judge(evaluated, where, change, problems)
        return violations, problems

    def _commit(self, commit: str, parents: list[str]) -> tuple[list[Violation], list[str]]:
        if commit not in self._commits:
            self._commits[commit] = self._inspect(commit, parents)
        return self._commits[commit]

    def _inspect(self, commit: str, parents: list[str]) -> tuple[list[Violation], list[str]]:
        if not parents:
            # A parentless commit inside a range is a root, unless the history is cut (shallow).
            run = _git(self.repo, "cat-file", "commit", commit)
            if run.returncode != 0:
                return [], [_failed(run, f"reading commit {commit}")]
            header = run.out.split(b"\n\n", 1)[0]
            if any(line.startswith(b"parent ") for line in header.splitlines()):
                return [], [(f"commit {commit} has parents missing from this repository "
                             "(shallow history): it cannot be inspected")]
        if not self.entries:
            return [], []
        found: dict[tuple[str, str], Violation] = {}
        problems: list[str] = []
        for parent in parents or [None]:
            where = f"against parent {parent}" if parent else "root commit, against an empty tree"
            args = ["diff-tree", "-r", "-z", "-M", "-C", "--no-commit-id"]
            args += [parent, commit] if parent else ["--root", commit]
            run = _git(self.repo, *args)
            if run.returncode != 0:
                problems.append(_failed(run, f"diffing commit {commit} {where}"))
                continue
            changes, malformed = _parse_raw(run.out)
            if malformed:
                problems.append(f"commit {commit} {where}: {malformed}")
            for change in changes:
                for violation in self._judge(commit, where, change, problems):
                    found.setdefault((violation.path, violation.change), violation)
        return list(found.values()), problems

    def _judge(self, commit: str, where: str, change: _Change,
               problems: list[str]) -> list[Violation]:
        out: list[Violation] = []
        letter = change.status[0]

        def flag(path: str, what: str, why: str) -> None:
            out.append(Violation(commit, _shown(path), what, f"{why}; {where}"))

        def scope(path: str) -> str | None:
            entry = _match(path, self.entries)
            return None if entry is None else f"matches protected entry {entry.raw!r}"

        if letter in _CHANGE_NAMES:
            why = scope(change.dst_path)
            if why and letter == "T":
                why += f" (mode {change.src_mode} -> {change.dst_mode})"
            if why:
                flag(change.dst_path, _CHANGE_NAMES[letter], why)
        elif letter == "R":
            why = scope(change.src_path)
            if why:
                flag(change.src_path, f"renamed to {_shown(change.dst_path)}", why)
            why = scope(change.dst_path)
            if why:
                flag(change.dst_path, f"renamed from {_shown(change.src_path)}", why)
        elif letter == "C":
            why = scope(change.dst_path)
            if why:
                flag(change.dst_path, f"copied from {_shown(change.src_path)}", why)
        else:
            problems.append(f"commit {commit} {where}: unexpected change status "
                            f"{change.status!r} for {_shown(change.dst_path)}")
            return out
        if letter != "D" and change.dst_mode == _SYMLINK:
            out.extend(self._symlink(commit, where, change.dst_path, change.dst_blob, problems))
        return out

    def _symlink(self, commit: str, where: str, path: str, blob: str,
                 problems: list[str]) -> list[Violation]:
        target = self._blob(blob)
        if target is None:
            problems.append(f"commit {commit}: the target of symlink {_shown(path)} "
                            "could not be read")
            return []
        outcome, resolved = self._resolve(commit, path, target)
        if outcome == "problem":
            problems.append(f"commit {commit}: resolving symlink {_shown(path)}: {resolved}")
            return []
        if outcome == "escapes":
            why = "the target leaves the repository"
        elif outcome == "loop":
            why = "the target cannot be resolved (a symlink loop or too many symlinks)"
        elif entry := _match(resolved, self.entries):
            why = f"resolves to {_shown(resolved)}, which matches protected entry {entry.raw!r}"
        elif entry := _holds_protected(resolved, self.entries):
            why = (f"resolves to directory {_shown(resolved)}, "
                   f"which holds protected entry {entry.raw!r}")
        else:
            return []
        return [Violation(commit, _shown(path), f"symlink -> {_shown(target)}", f"{why}; {where}")]

    def _resolve(self, commit: str, link: str, target: str) -> tuple[str, str]:
        """Follow `link` -> `target` in `commit`'s tree.

        Returns ("ok", resolved path), ("escapes", ""), ("loop", "") or ("problem", why).
        """
        links = self._symlinks(commit)
        if isinstance(links, str):
            return "problem", links
        if _absolute(target):
            return "escapes", ""
        resolved = link.split("/")[:-1]
        pending = list(reversed(target.split("/")))
        hops = 0
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not resolved:
                    return "escapes", ""
                resolved.pop()
                continue
            resolved.append(part)
            inner_blob = links.get("/".join(resolved))
            if inner_blob is None:
                continue
            hops += 1
            if hops > _MAX_SYMLINK_HOPS:
                return "loop", ""
            inner = self._blob(inner_blob)
            if inner is None:
                inner_path = _shown("/".join(resolved))
                return "problem", f"the target of symlink {inner_path} could not be read"
            if _absolute(inner):
                return "escapes", ""
            resolved.pop()
            pending.extend(reversed(inner.split("/")))
        return "ok", "/".join(resolved) or "."

    def _symlinks(self, commit: str) -> dict[str, str] | str:
        """Every symlink in `commit`'s tree (path -> blob), or a problem text."""
        if commit not in self._links:
            run = _git(self.repo, "ls-tree", "-r", "-z", "--full-tree", commit)
            if run.returncode != 0:
                self._links[commit] = _failed(run, f"listing the tree of commit {commit}")
            else:
                links: dict[str, str] = {}
                for record in run.out.split(b"\0"):
                    meta, _, name = record.partition(b"\t")
                    parts = meta.split(b" ")
                    if len(parts) == 3 and parts[0] == _SYMLINK.encode():
                        links[_text(name)] = _text(parts[2])
                self._links[commit] = links
        return self._links[commit]

    def _blob(self, blob: str) -> str | None:
        if blob not in self._blobs:
            run = _git(self.repo, "cat-file", "blob", blob)
            self._blobs[blob] = _text(run.out) if run.returncode == 0 else None
        return self._blobs[blob]


# --- the gate ---------------------------------------------------------------------------------


def _scope(protected: object) -> tuple[list[_Entry], list[str]]:
    if isinstance(protected, str) or not isinstance(protected, Sequence):
        return [], ["the protected scope is not a list of paths or patterns"]
    return _compile(protected)


def check_range(repo: Path, base: str, evaluated: str,
                protected: list[str]) -> tuple[list[Violation], list[str]]:
    """Every protected-scope violation in `base..evaluated`, and what could not be verified."""
    entries, problems = _scope(protected)
    if not Path(repo).is_dir():
        return [], problems + [f"the repository {str(repo)!r} is not a directory"]
    violations, trouble, _ = _Inspector(Path(repo), entries).check(base, evaluated)
    return violations, problems + trouble


def _summary(violations: list[Violation]) -> str:
    listed = [f"{v.path} {v.change} in {v.commit[:12]}" for v in violations[:_MAX_LISTED]]
    more = len(violations) - len(listed)
    return "; ".join(listed) + (f"; and {more} more" if more else "")


def check_boundary(repo: Path | None, packets: list[dict[str, Any]],
                   protected: list[str], pinned: str | None = None) -> BoundaryResult:
    """Verify from git that no packet's range changed the protected scope and, with ``pinned``
    (the contract's ``protected_commit``), that every evaluated commit's protected scope is
    exactly the pinned one's; fail closed."""
    entries, reasons = _scope(protected)
    if repo is None:
        return BoundaryResult(False, reasons + [NOT_IN_GIT], [], [])
    if not Path(repo).is_dir():
        return BoundaryResult(False, reasons + [NOT_IN_GIT + f" ({str(repo)!r} does not exist)"],
                              [], [])
    if isinstance(packets, (str, bytes, Mapping)) or not isinstance(packets, Sequence):
        return BoundaryResult(False, reasons + ["the evidence is not a list of packets"], [], [])
    if not packets:
        return BoundaryResult(False, reasons + [NO_EVIDENCE], [], [])
    inspector = _Inspector(Path(repo), entries)
    violations: dict[tuple[str, str, str], Violation] = {}
    checked: list[dict[str, Any]] = []
    for number, packet in enumerate(packets, start=1):
        if not isinstance(packet, Mapping):
            reasons.append(f"packet #{number} is not an object: its range cannot be checked")
            continue
        packet_id = packet.get("packet_id")
        label = f"packet {packet_id}" if packet_id not in (None, "") else f"packet #{number}"
        base, evaluated = packet.get("base_commit"), packet.get("evaluated_commit")
        missing = [name for name, value in (("base_commit", base), ("evaluated_commit", evaluated))
                   if value in (None, "")]
        if missing:
            reasons.append(f"{label} has no {' and no '.join(missing)}: "
                           "its range cannot be checked")
            continue
        found, problems, count = inspector.check(base, evaluated)
        if pinned is not None and count is not None:
            differs, trouble = inspector.compare(pinned, str(evaluated))
            seen = {(v.commit, v.path, v.change) for v in found}
            found += [v for v in differs if (v.commit, v.path, v.change) not in seen]
            problems += trouble
        reasons.extend(f"{label}: {problem}" for problem in problems)
        if count is not None:
            checked.append({"packet_id": packet_id, "base_commit": base,
                            "evaluated_commit": evaluated, "commits": count})
        if found:
            reasons.append(f"{label} ({base}..{evaluated}) changes the protected scope: "
                           f"{_summary(found)}")
        for violation in found:
            violations.setdefault((violation.commit, violation.path, violation.change), violation)
    found_all = list(violations.values())
    return BoundaryResult(not reasons and not found_all, reasons, found_all, checked)
