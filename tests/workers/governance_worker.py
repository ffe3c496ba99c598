"""A real agent process for the governance tests: proposes actions, records usage and findings.

The token comes from ``LOOPX_TOKEN`` (never argv). Each acknowledged write prints one line
(``PROPOSED id``, ``USED cpu_hours``, ``FOUND id``), so a test that kills the process knows
what was acknowledged. ``--owner`` approves or rejects every pending proposal instead, until
told to stop by a closed stdin.
"""

from __future__ import annotations

import argparse
import os
import sys

from loopx.governance.actions import decide_approval, pending_approvals, propose
from loopx.governance.findings import add_finding
from loopx.governance.usage import add_usage
from loopx.kernel.checks import Credentials
from loopx.workspace import find_workspace


def agent(ledger: object, creds: Credentials, rounds: int) -> None:
    name = creds.agent_id
    for i in range(rounds):
        risk = ("read", "compute", "write")[i % 3]
        tool = {"read": "lab.peek", "compute": "lab.train", "write": "lab.write"}[risk]
        out = propose(ledger, creds, name=f"step {i}", tool=tool, risk=risk,  # type: ignore[arg-type]
                      reason=f"{name} round {i}", estimated_cost={"cpu_hours": 0.1},
                      proposal_id=f"{name}-p{i}")
        print(f"PROPOSED {out['proposal_id']}", flush=True)
        add_usage(ledger, creds, {"cpu_hours": 0.25, "experiments": 1})  # type: ignore[arg-type]
        print("USED 0.25", flush=True)
        found = add_finding(ledger, creds, kind="computed_result",  # type: ignore[arg-type]
                            statement=f"{name} measured {i}",
                            evidence=[{"kind": "record", "ref": f"rec_{name}_{i}"}],
                            finding_id=f"{name}-f{i}")
        print(f"FOUND {found['finding_id']}", flush=True)


def owner(ledger: object, creds: Credentials) -> None:
    # Approve even-numbered proposals, reject odd ones, until stdin closes and nothing is left.
    import select

    while True:
        view = ledger.state()["lanes"]  # type: ignore[attr-defined]
        for row in pending_approvals(view):
            pid = row["subject"]["id"]
            number = int(pid.rsplit("p", 1)[1])
            decide_approval(ledger, creds, pid, approved=number % 2 == 0,  # type: ignore[arg-type]
                            note="by the owner process")
            print(f"DECIDED {pid}", flush=True)
        ready, _, _ = select.select([sys.stdin], [], [], 0.05)
        if ready and not sys.stdin.readline():
            view = ledger.state()["lanes"]  # type: ignore[attr-defined]
            if not pending_approvals(view):
                return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace")
    parser.add_argument("--agent-id", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    creds = Credentials(args.agent_id, os.environ["LOOPX_TOKEN"])
    ledger = find_workspace(args.workspace).ledger()
    if args.agent_id == "owner":
        owner(ledger, creds)
    else:
        agent(ledger, creds, args.rounds)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
