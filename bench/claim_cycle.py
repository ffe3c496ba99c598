"""Claim cycles/s: loopx should-run + complete against Optuna's journal file storage.

What it measures
    For each P in --procs (default 4,8), P spawned worker processes each do N cycles
    (--cycles, default 150) on one shared store. Up to three sides run back to back in the
    same temp directory, in a rotating order each repetition:

    loopx   each worker is its own registered agent (role research_executor) and repeats
            ``loopx.work.claims.should_run(..., claim=True)`` (selection and claim in one locked
            step), then ``complete`` of the todo it got. The parent first makes a workspace,
            registers the P agents and adds P*N todos. A cycle counts only when the reason is
            "selected" and the completion was written (not an idempotent repeat). Afterwards
            the log must pass ``loopx verify`` (chain, schemas, every write check re-run),
            every todo must be claimed exactly once (no double claim, no expiry) and every
            claim completed once by its claimant at its epoch; the fold must agree.
    optuna  ``JournalStorage(JournalFileBackend(path))``, default lock. A cycle is study.ask();
            trial.suggest_float("x", 0, 1); study.tell(trial, value): three fsynced appends
            (see run_optuna). The parent creates the study; workers load it before the barrier.
    raw     the floor for two durable appends per cycle: twice, flock(LOCK_EX), os.write of a
            --line-bytes line to a shared file, flock(LOCK_UN), os.fdatasync (after the unlock,
            as loopx's FileStore syncs).

    Workers import everything (for loopx, also what loads on a process's first write: the
    record models, the write checks and the domains' hooks) and open their store before a
    multiprocessing Barrier, so neither imports nor setup are timed. The clock runs from the
    first worker leaving the barrier to the last one finishing (CLOCK_MONOTONIC is
    system-wide). --keep keeps every repetition's logs.

Verdict
    cycles/s = P*N / wall, median over repetitions; loopx/optuna and loopx/raw are medians of
    per-repetition paired ratios. Goal: loopx/optuna >= 2 for every P.
    Beside them, per side: the user + system CPU of all its worker processes per cycle, and
    that CPU over wall x CPUs ("busy %"): near 100, a side is bound by the CPUs; far below, by
    waiting (locks, syncs, sleeps). Kernel threads (the filesystem's journal) are not counted.

Run
    python bench/claim_cycle.py                                            # defaults
    python bench/claim_cycle.py --reps 1 --cycles 20 --sides optuna,raw    # quick check
    python bench/claim_cycle.py --reps 1 --procs 8 --sides loopx --profile /tmp/prof
        # one cProfile file per loopx worker: python -m pstats /tmp/prof/loopx-exec-0-*.prof
    python bench/claim_cycle.py --reps 1 --procs 8 --sides loopx --lock-times /tmp/locks
        # the store lock's share of the wall, and its hold and wait times, per loopx run
"""

from __future__ import annotations

import argparse
import cProfile
import fcntl
import os
import platform
import resource
import shutil
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import claim_race
from temp_root import add_temp_root_options, temp_root
from worker_pool import Pool, serve

GOAL = "bench-claims"
STUDY = "bench"
SIDES = ("loopx", "optuna", "raw")
PROFILE_ENV = "LOOPX_BENCH_CLAIM_PROFILE"  # set by --profile for the spawned workers
LOCKS_ENV = "LOOPX_BENCH_CLAIM_LOCKS"  # set by --lock-times for the spawned workers


# -- worker process ---------------------------------------------------------------------------

def worker(conn: Any, barrier: Any, sides: list[str]) -> None:
    """Import what the selected sides need, then run ('run', side, ...) jobs until 'stop'."""
    try:
        if "loopx" in sides:
            import loopx.kernel.checks
            import loopx.work.agents  # noqa: E401,F401
        if "optuna" in sides:
            import optuna
            optuna.logging.set_verbosity(optuna.logging.WARNING)
    except Exception:
        conn.send(traceback.format_exc())
        return
    serve(conn, barrier, lambda job: run_job(job, barrier))


