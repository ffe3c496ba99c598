"""Durable append throughput of loopx against raw unlocked append + fdatasync of the same line.

What it measures
    For every (writer processes, batch size) cell, P real OS processes (multiprocessing,
    'spawn') each commit a fixed number of batches to one log. Two implementations run in
    the same temp directory, back to back, in alternating order each repetition:

    loopx     per append, what a writer pays from a draft in the kernel: ``kinds.prepare``
              (the draft validated against the kind's schema, a fresh record id), then
              ``FileStore.append`` of the records with its defaults (durable=True: encode,
              lock, find the head, seal the chain, write, unlock, fdatasync before returning).
              Each run gets a fresh store directory made with ``FileStore(dir).create()``
              plus one first record, written before the clock starts.
    baseline  per append: one ``os.write`` of the same number of bytes (batch x the real
              sealed loopx line length) to a file opened ``O_APPEND``, then ``os.fdatasync``.
              No lock: the kernel's O_APPEND already keeps concurrent writes whole, so this is
              the floor the disk and the OS set for a durable append, not a locked peer.

    Records are about 1 KB: the payload's detail text is sized so that the sealed loopx line
    is ``--line-bytes`` long (default 1024), and the baseline writes lines of that length.

    Workers import everything before a multiprocessing Barrier, so import is excluded. The
    clock runs from the first worker leaving the barrier to the last worker finishing
    (CLOCK_MONOTONIC is system-wide, so the workers' timestamps are comparable).

    A second table times the whole checked path, ``Ledger.append`` of drafts: each worker is
    its own registered executor agent (the parent registers it, adds it a todo with a long
    lease and claims it, before the clock) and appends rollout_event_v0 drafts tied to that
    todo, so every append authenticates the token, folds the new records of the other
    writers and runs the write checks.

    With ``--cpu-control``, a third run per repetition is the baseline again, each append
    first burning (busy, on the thread's CPU clock) the CPU time per append loopx spent beyond
    the baseline in the same repetition: a lock-free writer with loopx's CPU cost. If its ratio
    is near loopx's, the lock and the sync are not what limits loopx; the CPU per append is.

    Separately, before each cell of each repetition, the parent times ``os.fdatasync`` of a
    one-line append in the same directory; the table shows its median and p90.

Verdict
    ``ratio`` = loopx records/s / baseline records/s, the median of the per-repetition paired
    ratios (target >= 0.5 at 1 and 8 writers). Records/s columns are medians over repetitions.
    ``CPU us/app`` and ``ctx sw/app`` are the writer processes' user + system CPU time and
    context switches during the timed run (getrusage), per append: the cost behind the ratio.

Run
    python bench/append_throughput.py                # defaults, about a minute
    python bench/append_throughput.py --reps 3 --appends 100 --no-checked   # quick check
    python bench/append_throughput.py --no-checked --cpu-control   # is it the lock or the CPU?
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

from temp_root import add_temp_root_options, temp_root
from worker_pool import Pool, serve

GOAL = "bench"
TARGET = 0.5


def author():  # loopx is imported lazily: workers import it before the barrier
    """The authenticated executor agent the kernel-path drafts are prepared for."""
    from loopx.kernel.kinds import Author, new_record_id

    return Author(goal_id=GOAL, agent_id="w1", lane_role="research_executor",
                  capability=new_record_id(), authenticated=True)


def draft(text_bytes: int) -> dict:
    """One rollout_event_v0 draft under a claimed todo, with ``text_bytes`` of detail text."""
    return {"todo_id": "w1-work", "epoch": 1,
            "payload": {"event": "note", "detail": {"i": 1, "text": "x" * text_bytes}}}


def prepared(text_bytes: int) -> dict:
    """The unsealed record ``kinds.prepare`` makes of :func:`draft`."""
    from loopx.kernel.kinds import prepare

    return prepare(draft(text_bytes), author(), kind="rollout_event_v0")


def sealed_line_length(record: dict, at_seq: int) -> int:
    """Bytes of the stored line (newline included) of ``record`` sealed as record ``at_seq``."""
    from loopx.kernel.canonical import now_ts
    from loopx.kernel.store.base import Cursor, seal

    head = Cursor(seq=at_seq - 1, hash="0" * 64, ts=None)
    return len(seal([[record]], head, now_ts()).data)


def text_for_line(line_bytes: int, at_seq: int) -> int:
    """The detail text length that makes the sealed line ``line_bytes`` long (or the nearest)."""
    base = sealed_line_length(prepared(0), at_seq)
    return max(0, line_bytes - base)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


# -- worker process ---------------------------------------------------------------------------

def worker(conn, barrier) -> None:
    """Serve ('run', impl, path, batch, appends, line_len, text_bytes, writer) jobs, each run
    after the barrier (``writer`` is (agent id, token, todo id, epoch) for 'checked')."""
    import loopx.kernel.kinds  # imported before any timing
    import loopx.kernel.ledger
    import loopx.kernel.store.file  # noqa: F401

    serve(conn, barrier, lambda job: run_job(job, barrier))


def run_job(job: tuple, barrier) -> tuple[float, float, float, float, int]:
    """One timed run in a worker; returns (monotonic start, monotonic end, median latency,
    CPU seconds (user + system) and context switches of this process during the run)."""
    from loopx.kernel.kinds import prepare
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.file import FileStore

    _, impl, path, batch, appends, line_len, text_bytes, writer = job
    lat: list[float] = []
    if impl == "loopx":
        store = FileStore(path)
        who = author()
        drafts = [draft(text_bytes) for _ in range(batch)]
        prepare(drafts[0], who, kind="rollout_event_v0")  # warm the schema caches
        barrier.wait()
        t0, cpu0 = time.monotonic(), _usage()
        for _ in range(appends):
            a = time.perf_counter()
            store.append([prepare(d, who, kind="rollout_event_v0") for d in drafts])
            lat.append(time.perf_counter() - a)
        t1, cpu1 = time.monotonic(), _usage()
        store.close()
    elif impl == "checked":
        # The whole checked path from a draft: schema validation, authentication, the fold of
        # the other writers' records, the write checks (scope, the todo's lease and epoch),
        # encoding, commit, fsync.
        from loopx.kernel.checks import Credentials

        agent_id, token, todo_id, epoch = writer
        creds = Credentials(agent_id, token)
        ledger = Ledger(FileStore(path))
        drafts = [{"todo_id": todo_id, "epoch": epoch, "payload": draft(text_bytes)["payload"]}
                  for _ in range(batch)]
        ledger.append(drafts[:1], creds=creds, kind="rollout_event_v0")
        barrier.wait()
        t0, cpu0 = time.monotonic(), _usage()
        for _ in range(appends):
            a = time.perf_counter()
            ledger.append(drafts, creds=creds, kind="rollout_event_v0")
            lat.append(time.perf_counter() - a)
        t1, cpu1 = time.monotonic(), _usage()
        ledger.store.close()
    else:
        # 'baseline', or 'control': the baseline after burning ``writer`` seconds of CPU
        spin = writer if impl == "control" else 0.0
        fd = os.open(os.path.join(path, "data.jsonl"),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = (b"x" * (line_len - 1) + b"\n") * batch
        barrier.wait()
        t0, cpu0 = time.monotonic(), _usage()
        for _ in range(appends):
            a = time.perf_counter()
            if spin:
                until = time.thread_time() + spin
                while time.thread_time() < until:
                    pass
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fdatasync(fd)
            lat.append(time.perf_counter() - a)
        t1, cpu1 = time.monotonic(), _usage()
        os.close(fd)
    return t0, t1, statistics.median(lat), cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]


def _usage() -> tuple[float, int]:
    """This process's CPU seconds (user + system) and context switches so far."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime, u.ru_nvcsw + u.ru_nivcsw


