"""`loopx frontier` + `loopx candidates` after one new record, in fresh CLI processes, against
a full rebuild.

What it measures
    Builds (untimed) a file-backed workspace (``loopx.workspace.init_workspace``) whose log
    holds about N records (default 100,000). A few thousand hypotheses (default N / 50) go
    through the research loop with real agents and the checked write path
    (``loopx.testing.research.ResearchLoop``): proposals (a few duplicates of earlier content,
    some refused), failed attempts, dev runs and judgements, held-out runs and judgements for
    those dev supports, and decisions (promotions, retirements). Between blocks of hypotheses,
    and at the end up to N, the log is filled with rollout events of an executor holding a todo
    (``loopx.testing.lanes.executor_writer``), 1,000 per checked append. The build writes with
    ``FileStore(durable=False)``: durability is not what is measured.

    Each repetition leaves the checkpoint a ledger with the default ``checkpoint_every`` leaves
    after a command at the head (``.loopx/checkpoints/``, written by the workspace's own
    ``Ledger``), appends ONE record through the checked path (a dev judgement,
    ``loopx.research.operations.judge``, of a different hypothesis each repetition), untimed,
    then times, in alternating order, what an agent pays for both projections:
      (a) incremental  ``loopx frontier --json`` then ``loopx candidates --json``, each a fresh
                       process, spawn to exit, on the workspace with that checkpoint: each loads
                       the checkpoint, folds the one new record, recomputes the rows it touched
                       and prints the others as the checkpoint keeps them
                       (``loopx.research.row_cache``)
      (b) rebuild      the same two processes with no checkpoint to read or write (the
                       ``checkpoints`` directory is replaced by a plain file for the case, so
                       the rebuild pays neither a load nor a save): each reads and folds the
                       whole log, then projects
    The two processes of a case run one after the other; the case's time is their sum. Each
    repetition checks that (a) and (b) print byte-identical JSON naming the new record's seq
    as head, that (a) left the checkpoint untouched and that (b) wrote none.
    Bytecode caching is on, in a private cache that untimed first runs fill (as after an
    install's first import).

Verdict (median of per-repetition ratios)
    (a)/(b)   goal <= 0.05: after one new record, a fresh process pays a checkpoint load, a
              catch-up step and the rows that record touched, never a replay of the log
    Also printed: the CPU time (user + system) of each case's processes and its ratio, which
    other load on the machine sways less than the wall time the verdict uses.

Run
    python bench/projections_incremental.py                    # defaults, about a minute
    python bench/projections_incremental.py --records 20000    # quick, about 15 s
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GOAL = "bench-projections"
BLOCK = 100  # hypotheses between two filler batches
FILLER_BATCH = 1000
MECHANISMS = ("width", "depth", "lr", "dropout", "augment")
LEVELS = (0.86, 0.9, 0.9, 0.95)  # dev mean below, at or above the baseline 0.9


@dataclass
class Built:
    """The workspace and what the timed part needs from the build."""

    root: Path
    loop: Any  # ResearchLoop, whose ledger is the (untimed) writer
    judgeable: list[str]  # hypotheses with a scored dev packet: each may be judged again
    counts: dict[str, int] = field(default_factory=dict)


def research(loop: Any, rng: random.Random, hid: str, n: int, proposed: list[dict[str, Any]],
             counts: dict[str, int]) -> bool:
    """Take one hypothesis as far as its evidence goes; True if it has a scored dev packet."""
    from loopx.kernel.errors import LoopxError
    from loopx.research.decisions import decide
    from loopx.research.projections import row
    from loopx.work.claims import fail

    mechanism = rng.choice(MECHANISMS)
    content: dict[str, Any] = {"mechanism": mechanism, "parameters": {"n": n},
                               "statement": f"{mechanism} change {n} lifts accuracy"}
    if proposed and rng.random() < 0.03:  # the same content again: a duplicate
        content = rng.choice(proposed)
    try:
        loop.propose(hid, **content)
    except LoopxError:  # a duplicate of a retired or contradicted one: refused and recorded
        counts["refused"] += 1
        # The refusal left the proposer holding its todo; failing it reopens it for the next.
        lanes = loop.ledger.state()["lanes"]
        for todo_id in lanes["agents"]["prop"]["holding"]:
            fail(loop.ledger, loop.agents["prop"], todo_id, lanes["todos"][todo_id]["epoch"],
                 "refused as a duplicate")
        return False
    proposed.append(content)
    counts["hypotheses"] += 1
    if rng.random() < 0.1:
        loop.run(hid, "dev", None, status="failed")
    level = rng.choice(LEVELS)
    loop.run(hid, "dev", [round(level + rng.uniform(-0.01, 0.01), 3) for _ in range(3)])
    if loop.judge(hid, "dev")["verdict"] == "supports":
        level = rng.choice(LEVELS)
        loop.run(hid, "heldout", [round(level + rng.uniform(-0.01, 0.01), 3) for _ in range(3)])
        loop.judge(hid, "heldout")
    current = row(loop.ledger.state()["lanes"], hid)
    ev = loop.agents["ev"]
    if current.promotion is not None and rng.random() < 0.5:
        decide(loop.ledger, ev, hid, "promoted")
        counts["promoted"] += 1
    elif current.retirement is not None and rng.random() < 0.5:
        decide(loop.ledger, ev, hid, "retired", reason=current.retirement["reasons"][0])
        counts["retired"] += 1
    return True


def build(root: Path, records: int, hypotheses: int, seed: int) -> Built:
    """A workspace under ``root`` whose log holds about ``records`` records."""
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.testing.lanes import executor_writer
    from loopx.testing.research import ResearchLoop
    from loopx.workspace import init_workspace

    ws, owner_token = init_workspace(root, GOAL)
    ledger = Ledger(ws.store(durable=False))
    loop = ResearchLoop(ledger, Credentials("owner", owner_token))
    loop.contract()
    writer = executor_writer(ledger, owner_token, "filler")
    rng = random.Random(seed)
    counts = {"hypotheses": 0, "refused": 0, "promoted": 0, "retired": 0, "filler": 0}
    proposed: list[dict[str, Any]] = []
    judgeable: list[str] = []

    def fill(upto: int) -> None:
        while (left := upto - ledger.store.head().seq) > 0:
            batch = [writer.tie({"payload": {"event": "progress",
                                             "detail": {"i": i, "pad": "x" * 64}}})
                     for i in range(min(left, FILLER_BATCH))]
            ledger.append(batch, creds=writer.creds, kind="rollout_event_v0")
            counts["filler"] += len(batch)

    start = ledger.store.head().seq
    per_hypothesis: float | None = None
    for n in range(hypotheses):
        hid = f"h{n:05d}"
        if research(loop, rng, hid, n, proposed, counts):
            judgeable.append(hid)
        done = n + 1
        if done % BLOCK == 0 or done == hypotheses:
            if per_hypothesis is None:  # research records per hypothesis, from the first block
                per_hypothesis = (ledger.store.head().seq - start) / done
            # Filler spread over the campaign: what the research will not fill, in proportion.
            spare = records - start - per_hypothesis * hypotheses
            fill(int(start + per_hypothesis * done + spare * done / hypotheses))
    fill(records)
    return Built(root, loop, judgeable, counts)


@dataclass
class Case:
    """One timed case: seconds of each process, and what each printed."""

    frontier: float
    candidates: float
    out: tuple[str, str]
    cpu: float = 0.0  # user + system seconds of both processes (RUSAGE_CHILDREN)

    @property
    def total(self) -> float:
        return self.frontier + self.candidates


def loopx_argv(root: Path, command: str) -> list[str]:
    """The installed ``loopx`` entry point (as an agent runs it) for ``command --json``."""
    loopx = Path(sys.executable).with_name("loopx")
    head = [str(loopx)] if loopx.exists() else [sys.executable, "-m", "loopx.cli"]
    return [*head, "-C", str(root), command, "--json"]


def run_case(root: Path, env: dict[str, str]) -> Case:
    """``loopx frontier --json`` then ``loopx candidates --json``, each timed spawn to exit."""
    times: list[float] = []
    outs: list[str] = []
    before = _children_cpu()
    for command in ("frontier", "candidates"):
        t0 = time.perf_counter()
        done = subprocess.run(loopx_argv(root, command), capture_output=True, text=True,
                              env=env, check=False)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise RuntimeError(f"loopx {command} failed: {done.stderr}")
        outs.append(done.stdout)
    return Case(times[0], times[1], (outs[0], outs[1]), _children_cpu() - before)


def _children_cpu() -> float:
    """CPU seconds of every child reaped so far (the cases' processes run one at a time)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def save_head_checkpoint(root: Path) -> Path:
    """Leave the checkpoint the workspace's ledger leaves after a command at the head."""
    from loopx.kernel.ledger import Ledger
    from loopx.workspace import find_workspace

    ws = find_workspace(root)
    ledger = ws.ledger()
    ledger.checkpoint_every = 1  # save at the head now, as a command far enough ahead does
    ledger.state()
    ledger.store.close()
    path = ledger.checkpoint_path
    assert path is not None
    check = Ledger(ws.store(), checkpoint_path=path)
    check.state()
    check.store.close()
    if check.checkpoint_status != "checkpoint used":
        raise RuntimeError(f"the checkpoint is not usable: {check.checkpoint_status}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in the log")
    parser.add_argument("--hypotheses", type=int, default=None,
                        help="hypotheses taken through the loop (default: records / 50)")
    parser.add_argument("--reps", type=int, default=7, help="timed repetitions")
    parser.add_argument("--seed", type=int, default=20261204, help="random seed of the build")
    parser.add_argument("--dir", help="parent directory for the temp workspace")
    parser.add_argument("--keep", action="store_true", help="keep the temp workspace")
    args = parser.parse_args()
    hypotheses = args.hypotheses if args.hypotheses is not None else max(args.records // 50, 10)

    from loopx.research.operations import judge

    root = Path(tempfile.mkdtemp(prefix="loopx-bench-proj-", dir=args.dir))
    try:
        t0 = time.perf_counter()
        built = build(root / "ws", args.records, hypotheses, args.seed)
        built_s = time.perf_counter() - t0
        loop = built.loop
        ws = root / "ws"
        loopx_dir = ws / ".loopx"
        checkpoints = loopx_dir / "checkpoints"
        env = {k: v for k, v in os.environ.items()
               if k not in ("LOOPX_TOKEN", "LOOPX_WORKSPACE", "PYTHONDONTWRITEBYTECODE")}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        ckpt = save_head_checkpoint(ws)
        run_case(ws, env)  # untimed: fills the bytecode cache and the page cache
        runs: dict[str, list[Case]] = {"a": [], "b": []}
        for rep in range(args.reps):
            ckpt = save_head_checkpoint(ws)
            hid = built.judgeable[rep * 7919 % len(built.judgeable)]
            new = judge(loop.ledger, loop.agents["ev"], hid, "dev")["seq"]
            for case in (("a", "b") if rep % 2 == 0 else ("b", "a")):
                if case == "a":
                    before = ckpt.stat()
                    runs["a"].append(run_case(ws, env))
                    after = ckpt.stat()
                    if (before.st_ino, before.st_mtime_ns) != (after.st_ino, after.st_mtime_ns):
                        raise RuntimeError("(a) rewrote the checkpoint")
                else:
                    aside = loopx_dir / "checkpoints.aside"
                    checkpoints.rename(aside)
                    checkpoints.write_bytes(b"")  # neither read nor written by (b)
                    try:
                        runs["b"].append(run_case(ws, env))
                        if not checkpoints.is_file() or checkpoints.stat().st_size:
                            raise RuntimeError("(b) wrote a checkpoint")
                    finally:
                        checkpoints.unlink()
                        aside.rename(checkpoints)
            a, b = runs["a"][-1], runs["b"][-1]
            if a.out != b.out:
                raise RuntimeError("incremental and rebuilt projections differ")
            if json.loads(a.out[0])["head_seq"] != new or json.loads(a.out[1])["head_seq"] != new:
                raise RuntimeError(f"the projections did not reach the new record (seq {new})")
        frontier_out = json.loads(runs["a"][-1].out[0])
        candidates_out = json.loads(runs["a"][-1].out[1])
        head = frontier_out["head_seq"]
        log_bytes = sum(p.stat().st_size for p in (loopx_dir / "log").iterdir())
        ckpt_bytes = ckpt.stat().st_size
        loop.ledger.store.close()
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    med = statistics.median
    ratios = [a.total / b.total for a, b in zip(runs["a"], runs["b"], strict=True)]
    ratio = med(ratios)
    c = built.counts
    print(f"projections_incremental: python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{args.reps} reps, built in {built_s:.0f} s")
    print(f"log {head} records ({log_bytes / 2**20:.1f} MB), checkpoint "
          f"{ckpt_bytes / 2**20:.1f} MB: {len(frontier_out['hypotheses'])} hypotheses "
          f"({c['refused']} duplicates refused, {c['promoted']} promoted, {c['retired']} "
          f"retired), {sum(len(v) for v in candidates_out.values() if isinstance(v, list))} "
          f"candidates, {c['filler']} rollout events")
    print()
    print(f"{'case':<44} | {'median ms':>9} | {'min ms':>8} | {'max ms':>8} || "
          f"{'frontier':>8} | {'candid.':>8}")
    print("-" * 100)
    for key, name in (("a", "(a) one new record, checkpoint at the head"),
                      ("b", "(b) full rebuild, no checkpoint")):
        ts = [r.total for r in runs[key]]
        steps = [med(getattr(r, step) for r in runs[key]) * 1e3
                 for step in ("frontier", "candidates")]
        print(f"{name:<44} | {med(ts) * 1e3:>9.1f} | {min(ts) * 1e3:>8.1f} | "
              f"{max(ts) * 1e3:>8.1f} || {steps[0]:>8.1f} | {steps[1]:>8.1f}")
    print("\nms, spawn to exit; right of || the median of each process: `loopx frontier --json`, "
          "`loopx candidates --json`")
    cpu = [a.cpu / b.cpu for a, b in zip(runs["a"], runs["b"], strict=True)]
    print(f"CPU (user + system of both processes): (a) {med(r.cpu for r in runs['a']) * 1e3:.1f} "
          f"ms, (b) {med(r.cpu for r in runs['b']) * 1e3:.1f} ms, (a)/(b) {med(cpu):.4f} "
          "(less swayed by other load than the wall time the verdict uses)")
    print(f"(a)/(b) = {ratio:.4f} [{min(ratios):.4f}-{max(ratios):.4f}] "
          f"(goal <= 0.05: {'PASS' if ratio <= 0.05 else 'MISS'})")


if __name__ == "__main__":
    main()
