"""Frontier + candidates after one new record on a 100k-record log, against a full rebuild.

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

    Then, in one process, each repetition appends ONE record through the checked path, a dev
    judgement of a hypothesis (``loopx.research.operations.judge``, a different one each repetition), by
    a writer ledger (untimed), and times, in alternating order:
      (a) incremental  a ledger that has followed the log (caught up before the append) calls
                       ``state()`` (folds the one new record), then ``frontier(view)`` and
                       ``candidates(view, rows)``
      (b) rebuild      a fresh ``Ledger(FileStore(dir), checkpoint_path=None)``: ``state()``
                       reads and folds the whole log from nothing, then the same projections
    Neither ledger has a checkpoint path, so neither writes one while timed. A ``gc.collect()``
    precedes every timed section, so neither side pays for the other's garbage. Each
    repetition checks that (a) and (b) folded the same head and give byte-identical frontier
    and candidates (canonical JSON). Both cases compute the frontier once and read the
    candidates off its rows (``candidates(view, rows)``), as a client asking for both does;
    ``candidates(view)`` alone computes the frontier itself.

Verdict (median of per-repetition ratios)
    (a)/(b)   goal <= 0.05: after one new record, the projections cost a catch-up step and a
              pass over the hypotheses, never a replay of the log

Run
    python bench/projections_incremental.py                    # defaults, about 30 s
    python bench/projections_incremental.py --records 20000    # quick, about 5 s
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import statistics
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


def projected(view: dict[str, Any]) -> tuple[bytes, bytes]:
    """Frontier and candidates of ``view`` as canonical JSON (for the equality check only)."""
    from loopx.kernel.canonical import dumps
    from loopx.research.projections import candidates, frontier

    return dumps([r.to_json() for r in frontier(view)]), dumps(candidates(view))


@dataclass
class Run:
    """One timed case: seconds per step, the head it folded, and its view."""

    fold: float
    frontier: float
    candidates: float
    seq: int
    view: dict[str, Any]

    @property
    def total(self) -> float:
        return self.fold + self.frontier + self.candidates


def timed(ledger: Any) -> Run:
    """``ledger.state()`` then frontier and candidates of its view, each step timed."""
    from loopx.research.projections import candidates, frontier

    t0 = time.perf_counter()
    state = ledger.state()
    view = state["lanes"]
    t1 = time.perf_counter()
    rows = frontier(view)
    t2 = time.perf_counter()
    candidates(view, rows)  # read off the same rows: frontier and candidates are one pass
    t3 = time.perf_counter()
    return Run(t1 - t0, t2 - t1, t3 - t2, state.seq, view)


def incremental(live: Any) -> Run:
    """(a): the ledger that followed the log folds the new record, then projects."""
    gc.collect()
    return timed(live)


def rebuild(store_dir: Path) -> Run:
    """(b): a fresh ledger with no checkpoint folds the whole log, then projects."""
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.file import FileStore

    gc.collect()
    t0 = time.perf_counter()
    fresh = Ledger(FileStore(store_dir), checkpoint_path=None)
    opened = time.perf_counter() - t0
    run = timed(fresh)
    run.fold += opened  # opening the store belongs to the rebuild
    fresh.store.close()
    if fresh.checkpoint_status != "not loaded":
        raise RuntimeError(f"the rebuild read a checkpoint: {fresh.checkpoint_status}")
    return run


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

    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.file import FileStore
    from loopx.research.operations import judge

    root = Path(tempfile.mkdtemp(prefix="loopx-bench-proj-", dir=args.dir))
    try:
        t0 = time.perf_counter()
        built = build(root / "ws", args.records, hypotheses, args.seed)
        built_s = time.perf_counter() - t0
        loop = built.loop
        store_dir = root / "ws" / ".loopx"
        live = Ledger(FileStore(store_dir), checkpoint_path=None)
        live.state()  # caught up before the first new record, untimed
        runs: dict[str, list[Run]] = {"a": [], "b": []}
        for rep in range(args.reps):
            hid = built.judgeable[rep * 7919 % len(built.judgeable)]
            new = judge(loop.ledger, loop.agents["ev"], hid, "dev")["seq"]
            for case in (("a", "b") if rep % 2 == 0 else ("b", "a")):
                run = incremental(live) if case == "a" else rebuild(store_dir)
                if run.seq != new:
                    raise RuntimeError(f"({case}) folded up to seq {run.seq}, the new record "
                                       f"is {new}")
                runs[case].append(run)
            if projected(runs["a"][-1].view) != projected(runs["b"][-1].view):
                raise RuntimeError("incremental and rebuilt projections differ")
            runs["b"][-1].view = {}  # let the rebuilt state go before the next repetition
        head = live.state().seq
        view = live.state()["lanes"]
        log_bytes = sum(p.stat().st_size for p in (store_dir / "log").iterdir())
        loop.ledger.store.close()
        live.store.close()
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
    print(f"log {head} records ({log_bytes / 2**20:.1f} MB): {len(view['hypotheses'])} "
          f"hypotheses ({c['refused']} duplicates refused, {c['promoted']} promoted, "
          f"{c['retired']} retired), {len(view['packets'])} packets, {c['filler']} rollout events")
    print()
    print(f"{'case':<37} | {'median ms':>9} | {'min ms':>8} | {'max ms':>8} || "
          f"{'state()':>8} | {'frontier':>8} | {'candid.':>8}")
    print("-" * 103)
    for key, name in (("a", "(a) one new record, followed ledger"),
                      ("b", "(b) full rebuild, fresh ledger")):
        ts = [r.total for r in runs[key]]
        steps = [med(getattr(r, step) for r in runs[key]) * 1e3
                 for step in ("fold", "frontier", "candidates")]
        print(f"{name:<37} | {med(ts) * 1e3:>9.2f} | {min(ts) * 1e3:>8.2f} | "
              f"{max(ts) * 1e3:>8.2f} || {steps[0]:>8.2f} | {steps[1]:>8.2f} | {steps[2]:>8.2f}")
    print("\nms; right of || the median of each step: state() (for (b) opening the store, "
          "reading and folding the log), frontier(view), candidates(view, rows)")
    print(f"(a)/(b) = {ratio:.4f} [{min(ratios):.4f}-{max(ratios):.4f}] "
          f"(goal <= 0.05: {'PASS' if ratio <= 0.05 else 'MISS'})")


if __name__ == "__main__":
    main()
