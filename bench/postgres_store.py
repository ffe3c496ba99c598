"""The PostgreSQL store on one server: claim cycles against Optuna's RDB storage, and appends
against a plain INSERT+COMMIT loop.

What it measures
    Needs a server: --dsn, else LOOPX_TEST_PG (``postgresql://user:password@host/db``; .ci/run
    makes one). Every side runs on that server in the same run, in a rotating order each
    repetition, with P spawned worker processes (--procs, default 1,4,8) that import everything
    and connect before a barrier, so neither imports nor connecting are timed.

    claim   loopx: each worker is a registered agent on a workspace whose log is on PostgreSQL
            and repeats ``should_run(..., claim=True)`` then ``complete`` (two appends, each one
            transaction committed before it returns); the run fails unless the log verifies
            and every todo was claimed and completed exactly once (``claim_race.check``, as in
            ``claim_cycle.py``). optuna: ``RDBStorage("postgresql+psycopg://...")`` (SQLAlchemy 2, psycopg 3),
            a cycle is study.ask(); trial.suggest_float; study.tell(), RandomSampler.
            Goal: loopx/optuna >= 2.
    append  loopx: per append, what a writer pays from a draft, as in append_throughput.py:
            ``kinds.prepare`` (the draft validated, a fresh record id), then
            ``PostgresStore.append([record])`` through its full path for a batch without write
            checks (encode, one CALL that locks the head, seals, inserts, moves the head,
            commits and waits for the WAL flush, then the server's seal checked here). raw: a
            line as long as loopx's stored line, ``INSERT INTO bench_raw (...) VALUES (...)``
            on an autocommit connection, each its own transaction (one round trip, one commit,
            a flush): the plain INSERT+COMMIT loop. Goal: loopx/raw >= 0.5.

Verdict
    ops/s = all processes' operations / wall (first worker leaving the barrier to the last one
    finishing), medians over repetitions; ratios are medians of per-repetition paired ratios.

Run
    python bench/postgres_store.py                                # defaults (a few minutes)
    python bench/postgres_store.py --reps 1 --cycles 30 --procs 4 # quick check
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import claim_race
from append_throughput import author, draft, prepared
from temp_root import add_temp_root_options, temp_root
from worker_pool import Pool, serve


def worker(conn: Any, barrier: Any, dsn: str) -> None:
    """Import what every side needs, then run jobs until 'stop'."""
    try:
        import optuna
        import psycopg  # noqa: F401  (imported before the barrier, not on the clock)

        import loopx.kernel.checks
        import loopx.kernel.store.postgres
        import loopx.work.claims  # noqa: F401
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    except Exception:
        conn.send(traceback.format_exc())
        return
    serve(conn, barrier, lambda job: run_job(job, barrier, dsn))


TEXT_BYTES = 40  # detail text per record: stored lines of about 500 bytes


def run_job(job: tuple, barrier: Any, dsn: str) -> tuple[float, float, int]:
    """One timed run; returns (monotonic start, monotonic end, operations done)."""
    _, side, target, count, extra = job
    done = 0
    if side == "claim-loopx":
        from loopx.kernel.checks import Credentials
        from loopx.workspace import find_workspace

        agent_id, token, url = extra
        os.environ["LOOPX_STORE"] = url
        creds = Credentials(agent_id=agent_id, token=token)
        ledger = find_workspace(target).ledger()
        ledger.state()
        barrier.wait()
        t0 = time.monotonic()
        done, others = claim_race.loopx_cycles(ledger, agent_id, creds, count)
        t1 = time.monotonic()
        if others:
            raise RuntimeError(f"should-run said {dict(others)}")
        ledger.store.close()
    elif side == "claim-optuna":
        import optuna
        from optuna.storages import RDBStorage

        storage = RDBStorage(target)
        study = optuna.load_study(study_name="bench", storage=storage,
                                  sampler=optuna.samplers.RandomSampler())
        barrier.wait()
        t0 = time.monotonic()
        done = claim_race.optuna_cycles(study, count)
        t1 = time.monotonic()
        storage.engine.dispose()
    elif side == "append-loopx":
        from loopx.kernel.kinds import prepare
        from loopx.kernel.store.postgres import PostgresStore

        store = PostgresStore(target)
        store.head()  # connect before the clock
        who = author()
        drafts = [draft(TEXT_BYTES) for _ in range(count)]
        prepare(drafts[0], who, kind="rollout_event_v0")  # warm the schema caches
        barrier.wait()
        t0 = time.monotonic()
        for one in drafts:
            store.append([prepare(one, who, kind="rollout_event_v0")])
            done += 1
        t1 = time.monotonic()
        store.close()
    else:  # append-raw
        import psycopg

        from loopx.kernel.canonical import now_ts
        from loopx.kernel.store.base import Cursor, seal

        head = Cursor(seq=count * 10, hash="0" * 64)
        lines = [seal([[prepared(TEXT_BYTES)]], head, now_ts()).data[:-1] for _ in range(count)]
        with psycopg.connect(dsn, autocommit=True) as conn:
            barrier.wait()
            t0 = time.monotonic()
            for i, line in enumerate(lines):
                conn.execute("INSERT INTO bench_raw (log, seq, line) VALUES (%s, %s, %s)",
                             (target, extra * 10_000_000 + i, line))
                done += 1
            t1 = time.monotonic()
    return t0, t1, done


def run_all(pool: Pool, side: str, target: str, count: int, extras: list[Any]) -> float:
    """Run one job per worker; return operations/s over all of them."""
    wall, results = pool.run(side, [("run", side, target, count, e) for e in extras])
    total = sum(r[2] for r in results)
    if total != count * len(results):
        raise RuntimeError(f"{side}: {total} operations, expected {count * len(results)}")
    return total / wall


def claim_loopx(pool: Pool, dsn: str, run_dir: Path, procs: int, cycles: int) -> float:
    from loopx.kernel.store.postgres import PostgresStore
    from loopx.workspace import init_workspace

    url = _with_log(dsn, f"bench{uuid.uuid4().hex[:12]}")
    ws, owner_token = init_workspace(run_dir / "loopx", "bench-claims", store=url)
    os.environ["LOOPX_STORE"] = url
    try:
        agents, tokens, todo_ids = claim_race.seed(ws, owner_token, procs, cycles)
        rate = run_all(pool, "claim-loopx", str(ws.root), cycles,
                       [(a, t, url) for a, t in zip(agents, tokens, strict=True)])
        claim_race.check(ws, todo_ids, set(agents))
    finally:
        with PostgresStore(url) as store:
            store.drop()
        del os.environ["LOOPX_STORE"]
    return rate


def claim_optuna(pool: Pool, dsn: str, procs: int, cycles: int) -> float:
    import optuna
    from optuna.storages import RDBStorage

    url = _sqlalchemy_url(dsn)
    storage = RDBStorage(url)
    optuna.delete_study(study_name="bench", storage=storage) if _has_study(storage) else None
    optuna.create_study(study_name="bench", storage=storage)
    rate = run_all(pool, "claim-optuna", url, cycles, [None] * procs)
    trials = optuna.load_study(study_name="bench", storage=storage).get_trials()
    if sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials) != procs * cycles:
        raise RuntimeError("optuna: not every trial completed")
    optuna.delete_study(study_name="bench", storage=storage)
    storage.engine.dispose()
    return rate


def _has_study(storage: Any) -> bool:
    return any(s.study_name == "bench" for s in storage.get_all_studies())


def append_loopx(pool: Pool, dsn: str, procs: int, count: int) -> float:
    from loopx.kernel.store.postgres import PostgresStore

    url = _with_log(dsn, f"bench{uuid.uuid4().hex[:12]}")
    with PostgresStore(url) as store:
        store.create()
    try:
        rate = run_all(pool, "append-loopx", url, count, [None] * procs)
        with PostgresStore(url) as store:
            if store.head().seq != procs * count:
                raise RuntimeError("loopx: appends missing")
    finally:
        with PostgresStore(url) as store:
            store.drop()
    return rate


def append_raw(pool: Pool, dsn: str, procs: int, count: int) -> float:
    import psycopg

    log = f"bench{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_raw (log text NOT NULL, seq bigint NOT "
                     "NULL, line bytea NOT NULL, PRIMARY KEY (log, seq))")
    rate = run_all(pool, "append-raw", log, count, list(range(procs)))
    with psycopg.connect(dsn, autocommit=True) as conn:
        [(n,)] = conn.execute("SELECT count(*) FROM bench_raw WHERE log = %s", (log,)).fetchall()
        conn.execute("DELETE FROM bench_raw WHERE log = %s", (log,))
    if n != procs * count:
        raise RuntimeError("raw: inserts missing")
    return rate


def _with_log(dsn: str, log: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}log={log}"


def _sqlalchemy_url(dsn: str) -> str:
    return "postgresql+psycopg://" + dsn.split("://", 1)[1]


def main() -> None:
    """Parse options, run every (P, repetition, side) and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", default=os.environ.get("LOOPX_TEST_PG"),
                    help="postgresql://user:password@host/db (default: $LOOPX_TEST_PG)")
    ap.add_argument("--procs", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8])
    ap.add_argument("--cycles", type=int, default=100, help="claim cycles per process")
    ap.add_argument("--appends", type=int, default=300, help="appends per process")
    ap.add_argument("--reps", type=int, default=3)
    add_temp_root_options(ap)
    args = ap.parse_args()
    if not args.dsn:
        ap.error("give --dsn or set LOOPX_TEST_PG (or run .ci/run to make a server)")
    keys = ("claim-loopx", "claim-optuna", "append-loopx", "append-raw", "claim", "append")
    res: dict[int, dict[str, list[float]]] = {p: {k: [] for k in keys} for p in args.procs}
    started = time.monotonic()
    sides = ["claim-loopx", "claim-optuna", "append-loopx", "append-raw"]
    with temp_root("loopx-bench-pg-", args) as root:
        run_no = 0
        for procs in args.procs:
            with Pool(procs, worker, args.dsn) as pool:
                for rep in range(args.reps):
                    r = res[procs]
                    k = rep % len(sides)
                    for side in sides[k:] + sides[:k]:
                        run_no += 1
                        run_dir = root / f"run{run_no:03d}"
                        run_dir.mkdir()
                        if side == "claim-loopx":
                            rate = claim_loopx(pool, args.dsn, run_dir, procs, args.cycles)
                        elif side == "claim-optuna":
                            rate = claim_optuna(pool, args.dsn, procs, args.cycles)
                        elif side == "append-loopx":
                            rate = append_loopx(pool, args.dsn, procs, args.appends)
                        else:
                            rate = append_raw(pool, args.dsn, procs, args.appends)
                        r[side].append(rate)
                    r["claim"].append(r["claim-loopx"][-1] / r["claim-optuna"][-1])
                    r["append"].append(r["append-loopx"][-1] / r["append-raw"][-1])
    elapsed = time.monotonic() - started

    claim_race.print_table_head(
        "postgres_store: loopx on PostgreSQL vs Optuna RDBStorage (claim cycles) and vs a "
        "plain INSERT+COMMIT loop (appends), same server, same run",
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, {args.cycles} cycles/proc,"
        f" {args.appends} appends/proc, {args.reps} reps, imports and connecting excluded",
        f"{'procs':>5} | {'loopx c/s':>9} {'optuna c/s':>10} {'lx/optuna':>9} {'goal>=2':>7} |"
        f" {'loopx a/s':>9} {'raw a/s':>8} {'lx/raw':>6} {'goal>=.5':>8}")
    med = claim_race.median_text
    for procs in args.procs:
        r = res[procs]
        claim = statistics.median(r["claim"])
        append = statistics.median(r["append"])
        print(f"{procs:>5} | {med(r['claim-loopx'], '.0f'):>9} {med(r['claim-optuna'], '.0f'):>10}"
              f" {claim:>9.2f} {'PASS' if claim >= 2 else 'MISS':>7} |"
              f" {med(r['append-loopx'], '.0f'):>9} {med(r['append-raw'], '.0f'):>8}"
              f" {append:>6.2f} {'PASS' if append >= 0.5 else 'MISS':>8}")
    print("\nc/s = claim cycles/s, a/s = appends/s (all processes); medians over reps; ratios are "
          "medians of per-rep paired ratios")
    print(f"total run time {elapsed:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