def run_all(pool: Pool, impl: str, path: Path, batch: int, appends: int, line_len: int,
            text_bytes: int, writers: list | None = None) -> tuple[float, float, float, float]:
    """Run one job on every worker; return (wall seconds, median per-append seconds, CPU
    seconds per append and context switches per append, over all workers).

    ``writers`` gives each worker its own (agent id, token, todo id, epoch); the token goes
    over the worker's pipe, never on a command line.
    """
    jobs = [("run", impl, str(path), batch, appends, line_len, text_bytes,
             None if writers is None else writers[i]) for i in range(len(pool.conns))]
    wall, results = pool.run(impl, jobs)
    total = len(results) * appends
    return (wall, statistics.median(r[2] for r in results), sum(r[3] for r in results) / total,
            sum(r[4] for r in results) / total)


# -- parent -----------------------------------------------------------------------------------

def fsync_samples(path: Path, line_len: int, n: int) -> list[float]:
    """Latency of os.fdatasync after appending one line, n times, to a fresh file in ``path``."""
    name = path / "fsync_probe"
    fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = b"x" * (line_len - 1) + b"\n"
    out = []
    try:
        for _ in range(n):
            os.write(fd, line)
            a = time.perf_counter()
            os.fdatasync(fd)
            out.append(time.perf_counter() - a)
    finally:
        os.close(fd)
        os.unlink(name)
    return out


