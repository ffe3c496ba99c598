"""What the claim benchmarks share: the campaign they race on, one worker's cycles on each side
(loopx, Optuna), and the check of the log loopx leaves.

Both ``claim_cycle.py`` (file store) and ``postgres_store.py`` (PostgreSQL) register one
executor per worker process, add ``procs x cycles`` todos, let the workers claim and complete
them, and then read the whole log back: a run whose log does not verify, or in which a todo
was not claimed and completed exactly once, fails instead of printing a rate.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

ROLE = "research_executor"
MAX_BATCH = 500  # todos per add_todos call: batches are limited to 1 MiB
MAX_MISSES = 1000  # loopx: a worker gives up after this many non-selected decisions in a row


def seed(ws: Any, owner_token: str, procs: int, cycles: int
         ) -> tuple[list[str], list[str], set[str]]:
    """Register ``procs`` executors and add ``procs x cycles`` todos for them; return (agent
    ids, their tokens, the todo ids)."""
    from loopx.kernel.checks import Credentials
    from loopx.work.agents import register_agent
    from loopx.work.todos import add_todos

    owner = Credentials(agent_id="owner", token=owner_token)
    ledger = ws.ledger()
    agents = [f"exec-{i}" for i in range(procs)]
    tokens = [register_agent(ledger, owner, agent_id=a, role=ROLE)[1] for a in agents]
    todos = [{"todo_id": f"t-{i:05d}", "title": "bench todo", "role": ROLE,
              "action_kind": "run_dev_eval", "hypothesis_id": f"h-{i:05d}"}
             for i in range(procs * cycles)]
    for i in range(0, len(todos), MAX_BATCH):
        add_todos(ledger, owner, todos[i:i + MAX_BATCH])
    ledger.store.close()
    return agents, tokens, {t["todo_id"] for t in todos}


def loopx_cycles(ledger: Any, agent_id: str, creds: Any, cycles: int) -> tuple[int, Counter]:
    """Claim with should-run and complete, ``cycles`` times; return (cycles done, the other
    reasons should-run gave), stopping after MAX_MISSES of those in a row."""
    from loopx.work.claims import complete, should_run

    others: Counter[str] = Counter()
    done = misses = 0
    while done < cycles and misses < MAX_MISSES:
        d = should_run(ledger, agent_id, claim=True, creds=creds)
        if d["reason"] == "selected":
            out = complete(ledger, creds, d["todo"]["todo_id"], d["todo"]["epoch"],
                           result={"ok": True})
            if out["already_completed"]:
                raise RuntimeError(f"{d['todo']['todo_id']} was already completed")
            done, misses = done + 1, 0
        else:
            others[d["reason"]] += 1
            misses += 1
    return done, others


def optuna_cycles(study: Any, cycles: int) -> int:
    """Optuna's cycle, ``cycles`` times: ask, suggest one float, tell; return cycles done."""
    for _ in range(cycles):
        trial = study.ask()
        x = trial.suggest_float("x", 0, 1)
        study.tell(trial, (x - 0.5) ** 2)
    return cycles


def check(ws: Any, todo_ids: set[str], agents: set[str]) -> int:
    """Check a finished run from its log; return the number of records in it.

    ``verify`` (chain, schemas and every write check re-run) must pass; every todo must be
    claimed exactly once, by one of the workers, at epoch 1 (no double claim, no expiry); every
    claim must be completed by its claimant at its epoch, once; and the fold must show every
    todo completed.

    Raises:
        RuntimeError: naming what is wrong.
    """
    from loopx.kernel.verify import verify_store

    ledger = ws.ledger()
    try:
        report = verify_store(ledger.store)
        if not report.ok:
            raise RuntimeError(f"loopx: verify failed at seq {report.first_bad_seq}: "
                               f"{report.problem}")
        claims: Counter[str] = Counter()
        claimed: set[tuple[str, int, str]] = set()
        completed: Counter[tuple[str, int, str]] = Counter()
        other_events: Counter[str] = Counter()
        records = 0
        for rec, _ in ledger.store.read():
            records += 1
            kind = rec["schema_version"]
            if kind == "auto_research_lane_claim_v1":
                claims[rec["todo_id"]] += 1
                claimed.add((rec["todo_id"], rec["epoch"], rec["agent_id"]))
            elif kind == "todo_event_v0":
                event = rec["payload"]["event"]
                if event == "completed":
                    completed[(rec["todo_id"], rec["epoch"], rec["agent_id"])] += 1
                else:
                    other_events[event] += 1
        problems = [f"{len(set(claims) & todo_ids)} of {len(todo_ids)} todos claimed, "
                    f"{len(set(claims) - todo_ids)} unknown ones"] if set(claims) != todo_ids else []
        problems += _more_than_once("todos claimed", claims)
        if any(epoch != 1 or agent not in agents for _, epoch, agent in claimed):
            problems.append("a claim at an epoch other than 1, or by an unknown agent")
        if set(completed) != claimed:
            problems.append(f"{len(claimed - set(completed))} claims not completed by their "
                            f"claimant, {len(set(completed) - claimed)} completions of no claim")
        problems += _more_than_once("claims completed", completed)
        if other_events:
            problems.append(f"unexpected todo events: {dict(other_events)}")
        todos = ledger.state()["lanes"]["todos"]
        open_ = sorted(t for t in todo_ids if todos[t]["status"] != "completed")
        if open_:
            problems.append(f"{len(open_)} todos not completed in the fold: {open_[:5]}")
        if problems:
            raise RuntimeError("loopx: " + "; ".join(problems))
    finally:
        ledger.store.close()
    return records


def _more_than_once(what: str, counts: Counter) -> list[str]:
    many = sorted(k for k, n in counts.items() if n > 1)
    return [f"{len(many)} {what} more than once: {many[:5]}"] if many else []


def median_text(values: list[float], fmt: str) -> str:
    """The median of ``values`` formatted with ``fmt``, or "-" when there are none."""
    return format(statistics.median(values), fmt) if values else "-"


def print_table_head(title: str, setup: str, header: str) -> None:
    """The report's first lines: what is compared, the run's settings, the column names."""
    print(title)
    print(setup + "\n")
    print(header)
    print("-" * len(header))
