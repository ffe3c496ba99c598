"""Held-out data confirms the code dev screened (write rules version 10).

A held-out todo's claim hands its executor the held-out data's location. An executor that then
changes the code before it evaluates (a threshold fit to the held-out data, say) confirms code
no dev run screened, with a measurement the held-out data itself shaped. The protected boundary
gate therefore also checks, from git, that each held-out packet's evaluated commit holds the
same tree as the evaluated commit of a dev packet the hypothesis' judgements rest on. Trees,
not commits: a lane that commits the same configuration again in a fresh worktree makes a new
commit of the same code. A path that differs from the latest such dev run is a violation with
rule ``unscreened``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopx.research.git_read import diff_tree, resolve
from loopx.research.protected_history import CHANGE_NAMES, Violation

UNSCREENED = "unscreened"


def unscreened(repo: Path, heldout: Sequence[dict[str, Any]],
               dev: Sequence[dict[str, Any]]) -> tuple[list[Violation], list[str]]:
    """Paths in which a held-out packet's evaluated code differs from every dev run's (compared
    with the latest dev run), and reasons why a comparison could not be made. Packets are
    ``{"packet_id", "evaluated_commit"}``, dev ones oldest first; a packet without an
    evaluated commit is left to the range check, which reports it."""
    screened = [p["evaluated_commit"] for p in dev if p.get("evaluated_commit")]
    held_commits = [p["evaluated_commit"] for p in heldout if p.get("evaluated_commit")]
    if not held_commits:
        return [], []
    violations: list[Violation] = []
    reasons: list[str] = []
    # Every tree in one git process: a commit that is none here is left to the range check.
    trees = resolve(repo, [f"{c}^{{tree}}" for c in [*screened, *held_commits]])
    dev_trees = {trees.get(f"{c}^{{tree}}") for c in screened}
    for packet in heldout:
        evaluated = packet.get("evaluated_commit")
        if not evaluated:
            continue
        label = f"held-out packet {packet['packet_id']}"
        if not screened:
            reasons.append(f"{label}: no dev packet its judgements rest on cites an evaluated "
                           "commit, so nothing shows the dev runs screened its code")
            continue
        held = trees.get(f"{evaluated}^{{tree}}")
        if held is None:
            continue  # not a commit here: the range check names it
        if held in dev_trees:
            continue
        latest = screened[-1]
        changes, trouble = diff_tree(repo, ["--no-renames", latest, evaluated],
                                     f"{evaluated} against {latest} ({label})")
        reasons += trouble
        if trouble and not changes:
            continue
        where = f"against the dev run's {latest}"
        violations += [Violation(evaluated, c.dst_path, CHANGE_NAMES.get(c.status, c.status),
                                 where, UNSCREENED) for c in changes]
        reasons.append(f"{label} evaluated {evaluated}, code no dev run screened: "
                       f"{len(changes)} path(s) differ from the dev run's {latest} "
                       f"({', '.join(c.dst_path for c in changes[:5])}"
                       f"{', ...' if len(changes) > 5 else ''})")
    return violations, reasons
