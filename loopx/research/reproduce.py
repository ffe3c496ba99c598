"""Re-running a held-out packet: the packet's evaluated commit checked out in a fresh worktree,
the evaluator's command run there on the held-out split, and each value it gives compared with
the value the packet recorded. A pure comparison (:func:`compare`) and one impure step
(:func:`rerun`); the reproduced gate (``loopx gate reproduce``) records what they found.

The command is the evaluator's own (its lane configuration or its command line), never text from
the log: a record's words are data for other agents, not instructions. It reads one JSON object
on stdin (``packet_id``, ``hypothesis_id``, ``split``, ``location``, ``metric``, ``seeds``,
``evaluated_commit``) and prints one on stdout: ``{"results": [{"seed": S, "value": V}, ...]}``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopx.kernel.tokens import TOKEN_PREFIX
from loopx.research.git_read import run_git

REPRODUCED, DIFFERS, NOT_RUN = "reproduced", "differs", "not_run"
# Values a gate result keeps per packet (the detail names the first that differ): a record is
# at most 64 KiB.
KEPT_VALUES = 64
# What of a failed command's stderr a reason keeps: enough to see the error, no more.
STDERR_CHARS = 400


@dataclass(frozen=True)
class Rerun:
    """One packet re-run: its outcome, each seed's recorded and re-run value, and why it was
    not run or differs, in words."""

    packet_id: str
    evaluated_commit: str | None
    outcome: str
    values: list[dict[str, Any]] = field(default_factory=list)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The packet's entry in a ``gate_result_v0``'s ``reproductions``."""
        return {"packet_id": self.packet_id, "evaluated_commit": self.evaluated_commit,
                "outcome": self.outcome, "values": self.values[:KEPT_VALUES],
                "detail": self.detail[:500]}


def recorded(packet: dict[str, Any], metric: str) -> list[tuple[int, float]]:
    """The (seed, value) pairs a folded packet recorded for ``metric`` on the held-out split."""
    return [(seed, value) for split, name, seed, value in packet["results"]
            if split == "heldout" and name == metric]


def compare(packet_id: str, commit: str | None, values: list[tuple[int, float]],
            answer: dict[int, float], tolerance: float) -> Rerun:
    """Each recorded value against the re-run's value for its seed (``answer`` has every seed):
    ``differs`` if any is further apart than ``tolerance``."""
    rows = [{"seed": seed, "recorded": value, "reproduced": answer[seed]}
            for seed, value in values]
    off = [r for r in rows if abs(r["reproduced"] - r["recorded"]) > tolerance]
    if not off:
        return Rerun(packet_id, commit, REPRODUCED, rows)
    said = "; ".join(f"seed {r['seed']}: recorded {r['recorded']:.10g}, the re-run gave "
                     f"{r['reproduced']:.10g}" for r in off[:8])
    more = f" (and {len(off) - 8} more)" if len(off) > 8 else ""
    return Rerun(packet_id, commit, DIFFERS, rows,
                 f"{len(off)} of {len(rows)} value(s) differ by more than {tolerance:g}: "
                 f"{said}{more}")


def parse_answer(stdout: str, seeds: list[int]) -> dict[int, float]:
    """The values a command printed, by seed.

    Raises:
        ValueError: not the expected JSON object, a seed twice, or a value not a finite number.
    """
    try:
        answer = json.loads(stdout)
    except ValueError:
        raise ValueError("its output is not JSON (expected {\"results\": [{\"seed\": S, "
                         "\"value\": V}, ...]})") from None
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ValueError("its output has no \"results\" list")
    out: dict[int, float] = {}
    for i, item in enumerate(results):
        seed = item.get("seed") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if type(seed) is not int or seed not in seeds:
            raise ValueError(f"results[{i}].seed: {seed!r} is not one of the packet's seeds "
                             f"{seeds}")
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise ValueError(f"results[{i}].value: {value!r} is not a finite number")
        if seed in out:
            raise ValueError(f"results[{i}].seed: seed {seed} is given twice")
        out[seed] = float(value)
    lacking = [seed for seed in seeds if seed not in out]
    if lacking:
        raise ValueError(f"results lack seed(s) {', '.join(map(str, lacking))}")
    return out


def command_env() -> dict[str, str]:
    """The environment a re-run gets: the evaluator's, without loopx's variables or anything
    holding a token (the code re-run is an executor's)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("LOOPX_") and TOKEN_PREFIX not in v}


def rerun(repo: Path | None, command: list[str], packet: dict[str, Any], metric: str,
          location: str | None, tolerance: float, timeout: float) -> Rerun:
    """Check out a folded held-out ``packet``'s evaluated commit in a fresh detached worktree,
    run ``command`` there with the request on stdin, compare its answer with the packet's
    values of ``metric``, and remove the worktree."""
    packet_id, commit = packet["packet_id"], packet["evaluated_commit"]
    values = recorded(packet, metric)
    if repo is None:
        return Rerun(packet_id, commit, NOT_RUN, detail="the workspace is not in a git "
                     "repository: no commit can be checked out")
    if not commit:
        return Rerun(packet_id, commit, NOT_RUN, detail="the packet cites no evaluated commit")
    if not values:
        return Rerun(packet_id, commit, NOT_RUN,
                     detail=f"the packet recorded no held-out value of {metric}")
    seeds = sorted({seed for seed, _ in values})
    request = {"packet_id": packet_id, "hypothesis_id": packet["hypothesis_id"],
               "split": "heldout", "location": location, "metric": metric, "seeds": seeds,
               "evaluated_commit": commit}
    place = Path(tempfile.mkdtemp(prefix="loopx-reproduce-"))
    try:
        made = run_git(repo, "worktree", "add", "--detach", str(place), commit)
        if made.returncode != 0:
            return Rerun(packet_id, commit, NOT_RUN,
                         detail=f"git could not check out {commit[:12]}: "
                                f"{made.err[:STDERR_CHARS]}")
        out, problem = _run(command, place, json.dumps(request, sort_keys=True), timeout)
        if out is None:
            return Rerun(packet_id, commit, NOT_RUN, detail=problem)
        try:
            answer = parse_answer(out, seeds)
        except ValueError as exc:
            return Rerun(packet_id, commit, NOT_RUN, detail=f"the command's answer: {exc}")
        return compare(packet_id, commit, values, answer, tolerance)
    finally:
        run_git(repo, "worktree", "remove", "--force", str(place))
        run_git(repo, "worktree", "prune")
        shutil.rmtree(place, ignore_errors=True)


def _run(command: list[str], cwd: Path, stdin: str, timeout: float) -> tuple[str | None, str]:
    """The command's stdout, or None and why it gave none (in words)."""
    try:
        # The executor's code may print any bytes: they are decoded, never a traceback.
        child = subprocess.Popen(command, cwd=cwd, env=command_env(), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 encoding="utf-8", errors="replace", start_new_session=True)
    except OSError as exc:
        return None, f"the command could not start: {exc.strerror or exc}"
    try:
        out, err = child.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        # Its own process group: whatever it started goes with it.
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended on its own meanwhile
        child.communicate()
        return None, f"the command did not finish within {timeout:g} s"
    if child.returncode != 0:
        return None, (f"the command exited with status {child.returncode}: "
                      f"{err.strip()[-STDERR_CHARS:] or '(no stderr)'}")
    return out, ""
