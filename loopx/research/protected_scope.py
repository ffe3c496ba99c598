"""Scope entries (the protected and the editable scope): normalising paths and matching them
against literal entries and glob patterns (the semantics are in :mod:`loopx.research.protected`)."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

_GLOB_CHARS = frozenset("*?[")
_MAX_GLOB_VARIANTS = 64


@dataclass(frozen=True)
class ScopeEntry:
    """One scope entry, normalised and ready to match."""

    raw: str
    norm: str
    variants: tuple[str, ...]  # empty for a literal entry
    fixed_dir: str  # the leading directories before any glob character ("" for the root)


def normalise(path: str) -> str:
    """A repository-relative POSIX path without ``./``, ``//``, a leading or trailing ``/``."""
    norm = posixpath.normpath(path).lstrip("/")
    return norm or "."


def leaves_repository(norm: str) -> bool:
    """Whether a normalised path climbs above the repository's root."""
    return norm == ".." or norm.startswith("../")


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


def compile_scope(protected: Sequence[object],
                  label: str = "protected scope") -> tuple[list[ScopeEntry], list[str]]:
    """The usable entries, and a problem for each entry that matches nothing (``label`` names
    the scope in it)."""
    entries: list[ScopeEntry] = []
    problems: list[str] = []
    for raw in protected:
        if not isinstance(raw, str) or not raw:
            problems.append(f"{label} entry {raw!r} is not a path or pattern")
            continue
        norm = normalise(raw)
        if leaves_repository(norm):
            problems.append(f"{label} entry {raw!r} is outside the repository")
            continue
        glob_at = next((i for i, ch in enumerate(norm) if ch in _GLOB_CHARS), None)
        if glob_at is None:
            entries.append(ScopeEntry(raw, norm, (), "" if norm == "." else norm))
        else:
            fixed = norm[:glob_at].rpartition("/")[0]
            entries.append(ScopeEntry(raw, norm, _glob_variants(norm), fixed))
    return entries, problems


def match_entry(path: str, entries: Sequence[ScopeEntry]) -> ScopeEntry | None:
    """The first entry that protects the normalised `path`, or None."""
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


def holds_protected(directory: str, entries: Sequence[ScopeEntry]) -> ScopeEntry | None:
    """The first entry whose fixed leading directories lie at or below `directory`."""
    for entry in entries:
        if directory == "." or (entry.fixed_dir and (
                entry.fixed_dir == directory or entry.fixed_dir.startswith(directory + "/"))):
            return entry
    return None


def parse_scope(protected: object,
                label: str = "protected scope") -> tuple[list[ScopeEntry], list[str]]:
    """Like compile_scope, for a scope that may not be a list at all."""
    if isinstance(protected, str) or not isinstance(protected, Sequence):
        return [], [f"the {label} is not a list of paths or patterns"]
    return compile_scope(protected, label)