def run_job(job: tuple, barrier: Any) -> tuple[float, float, int, dict[str, int], float]:
    """One timed run; returns (monotonic start, monotonic end, cycles done, other reasons,
    CPU seconds this process spent between the two)."""
    _, side, path, cycles, extra = job
    others: Counter[str] = Counter()
    done = 0
    cpu0 = cpu1 = 0.0
    if side == "loopx":
        from loopx.kernel.checks import Credentials
        from loopx.workspace import find_workspace

        agent_id, token = extra
        creds = Credentials(agent_id=agent_id, token=token)
        ledger = find_workspace(path).ledger()
        ledger.state()  # catch up with the setup records before the clock, as load_study does
        load_write_path(ledger)
        profile_dir = os.environ.get(PROFILE_ENV)
        locks = time_lock(ledger.store) if os.environ.get(LOCKS_ENV) else None
        profiler = cProfile.Profile() if profile_dir else None
        barrier.wait()
        t0, cpu0 = time.monotonic(), cpu_seconds()
        if profiler is not None:
            profiler.enable()
        done, others = claim_race.loopx_cycles(ledger, agent_id, creds, cycles)
        t1, cpu1 = time.monotonic(), cpu_seconds()
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"loopx-{agent_id}-{os.getpid()}-"
                                                          f"{time.monotonic_ns()}.prof"))
        ledger.store.close()
        if locks is not None:
            name = f"{Path(path).parent.name}-{os.getpid()}.txt"
            Path(os.environ[LOCKS_ENV], name).write_text(
                "".join(f"{w} {a} {r}\n" for w, a, r in locks))
    elif side == "optuna":
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        storage = JournalStorage(JournalFileBackend(path))
        sampler = (optuna.samplers.TPESampler() if extra == "tpe"
                   else optuna.samplers.RandomSampler())
        study = optuna.load_study(study_name=STUDY, storage=storage, sampler=sampler)
        barrier.wait()
        t0, cpu0 = time.monotonic(), cpu_seconds()
        done = claim_race.optuna_cycles(study, cycles)
        t1, cpu1 = time.monotonic(), cpu_seconds()
    else:
        line = b"x" * (extra - 1) + b"\n"
        lock_fd = os.open(os.path.join(path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fd = os.open(os.path.join(path, "data.jsonl"),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        barrier.wait()
        t0, cpu0 = time.monotonic(), cpu_seconds()
        for _ in range(cycles):
            for _ in range(2):  # the claim, then the completion
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
                os.write(fd, line)  # one short write of < PIPE_BUF bytes to a regular file
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
                os.fdatasync(fd)
            done += 1
        t1, cpu1 = time.monotonic(), cpu_seconds()
        os.close(fd)
        os.close(lock_fd)
    return t0, t1, done, dict(others), cpu1 - cpu0


def cpu_seconds() -> float:
    """User + system CPU time of this process (all its threads) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_lock(store: Any) -> list[tuple[int, int, int]]:
    """Wrap this worker's FileStore lock (instance attributes only, bench-side) so that each
    append records (asked, granted, released) in monotonic ns; returns the list it fills."""
    times: list[tuple[int, int, int]] = []
    take, lock = store._take_lock, store._lock
    release = lock.release
    asked = granted = 0

    def timed_take(*args: Any) -> None:
        nonlocal asked, granted
        asked = time.monotonic_ns()
        take(*args)
        granted = time.monotonic_ns()

    def timed_release() -> None:
        released = time.monotonic_ns()
        release()
        times.append((asked, granted, released))

    store._take_lock, lock.release = timed_take, timed_release
    return times


def lock_summary(directory: Path) -> None:
    """Print the store lock's wait and hold times per run from the --lock-times files."""
    runs: dict[str, list[tuple[int, int, int]]] = {}
    for f in sorted(directory.glob("run*-*.txt")):
        rows = [tuple(map(int, line.split())) for line in f.read_text().splitlines()]
        runs.setdefault(f.name.rsplit("-", 1)[0], []).extend(rows)  # type: ignore[arg-type]
    print("\nstore lock per loopx run (us; held = sum of holds / first ask to last release):")
    for run, rows in sorted(runs.items()):
        wait = sorted(g - a for a, g, _ in rows)
        hold = sorted(r - g for _, g, r in rows)
        span = max(r for *_, r in rows) - min(a for a, *_ in rows)

        def q(xs: list[int], f: float) -> str:
            return f"{xs[min(len(xs) - 1, int(f * len(xs)))] / 1e3:.0f}"

        print(f"  {run}: {len(rows)} appends, held {sum(hold) / span:.0%}; hold p50 "
              f"{q(hold, .5)} p90 {q(hold, .9)} p99 {q(hold, .99)} mean "
              f"{sum(hold) / len(hold) / 1e3:.0f}; wait p50 {q(wait, .5)} p90 {q(wait, .9)} "
              f"mean {sum(wait) / len(wait) / 1e3:.0f}")


def load_write_path(ledger: Any) -> None:
    """Import what a process's first write imports (the record models, the domains' write
    checks and extension hooks, the settings parser) before the clock, as Optuna's imports are.
    """
    from loopx.kernel.domains import Hook
    from loopx.kernel.kinds import KINDS

    len(KINDS)  # the record models (pydantic)
    ledger.domains.checks_for("")  # every domain's write checks
    for domain in ledger.domains.domains:
        for hook in (*domain.extensions.values(), *domain.before_fold.values(),
                     *domain.after_fold.values()):
            if isinstance(hook, Hook):
                hook.resolve()
    ledger.settings()


def run_all(pool: Pool, side: str, path: Path, cycles: int, extras: list[Any]
            ) -> tuple[float, int, float]:
    """Run one job per worker (worker i gets extras[i]); return (wall seconds, cycles, CPU
    seconds of all the workers)."""
    wall, results = pool.run(side, [("run", side, str(path), cycles, extra) for extra in extras])
    total = sum(r[2] for r in results)
    if total != cycles * len(results):
        others = sum((Counter(r[3]) for r in results), Counter())
        raise RuntimeError(f"{side}: {total} cycles done, expected "
                           f"{cycles * len(results)}; other reasons: {dict(others)}")
    return wall, total, sum(r[4] for r in results)


class Rate:
    """One side's run: cycles/s, CPU per cycle (all workers) and the share of the machine's
    CPUs the workers kept busy."""

    def __init__(self, wall: float, cycles: int, cpu: float) -> None:
        self.per_second = cycles / wall
        self.cpu_us = 1e6 * cpu / cycles
        self.busy = cpu / (wall * (os.cpu_count() or 1))


# -- parent: one run per side -----------------------------------------------------------------

def run_loopx(pool: Pool, run_dir: Path, procs: int, cycles: int) -> tuple[Rate, float]:
    """One loopx run; returns (its rate, bytes per record in the log)."""
    from loopx.workspace import init_workspace

    ws, owner_token = init_workspace(run_dir / "loopx", GOAL)
    agents, tokens, todo_ids = claim_race.seed(ws, owner_token, procs, cycles)
    rate = Rate(*run_all(pool, "loopx", ws.root, cycles,
                         list(zip(agents, tokens, strict=True))))
    records = claim_race.check(ws, todo_ids, set(agents))
    store = ws.store()
    size = sum(store.segment_path(s).stat().st_size for s in store.segments())
    store.close()
    return rate, size / records


def run_optuna(pool: Pool, run_dir: Path, procs: int, cycles: int, sampler: str) -> Rate:
    """One Optuna run; returns its rate.

    Optuna 5.1's JournalFileBackend.append_logs (optuna/storages/journal/_file.py) takes the
    lock (default JournalFileSymlinkLock: os.symlink, on EEXIST time.sleep with backoff from
    1 ms doubling to 1 s), opens the file "ab", writes, flush()es and os.fsync()s while
    holding the lock, then releases it (rename + unlink). JournalStorage appends one log line
    per write op and re-reads the file's new tail on every call: ask, suggest_float and tell
    are one append (one fsync) each, so a cycle here is 3 fsyncs against loopx's 2.
    """
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    log = str(run_dir / "optuna.log")
    optuna.create_study(study_name=STUDY, storage=JournalStorage(JournalFileBackend(log)))
    rate = Rate(*run_all(pool, "optuna", Path(log), cycles, [sampler] * procs))
    trials = optuna.load_study(study_name=STUDY,
                               storage=JournalStorage(JournalFileBackend(log))).get_trials()
    done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    if done != procs * cycles or len(trials) != done:
        raise RuntimeError(f"optuna: {done} complete of {len(trials)} trials, "
                           f"expected {procs * cycles}")
    return rate


def run_raw(pool: Pool, run_dir: Path, procs: int, cycles: int, line_bytes: int) -> Rate:
    """One raw run (two flock + write + unlock + fdatasync appends per cycle); returns its
    rate."""
    path = run_dir / "raw"
    path.mkdir()
    rate = Rate(*run_all(pool, "raw", path, cycles, [line_bytes] * procs))
    size = (path / "data.jsonl").stat().st_size
    if size != 2 * procs * cycles * line_bytes:
        raise RuntimeError(f"raw wrote {size} bytes, expected {2 * procs * cycles * line_bytes}")
    return rate


def split(text: str) -> list[str]:
    """Comma-separated items of ``text``."""
    return [x.strip() for x in text.split(",") if x.strip()]


def main() -> None:
    """Parse options, run every (P, repetition, side) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=lambda s: [int(x) for x in split(s)], default=[4, 8],
                    help="comma-separated worker process counts (default 4,8)")
    ap.add_argument("--cycles", type=int, default=150, help="cycles per process (default 150)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per P (default 5)")
    ap.add_argument("--sides", type=split, default=list(SIDES),
                    help="comma-separated subset of loopx,optuna,raw (default: all three)")
    ap.add_argument("--line-bytes", type=int, default=300,
                    help="line length of the raw side's appends (default 300)")
    ap.add_argument("--sampler", choices=("random", "tpe"), default="random",
                    help="Optuna sampler in the workers (default random: measure the storage, "
                         "not TPE's model fitting)")
    ap.add_argument("--profile", metavar="DIR", default=None,
                    help="write a cProfile file per loopx worker and run into DIR (for finding "
                         "the cost; it slows the loopx side, so the ratios do not count)")
    ap.add_argument("--lock-times", metavar="DIR", default=None,
                    help="record every loopx append's store-lock wait and hold into DIR and "
                         "print them per run (adds two clock reads per append)")
    add_temp_root_options(ap)
    args = ap.parse_args()
    if args.lock_times:
        Path(args.lock_times).mkdir(parents=True, exist_ok=True)
        os.environ[LOCKS_ENV] = str(Path(args.lock_times).resolve())
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        os.environ[PROFILE_ENV] = str(Path(args.profile).resolve())
    sides = [s for s in SIDES if s in args.sides]
    if not sides or set(args.sides) - set(SIDES):
        ap.error(f"--sides must be a subset of {','.join(SIDES)}")

    keys = ("loopx", "optuna", "raw", "lx/op", "lx/raw", "bytes", *(f"{kind}-{side}"
            for kind in ("cpu", "busy") for side in SIDES))
    res: dict[int, dict[str, list[float]]] = {p: {k: [] for k in keys} for p in args.procs}
    started = time.monotonic()
    run_no = 0
    with temp_root("loopx-bench-claims-", args) as root:
        for procs in args.procs:
            with Pool(procs, worker, sides) as pool:
                for rep in range(args.reps):
                    r = res[procs]
                    run_no += 1
                    run_dir = root / f"run{run_no:03d}"
                    run_dir.mkdir()
                    k = rep % len(sides)
                    for side in sides[k:] + sides[:k]:  # rotate the order each repetition
                        if side == "loopx":
                            rate, per = run_loopx(pool, run_dir, procs, args.cycles)
                            r["bytes"].append(per)
                        elif side == "optuna":
                            rate = run_optuna(pool, run_dir, procs, args.cycles, args.sampler)
                        else:
                            rate = run_raw(pool, run_dir, procs, args.cycles, args.line_bytes)
                        r[side].append(rate.per_second)
                        r[f"cpu-{side}"].append(rate.cpu_us)
                        r[f"busy-{side}"].append(100 * rate.busy)
                    if r["loopx"] and r["optuna"]:
                        r["lx/op"].append(r["loopx"][-1] / r["optuna"][-1])
                    if r["loopx"] and r["raw"]:
                        r["lx/raw"].append(r["loopx"][-1] / r["raw"][-1])
                    if not args.keep:  # --keep keeps every run's logs to inspect
                        shutil.rmtree(run_dir)
    elapsed = time.monotonic() - started

    claim_race.print_table_head(
        "claim_cycle: loopx should-run(claim)+complete vs Optuna JournalFileBackend "
        "ask/suggest/tell vs raw 2 x (flock+write+unlock+fdatasync)",
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, temp dir under "
        f"{root.parent}, {args.cycles} cycles/proc, {args.reps} reps, optuna sampler "
        f"{args.sampler}, raw line {args.line_bytes} B, imports and setup excluded",
        f"{'procs':>5} | {'loopx c/s':>9} {'optuna c/s':>10} {'raw c/s':>8} | "
        f"{'lx/optuna':>9} {'[min-max]':>11} {'goal>=2':>7} | {'lx/raw':>6} | {'B/rec':>5} | "
        f"{'CPU us/cycle lx op raw':>22} | {'busy % lx op raw':>16}")
    med = claim_race.median_text
    for procs in args.procs:
        r = res[procs]
        ratio = r["lx/op"]
        spread = f"[{min(ratio):.2f}-{max(ratio):.2f}]" if ratio else "-"
        verdict = ("PASS" if statistics.median(ratio) >= 2 else "MISS") if ratio else "-"
        cpu = " ".join(format(med(r[f"cpu-{side}"], ".0f"), ">5") for side in SIDES)
        busy = " ".join(format(med(r[f"busy-{side}"], ".0f"), ">3") for side in SIDES)
        print(f"{procs:>5} | {med(r['loopx'], '.0f'):>9} {med(r['optuna'], '.0f'):>10} "
              f"{med(r['raw'], '.0f'):>8} | {med(ratio, '.2f'):>9} {spread:>11} {verdict:>7} | "
              f"{med(r['lx/raw'], '.2f'):>6} | {med(r['bytes'], '.0f'):>5} | {cpu:>22} | "
              f"{busy:>16}")
    print("\nc/s = cycles/s (all processes), medians over reps; ratios are medians of per-rep "
          "paired ratios; B/rec = bytes per record in the loopx log")
    print("CPU us/cycle = user + system CPU of all worker processes per cycle; busy % = that "
          "CPU over wall x CPUs (near 100: the side is bound by the CPUs, not by waiting)")
    print("optuna fsyncs 3x per cycle under its symlink lock (sleep backoff from 1 ms); "
          "loopx and raw append 2x per cycle and sync after unlocking")
    print(f"total run time {elapsed:.1f} s")
    if args.keep:
        print(f"kept: {root} (one runNNN directory per repetition)")
    if args.lock_times:
        lock_summary(Path(args.lock_times))


if __name__ == "__main__":
    sys.exit(main())
