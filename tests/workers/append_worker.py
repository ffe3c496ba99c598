"""A real writer process for the concurrency and crash tests.

Appends batches through the workspace's checked path and prints one line per acknowledged
append, flushed at once: ``ACK <first seq> <last seq> <record_id>...``. Runs ``--appends`` times
(forever when 0) and prints ``READY`` once imports are done so tests can line writers up.
"""

from __future__ import annotations

import argparse
import random
import sys

import loopx.records.registry  # noqa: F401  (import before READY, not on the clock)
from loopx.workspace import find_workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace")
    parser.add_argument("--writer", required=True)
    parser.add_argument("--appends", type=int, default=0)
    parser.add_argument("--max-batch", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pad", type=int, default=64)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ledger = find_workspace(args.workspace).ledger()
    print("READY", flush=True)
    sys.stdin.readline()  # the test releases every writer at once
    n = 0
    while args.appends == 0 or n < args.appends:
        size = rng.randint(1, args.max_batch)
        drafts = [{"payload": {"event": "progress",
                               "detail": {"writer": args.writer, "n": n, "i": i, "size": size,
                                          "pad": "x" * rng.randint(0, args.pad)}}}
                  for i in range(size)]
        records = ledger.append(drafts, agent_id=args.writer, lane_role="owner",
                                kind="rollout_event_v0")
        ids = " ".join(r["record_id"] for r in records)
        print(f"ACK {records[0]['seq']} {records[-1]['seq']} {ids}", flush=True)
        n += 1


if __name__ == "__main__":
    main()
