"""`loopx demo` end to end: wall and CPU (user + sys of the whole process tree) per run,
median over repetitions, against a baseline install of another commit in the same run.

The baseline is a second Python environment with the old code installed (``--baseline-python``),
run alternately with this one on the same machine, so both see the same load. Without it the
script only prints this install's figures. Each run is a whole cold `python -m loopx.cli demo
--json` in a new directory: what a user pays, lanes, imports and training included.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from temp_root import add_temp_root_options, temp_root

TARGET = 0.5  # issue 18: new/old wall time <= 0.5 on 2 cores


def run_once(python: str, directory: Path, seed: int) -> dict[str, Any]:
    """One whole demo: wall seconds, CPU seconds of every process it started, and its outcome."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([python, "-m", "loopx.cli", "demo", "--dir", str(directory),
                           "--seed", str(seed), "--json"], capture_output=True, text=True,
                          check=False, cwd=directory.parent)  # not a checkout: `-m` would
    # import the loopx beside the working directory instead of the one `python` has installed
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{python}: the demo failed ({done.returncode}):\n{done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    if out["state"] != "stopped" or not out["verified"]:
        sys.exit(f"{python}: the campaign did not end as it should: {out}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcome = (out["state"], tuple(out["promoted"]), tuple(out["retired"]), out["verified"])
    return {"wall": wall, "cpu": cpu, "outcome": outcome}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3, help="runs per side (default 3)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--python", default=sys.executable,
                    help="the Python with the code under test (default: this one)")
    ap.add_argument("--baseline-python", default=None,
                    help="a Python with the old code installed, e.g. a venv of main's commit")
    add_temp_root_options(ap)
    args = ap.parse_args()
    sides = {"new": args.python}
    if args.baseline_python:
        sides["old"] = args.baseline_python
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    with temp_root("loopx-demo-bench-", args) as root:
        for rep in range(args.reps):
            # Alternate which side goes first, so drifting load does not favour one.
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for side in order:
                result = run_once(sides[side], root / f"{side}-{rep}", args.seed)
                runs[side].append(result)
                print(f"rep {rep} {side}: wall {result['wall']:.1f} s, cpu {result['cpu']:.1f} s, "
                      f"{result['outcome']}", flush=True)
    print("\n| side | runs | median wall s | median cpu s | outcome |\n| --- | --- | --- | --- | --- |")
    medians = {}
    for side, results in runs.items():
        medians[side] = (statistics.median(r["wall"] for r in results),
                         statistics.median(r["cpu"] for r in results))
        outcomes = {r["outcome"] for r in results}
        print(f"| {side} | {len(results)} | {medians[side][0]:.1f} | {medians[side][1]:.1f} | "
              f"{' / '.join(map(str, outcomes))} |")
    if "old" in runs:
        walls = [n["wall"] / o["wall"] for n, o in zip(runs["new"], runs["old"], strict=True)]
        cpus = [n["cpu"] / o["cpu"] for n, o in zip(runs["new"], runs["old"], strict=True)]
        print(f"\nnew/old wall (median of paired ratios): {statistics.median(walls):.2f} "
              f"(target <= {TARGET})")
        print(f"new/old cpu  (median of paired ratios): {statistics.median(cpus):.2f}")
        if {r["outcome"] for r in runs["new"]} != {r["outcome"] for r in runs["old"]}:
            print("WARNING: the two sides ended the campaign differently")


if __name__ == "__main__":
    main()
