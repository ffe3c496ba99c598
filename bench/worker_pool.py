"""The worker pool of the multi-process benchmarks: P spawned processes, each preparing its job
before one barrier shared with the parent, so that only the work after it is timed.

A script's worker function (module level, so that 'spawn' can find it) prepares what every job
of its process needs, then hands its job loop to :func:`serve`; the parent starts the workers
with :class:`Pool` and runs one job per worker with :meth:`Pool.run`. A job result starts with
the worker's (monotonic start, monotonic end).
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import traceback
from collections.abc import Callable
from typing import Any


def serve(conn: Any, barrier: Any, run_job: Callable[[tuple], tuple]) -> None:
    """Say "up", then answer each ('run', ...) job with ``run_job(job)`` until ('stop',)."""
    conn.send("up")
    while True:
        job = conn.recv()
        if job[0] == "stop":
            return
        try:
            conn.send(run_job(job))
        except Exception:  # tell the parent, and release everyone from the barrier
            barrier.abort()
            conn.send(("error", traceback.format_exc()))


class Pool:
    """P spawned worker processes sharing one reusable barrier (P workers + the parent)."""

    def __init__(self, procs: int, worker: Callable[..., None], *args: Any) -> None:
        """Start ``worker(conn, barrier, *args)`` in each process; wait until all say "up"
        (a worker that cannot start sends why instead)."""
        ctx = mp.get_context("spawn")
        self.barrier = ctx.Barrier(procs + 1)
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for _ in range(procs):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker, args=(child, self.barrier, *args), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        for c in self.conns:
            msg = c.recv()
            if msg != "up":
                self.close()
                raise RuntimeError(f"worker failed to start:\n{msg}")

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, what: str, jobs: list[tuple]) -> tuple[float, list[tuple]]:
        """Give worker i ``jobs[i]``; return the wall seconds from the first worker leaving the
        barrier to the last one finishing, and every worker's result.

        Raises:
            RuntimeError: a worker failed (with its traceback; ``what`` names the run).
        """
        for c, job in zip(self.conns, jobs):
            c.send(job)
        try:
            self.barrier.wait(timeout=600)
        except threading.BrokenBarrierError:
            pass  # a worker failed while preparing; its message says why
        results = [c.recv() for c in self.conns]
        for r in results:
            if r[0] == "error":
                raise RuntimeError(f"{what} worker failed:\n{r[1]}")
        return max(r[1] for r in results) - min(r[0] for r in results), results

    def close(self) -> None:
        """Stop the workers."""
        for c, p in zip(self.conns, self.procs):
            if p.is_alive():
                c.send(("stop",))
        for p in self.procs:
            p.join(timeout=10)
