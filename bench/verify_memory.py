"""Peak memory of a whole `loopx verify --json` process on a small and a big log.

What it measures
    Builds (untimed) two file-backed workspaces whose logs hold ``--small`` (default 10,000)
    and ``--records`` (default 1,000,000) records, as ``catch_up.py`` builds its logs: a real
    ``init_workspace`` genesis record, then rollout events of an executor holding a todo,
    prepared once by the checked path and written with ``FileStore(durable=False)`` in batches
    of ``--build-batch`` records (default 100), each with a fresh record id. The big log spans
    several 64 MB segments.

    Then runs ``loopx -C <workspace> verify --json`` in a fresh process per measurement,
    ``--reps`` times per log in alternating order, and reads the child's peak resident set
    (``ru_maxrss`` from ``os.wait4`` for that one child, so no measurement sees another's
    peak). Each run must report ``ok`` with the expected record count. For scale, the table also
    gives the peak of ``loopx --version`` (the same interpreter and CLI, no log read).

Verdict (median peak of each log)
    big/small   goal ~1 (at most 1.25): verify's memory stays flat in the log's length. What
                verify keeps per record is given with the table: the set of record ids seen
                (for the uniqueness check) and the batch-end hashes (for publications' pins)
                live in a temporary SQLite database on disk, not in the process.

Run
    python bench/verify_memory.py                       # defaults: a few minutes (1M records)
    python bench/verify_memory.py --records 200000      # quick check, under a minute
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from catch_up import build
from temp_root import add_temp_root_options, temp_root


def peak_rss(argv: list[str], out: Path) -> tuple[int, int, str]:
    """Run ``argv`` to exit; its own peak RSS in bytes, its exit code and its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_TOKEN", "LOOPX_WORKSPACE")}
    with open(out, "wb") as f:
        pid = os.posix_spawn(argv[0], argv, env, file_actions=[
            (os.POSIX_SPAWN_DUP2, f.fileno(), 1)])
    _, status, usage = os.wait4(pid, 0)
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return usage.ru_maxrss * scale, os.waitstatus_to_exitcode(status), out.read_text()


def loopx_head() -> list[str]:
    """The installed ``loopx`` entry point, as an agent runs it."""
    loopx = Path(sys.executable).with_name("loopx")
    return [str(loopx)] if loopx.exists() else [sys.executable, "-m", "loopx.cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the big log")
    parser.add_argument("--small", type=int, default=10_000, help="records in the small log")
    parser.add_argument("--reps", type=int, default=3, help="runs per log")
    parser.add_argument("--build-batch", type=int, default=100, help="records per built batch")
    parser.add_argument("--detail-bytes", type=int, default=64, help="filler text per record")
    add_temp_root_options(parser)
    args = parser.parse_args()

    with temp_root("loopx-bench-verify-", args) as root:
        t0 = time.perf_counter()
        dirs = {"small": build(root / "small", args.small, args.build_batch, args.detail_bytes),
                "big": build(root / "big", args.records, args.build_batch, args.detail_bytes)}
        built = time.perf_counter() - t0
        sizes = {name: sum(p.stat().st_size for p in (d / "log").iterdir())
                 for name, d in dirs.items()}
        segments = {name: len(list((d / "log").iterdir())) for name, d in dirs.items()}
        expect = {"small": args.small, "big": args.records}
        out = Path(tempfile.mkstemp(dir=root)[1])
        peaks: dict[str, list[int]] = {"small": [], "big": [], "base": []}
        seconds: dict[str, list[float]] = {"small": [], "big": []}
        for rep in range(args.reps):
            for name in (("small", "big") if rep % 2 == 0 else ("big", "small")):
                t = time.perf_counter()
                rss, code, stdout = peak_rss(
                    [*loopx_head(), "-C", str(dirs[name].parent), "verify", "--json"], out)
                seconds[name].append(time.perf_counter() - t)
                report = json.loads(stdout)
                if code != 0 or not report["ok"] or report["records"] != expect[name]:
                    raise RuntimeError(f"verify of the {name} log: exit {code}, {report}")
                peaks[name].append(rss)
            rss, code, _ = peak_rss([*loopx_head(), "--version"], out)
            peaks["base"].append(rss)

    med = statistics.median
    mib = 2 ** 20
    ratio = med(peaks["big"]) / med(peaks["small"])
    print(f"verify_memory: python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{args.reps} reps, built in {built:.0f} s")
    print()
    print(f"{'case':<34} | {'records':>9} | {'log MB':>7} | {'segments':>8} | "
          f"{'peak RSS MB':>11} | {'min':>6} | {'max':>6} | {'verify s':>8}")
    print("-" * 108)
    for name, label in (("small", "loopx verify --json, small log"),
                        ("big", "loopx verify --json, big log"),
                        ("base", "loopx --version (no log read)")):
        records = f"{expect[name]:,}" if name != "base" else "-"
        log_mb = f"{sizes[name] / mib:.1f}" if name != "base" else "-"
        segs = str(segments[name]) if name != "base" else "-"
        secs = f"{med(seconds[name]):.1f}" if name != "base" else "-"
        print(f"{label:<34} | {records:>9} | {log_mb:>7} | {segs:>8} | "
              f"{med(peaks[name]) / mib:>11.1f} | {min(peaks[name]) / mib:>6.1f} | "
              f"{max(peaks[name]) / mib:>6.1f} | {secs:>8}")
    grown = (med(peaks["big"]) - med(peaks["small"])) / (args.records - args.small)
    print(f"\nbig - small = {grown:.1f} bytes of peak RSS per extra record")
    print(f"big/small = {ratio:.3f} (goal ~1, at most 1.25: "
          f"{'PASS' if ratio <= 1.25 else 'MISS'})")


if __name__ == "__main__":
    main()
