"""Cold read commands (``quota should-run``, ``status``, ``board``) against ``python -c pass``.

What it measures
    Two workspaces are built through the library's checked path: a small one (default 1,000
    records) and a big one (default 100,000). Their folded state grows with the log: agents
    (one per 100 records), open todos (one per 10 records), hypotheses taken through the research
    loop with their attempts, evidence packets and judgements (one per 100 records), and
    claim/complete cycles; rollout events tied to a held todo fill the rest. The build's ledger
    uses the workspace's checkpoint with the default ``checkpoint_every``; then a reader (a
    fresh ledger on that checkpoint, as every command opens) folds and saves what it changed as
    a delta, and the log grows by one record short of the next delta save (99 records): the
    furthest behind a reader finds the checkpoint while readers keep coming, and what every
    measured process folds. One untimed run of every command then leaves what those commands
    leave (below the next save, nothing but status's profile cache).

    Then, interleaved in rotating order, each repetition times whole processes (spawn to exit,
    as a user waits), each the ``loopx`` console script the install made:
      should-run  ``loopx -C W quota should-run --agent-id ex-0 --json``
      status      ``loopx -C W status --json``
      board       ``loopx -C W board`` (the HTML page, stdout to a file)
      base        ``python -c pass`` (the same interpreter)
    and checks that every command succeeded (should-run's answer a well-formed decision).
    Every process runs with bytecode caching on, in a private cache the untimed first runs
    fill (as an installed package has after its first import), even where the environment sets
    PYTHONDONTWRITEBYTECODE.

Verdict (medians of per-repetition ratios, each command against the base of its repetition)
    command/base  goal <= 3 for should-run on both logs, and for status and board

Run
    python bench/cold_should_run.py                   # defaults: about 8 minutes (the board)
    python bench/cold_should_run.py --big 20000 --reps 5
    python bench/cold_should_run.py --commands should-run,status   # without the board
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from temp_root import add_temp_root_options, temp_root

GOAL = 3.0
TODO_BATCH = 500
FILLER_BATCH = 1000
COMMANDS = ("should-run", "status", "board")


def build(root: Path, records: int) -> Path:
    """A workspace whose log holds about ``records`` records, its state growing with them."""
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import CHECKPOINT_EVERY, DELTAS_PER_CHECKPOINT, Ledger
    from loopx.testing.lanes import executor_writer
    from loopx.testing.research import ResearchLoop
    from loopx.work.agents import register_agent
    from loopx.work.claims import complete, should_run
    from loopx.work.todos import add_todos
    from loopx.workspace import init_workspace

    ws, owner_token = init_workspace(root, "bench-cold")
    # The workspace's own checkpoint and settings; only the fsyncs are left out of the build.
    ledger = Ledger(ws.store(durable=False), checkpoint_path=ws.ledger().checkpoint_path,
                    settings=ws.settings)
    owner = Credentials("owner", owner_token)
    loop = ResearchLoop(ledger, owner)
    loop.contract()
    agents = max(records // 100, 4)
    tokens = [register_agent(ledger, owner, f"ex-{i}", "research_executor")[1]
              for i in range(agents)]
    todos = max(records // 10, 20)
    for start in range(0, todos, TODO_BATCH):
        add_todos(ledger, owner, [{"todo_id": f"t{n:06d}", "title": f"todo {n}",
                                   "role": "research_executor", "action_kind": "run_dev_eval",
                                   "hypothesis_id": f"h{n:06d}"}
                                  for n in range(start, min(start + TODO_BATCH, todos))])
    for n in range(max(records // 100, 5)):  # claim/complete cycles, spread over the agents
        creds = Credentials(f"ex-{n % agents}", tokens[n % agents])
        got = should_run(ledger, creds.agent_id, claim=True, creds=creds)
        complete(ledger, creds, got["todo"]["todo_id"], got["todo"]["epoch"], {"n": n})
    for n in range(max(records // 100, 3)):  # hypotheses with attempts, packets, judgements
        hid = f"hyp{n:05d}"
        loop.propose(hid, mechanism=("width", "depth", "lr")[n % 3])
        loop.run(hid, "dev", [0.91 + (n % 7) / 100] * 3)
        if loop.judge(hid, "dev")["verdict"] == "supports" and n % 2:
            loop.run(hid, "heldout", [0.92] * 3)
            loop.judge(hid, "heldout")
    writer = executor_writer(ledger, owner_token, "filler")

    def fill(upto: int, fold: bool) -> None:
        while (left := upto - ledger.store.head().seq) > 0:
            batch = [writer.tie({"payload": {"event": "progress",
                                             "detail": {"i": i, "pad": "x" * 64}}})
                     for i in range(min(left, FILLER_BATCH))]
            ledger.append(batch, creds=writer.creds, kind="rollout_event_v0")
            if fold:  # saves a checkpoint every checkpoint_every records, as any ledger does
                ledger.state()

    tail = max(1, CHECKPOINT_EVERY // DELTAS_PER_CHECKPOINT) - 1
    fill(records - tail, fold=True)
    # A reader (a fresh ledger on the checkpoint, as every command opens) folds what the build
    # left and saves the rows it changed as a delta; then the log grows by one record short of
    # the next delta: the furthest behind the head a reader finds the checkpoint while readers
    # keep coming, and what every measured process folds on top of it.
    reader = Ledger(ws.store(durable=False), checkpoint_path=ws.ledger().checkpoint_path,
                    settings=ws.settings)
    reader.state()
    reader.store.close()
    fill(records, fold=False)
    ledger.store.close()
    return root


def behind(root: Path) -> int:
    """How many records the workspace's checkpoint (with its delta) is behind the log's head."""
    from loopx.kernel.checkpoint import load_checkpoint
    from loopx.workspace import find_workspace

    ledger = find_workspace(root).ledger()
    assert ledger.checkpoint_path is not None
    state, _ = load_checkpoint(ledger.checkpoint_path, ledger.store, ledger.version)
    head = ledger.store.head().seq
    ledger.store.close()
    return head - (0 if state is None else state.seq)


def label(records: int) -> str:
    """1000 -> "1k", 100000 -> "100k" (the case names)."""
    return f"{records // 1000}k" if records % 1000 == 0 else str(records)


def loopx_argv() -> list[str]:
    """The ``loopx`` console script next to this interpreter (``python -m loopx`` without it)."""
    script = Path(sys.executable).with_name("loopx")
    return [str(script)] if script.exists() else [sys.executable, "-m", "loopx"]


def timed(argv: list[str], env: dict[str, str], out: Path | None = None) -> tuple[float, str]:
    """Wall time of one process, spawn to exit, and its stdout (or "" when sent to ``out``)."""
    if out is not None:
        with out.open("wb") as sink:
            start = time.perf_counter()
            subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, env=env, check=True)
            return time.perf_counter() - start, ""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - start, done.stdout


def check(name: str, out: str, sink: Path) -> None:
    """The command answered what it answers (not an error that happens to be fast)."""
    if name.startswith("should-run"):
        decision = json.loads(out)
        assert decision["agent_id"] == "ex-0" and decision["reason"] in (
            "selected", "no_eligible_todo"), decision
    elif name.startswith("status"):
        assert "agents" in json.loads(out)
    elif name.startswith("board"):
        assert sink.read_bytes().lstrip().lower().startswith(b"<!doctype html")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000, help="records in the small log")
    parser.add_argument("--big", type=int, default=100_000, help="records in the big log")
    parser.add_argument("--reps", type=int, default=11, help="timed repetitions per case")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help="comma-separated commands to time, of: " + ", ".join(COMMANDS))
    add_temp_root_options(parser)
    args = parser.parse_args()
    chosen = [c.strip() for c in args.commands.split(",") if c.strip()]
    if not chosen or set(chosen) - set(COMMANDS):
        parser.error(f"--commands takes a list of: {', '.join(COMMANDS)}")

    with temp_root("loopx-bench-cold-", args) as root:
        t0 = time.perf_counter()
        small, big = label(args.small), label(args.big)
        logs = {small: build(root / "small", args.small), big: build(root / "big", args.big)}
        built = time.perf_counter() - t0
        # Bytecode caching on, in a private cache the untimed first runs fill: what an installed
        # package has after its first import, even where PYTHONDONTWRITEBYTECODE is set.
        env = {k: v for k, v in os.environ.items()
               if k not in ("LOOPX_TOKEN", "LOOPX_WORKSPACE", "LOOPX_AGENT_ID",
                            "PYTHONDONTWRITEBYTECODE")}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        loopx = loopx_argv()
        sink = root / "board.html"
        cases: dict[str, tuple[list[str], Path | None]] = {"base": ([sys.executable, "-c",
                                                                     "pass"], None)}
        for size in (small, big) if "should-run" in chosen else ():
            ws = str(logs[size])
            cases[f"should-run {size}"] = ([*loopx, "-C", ws, "quota", "should-run",
                                            "--agent-id", "ex-0", "--json"], None)
        if "status" in chosen:
            cases[f"status {big}"] = ([*loopx, "-C", str(logs[big]), "status", "--json"], None)
        if "board" in chosen:
            cases[f"board {big}"] = ([*loopx, "-C", str(logs[big]), "board"], sink)
        for name, (argv, out) in cases.items():  # untimed: fill the bytecode cache, checkpoints
            check(name, timed(argv, env, out)[1], sink)
        times: dict[str, list[float]] = {name: [] for name in cases}
        names = list(cases)
        for rep in range(args.reps):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                argv, out = cases[name]
                seconds, text = timed(argv, env, out)
                check(name, text, sink)
                times[name].append(seconds)

        def info(path: Path) -> tuple[float, float, int]:
            log = sum(p.stat().st_size for p in (path / ".loopx" / "log").iterdir())
            ckpt = sum(p.stat().st_size for p in (path / ".loopx" / "checkpoints").iterdir()
                       if p.is_file())
            return log / 2**20, ckpt / 2**20, behind(path)

        print(f"cold_should_run: python {platform.python_version()}, {os.cpu_count()} CPUs, "
              f"{args.reps} reps, built in {built:.0f} s; logs: "
              + ", ".join(f"{size} = {info(p)[0]:.1f} MB (checkpoint {info(p)[1]:.1f} MB, "
                          f"{info(p)[2]} records behind)" for size, p in logs.items()))
        print(f"{'case':<16} | {'median ms':>9} | {'vs base':>7} | goal")
        print("-" * 50)
        base = times["base"]
        print(f"{'base (-c pass)':<16} | {statistics.median(base) * 1000:>9.1f} | {'1.00':>7} |")
        for name in names[1:]:
            ratio = statistics.median(t / b for t, b in zip(times[name], base, strict=True))
            verdict = "PASS" if ratio <= GOAL else "MISS"
            print(f"{name:<16} | {statistics.median(times[name]) * 1000:>9.1f} | {ratio:>7.2f} | "
                  f"<= {GOAL:g} {verdict}")


if __name__ == "__main__":
    main()
