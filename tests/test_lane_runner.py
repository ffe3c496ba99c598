"""`loopx lane run` with real processes: a command's success, failure, timeout and invalid
output are each recorded whole; SIGTERM releases the claim; a crash leaves it to expire and be
reclaimed; the token never reaches the command; an executor works in its own git worktree,
where a change to the protected scope is caught by the gate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from loopx.governance.contract import amend_contract
from loopx.kernel.checks import Credentials
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


class Setup:
    """A file workspace with a contract, hypothesis h1 and the research agents."""

    def __init__(self, root: Path, store: str | None = None) -> None:
        self.root = root
        workspace, owner_token = init_workspace(root, "runner", store=store)
        self.ledger = workspace.ledger()
        self.owner = Credentials("owner", owner_token)
        self.r = ResearchLoop(self.ledger, self.owner)
        self.r.contract({**CONTRACT, "protected_scope": ["eval/"],
                         "promotion_policy": {"required_gates": ["protected_boundary",
                                                                 "heldout"]}})
        self.r.propose("h1")

    def dev_todo(self, todo_id: str, ttl: float = 600.0) -> None:
        add_todos(self.ledger, self.r.agents["ev"], [{
            "todo_id": todo_id, "title": "dev run", "role": "research_executor",
            "action_kind": "run_dev_eval", "hypothesis_id": "h1", "lease_ttl_seconds": ttl}])

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        store = find_workspace(self.root).store()
        out = [r for r, _ in store.read() if kind is None or r["schema_version"] == kind]
        store.close()
        return out

    def todo(self, todo_id: str) -> dict[str, Any]:
        ledger = find_workspace(self.root).ledger()
        todo = dict(ledger.state()["lanes"]["todos"][todo_id])
        ledger.store.close()
        return todo

    def script(self, name: str, body: str) -> Path:
        path = self.root.parent / f"{name}.py"
        path.write_text(textwrap.dedent(body))
        return path

    def hanging_lane(self, agent: str) -> tuple[subprocess.Popen[str], int]:
        """A lane whose command hangs after it started: the runner and the command's pid."""
        pid_file = self.root.parent / "child.pid"
        script = self.script("hang", f"""
            import os, time
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(60)
        """)
        runner = self.lane(agent, script, "--no-worktree", wait=False)
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return runner, int(pid_file.read_text())

    def lane(self, agent: str, script: Path, *extra: str, wait: bool = True,
             env: dict[str, str] | None = None) -> Any:
        creds = self.r.agents[agent]
        command = [sys.executable, "-m", "loopx.cli", "-C", str(self.root), "lane", "run",
                   "--agent-id", agent, "--poll-seconds", "0.1", "--idle-polls", "3",
                   "--json", *extra, "--", sys.executable, str(script)]
        full_env = {**os.environ, **GIT_ENV, **(env or {}), "LOOPX_TOKEN": str(creds.token)}
        full_env.pop("LOOPX_AGENT_ID", None)
        if not wait:
            return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=full_env)
        done = subprocess.run(command, capture_output=True, text=True, env=full_env,
                              timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
        return done


@pytest.fixture
def ws(tmp_path: Path) -> Setup:
    root = tmp_path / "ws"
    root.mkdir()
    return Setup(root)


SCORED = """
    import json, os, sys
    claim = json.load(sys.stdin)
    dump = {"claim": claim, "env": dict(os.environ)}
    seen = os.path.join(os.environ["LOOPX_WORKSPACE"], "..", "seen.json")
    open(seen, "w").write(json.dumps(dump))
    packet = {"hypothesis_id": claim["hypothesis_id"], "status": "scored",
              "results": [{"split": "dev", "metric": "acc", "seed": s, "value": v}
                          for s, v in zip([0, 1, 2], [0.91, 0.92, 0.93])]}
    print("progress goes to stderr", file=sys.stderr)
    print(json.dumps({"records": [{"schema_version": "auto_research_evidence_packet_v0",
                                   "payload": packet}],
                      "result": {"status": "scored", "dev": {"verdict": "supports"}}}))
"""


def test_a_completed_attempt_is_recorded_whole_and_the_token_stays_out(ws: Setup) -> None:
    ws.dev_todo("dev-1")
    done = ws.lane("ex", ws.script("scored", SCORED), "--no-worktree", "--max-attempts", "1")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["completed"], report["failed"], report["stopped_because"]) == (
        1, 0, "max_attempts")
    seen = json.loads((ws.root.parent / "seen.json").read_text())
    token = str(ws.r.agents["ex"].token)
    assert token not in json.dumps(seen)
    assert "LOOPX_TOKEN" not in seen["env"]
    assert seen["claim"]["todo_id"] == "dev-1" and seen["claim"]["epoch"] == 1
    assert seen["env"]["LOOPX_TODO_ID"] == "dev-1" and seen["env"]["LOOPX_EPOCH"] == "1"
    assert json.loads(seen["env"]["LOOPX_CLAIM"]) == seen["claim"]
    assert seen["claim"]["data"]["split"] == "dev"
    # The packet, the usage and the completion (and its successors) are one batch.
    [packet] = ws.records("auto_research_evidence_packet_v0")
    completion = [r for r in ws.records("todo_event_v0") if r["todo_id"] == "dev-1"
                  and r["payload"]["event"] == "completed"][0]
    [usage] = [r for r in ws.records("usage_v0") if r["todo_id"] == "dev-1"]
    assert packet["batch_end"] == completion["batch_end"] == usage["batch_end"]
    assert packet["todo_id"] == "dev-1" and usage["payload"]["wall_seconds"] > 0
    assert completion["payload"]["result"] == {"status": "scored", "dev": {"verdict": "supports"}}
    # The judging todo is owed to the packet ahead of the completion in its batch; the
    # executor's own "supports" makes no held-out todo (only the evaluator's judgement does).
    [successor] = [r for r in ws.records("todo_item_v0")
                   if r["payload"].get("source_todo_id") == "dev-1"]
    assert successor["payload"]["todo_id"] == "dev-1.judge_dev_attempt"
    assert successor["batch_end"] == completion["batch_end"]
    assert ws.todo("dev-1.judge_dev_attempt")["status"] == "open"


