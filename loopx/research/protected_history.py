"""Git history checked against the protected scope (and, when the contract sets one, the
editable scope): each commit's changes, and the symlinks they add followed through the commit's
tree."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from loopx.research.git_read import (
    TreeChange,
    diff_tree,
    git_failed,
    git_text,
    run_git,
    shown,
)
from loopx.research.protected_scope import ScopeEntry, holds_protected, match_entry

# Packets must cite object names: a ref such as "main" or "HEAD" moves after the evaluation.
_COMMIT_RE = re.compile(r"[0-9a-fA-F]{4,64}")
_SYMLINK = "120000"
_MAX_SYMLINK_HOPS = 40  # the Linux limit on nested symlinks
CHANGE_NAMES = {"A": "added", "D": "deleted", "M": "modified", "T": "type changed"}


PROTECTED = "protected"
OUTSIDE_EDITABLE = "outside_editable"


@dataclass(frozen=True)
class Violation:
    """One change that broke a rule, found in one commit: ``rule`` is ``protected`` (it touched
    the protected scope) or ``outside_editable`` (it touched a path outside the editable scope)."""

    commit: str
    path: str
    change: str
    detail: str
    rule: str = PROTECTED


def _absolute(target: str) -> bool:
    return target.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", target) is not None


@dataclass
class ScopeInspector:
    """Checks ranges of one repository against one protected scope (``entries``) and, unless
    ``editable`` is None, one editable scope, sharing work between packets."""

    repo: Path
    entries: list[ScopeEntry]
    editable: list[ScopeEntry] | None = None
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
            run = run_git(self.repo, "rev-parse", "--verify", "--quiet", f"{value}^{{commit}}")
            sha = git_text(run.out).strip()
            if run.returncode == 1 or (run.returncode == 0 and not _COMMIT_RE.fullmatch(sha)):
                problems.append(f"{label} {value} is not a commit in this repository "
                                "(unknown or ambiguous)")
            elif run.returncode != 0:
                problems.append(git_failed(run, f"looking up {label} {value}"))
            else:
                shas.append(sha)
        if problems:
            return [], problems, None
        base_sha, evaluated_sha = shas
        run = run_git(self.repo, "merge-base", "--is-ancestor", base_sha, evaluated_sha)
        if run.returncode == 1:
            why = f"base_commit {base} is not an ancestor of evaluated_commit {evaluated}"
            return [], [why], None
        if run.returncode != 0:
            return [], [git_failed(run, "checking that base_commit is an ancestor")], None
        run = run_git(self.repo, "rev-list", "--reverse", "--topo-order", "--parents",
                   f"{base_sha}..{evaluated_sha}")
        if run.returncode != 0:
            return [], [git_failed(run, f"listing the commits in {base}..{evaluated}")], None
        commits = [git_text(line).split() for line in run.out.splitlines() if line.strip()]
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
        run = run_git(self.repo, "rev-parse", "--verify", "--quiet", f"{pinned}^{{commit}}")
        if run.returncode != 0:
            return [], [f"protected_commit {pinned} is not a commit in this repository"]
        changes, problems = diff_tree(self.repo, ["-M", "-C", "--no-commit-id", pinned,
                                                  evaluated], f"{evaluated} {where}")
        violations: list[Violation] = []
        for change in changes:
            # The pin holds the protected scope only: the main line may move elsewhere.
            violations += self._judge(evaluated, where, change, problems, editable=False)
        return violations, problems

    def _commit(self, commit: str, parents: list[str]) -> tuple[list[Violation], list[str]]:
        if commit not in self._commits:
            self._commits[commit] = self._inspect(commit, parents)
        return self._commits[commit]

    def _inspect(self, commit: str, parents: list[str]) -> tuple[list[Violation], list[str]]:
        if not parents:
            # A parentless commit inside a range is a root, unless the history is cut (shallow).
            run = run_git(self.repo, "cat-file", "commit", commit)
            if run.returncode != 0:
                return [], [git_failed(run, f"reading commit {commit}")]
            header = run.out.split(b"\n\n", 1)[0]
            if any(line.startswith(b"parent ") for line in header.splitlines()):
                return [], [(f"commit {commit} has parents missing from this repository "
                             "(shallow history): it cannot be inspected")]
        if not self.entries and self.editable is None:
            return [], []
        found: dict[tuple[str, str, str], Violation] = {}
        problems: list[str] = []
        for parent in parents or [None]:
            where = f"against parent {parent}" if parent else "root commit, against an empty tree"
            args = ["-M", "-C", "--no-commit-id"]
            args += [parent, commit] if parent else ["--root", commit]
            changes, trouble = diff_tree(self.repo, args, f"commit {commit} {where}")
            problems += trouble
            for change in changes:
                for violation in self._judge(commit, where, change, problems):
                    found.setdefault((violation.path, violation.change, violation.rule),
                                     violation)
        return list(found.values()), problems

    def _judge(self, commit: str, where: str, change: TreeChange, problems: list[str], *,
               editable: bool = True) -> list[Violation]:
        out: list[Violation] = []
        letter = change.status[0]
        allowed = self.editable if editable else None  # the editable entries, if judged

        def flag(path: str, what: str, extra: str = "") -> None:
            # One violation per rule the change breaks: a path may break both.
            entry = match_entry(path, self.entries)
            if entry is not None:
                out.append(Violation(commit, shown(path), what, f"matches protected entry "
                                     f"{entry.raw!r}{extra}; {where}", PROTECTED))
            if allowed is not None and match_entry(path, allowed) is None:
                out.append(Violation(commit, shown(path), what, f"outside the editable scope"
                                     f"{extra}; {where}", OUTSIDE_EDITABLE))

        if letter in CHANGE_NAMES:
            extra = f" (mode {change.src_mode} -> {change.dst_mode})" if letter == "T" else ""
            flag(change.dst_path, CHANGE_NAMES[letter], extra)
        elif letter == "R":
            flag(change.src_path, f"renamed to {shown(change.dst_path)}")
            flag(change.dst_path, f"renamed from {shown(change.src_path)}")
        elif letter == "C":
            flag(change.dst_path, f"copied from {shown(change.src_path)}")
        else:
            problems.append(f"commit {commit} {where}: unexpected change status "
                            f"{change.status!r} for {shown(change.dst_path)}")
            return out
        if letter != "D" and change.dst_mode == _SYMLINK:
            out.extend(self._symlink(commit, where, change.dst_path, change.dst_blob, problems,
                                     allowed))
        return out

    def _symlink(self, commit: str, where: str, path: str, blob: str, problems: list[str],
                 allowed: list[ScopeEntry] | None) -> list[Violation]:
        target = self._blob(blob)
        if target is None:
            problems.append(f"commit {commit}: the target of symlink {shown(path)} "
                            "could not be read")
            return []
        outcome, resolved = self._resolve(commit, path, target)
        if outcome == "problem":
            problems.append(f"commit {commit}: resolving symlink {shown(path)}: {resolved}")
            return []
        found: list[tuple[str, str]] = []  # (rule, why)
        if outcome in ("escapes", "loop"):
            why = ("the target leaves the repository" if outcome == "escapes" else
                   "the target cannot be resolved (a symlink loop or too many symlinks)")
            found = [(rule, why) for rule, judged in ((PROTECTED, bool(self.entries)),
                                                      (OUTSIDE_EDITABLE, allowed is not None))
                     if judged]
        else:
            if entry := match_entry(resolved, self.entries):
                found.append((PROTECTED, f"resolves to {shown(resolved)}, which matches "
                                         f"protected entry {entry.raw!r}"))
            elif entry := holds_protected(resolved, self.entries):
                found.append((PROTECTED, f"resolves to directory {shown(resolved)}, "
                                         f"which holds protected entry {entry.raw!r}"))
            if allowed is not None and match_entry(resolved, allowed) is None:
                found.append((OUTSIDE_EDITABLE, f"resolves to {shown(resolved)}, which is "
                                                "outside the editable scope"))
        return [Violation(commit, shown(path), f"symlink -> {shown(target)}",
                          f"{reason}; {where}", rule) for rule, reason in found]

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
                inner_path = shown("/".join(resolved))
                return "problem", f"the target of symlink {inner_path} could not be read"
            if _absolute(inner):
                return "escapes", ""
            resolved.pop()
            pending.extend(reversed(inner.split("/")))
        return "ok", "/".join(resolved) or "."

    def _symlinks(self, commit: str) -> dict[str, str] | str:
        """Every symlink in `commit`'s tree (path -> blob), or a problem text."""
        if commit not in self._links:
            run = run_git(self.repo, "ls-tree", "-r", "-z", "--full-tree", commit)
            if run.returncode != 0:
                self._links[commit] = git_failed(run, f"listing the tree of commit {commit}")
            else:
                links: dict[str, str] = {}
                for record in run.out.split(b"\0"):
                    meta, _, name = record.partition(b"\t")
                    parts = meta.split(b" ")
                    if len(parts) == 3 and parts[0] == _SYMLINK.encode():
                        links[git_text(name)] = git_text(parts[2])
                self._links[commit] = links
        return self._links[commit]

    def _blob(self, blob: str) -> str | None:
        if blob not in self._blobs:
            run = run_git(self.repo, "cat-file", "blob", blob)
            self._blobs[blob] = git_text(run.out) if run.returncode == 0 else None
        return self._blobs[blob]
