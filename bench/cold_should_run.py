"""A cold ``loopx quota should-run`` CLI process: 100k-record log vs 1k-record log vs bare imports.

What it measures
    Two workspaces are built through the library's checked path: a small one (default 1,000
    records) and a big one (default 100,000). Both hold the same shape of campaign, scaled:
    registered executors, todos (a tenth of the records), claim/complete cycles, and rollout
    events tied to a held todo in large batches for the rest. One untimed should-run per
    workspace first leaves the checkpoint any long-running workspace has.

    Then, interleaved, each repetition times whole processes (spawn to exit, as a user waits):
      small   ``loopx quota should-run --agent-id ex-0 --json`` on the small workspace
      big     the same on the big workspace
      base    ``python -c "import pydantic, click, filelock"``
    and checks that both should-run answers are well-formed decisions. Every process runs with
    bytecode caching on, in a private cache the untimed first runs fill (as an installed package
    has after its first import), even where the environment sets PYTHONDONTWRITEBYTECODE.

Verdict (medians of per-repetition ratios)
    big/small  goal <= 2: a query reads a checkpoint and the tail, never the whole log
    big/base   goal <= 2: imports stay lazy; the query costs about what its imports do

Run
    python bench/cold_should_run.py                   # defaults, about a minute
    python bench/cold_should_run.py --big 20000 --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGENTS = 4


def build(root: Path, records: int) -> Path:
    """A workspace whose log holds about ``records`` records; returns its root."""
    from loopx.kernel.checks import Credentials
    from loopx.testing.lanes import executor_writer
    from loopx.work.agents import register_agent
    from loopx.work.claims import complete, should_run
    from loopx.work.todos import add_todos
    from loopx.workspace import init_workspace

    workspace, owner_token = init_workspace(root, "bench-cold")
    ledger = workspace.ledger()
    owner = Credentials("owner", owner_token)
    tokens = [register_agent(ledger, owner, f"ex-{i}", "research_executor")[1]
              for i in range(AGENTS)]
    todos = max(records // 10, 20)
    for start in range(0, todos, 500):
        add_todos(ledger, owner, [{"todo_id": f"t{n:06d}", "title": f"todo {n}",
                                   "role": "research_executor", "action_kind": "run_dev_eval",
                                   "hypothesis_id": f"h{n:06d}"}
                                  for n in range(start, min(start + 500, todos))])
    cycles = max(records // 100, 5)
    for n in range(cycles):
        creds = Credentials(f"ex-{n % AGENTS}", tokens[n % AGENTS])
        got = should_run(ledger, creds.agent_id, claim=True, creds=creds)
        complete(ledger, creds, got["todo"]["todo_id"], got["todo"]["epoch"], {"n": n})
    writer = executor_writer(ledger, owner_token, "filler")
    while (left := records - ledger.store.head().seq) > 0:
        batch = [writer.tie({"payload": {"event": "progress", "detail": {"i": i, "pad": "x" * 64}}})
                 for i in range(min(left, 1000))]
        ledger.append(batch, creds=writer.creds, kind="rollout_event_v0")
    ledger.store.close()
    return root


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall time of one process, spawn to exit, and its stdout."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - start, done.stdout


def should_run_argv(root: Path) -> list[str]:
    loopx = Path(sys.executable).with_name("loopx")
    head = [str(loopx)] if loopx.exists() else [sys.executable, "-m", "loopx.cli"]
    return [*head, "-C", str(root), "quota", "should-run", "--agent-id", "ex-0", "--json"]


def check(out: str) -> None:
    decision = json.loads(out)
    assert decision["agent_id"] == "ex-0" and decision["reason"] in (
        "selected", "no_eligible_todo"), decision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000, help="records in the small log")
    parser.add_argument("--big", type=int, default=100_000, help="records in the big log")
    parser.add_argument("--reps", type=int, default=15, help="timed repetitions per case")
    parser.add_argument("--dir", help="parent directory for the temp workspaces")
    parser.add_argument("--keep", action="store_true", help="keep the temp workspaces")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="loopx-bench-cold-", dir=args.dir))
    try:
        t0 = time.perf_counter()
        small = build(root / "small", args.small)
        big = build(root / "big", args.big)
        built = time.perf_counter() - t0
        # Bytecode caching on, in a private cache the untimed first runs fill: what an installed
        # package has after its first import, even where PYTHONDONTWRITEBYTECODE is set (then
        # every process would compile loopx from source while pydantic's .pyc files exist).
        env = {k: v for k, v in os.environ.items()
               if k not in ("LOOPX_TOKEN", "LOOPX_WORKSPACE", "PYTHONDONTWRITEBYTECODE")}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        cases = {
            "small": should_run_argv(small),
            "big": should_run_argv(big),
            "base": [sys.executable, "-c", "import pydantic, click, filelock"],
        }
        for name in ("small", "big"):  # leave the checkpoint a long-running workspace has
            check(timed(cases[name], env)[1])
        timed(cases["base"], env)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for rep in range(args.reps):
            order = list(cases)[rep % 3:] + list(cases)[:rep % 3]
            for name in order:
                seconds, out = timed(cases[name], env)
                if name != "base":
                    check(out)
                times[name].append(seconds)
        ratio_small = statistics.median(b / s for b, s in zip(times["big"], times["small"],
                                                              strict=True))
        ratio_base = statistics.median(b / s for b, s in zip(times["big"], times["base"],
                                                             strict=True))
        sizes = {name: sum(p.stat().st_size for p in (path / ".loopx" / "log").iterdir())
                 for name, path in (("small", small), ("big", big))}
        ckpt = {name: (path / ".loopx" / "checkpoints" / "state.json").stat().st_size
                for name, path in (("small", small), ("big", big))}
        print(f"cold_should_run: python {platform.python_version()}, {os.cpu_count()} CPUs, "
              f"{args.reps} reps, built in {built:.0f} s")
        print(f"{'case':<6} | {'records':>8} | {'log MB':>7} | {'ckpt KB':>8} | {'median ms':>9}")
        print("-" * 50)
        for name, records in (("small", args.small), ("big", args.big)):
            print(f"{name:<6} | {records:>8} | {sizes[name] / 2**20:>7.1f} | "
                  f"{ckpt[name] / 1024:>8.0f} | {statistics.median(times[name]) * 1000:>9.1f}")
        print(f"{'base':<6} | {'-':>8} | {'-':>7} | {'-':>8} | "
              f"{statistics.median(times['base']) * 1000:>9.1f}")
        print(f"\nbig/small = {ratio_small:.2f} (goal <= 2: "
              f"{'PASS' if ratio_small <= 2 else 'MISS'})")
        print(f"big/base  = {ratio_base:.2f} (goal <= 2: {'PASS' if ratio_base <= 2 else 'MISS'})")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