def test_a_command_that_fails_every_todo_stops_the_lane_after_three(ws: Setup) -> None:
    """It starts, then fails (a mistake in the script, a missing dependency): without a limit
    it would fail every todo in turn, each attempt counted against its hypothesis, and a
    held-out todo's claim spent as a read. Three failures in a row stop the lane; each is
    recorded, and the other todos were never claimed. Failures between successes do not."""
    from loopx.work.agents import register_agent

    for n, hid in enumerate(("h2", "h3", "h4", "h5"), start=2):
        ws.r.propose(hid, mechanism=f"m{n}")
    ws.r.agents["ex2"] = Credentials("ex2", register_agent(ws.ledger, ws.owner, "ex2",
                                                           "research_executor")[1])
    for n, hid in enumerate(("h1", "h2", "h3", "h4", "h5"), start=1):
        add_todos(ws.ledger, ws.r.agents["ev"], [{
            "todo_id": f"dev-{n}", "title": "dev run", "role": "research_executor",
            "action_kind": "run_dev_eval", "hypothesis_id": hid}])
    broken = ws.script("broken", "import sys; sys.exit(1)")
    done = ws.lane("ex", broken, "--no-worktree")
    report = json.loads(done.stdout)
    assert (report["failed"], report["stopped_because"]) == (3, "failures_in_a_row"), done.stdout
    assert "stopping: 3 attempts failed in a row (the last: the command exited with status 1)" \
        in done.stderr
    claims = [ws.todo(f"dev-{n}")["claims"] for n in range(1, 6)]
    assert sum(claims) == 3 and claims.count(0) >= 3, claims
    # Failures with successes between them do not stop it: only failures in a row count.
    counter = ws.root.parent / "runs"
    flaky = ws.script("flaky", textwrap.dedent(f"""
        import pathlib, sys
        runs = pathlib.Path({str(counter)!r})
        n = int(runs.read_text()) if runs.exists() else 0
        runs.write_text(str(n + 1))
        if n % 3 != 2:
            sys.exit(1)
    """) + textwrap.dedent(SCORED))
    done = ws.lane("ex", flaky, "--no-worktree", "--max-attempts", "6")
    report = json.loads(done.stdout)
    assert (report["failed"], report["completed"], report["stopped_because"]) == (
        4, 2, "max_attempts"), done.stdout
    # --max-failures 0 keeps going, as before: into the next todos.
    done = ws.lane("ex2", broken, "--no-worktree", "--max-failures", "0", "--max-attempts", "5")
    report = json.loads(done.stdout)
    assert (report["failed"], report["stopped_because"]) == (5, "max_attempts")
    assert sum(ws.todo(f"dev-{n}")["claims"] for n in range(1, 6)) == 14


