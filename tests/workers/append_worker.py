"""A real writer process for the concurrency and crash tests.

Runs as one registered executor agent (``--writer`` is its agent id) whose token comes from the
``LOOPX_TOKEN`` environment variable, never the command line. Appends batches of
rollout_event_v0 drafts tied to the todo it holds (``--todo-id``/``--epoch``) through the
workspace's checked path and prints one line per acknowledged append, flushed at once:
``ACK <first seq> <last seq> <record_id>...``. Runs ``--appends`` times (forever when 0) and
prints ``READY`` once imports are done so tests can line writers up.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

import loopx.kernel.kinds  # noqa: F401  (import before READY, not on the clock)
from loopx.kernel.checks import Credentials
from loopx.workspace import find_workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace")
    parser.add_argument("--writer", required=True, help="the agent id")
    parser.add_argument("--todo-id", required=True)
    parser.add_argument("--epoch", type=int, required=True)
    parser.add_argument("--appends", type=int, default=0)
    parser.add_argument("--max-batch", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pad", type=int, default=64)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    creds = Credentials(args.writer, os.environ["LOOPX_TOKEN"])
    ledger = find_workspace(args.workspace).ledger()
    ledger.identify(creds)  # fold and authenticate before READY, so the first append is warm
    print("READY", flush=True)
    sys.stdin.readline()  # the test releases every writer at once
    n = 0
    while args.appends == 0 or n < args.appends:
        size = rng.randint(1, args.max_batch)
        drafts = [{"todo_id": args.todo_id, "epoch": args.epoch,
                   "payload": {"event": "progress",
                               "detail": {"writer": args.writer, "n": n, "i": i, "size": size,
                                          "pad": "x" * rng.randint(0, args.pad)}}}
                  for i in range(size)]
        records = ledger.append(drafts, creds=creds, kind="rollout_event_v0")
        ids = " ".join(r["record_id"] for r in records)
        print(f"ACK {records[0]['seq']} {records[-1]['seq']} {ids}", flush=True)
        n += 1


if __name__ == "__main__":
    main()
