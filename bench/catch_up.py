"""Cost of opening a Ledger and catching up to the head, with and without a checkpoint.

What it measures
    Builds a workspace (``loopx.workspace.init_workspace``: genesis record and role profiles,
    durable), registers one executor agent holding a todo (``loopx.testing.lanes``), and fills
    its log up to N records (default 100,000) with that agent's rollout_event_v0 records, tied
    to its todo exactly as the checked path prepares them, written with
    ``FileStore(durable=False)`` and large batches, plus a second, small workspace (default
    10,000 records). Then, each in a fresh subprocess (nothing cached in-process; the OS page
    cache is warm, and one untimed warm-up run per case precedes the timed ones), it times only
    ``Ledger(FileStore(dir), checkpoint_path=..., checkpoint_every=...).state()``; imports are
    done before the clock starts. Cases:

    (a)    big log, no checkpoint file: folds all N records
    (b)    big log, checkpoint 100 records behind the head
    (c)    big log, checkpoint 10,000 records behind the head
    (b')   small log, checkpoint 100 records behind its head
    (a')   small log, no checkpoint (for contrast: without one, cost follows log length)

    A checkpoint at seq K is made by folding the log with ``loopx.kernel.fold.advance`` from
    ``State.initial()`` up to K and writing it with ``loopx.kernel.checkpoint.save_checkpoint``. The
    checkpoint file is deleted before every measured run and re-written (from the in-memory
    state) for the cases that use one, so no run benefits from a checkpoint another run left.
    The measured process uses a huge ``checkpoint_every`` so ``state()`` does not save a
    checkpoint itself (pass ``--child-checkpoint-every 1000``, the loopx default, to include
    that save in the measured cost); the script checks afterwards that the file is unchanged.
    Each run must report the head seq, the record count, and the expected checkpoint status.

Verdict (ratios are medians of per-repetition ratios; every case runs once per repetition)
    (b)/(a)   goal <= 0.05: a near-head checkpoint makes opening cheap
    (c)/(b)   how much a 100x longer tail costs
    (b')/(b)  should be ~1: with a checkpoint, cost follows tail length, not log length
    (a)/(a')  ~ N / N_small: without one, cost follows log length

Run
    python bench/catch_up.py                                   # defaults, ~15 s
    python bench/catch_up.py --records 20000 --small-records 5000 --far 2000 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from temp_root import add_temp_root_options, temp_root

GOAL = "bench"
CHILD_FLAG = "--child"


# -- measured process -------------------------------------------------------------------------

def child(store_dir: str, checkpoint: str, checkpoint_every: int) -> None:
    """Time opening a Ledger and calling state(); print one JSON line."""
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.file import FileStore

    t0 = time.perf_counter()
    ledger = Ledger(FileStore(store_dir), checkpoint_path=Path(checkpoint),
                    checkpoint_every=checkpoint_every)
    state = ledger.state()
    elapsed = time.perf_counter() - t0
    ledger.store.close()
    print(json.dumps({"seconds": elapsed, "seq": state.seq,
                      "records": state["kernel"]["records"],
                      "goal_id": state["kernel"]["goal_id"],
                      "status": ledger.checkpoint_status}))


# -- building ---------------------------------------------------------------------------------

def build(root: Path, records: int, batch: int, detail_bytes: int) -> Path:
    """A workspace under ``root`` whose log holds exactly ``records`` records; its .loopx dir.

    Batches after the setup records (genesis, profiles, the writer's grant, todo and claim) end
    on multiples of ``batch``, so checkpoints a multiple of ``batch`` behind the head sit on
    batch boundaries, as Ledger's own checkpoints do. The notes are prepared once by
    ``Ledger.prepare`` as the writer (the checked path's own preparation) and then written
    directly, bypassing the per-append checks, which only the build would pay for.
    """
    from loopx.kernel.kinds import new_record_id
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.file import FileStore
    from loopx.testing.lanes import executor_writer
    from loopx.workspace import init_workspace

    ws, owner_token = init_workspace(root, GOAL)
    with ws.store() as setup:
        ledger = Ledger(setup)
        writer = executor_writer(ledger, owner_token, "w1")
        [template] = ledger.prepare(
            writer.tie({"payload": {"event": "note",
                                    "detail": {"i": 1, "text": "x" * detail_bytes}}}),
            ledger.identify(writer.creds), kind="rollout_event_v0")
    with FileStore(ws.dir, durable=False) as store:
        seq = store.head().seq
        while seq < records:
            n = min(batch - seq % batch, records - seq)
            seq = store.append([dict(template, record_id=new_record_id())
                                for _ in range(n)])[-1]["seq"]
    return ws.dir


def fold_to(store_dir: Path, seq: int):
    """The folded State of the log up to and including record ``seq``."""
    from loopx.kernel.fold import State, advance
    from loopx.kernel.store.file import FileStore

    def upto(entries):
        for record, cursor in entries:
            yield record, cursor
            if record["seq"] >= seq:
                return

    state = State.initial()
    with FileStore(store_dir) as store:
        advance(state, upto(store.read()))
    if state.seq != seq:
        raise RuntimeError(f"folded to {state.seq}, wanted {seq}")
    return state


# -- parent -----------------------------------------------------------------------------------

def measure(case: dict, child_every: int) -> float:
    """One fresh-subprocess run of ``case``; returns its seconds after checking the outcome."""
    from loopx.kernel.checkpoint import save_checkpoint
    from loopx.kernel.fold import fold_version

    path: Path = case["checkpoint_path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.iterdir():  # the checkpoint and any temp file a run left behind
        stale.unlink()
    before = None
    if case["state"] is not None:
        save_checkpoint(path, case["state"], fold_version())
        before = path.read_bytes()
    out = subprocess.run([sys.executable, __file__, CHILD_FLAG, str(case["dir"]), str(path),
                          str(child_every)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{case['name']}: child failed:\n{out.stderr}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want_status = "no checkpoint" if before is None else "checkpoint used"
    if (got["seq"] != case["records"] or got["records"] != case["records"]
            or got["goal_id"] != GOAL or got["status"] != want_status):
        raise RuntimeError(f"{case['name']}: unexpected result {got}, wanted seq and records "
                           f"{case['records']}, status {want_status!r}")
    if child_every > case["tail"]:  # state() must not have written a checkpoint of its own
        after = path.read_bytes() if path.exists() else None
        if after != before:
            raise RuntimeError(f"{case['name']}: the measured run changed the checkpoint")
    return got["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000,
                    help="records in the big log (default 100000)")
    ap.add_argument("--small-records", type=int, default=10_000,
                    help="records in the small log (default 10000)")
    ap.add_argument("--near", type=int, default=100,
                    help="records the near checkpoint is behind the head (default 100)")
    ap.add_argument("--far", type=int, default=10_000,
                    help="records the far checkpoint is behind the head (default 10000)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per case (default 5)")
    ap.add_argument("--build-batch", type=int, default=100,
                    help="records per append while building (default 100)")
    ap.add_argument("--detail-bytes", type=int, default=64,
                    help="length of the text in each record's payload detail (default 64)")
    ap.add_argument("--child-checkpoint-every", type=int, default=10**15,
                    help="checkpoint_every of the measured Ledger (default: never save)")
    add_temp_root_options(ap)
    args = ap.parse_args()
    if not 0 < args.near < args.far < args.records or args.near >= args.small_records:
        ap.error("need 0 < near < far < records and near < small-records")

    started = time.monotonic()
    with temp_root("loopx-bench-catchup-", args) as root:
        t = time.monotonic()
        big = build(root / "big", args.records, args.build_batch, args.detail_bytes)
        small = build(root / "small", args.small_records, args.build_batch, args.detail_bytes)
        build_s = time.monotonic() - t
        log_bytes = sum(f.stat().st_size for f in (big / "log").iterdir())
        t = time.monotonic()
        near_state = fold_to(big, args.records - args.near)
        far_state = fold_to(big, args.records - args.far)
        small_state = fold_to(small, args.small_records - args.near)
        fold_s = time.monotonic() - t

        def case(key, name, d, n, state, tail):
            return {"key": key, "name": name, "dir": d, "records": n, "state": state,
                    "tail": tail, "checkpoint_path": d / "checkpoints" / "state.sqlite"}

        cases = [
            case("a", "(a)  no checkpoint", big, args.records, None, args.records),
            case("b", f"(b)  checkpoint {args.near} behind", big, args.records, near_state,
                 args.near),
            case("c", f"(c)  checkpoint {args.far} behind", big, args.records, far_state,
                 args.far),
            case("b'", f"(b') checkpoint {args.near} behind", small, args.small_records,
                 small_state, args.near),
            case("a'", "(a') no checkpoint", small, args.small_records, None,
                 args.small_records),
        ]
        for c in cases:  # warm-up: page cache, interpreter bytecode caches
            measure(c, args.child_checkpoint_every)
        times: dict[str, list[float]] = {c["key"]: [] for c in cases}
        for rep in range(args.reps):
            k = rep % len(cases)
            for c in cases[k:] + cases[:k]:  # rotate the order each repetition
                times[c["key"]].append(measure(c, args.child_checkpoint_every))
    elapsed = time.monotonic() - started

    med = statistics.median

    def ratio(x: str, y: str) -> tuple[float, float, float]:
        per_rep = [a / b for a, b in zip(times[x], times[y])]
        return med(per_rep), min(per_rep), max(per_rep)

    print("catch_up: Ledger(FileStore(dir), checkpoint_path=...).state() in a fresh process")
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, temp dir under "
          f"{root.parent}, {args.reps} timed reps per case after 1 warm-up, import excluded")
    print(f"big log {args.records} records ({log_bytes / 1e6:.1f} MB, "
          f"{log_bytes / args.records:.0f} B/record), small log {args.small_records} records; "
          f"built in {build_s:.1f} s, checkpoints folded in {fold_s:.1f} s")
    print(f"measured Ledger checkpoint_every = {args.child_checkpoint_every}")
    print()
    hdr = (f"{'case':<34} {'log':>7} {'tail':>7} | {'median ms':>9} {'min ms':>8} "
           f"{'max ms':>8} | {'us/tail rec':>11}")
    print(hdr)
    print("-" * len(hdr))
    for c in cases:
        ts = times[c["key"]]
        print(f"{c['name']:<34} {c['records']:>7} {c['tail']:>7} | {med(ts) * 1e3:>9.2f} "
              f"{min(ts) * 1e3:>8.2f} {max(ts) * 1e3:>8.2f} | "
              f"{med(ts) / c['tail'] * 1e6:>11.2f}")
    print()
    rows = [
        ("(b)/(a)", "b", "a", "goal <= 0.05", lambda r: "ok" if r <= 0.05 else "HIGH"),
        ("(c)/(b)", "c", "b", f"tail {args.far // args.near}x longer", None),
        ("(b')/(b)", "b'", "b", f"same tail, log {args.small_records} vs {args.records}: ~1",
         None),
        ("(a)/(a')", "a", "a'", f"no checkpoint: ~{args.records / args.small_records:.0f} "
         "(log length)", None),
    ]
    print(f"{'ratio':<9} {'median':>8} {'[min-max]':>19}  meaning")
    print("-" * 70)
    for label, x, y, meaning, verdict in rows:
        r, lo, hi = ratio(x, y)
        tag = f"  {verdict(r)}" if verdict else ""
        print(f"{label:<9} {r:>8.4f} {f'[{lo:.4f}-{hi:.4f}]':>19}  {meaning}{tag}")
    print()
    print("ratios are medians of per-repetition ratios; times are medians over reps")
    print(f"total run time {elapsed:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == CHILD_FLAG:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(main())