@pytest.mark.parametrize(("body", "status", "reason"), [
    ("import sys; sys.exit(3)", "failed", "the command exited with status 3"),
    ("print('not json at all')", "invalid_output", "invalid result: lane result refused: "
                                                   "stdout: not JSON"),
    ("print('{\"outcome\": \"maybe\"}')", "invalid_output", "invalid result: lane result "
                                                         "refused: outcome:"),
])
def test_a_failed_attempt_is_recorded_with_an_unscored_packet(ws: Setup, body: str,
                                                               status: str, reason: str) -> None:
    ws.dev_todo("dev-1")
    done = ws.lane("ex", ws.script("bad", body), "--no-worktree", "--max-attempts", "1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["failed"] == 1
    [failure] = [r for r in ws.records("todo_event_v0") if r["payload"]["event"] == "failed"]
    assert failure["payload"]["reason"].startswith(reason), failure["payload"]["reason"]
    [packet] = ws.records("auto_research_evidence_packet_v0")
    assert packet["payload"]["status"] == status
    assert packet["batch_end"] == failure["batch_end"]
    assert ws.todo("dev-1")["status"] == "open"  # it reopens until its attempts are spent


def test_a_command_past_its_timeout_is_stopped_and_recorded(ws: Setup) -> None:
    ws.dev_todo("dev-1")
    started = time.monotonic()
    done = ws.lane("ex", ws.script("hang", "import time; time.sleep(60)"), "--no-worktree",
                   "--max-attempts", "1", "--timeout", "1")
    assert time.monotonic() - started < 40
    assert json.loads(done.stdout)["attempts"][0]["reason"] == "timed out after 1 s"
    [packet] = ws.records("auto_research_evidence_packet_v0")
    assert packet["payload"]["status"] == "timeout"


def test_sigterm_releases_the_held_claim(ws: Setup) -> None:
    ws.dev_todo("dev-1")
    runner, child = ws.hanging_lane("ex")
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    assert json.loads(out)["stopped_because"] == "signal"
    [event] = [r for r in ws.records("todo_event_v0") if r["todo_id"] == "dev-1"]
    assert event["payload"]["event"] == "released"
    assert ws.todo("dev-1")["status"] == "open"
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # the command is stopped with the runner
            os.kill(child, 0)
            time.sleep(0.05)


def test_a_crashed_lane_leaves_its_claim_to_expire_and_another_takes_it(ws: Setup) -> None:
    from loopx.work.agents import register_agent

    _, token = register_agent(ws.ledger, ws.owner, "ex2", "research_executor")
    ws.r.agents["ex2"] = Credentials("ex2", token)
    ws.dev_todo("dev-1", ttl=2.0)
    runner, child = ws.hanging_lane("ex")
    runner.kill()  # SIGKILL: no release
    runner.wait(timeout=30)
    os.killpg(child, signal.SIGKILL)  # the orphaned command, too
    runner.communicate(timeout=30)
    assert ws.todo("dev-1")["holder"] == "ex"
    time.sleep(2.5)
    done = ws.lane("ex2", ws.script("scored", SCORED), "--no-worktree", "--max-attempts", "1")
    assert json.loads(done.stdout)["completed"] == 1
    events = [(r["agent_id"], r["payload"]["event"]) for r in ws.records("todo_event_v0")
              if r["todo_id"] == "dev-1"]
    assert events == [("ex2", "expired"), ("ex2", "completed")]
    claims = [(r["agent_id"], r["epoch"]) for r in ws.records("auto_research_lane_claim_v1")
              if r["todo_id"] == "dev-1"]
    assert claims == [("ex", 1), ("ex2", 2)]


def test_the_runner_stops_when_the_campaign_stops(ws: Setup) -> None:
    from loopx.governance.campaign import transition

    transition(ws.ledger, ws.r.agents["cur"], "ready", reason="go")
    transition(ws.ledger, ws.owner, "stopped", reason="enough")
    done = ws.lane("ex", ws.script("never", "raise SystemExit(1)"), "--no-worktree")
    assert json.loads(done.stdout)["stopped_because"] == "campaign_stopped"


def test_bad_usage_is_refused_before_anything_runs(ws: Setup) -> None:
    head = len(ws.records())
    wrong_role = ws.lane("ex", ws.script("x", "pass"), "--role", "evaluator_promoter")
    assert wrong_role.returncode == 2
    assert "has role 'research_executor'" in json.loads(wrong_role.stdout)["message"]
    assert len(ws.records()) == head


# -- persistent commands ------------------------------------------------------------------------

SERVING = """
    import json, os, sys
    first = os.path.join(os.environ["LOOPX_WORKSPACE"], "..", "crash-once")
    for line in sys.stdin:
        task = json.loads(line)
        if os.environ.get("CRASH_FIRST") and not os.path.exists(first):
            open(first, "w").close()
            sys.exit(3)  # mid-task, without an answer
        claim = task["claim"]
        packet = {"hypothesis_id": claim["hypothesis_id"], "status": "scored",
                  "results": [{"split": "dev", "metric": "acc", "seed": 0, "value": 0.9}]}
        print(json.dumps({"records": [{"schema_version": "auto_research_evidence_packet_v0",
                                       "payload": packet}],
                          "result": {"pid": os.getpid(), "todo": task["env"]["LOOPX_TODO_ID"],
                                     "token_seen": "LOOPX_TOKEN" in os.environ}}), flush=True)
"""


def completions(ws: Setup) -> dict[str, Any]:
    return {r["todo_id"]: r["payload"]["result"] for r in ws.records("todo_event_v0")
            if r["payload"]["event"] == "completed"}


def test_a_persistent_command_takes_every_todo_of_the_lane_in_one_process(ws: Setup) -> None:
    ws.dev_todo("dev-1")
    ws.dev_todo("dev-2")
    done = ws.lane("ex", ws.script("serving", SERVING), "--no-worktree", "--persistent",
                   "--max-attempts", "2")
    assert json.loads(done.stdout)["completed"] == 2, done.stdout
    results = completions(ws)
    assert {results[t]["todo"] for t in ("dev-1", "dev-2")} == {"dev-1", "dev-2"}
    assert results["dev-1"]["pid"] == results["dev-2"]["pid"]
    assert not results["dev-1"]["token_seen"]


def test_a_persistent_command_that_dies_fails_its_attempt_and_is_started_afresh(
        ws: Setup) -> None:
    ws.dev_todo("dev-1")
    ws.dev_todo("dev-2")
    done = ws.lane("ex", ws.script("serving", SERVING), "--no-worktree", "--persistent",
                   "--max-attempts", "2", env={"CRASH_FIRST": "1"})
    report = json.loads(done.stdout)
    assert (report["failed"], report["completed"]) == (1, 1), done.stdout
    [failure] = [r for r in ws.records("todo_event_v0") if r["payload"]["event"] == "failed"]
    assert failure["payload"]["reason"] == ("the command exited with status 3 before it "
                                            "answered")
    assert len(completions(ws).keys() & {"dev-1", "dev-2"}) == 1  # by a fresh command


# -- worktrees ----------------------------------------------------------------------------------

def git(root: Path, *args: str, check: bool = True) -> str:
    """git's stdout; with ``check=False``, "yes" or "no" for its exit status instead."""
    done = subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV},
                          capture_output=True, text=True, check=check)
    return done.stdout.strip() if check else ("yes" if done.returncode == 0 else "no")


