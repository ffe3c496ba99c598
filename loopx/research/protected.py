"""The protected boundary gate: verify from git that no experiment changed the protected scope,
nor, when the contract sets an ``editable_scope``, anything outside it.

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

The editable scope (``check_boundary(..., editable=[...])``, when non-empty) uses the same entries
and the same history walk with the test turned round: a path that is added, modified, deleted,
changes type, is the old or the new path of a rename or the destination of a copy, and that no
editable entry matches, is a violation with rule ``outside_editable``; so is a symlink added or
changed whose target resolves outside the editable scope, leaves the repository or cannot be
resolved. Each violation names the rule it broke (``protected`` or ``outside_editable``); a change
that breaks both is listed once for each. ``protected_commit`` pins the protected scope only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loopx.research.git_read import repo_root
from loopx.research.protected_history import (
    OUTSIDE_EDITABLE,
    PROTECTED,
    ScopeInspector,
    Violation,
)
from loopx.research.protected_scope import (
    ScopeEntry,
    compile_scope,
    match_entry,
    normalise,
    parse_scope,
)

__all__ = ["NOT_IN_GIT", "NO_EVIDENCE", "BoundaryResult", "Violation", "check_boundary",
           "check_range", "is_protected", "repo_root"]

NOT_IN_GIT = ("the workspace is not inside a git repository: "
              "the protected boundary cannot be verified")
NO_EVIDENCE = "no evidence to check"

_MAX_LISTED = 5


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


def is_protected(path: str, protected: list[str]) -> bool:
    """Whether the repository-relative `path` falls in the protected scope (see module docs)."""
    if isinstance(protected, str):
        raise TypeError("protected must be a list of paths or patterns, not one string")
    entries, _ = compile_scope(protected)
    norm = normalise(path) if path else "."
    return match_entry(norm, entries) is not None


# --- the gate ---------------------------------------------------------------------------------


def check_range(repo: Path, base: str, evaluated: str, protected: list[str],
                editable: list[str] | None = None) -> tuple[list[Violation], list[str]]:
    """Every violation in `base..evaluated` (of the protected scope and, if `editable` is
    non-empty, of the editable scope), and what could not be verified."""
    entries, problems = parse_scope(protected)
    allowed, trouble = _editable(editable)
    problems += trouble
    if not Path(repo).is_dir():
        return [], problems + [f"the repository {str(repo)!r} is not a directory"]
    violations, trouble, _ = ScopeInspector(Path(repo), entries, allowed).check(base, evaluated)
    return violations, problems + trouble


def _editable(editable: object) -> tuple[list[ScopeEntry] | None, list[str]]:
    """The editable scope's entries, or None when there is none (nothing is then outside it)."""
    if editable is None or (isinstance(editable, Sequence) and not isinstance(editable, str)
                            and not editable):
        return None, []
    return parse_scope(editable, "editable scope")


def _summary(violations: list[Violation]) -> str:
    listed = [f"{v.path} {v.change} in {v.commit[:12]}" for v in violations[:_MAX_LISTED]]
    more = len(violations) - len(listed)
    return "; ".join(listed) + (f"; and {more} more" if more else "")


def check_boundary(repo: Path | None, packets: list[dict[str, Any]],
                   protected: list[str], pinned: str | None = None,
                   editable: list[str] | None = None) -> BoundaryResult:
    """Verify from git that no packet's range changed the protected scope, nor (with a
    non-empty ``editable``) any path outside the editable scope, and, with ``pinned`` (the
    contract's ``protected_commit``), that every evaluated commit's protected scope is exactly
    the pinned one's; fail closed."""
    entries, reasons = parse_scope(protected)
    allowed, trouble = _editable(editable)
    reasons += trouble
    if repo is None:
        return BoundaryResult(False, reasons + [NOT_IN_GIT], [], [])
    if not Path(repo).is_dir():
        return BoundaryResult(False, reasons + [NOT_IN_GIT + f" ({str(repo)!r} does not exist)"],
                              [], [])
    if isinstance(packets, (str, bytes, Mapping)) or not isinstance(packets, Sequence):
        return BoundaryResult(False, reasons + ["the evidence is not a list of packets"], [], [])
    if not packets:
        return BoundaryResult(False, reasons + [NO_EVIDENCE], [], [])
    inspector = ScopeInspector(Path(repo), entries, allowed)
    violations: dict[tuple[str, str, str, str], Violation] = {}
    checked: list[dict[str, Any]] = []
    for number, packet in enumerate(packets, start=1):
        if not isinstance(packet, Mapping):
            reasons.append(f"packet #{number} is not an object: its range cannot be checked")
            continue
        packet_id = packet.get("packet_id")
        label = packet.get("label") or (f"packet {packet_id}" if packet_id not in (None, "")
                                        else f"packet #{number}")
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
            seen = {(v.commit, v.path, v.change, v.rule) for v in found}
            found += [v for v in differs if (v.commit, v.path, v.change, v.rule) not in seen]
            problems += trouble
        reasons.extend(f"{label}: {problem}" for problem in problems)
        if count is not None:
            checked.append({"packet_id": packet_id, "base_commit": base,
                            "evaluated_commit": evaluated, "commits": count})
        for rule, broke in ((PROTECTED, "changes the protected scope"),
                            (OUTSIDE_EDITABLE, "changes files outside the editable scope")):
            these = [v for v in found if v.rule == rule]
            if these:
                reasons.append(f"{label} ({base}..{evaluated}) {broke}: {_summary(these)}")
        for violation in found:
            key = (violation.commit, violation.path, violation.change, violation.rule)
            violations.setdefault(key, violation)
    found_all = list(violations.values())
    return BoundaryResult(not reasons and not found_all, reasons, found_all, checked)