def run_loopx(pool: Pool, run_dir: Path, text_bytes: int, procs: int, batch: int,
              appends: int) -> tuple[float, float, float, float, float]:
    """One loopx run; returns (records/s, median append latency, measured bytes per record,
    CPU seconds per append, context switches per append)."""
    from loopx.kernel.store.file import FileStore

    path = run_dir / "loopx"
    setup = FileStore(path)
    setup.create()
    setup.append([prepared(text_bytes)])  # the first record
    setup.close()
    wall, lat, cpu, csw = run_all(pool, "loopx", path, batch, appends, 0, text_bytes)
    expected = 1 + procs * batch * appends
    with FileStore(path) as check:
        # A full read re-verifies the hash chain: no record lost, none written twice.
        count = sum(1 for _ in check.read())
        if count != expected or check.head().seq != expected:
            raise RuntimeError(f"loopx log has {count} records, expected {expected}")
        size = sum(check.segment_path(s).stat().st_size for s in check.segments())
    return procs * batch * appends / wall, lat, size / expected, cpu, csw


def run_checked(pool: Pool, run_dir: Path, text_bytes: int, procs: int, batch: int,
                appends: int) -> tuple[float, float, float]:
    """One run of the full checked path (Ledger.append of drafts); returns (records/s, p50,
    CPU seconds per append)."""
    from loopx.kernel.ledger import Ledger
    from loopx.testing.lanes import executor_writer
    from loopx.workspace import init_workspace

    workspace, owner_token = init_workspace(run_dir / "checked", GOAL)
    with workspace.store() as store:
        ledger = Ledger(store)
        writers = []
        for i in range(procs):
            w = executor_writer(ledger, owner_token, f"w{i + 1}")
            writers.append((w.creds.agent_id, w.creds.token, w.todo_id, w.epoch))
    wall, lat, cpu, _ = run_all(pool, "checked", workspace.dir, batch, appends, 0, text_bytes,
                                writers)
    # init (genesis + 5 profiles), grant + todo + claim per worker, one warm-up per worker, the run
    expected = 6 + 3 * procs + procs + procs * batch * appends
    with workspace.store() as check:
        if check.head().seq != expected:
            raise RuntimeError(f"checked log has {check.head().seq} records, expected {expected}")
    return procs * batch * appends / wall, lat, cpu