@pytest.fixture
def repo(ws: Setup) -> Setup:
    (ws.root / "eval").mkdir()
    (ws.root / "eval" / "score.py").write_text("def score(p, l):\n    return (p == l).mean()\n")
    (ws.root / "model.py").write_text("WIDTH = 64\n")
    git(ws.root, "init", "-q", "-b", "main")
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-q", "-m", "base")
    # The curator pins the commit every experiment starts from (write rules version 9).
    amend_contract(ws.ledger, ws.r.agents["cur"], "pin the base",
                   settings=[("base_commit", git(ws.root, "rev-parse", "HEAD"))])
    return ws


EDIT = """
    import json, os, subprocess, sys
    claim = json.load(sys.stdin)
    tree = os.environ["LOOPX_WORKTREE"]
    assert os.getcwd() == tree, (os.getcwd(), tree)
    open(os.path.join(tree, "{path}"), "a").write("# changed\\n")
    if {commit}:
        subprocess.run(["git", "commit", "-q", "-am", "change"], cwd=tree, check=True)
    packet = {{"hypothesis_id": claim["hypothesis_id"], "status": "scored",
               "results": [{{"split": "dev", "metric": "acc", "seed": s, "value": 0.95}}
                           for s in (0, 1, 2)]}}
    print(json.dumps({{"records": [{{"schema_version": "auto_research_evidence_packet_v0",
                                    "payload": packet}}], "result": {{"status": "scored"}}}}))
"""


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_an_executor_works_in_its_own_worktree_and_the_gate_catches_a_protected_edit(
        repo: Setup) -> None:
    from loopx.research.operations import check_gate

    base = git(repo.root, "rev-parse", "HEAD")
    repo.dev_todo("dev-1")
    done = repo.lane("ex", repo.script("edit", EDIT.format(path="eval/score.py", commit=True)))
    assert json.loads(done.stdout)["completed"] == 1, done.stderr
    [packet] = repo.records("auto_research_evidence_packet_v0")
    p = packet["payload"]
    assert (p["branch"], p["base_commit"]) == ("loopx/dev-1/1", base)
    assert p["evaluated_commit"] == git(repo.root, "rev-parse", "loopx/dev-1/1") != base
    assert git(repo.root, "rev-parse", "HEAD") == base  # the main checkout is untouched
    assert "dev-1" not in git(repo.root, "worktree", "list")  # cleaned up; the branch stays
    repo.r.judge("h1", "dev")
    out = check_gate(repo.ledger, repo.r.agents["ev"], "h1", repo=repo.root)
    assert not out["passed"]
    assert [(v["path"], v["change"]) for v in out["violations"]] == [("eval/score.py",
                                                                       "modified")]


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_a_dirty_worktree_is_not_evaluated(repo: Setup) -> None:
    repo.dev_todo("dev-1")
    done = repo.lane("ex", repo.script("dirty", EDIT.format(path="model.py", commit=False)),
                     "--max-attempts", "1")
    attempt = json.loads(done.stdout)["attempts"][0]
    assert attempt["outcome"] == "failed" and "the worktree is dirty" in attempt["reason"]
    [packet] = repo.records("auto_research_evidence_packet_v0")
    assert packet["payload"]["status"] == "failed"


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_worktrees_start_from_the_campaign_base_after_main_moved(repo: Setup) -> None:
    """The contract pins the campaign's base commit. Main moving on (a fix someone committed)
    does not move the experiments: a later worktree starts from that base, so its result is
    compared with runs of the same code, and its packet is accepted."""
    base = git(repo.root, "rev-parse", "HEAD")
    repo.dev_todo("dev-1")
    script = repo.script("edit", EDIT.format(path="model.py", commit=True))
    assert json.loads(repo.lane("ex", script).stdout)["completed"] == 1
    (repo.root / "model.py").write_text("WIDTH = 256\n")
    git(repo.root, "commit", "-q", "-am", "main moves on")
    moved = git(repo.root, "rev-parse", "HEAD")
    repo.r.propose("h2", mechanism="other")
    add_todos(repo.ledger, repo.r.agents["ev"], [{
        "todo_id": "dev-2", "title": "dev run", "role": "research_executor",
        "action_kind": "run_dev_eval", "hypothesis_id": "h2"}])
    done = repo.lane("ex", script)
    assert json.loads(done.stdout)["completed"] == 1, done.stdout
    packets = [r["payload"] for r in repo.records("auto_research_evidence_packet_v0")]
    assert [(p["hypothesis_id"], p["base_commit"]) for p in packets] == [("h1", base),
                                                                           ("h2", base)]
    assert git(repo.root, "merge-base", "--is-ancestor", moved, packets[1]["evaluated_commit"],
               check=False) == "no"
    assert git(repo.root, "rev-parse", "HEAD") == moved  # the main checkout is untouched
    assert repo.records("research_refusal_v0") == []
    # `loopx status` tells a host which commit it needs.
    status = [sys.executable, "-m", "loopx.cli", "-C", str(repo.root), "status"]
    shown = json.loads(subprocess.run([*status, "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    assert shown["campaign"]["base_commit"] == base
    text = subprocess.run(status, capture_output=True, text=True, check=True).stdout
    assert f", experiments start from {base}\n" in text


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_the_first_worktree_starts_from_the_base_the_contract_pins(repo: Setup) -> None:
    """With the base pinned, no packet chooses it: main moved on before anything ran, and the
    very first experiment still starts from the pinned commit."""
    pinned = git(repo.root, "rev-parse", "HEAD")
    (repo.root / "model.py").write_text("WIDTH = 256\n")
    git(repo.root, "commit", "-q", "-am", "main moves on")
    repo.dev_todo("dev-1")
    done = repo.lane("ex", repo.script("edit", EDIT.format(path="model.py", commit=True)))
    assert json.loads(done.stdout)["completed"] == 1, done.stdout
    [packet] = repo.records("auto_research_evidence_packet_v0")
    assert packet["payload"]["base_commit"] == pinned
    assert repo.records("research_refusal_v0") == []


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_a_lane_script_missing_from_the_base_is_caught_before_any_claim(repo: Setup) -> None:
    """The base was pinned before the lane's script was committed (or the script was never
    committed): every worktree would lack it, and each todo would fail, a held-out one costing
    its hypothesis' read. The lane stops before it claims, naming the file and the commit."""
    pinned = git(repo.root, "rev-parse", "HEAD")
    (repo.root / "lane_cmd.py").write_text(textwrap.dedent(
        EDIT.format(path="model.py", commit=True)))
    repo.dev_todo("dev-1")
    for state in ("untracked", "committed after the pin"):
        if state != "untracked":
            git(repo.root, "add", "lane_cmd.py")
            git(repo.root, "commit", "-q", "-m", "the lane command")
        done = repo.lane("ex", Path("lane_cmd.py"))
        assert done.returncode != 0, done.stdout
        error = json.loads(done.stdout)
        assert error["message"] == (
            f"the lane command's lane_cmd.py is in your checkout but not in commit {pinned}, "
            "where every experiment's worktree starts: the command would not find it")
        assert "loopx contract amend --set base_commit=SHA" in error["hint"]
        assert repo.todo("dev-1")["claims"] == 0
    amend_contract(repo.ledger, repo.r.agents["cur"], "pin the commit with the lane command",
                   settings=[("base_commit", git(repo.root, "rev-parse", "HEAD"))])
    done = repo.lane("ex", Path("lane_cmd.py"))
    assert json.loads(done.stdout)["completed"] == 1, done.stdout


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_an_unpinned_base_stops_the_lane_before_any_claim(repo: Setup) -> None:
    """Under write rules version 9 a scored packet citing commits is refused while the contract
    pins no base, so an executor lane in a worktree would only spend claims: it stops first."""
    amend_contract(repo.ledger, repo.r.agents["cur"], "unpin", settings=[("base_commit", None)])
    repo.dev_todo("dev-1")
    done = repo.lane("ex", repo.script("edit", EDIT.format(path="model.py", commit=True)))
    assert done.returncode != 0, done.stdout
    error = json.loads(done.stdout)
    assert error["message"].startswith("the contract pins no base commit")
    assert "loopx contract amend --set base_commit=SHA" in error["hint"]
    assert repo.todo("dev-1")["claims"] == 0
    status = subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(repo.root), "status"],
                            capture_output=True, text=True, check=True).stdout
    assert ", contract v3, base not pinned\n" in status


def test_the_script_a_lane_command_names() -> None:
    from loopx.runner.preflight import interpreted_script, script_paths

    assert script_paths(["python3", "train_lane.py", "--fast"]) == ["train_lane.py"]
    assert script_paths(["python3", "-u", "lanes/run.py"]) == ["lanes/run.py"]
    assert script_paths(["./run.sh", "x"]) == ["./run.sh", "x"]
    assert script_paths(["python3", "/abs/run.py"]) == []
    assert script_paths(["uv", "run", "train.py"]) == ["run"]
    for command, script in ((["python3", "-X", "importtime", "-u", "t.py", "a"], "t.py"),
                            (["/usr/bin/env", "-i", "A=1", "python3.11", "t.py"], "t.py"),
                            (["bash", "-o", "pipefail", "run.sh"], "run.sh"),
                            (["node", "--require", "x", "lane.js"], "lane.js"),
                            (["Rscript", "lane.R"], "lane.R"),
                            (["python3", "-m", "lab.train"], None),
                            (["python3", "-c", "print(1)"], None), (["bash", "-c", "x"], None),
                            (["python3", "-"], None), (["make", "train"], None)):
        assert interpreted_script(command) == script, command


def test_a_mistyped_script_is_caught_before_any_claim(repo: Setup) -> None:
    """`python3 trian_lane.py`: the interpreter starts, cannot open its script and exits, once
    per claimed todo, so every todo would fail (and a held-out one cost its hypothesis' read).
    The lane stops before it claims, in a worktree and in the workspace alike."""
    repo.dev_todo("dev-1")
    for extra, says in (((), "is neither in commit"),
                        (("--no-worktree",), "which is not a file in")):
        done = repo.lane("ex", Path("trian_lane.py"), *extra)
        assert done.returncode != 0, done.stdout
        report = json.loads(done.stdout)
        said = report.get("message") or report["reason"]
        assert "trian_lane.py" in said and says in said, said
        assert repo.todo("dev-1")["claims"] == 0


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_a_clone_without_the_campaign_base_is_told_to_fetch_it(repo: Setup) -> None:
    """The contract pins a base commit this clone never fetched (another host made it, and the
    campaign's first packet came from there): the lane stops before it claims anything (a
    held-out claim would count as a read), naming the commit and how to get it."""
    from loopx.testing.research import GOOD

    elsewhere = "f" * 40
    amend_contract(repo.ledger, repo.r.agents["cur"], "the base on the other host",
                   settings=[("base_commit", elsewhere)])
    repo.r.run("h1", "dev", GOOD, commits=(elsewhere, elsewhere))
    repo.dev_todo("dev-x")
    done = repo.lane("ex", repo.script("edit", EDIT.format(path="model.py", commit=True)))
    assert done.returncode != 0
    error = json.loads(done.stdout)
    assert elsewhere in error["message"] and "is not in the git repository" in error["message"]
    assert f"git fetch origin {elsewhere}" in error["hint"]
    assert repo.todo("dev-x")["status"] == "open" and repo.todo("dev-x")["claims"] == 0
    assert len(repo.records("auto_research_evidence_packet_v0")) == 1
    assert "dev-x" not in git(repo.root, "branch", "--list", "loopx/*")


def test_an_attempt_past_the_limit_is_refused_and_its_todo_not_left_claimed(ws: Setup) -> None:
    """Two executors race for a hypothesis' last attempt: the loser's failure packet is refused
    (and the refusal recorded), and its todo is failed, not left claimed for a whole lease."""
    from loopx.work.agents import register_agent

    ws.r.agents["ex2"] = Credentials("ex2", register_agent(ws.ledger, ws.owner, "ex2",
                                                           "research_executor")[1])
    ws.r.run("h1", "dev", None, status="failed")
    ws.r.run("h1", "dev", None, status="failed")  # two of the three attempts used
    ws.dev_todo("dev-race")
    started, go = ws.root.parent / "started", ws.root.parent / "go"
    script = ws.script("slow_fail", f"""
        import os, sys, time
        open({str(started)!r}, "w").write("1")
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        sys.exit(3)
    """)
    runner = ws.lane("ex2", script, "--no-worktree", "--max-attempts", "1", wait=False)
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), runner.stderr.read() if runner.poll() is not None else "no start"
    ws.r.run("h1", "dev", None, status="timeout")  # the other executor takes the last attempt
    go.write_text("1")
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0 and "Traceback" not in err, err
    assert json.loads(out)["failed"] == 1
    [refusal] = ws.records("research_refusal_v0")
    assert refusal["payload"]["rule"] == "attempts_exhausted" and refusal["agent_id"] == "ex2"
    [failure] = [r for r in ws.records("todo_event_v0") if r["todo_id"] == "dev-race"
                 and r["payload"]["event"] == "failed"]
    assert "its packet was refused" in failure["payload"]["reason"]
    assert ws.todo("dev-race")["status"] != "claimed"


