"""A hypothesis is measured on its own change (write rules version 11).

Every scored packet starts from the campaign's base and is compared with the baseline measured
there, so the measured lift is everything between the base and the evaluated commit. An
executor that merges another hypothesis' branch (or cherry-picks its commits, or squashes its
branch into one commit) measures that hypothesis' effect as well, and a null idea is promoted on
another's lift. The protected boundary gate therefore also checks, from git, that no commit the
evaluated code holds is one, or the same change (``git patch-id``) as one or as the whole of
one's change from the base, that another hypothesis' packet evaluated first, in log order. A
hypothesis may build on those it refines or supersedes: its claim is theirs plus its own. A
violation has rule ``borrowed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loopx.research.git_read import GitRun, diff_tree, git_failed, resolve, run_git
from loopx.research.protected_history import CHANGE_NAMES, Violation

BORROWED = "borrowed"


@dataclass(frozen=True)
class Cited:
    """A packet's evaluated commit, where it sits in the log, and whose it is."""

    packet_id: str
    hypothesis_id: str
    seq: int
    evaluated_commit: str
    base_commit: str | None = None


@dataclass
class _Git:
    """The repository, with the ancestry answers already asked."""

    repo: Path
    _ancestry: dict[tuple[str, str], bool] = field(default_factory=dict)

    def changes(self, heads: set[str], bases: set[str]) -> tuple[dict[str, str], list[str]]:
        """The patch id of each commit with a change that ``heads`` reach and no base does."""
        if not heads:
            return {}, []
        log = run_git(self.repo, "log", "-p", "--binary", "--full-index", "--no-merges",
                      "--no-color", "--no-ext-diff", "--no-textconv", "--format=commit %H",
                      *sorted(heads), *(f"^{b}" for b in sorted(bases)), "--")
        return self._patch_ids(log, "listing the commits of evaluated code")

    def whole(self, packets: Sequence[Cited]) -> tuple[dict[str, str], list[str]]:
        """The patch id of each packet's whole change, base to evaluated commit (what a squash
        of its branch commits as one)."""
        pairs = sorted({(p.evaluated_commit, p.base_commit) for p in packets
                        if p.base_commit and p.base_commit != p.evaluated_commit})
        if not pairs:
            return {}, []
        diff = run_git(self.repo, "diff-tree", "--stdin", "-r", "-p", "--binary", "--full-index",
                       "--no-color", "--no-ext-diff", "--no-textconv",
                       input="".join(f"{e} {b}\n" for e, b in pairs).encode())
        return self._patch_ids(diff, "diffing evaluated code against its base")

    def _patch_ids(self, patches: GitRun, what: str) -> tuple[dict[str, str], list[str]]:
        """Each patch's id (``git patch-id --stable``) by the commit that heads it."""
        if patches.returncode != 0:
            return {}, [git_failed(patches, what)]
        ids = run_git(self.repo, "patch-id", "--stable", input=patches.out)
        if ids.returncode != 0:
            return {}, [git_failed(ids, "computing the patch ids of evaluated code")]
        pairs = (line.split() for line in ids.out.decode().splitlines())
        return {commit: patch for patch, commit in pairs}, []

    def holds(self, commit: str, evaluated: str) -> bool:
        """Whether ``evaluated`` holds ``commit`` (is it or descends from it)."""
        key = (commit, evaluated)
        if key not in self._ancestry:
            run = run_git(self.repo, "merge-base", "--is-ancestor", commit, evaluated)
            self._ancestry[key] = run.returncode == 0
        return self._ancestry[key]

    def first(self, commit: str, packets: Sequence[Cited]) -> Cited | None:
        """The packet earliest in the log whose evaluated code holds ``commit``."""
        return next((p for p in sorted(packets, key=lambda p: p.seq)
                     if self.holds(commit, p.evaluated_commit)), None)


def borrowed(repo: Path, bases: Iterable[str], relied: Sequence[Cited], own: Sequence[Cited],
             others: Sequence[Cited]) -> tuple[list[Violation], list[str]]:
    """Changes the ``relied`` packets' evaluated code holds that a packet of ``others`` evaluated
    before any ``own`` packet did (the hypothesis' and those of the hypotheses it refines or
    supersedes), and problems met reading git.

    ``bases`` are the campaign's base (what it holds is nobody's change), never what a packet
    says it started from.
    """
    g = _Git(repo)
    base_names = set(bases)
    named = {*base_names, *(p.evaluated_commit for p in [*relied, *others])}
    commits = resolve(repo, [f"{c}^{{commit}}" for c in named])  # one git process for all
    present = {c for c in named if f"{c}^{{commit}}" in commits}
    base_set = base_names & present
    heads = {p.evaluated_commit for p in relied if p.evaluated_commit in present} - base_set
    theirs = [p for p in others if p.evaluated_commit in present]
    if not heads or not theirs:
        return [], []
    mine, trouble = g.changes(heads, base_set)
    other_changes, more = g.changes({p.evaluated_commit for p in theirs} - base_set, base_set)
    squashed, most = g.whole([p for p in theirs if p.base_commit in base_set])
    trouble += more + most
    by_patch: dict[str, list[tuple[str, bool]]] = {}
    for whole, found in ((False, other_changes), (True, squashed)):
        for commit, patch in found.items():
            by_patch.setdefault(patch, []).append((commit, whole))
    violations: list[Violation] = []
    reasons: list[str] = []
    for commit, patch in sorted(mine.items()):
        for source, whole in sorted(by_patch.get(patch, [])):
            earliest = (min((p for p in theirs if p.evaluated_commit == source),
                            key=lambda p: p.seq) if whole else g.first(source, theirs))
            ours = g.first(commit, own)
            if earliest is None or (ours is not None and ours.seq < earliest.seq):
                continue  # it was this hypothesis' change first; the other took it
            if whole:
                how = f"the same change as all of {source} from its base"
            else:
                how = "the same commit" if source == commit else f"the same change as {source}"
            where = (f"{how}, which hypothesis {earliest.hypothesis_id}'s packet "
                     f"{earliest.packet_id} (seq {earliest.seq}) evaluated first")
            paths, problems = diff_tree(repo, ["--no-commit-id", "--no-renames", "--root", commit],
                                        f"commit {commit}")
            reasons += problems
            violations += [Violation(commit, c.dst_path, CHANGE_NAMES.get(c.status, c.status),
                                     where, BORROWED) for c in paths if c.dst_path]
            holder = next((p for p in relied if g.holds(commit, p.evaluated_commit)), None)
            label = f"packet {holder.packet_id}" if holder else "a packet"
            reasons.append(f"{label} evaluated code holding commit {commit}, {where}: a "
                           "hypothesis is measured on its own change "
                           f"({', '.join(c.dst_path for c in paths[:5])}"
                           f"{', ...' if len(paths) > 5 else ''})")
            break
    return violations, trouble + reasons