def run_baseline(pool: Pool, run_dir: Path, procs: int, batch: int, appends: int,
                 line_len: int, spin: float | None = None) -> tuple[float, float, float, float]:
    """One baseline run (with ``spin``, the CPU control: each append first burns ``spin``
    seconds of CPU); returns (records/s, median append latency, CPU seconds and context
    switches per append)."""
    impl = "baseline" if spin is None else "control"
    path = run_dir / impl
    path.mkdir()
    wall, lat, cpu, csw = run_all(pool, impl, path, batch, appends, line_len, 0,
                                  None if spin is None else [spin] * procs)
    size = (path / "data.jsonl").stat().st_size
    if size != procs * batch * appends * line_len:
        raise RuntimeError(f"baseline wrote {size} bytes, expected "
                           f"{procs * batch * appends * line_len}")
    return procs * batch * appends / wall, lat, cpu, csw


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=ints, default=[1, 8],
                    help="comma-separated writer process counts (default 1,8)")
    ap.add_argument("--batches", type=ints, default=[1],
                    help="comma-separated batch sizes (default 1)")
    ap.add_argument("--appends", type=int, default=300,
                    help="appends per process when batch is 1 (default 300)")
    ap.add_argument("--appends-batched", type=int, default=20,
                    help="appends per process for any batch > 1 (default 20)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per cell (default 5)")
    ap.add_argument("--line-bytes", type=int, default=1024,
                    help="length of each sealed record line, newline included (default 1024)")
    ap.add_argument("--fsync-samples", type=int, default=40,
                    help="fdatasync probes per cell per repetition (default 40)")
    ap.add_argument("--no-checked", dest="checked", action="store_false",
                    help="skip the full checked-path (Ledger.append of drafts) runs")
    ap.add_argument("--cpu-control", action="store_true",
                    help="also run the raw baseline burning, before each append, the CPU "
                         "loopx spent per append beyond raw in the same repetition")
    add_temp_root_options(ap)
    args = ap.parse_args()

    cells = [(p, b) for p in args.procs for b in args.batches]
    appends = {b: (args.appends if b == 1 else args.appends_batched) for b in args.batches}
    # Sized at the middle of the biggest run (seq digits change the length by a byte or two).
    mid = 1 + max(p * b * appends[b] for p, b in cells) // 2
    text_bytes = text_for_line(args.line_bytes, mid)
    line_len = {(p, b): sealed_line_length(prepared(text_bytes), 1 + p * b * appends[b] // 2)
                for p, b in cells}
    res: dict[tuple[int, int], dict[str, list[float]]] = {
        c: {"lx": [], "bl": [], "ratio": [], "lx_lat": [], "bl_lat": [], "bytes": [],
            "fsync": [], "ck": [], "ck_ratio": [], "ck_lat": [], "lx_cpu": [], "bl_cpu": [],
            "lx_csw": [], "bl_csw": [], "ck_cpu": [], "ctl": [], "ctl_ratio": []}
        for c in cells}
    started = time.monotonic()
    run_no = 0
    with temp_root("loopx-bench-append-", args) as root:
        for procs in args.procs:
            with Pool(procs, worker) as pool:
                for rep in range(args.reps):
                    for batch in args.batches:
                        cell, n = (procs, batch), appends[batch]
                        r = res[cell]
                        r["fsync"] += fsync_samples(root, line_len[cell], args.fsync_samples)
                        run_no += 1
                        run_dir = root / f"run{run_no:03d}"
                        run_dir.mkdir()
                        order = ("loopx", "baseline") if rep % 2 == 0 else ("baseline", "loopx")
                        for impl in order:
                            if impl == "loopx":
                                rate, lat, per, cpu, csw = run_loopx(pool, run_dir, text_bytes,
                                                                     procs, batch, n)
                                r["lx_cpu"].append(cpu)
                                r["lx_csw"].append(csw)
                                r["lx"].append(rate)
                                r["lx_lat"].append(lat)
                                r["bytes"].append(per)
                            else:
                                rate, lat, cpu, csw = run_baseline(pool, run_dir, procs, batch,
                                                                   n, line_len[cell])
                                r["bl_cpu"].append(cpu)
                                r["bl_csw"].append(csw)
                                r["bl"].append(rate)
                                r["bl_lat"].append(lat)
                        r["ratio"].append(r["lx"][-1] / r["bl"][-1])
                        if args.cpu_control:
                            spin = max(0.0, r["lx_cpu"][-1] - r["bl_cpu"][-1])
                            rate = run_baseline(pool, run_dir, procs, batch, n, line_len[cell],
                                                spin)[0]
                            r["ctl"].append(rate)
                            r["ctl_ratio"].append(rate / r["bl"][-1])
                        if args.checked:
                            rate, lat, cpu = run_checked(pool, run_dir, text_bytes, procs,
                                                         batch, n)
                            r["ck_cpu"].append(cpu)
                            r["ck"].append(rate)
                            r["ck_lat"].append(lat)
                            r["ck_ratio"].append(rate / r["bl"][-1])
                        shutil.rmtree(run_dir)
    elapsed = time.monotonic() - started

    med = statistics.median
    print("append_throughput: durable loopx appends (draft validated, encoded, committed, "
          "fdatasynced) vs raw O_APPEND write + fdatasync, no lock")
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, temp dir under "
          f"{root.parent}, {args.reps} reps per cell, imports excluded")
    lines = ", ".join(f"{c[0]}x{c[1]}: {line_len[c]} B sealed / {med(res[c]['bytes']):.1f} B in log"
                      for c in cells)
    print(f"line length per (procs x batch): {lines}")
    print()
    hdr = (f"{'procs':>5} {'batch':>5} {'appends':>7} | {'loopx rec/s':>11} {'raw rec/s':>10} "
           f"{'ratio':>5} {'[min-max]':>11} {'target':>6} | {'loopx p50':>9} {'raw p50':>8} | "
           f"{'fdatasync':>9} {'p90':>6} | {'loopx':>5} {'raw':>5} | {'loopx':>5} {'raw':>5}")
    print(hdr)
    print(f"{'':>5} {'':>5} {'/proc':>7} | {'':>11} {'':>10} {'lx/raw':>5} {'':>11} "
          f"{'>=' + str(TARGET):>6} | {'ms/app':>9} {'ms/app':>8} | {'p50 ms':>9} {'ms':>6} | "
          f"{'CPU us/app':>11} | {'ctx sw/app':>11}")
    print("-" * len(hdr))
    for cell in cells:
        r = res[cell]
        ratio = med(r["ratio"])
        spread = f"[{min(r['ratio']):.2f}-{max(r['ratio']):.2f}]"
        verdict = "ok" if ratio >= TARGET else "LOW"
        print(f"{cell[0]:>5} {cell[1]:>5} {appends[cell[1]]:>7} | {med(r['lx']):>11.0f} "
              f"{med(r['bl']):>10.0f} {ratio:>5.2f} {spread:>11} {verdict:>6} | "
              f"{med(r['lx_lat']) * 1e3:>9.2f} {med(r['bl_lat']) * 1e3:>8.2f} | "
              f"{med(r['fsync']) * 1e3:>9.3f} {percentile(r['fsync'], 90) * 1e3:>6.3f} | "
              f"{med(r['lx_cpu']) * 1e6:>5.0f} {med(r['bl_cpu']) * 1e6:>5.0f} | "
              f"{med(r['lx_csw']):>5.1f} {med(r['bl_csw']):>5.1f}")
    if args.checked:
        print()
        print("full checked path: Ledger.append of drafts (authentication, validation, fold of "
              "the others' records, write checks, encoding, commit, fdatasync), same raw baseline")
        print(f"{'procs':>5} {'batch':>5} | {'checked rec/s':>13} {'/ raw':>6} {'[min-max]':>11} "
              f"{'target':>6} | {'p50 ms/app':>10} | {'CPU us/app':>10}")
        for cell in cells:
            r = res[cell]
            ratio = med(r["ck_ratio"])
            spread = f"[{min(r['ck_ratio']):.2f}-{max(r['ck_ratio']):.2f}]"
            print(f"{cell[0]:>5} {cell[1]:>5} | {med(r['ck']):>13.0f} {ratio:>6.2f} "
                  f"{spread:>11} {'ok' if ratio >= TARGET else 'LOW':>6} | "
                  f"{med(r['ck_lat']) * 1e3:>10.2f} | {med(r['ck_cpu']) * 1e6:>10.0f}")
    if args.cpu_control:
        print()
        print("CPU control: the raw baseline (no lock, no sealing) after burning, before each "
              "append, the CPU loopx spent per append beyond raw in the same repetition")
        print(f"{'procs':>5} {'batch':>5} | {'control rec/s':>13} {'/ raw':>6} {'[min-max]':>11} "
              f"| {'loopx / raw':>11}")
        for cell in cells:
            r = res[cell]
            spread = f"[{min(r['ctl_ratio']):.2f}-{max(r['ctl_ratio']):.2f}]"
            print(f"{cell[0]:>5} {cell[1]:>5} | {med(r['ctl']):>13.0f} "
                  f"{med(r['ctl_ratio']):>6.2f} {spread:>11} | {med(r['ratio']):>11.2f}")
    print()
    print("ratio = median over reps of (loopx rec/s / raw rec/s) from back-to-back runs; rec/s "
          "and latencies are medians over reps")
    print("CPU us/app, ctx sw/app = user + system CPU time and context switches of the writer "
          "processes during the timed run, per append (getrusage)")
    print("fdatasync = one-line append + fdatasync probed in the same directory before each cell: "
          "the device's floor")
    print(f"total run time {elapsed:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
