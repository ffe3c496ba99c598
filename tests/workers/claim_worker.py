"""A real agent process for the lane tests: claims through should-run and completes, or holds.

The token comes from ``LOOPX_TOKEN`` (never argv). Prints ``READY`` once imported, waits for a
line on stdin, then either loops (``CLAIM <todo> <epoch>`` per completed claim, ``DONE <n>``
when nothing is left) or, with ``--hold``, claims one todo, prints ``HELD <todo> <epoch>`` and
sleeps until killed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import loopx.kernel.kinds  # noqa: F401  (import before READY, not on the clock)
from loopx.kernel.checks import Credentials
from loopx.work.claims import complete, should_run
from loopx.workspace import find_workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace")
    parser.add_argument("--agent-id", required=True)
    parser.add_argument("--hold", action="store_true")
    args = parser.parse_args()
    creds = Credentials(args.agent_id, os.environ["LOOPX_TOKEN"])
    ledger = find_workspace(args.workspace).ledger()
    ledger.state()
    print("READY", flush=True)
    sys.stdin.readline()
    done = 0
    while True:
        decision = should_run(ledger, args.agent_id, claim=True, creds=creds)
        if decision["reason"] != "selected":
            print(f"DONE {done} {decision['reason']}", flush=True)
            return
        if not decision["claimed"]:
            print(f"UNCLAIMED {decision['todo']['todo_id']}", flush=True)
            sys.exit(3)
        todo_id, epoch = decision["todo"]["todo_id"], decision["todo"]["epoch"]
        if args.hold:
            print(f"HELD {todo_id} {epoch}", flush=True)
            time.sleep(3600)
        complete(ledger, creds, todo_id, epoch, {"by": args.agent_id})
        print(f"CLAIM {todo_id} {epoch}", flush=True)
        done += 1


if __name__ == "__main__":
    main()
