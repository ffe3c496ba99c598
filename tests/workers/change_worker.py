"""A real process for the todo change race: on each line ``TODO_ID`` from stdin it either claims
and completes the todo (``claim``) or cancels it (``cancel``), and prints ``WON TODO_ID`` or
``LOST TODO_ID <error code> <message>``.

The token comes from ``LOOPX_TOKEN`` (never argv). Prints ``READY`` once imported and caught up,
so the parent can release both processes onto the same todo at once.
"""

from __future__ import annotations

import argparse
import os
import sys

import loopx.kernel.kinds  # noqa: F401  (import before READY, not on the clock)
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import LoopxError
from loopx.work.claims import claim, complete
from loopx.work.todo_changes import cancel
from loopx.workspace import find_workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace")
    parser.add_argument("--agent-id", required=True)
    parser.add_argument("--mode", choices=("claim", "cancel"), required=True)
    args = parser.parse_args()
    creds = Credentials(args.agent_id, os.environ["LOOPX_TOKEN"])
    ledger = find_workspace(args.workspace).ledger()
    ledger.state()
    print("READY", flush=True)
    for line in sys.stdin:
        todo_id = line.strip()
        if not todo_id:
            break
        try:
            if args.mode == "claim":
                got = claim(ledger, creds, todo_id)
                complete(ledger, creds, todo_id, got["todo"]["epoch"], {"by": args.agent_id})
            else:
                cancel(ledger, creds, todo_id, "raced a claim")
        except LoopxError as exc:
            print(f"LOST {todo_id} {exc.code} {exc.message}", flush=True)
        else:
            print(f"WON {todo_id}", flush=True)


if __name__ == "__main__":
    main()