@pytest.mark.parametrize("backend", ["file", "postgresql"])
def test_an_idle_lane_stops_when_its_log_moves_instead_of_waiting_forever(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A lane waiting for todos on a log that moved (``store copy --use``, here or on another
    host) would wait for records that never come there: it stops, saying where the log went.
    (On files its next should-run is refused; on PostgreSQL a should-run that claims nothing
    writes nothing, so the runner looks for the mark after each wait.)"""
    env: dict[str, str] = {}
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")
        env["LOOPX_STORE"] = url  # the password, for the lane process and this one
        monkeypatch.setenv("LOOPX_STORE", url)
    root = tmp_path / "ws"
    root.mkdir()
    ws = Setup(root, store=url if backend == "postgresql" else None)
    runner = ws.lane("ex", ws.script("never", "raise SystemExit(1)"), "--no-worktree",
                     "--idle-polls", "100000", wait=False, env=env)
    try:
        time.sleep(1.0)  # started and idle
        assert runner.poll() is None
        store = ws.ledger.store
        head = store.head()
        with store.locked():  # type: ignore[attr-defined]
            store.mark_moved("postgresql://loopx@db/loopx?log=runner",  # type: ignore[attr-defined]
                             head)
        out, err = runner.communicate(timeout=60)
    finally:
        runner.kill()
    assert runner.returncode == 3, out + err
    assert "Traceback" not in err
    assert json.loads(out)["message"].startswith(
        "this log moved to postgresql://loopx@db/loopx?log=runner at seq")
