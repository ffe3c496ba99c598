"""Lanes that hit a fault, with real processes: a command known not to start stops the lane
before it claims anything, one that fails to start once claimed is a recorded failed attempt
(not a wedged claim), a crashed attempt's branch is kept and never reused, and the
narrator still tells the last chapter after the campaign stopped on its budget."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import research_workspace, run_loopx

from loopx.governance.campaign import evaluate, transition
from loopx.governance.contract import amend_contract
from loopx.governance.usage import add_usage
from loopx.kernel.checks import Credentials
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.agents import register_agent
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# A command that works: reads its claim, records a scored packet, leaves its worktree clean.
SCORED = """
    import json, sys
    claim = json.load(sys.stdin)
    packet = {"hypothesis_id": claim["hypothesis_id"], "status": "scored",
              "results": [{"split": "dev", "metric": "acc", "seed": s, "value": 0.95}
                          for s in (0, 1, 2)]}
    print(json.dumps({"records": [{"schema_version": "auto_research_evidence_packet_v0",
                                   "payload": packet}], "result": {"status": "scored"}}))
"""


class Lane:
    """A workspace in a git repository with a contract, hypothesis h1 and todo dev-1."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "ws"
        self.root.mkdir()
        (self.root / "model.py").write_text("WIDTH = 64\n")
        for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "b")):
            self.git(*args)
        workspace, owner_token = init_workspace(self.root, "faults")
        self.ledger = workspace.ledger()
        self.r = ResearchLoop(self.ledger, Credentials("owner", owner_token))
        self.r.contract({**CONTRACT, "base_commit": self.git("rev-parse", "HEAD")})
        self.r.propose("h1")
        add_todos(self.ledger, self.r.agents["ev"], [{
            "todo_id": "dev-1", "title": "dev run", "role": "research_executor",
            "action_kind": "run_dev_eval", "hypothesis_id": "h1"}])

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, env={**os.environ, **GIT_ENV},
                              capture_output=True, text=True, check=True).stdout.strip()

    def branches(self) -> list[str]:
        return sorted(self.git("branch", "--list", "loopx/*", "--format=%(refname:short)")
                      .split())

    def script(self, name: str, body: str) -> Path:
        path = self.tmp / f"{name}.py"
        path.write_text(textwrap.dedent(body))
        return path

    def lane(self, *command: str, wait: bool = True, max_attempts: int = 1) -> Any:
        args = [sys.executable, "-m", "loopx.cli", "-C", str(self.root), "lane", "run",
                "--agent-id", "ex", "--poll-seconds", "0.1", "--idle-polls", "3",
                "--max-attempts", str(max_attempts), "--json", "--", *command]
        env = {**os.environ, **GIT_ENV, "LOOPX_TOKEN": str(self.r.agents["ex"].token)}
        env.pop("LOOPX_AGENT_ID", None)
        if not wait:
            return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env)
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120,
                              check=False)

    def records(self, kind: str) -> list[dict[str, Any]]:
        with find_workspace(self.root).store() as store:
            return [r for r, _ in store.read() if r["schema_version"] == kind]

    def todo(self, todo_id: str) -> dict[str, Any]:
        ledger = find_workspace(self.root).ledger()
        try:
            return dict(ledger.state()["lanes"]["todos"][todo_id])
        finally:
            ledger.store.close()


@pytest.fixture
def lane(tmp_path: Path) -> Lane:
    return Lane(tmp_path)


def _not_executable(lane: Lane) -> tuple[list[str], str]:
    path = lane.tmp / "train.sh"
    path.write_text("#!/bin/sh\necho never\n")
    path.chmod(0o644)
    return [str(path)], f"Permission denied: {str(path)!r}"


def _typo(lane: Lane) -> tuple[list[str], str]:
    return ["pyhton-loopx-test", "train.py"], "No such file or directory: 'pyhton-loopx-test'"


def _missing_directory(lane: Lane) -> tuple[list[str], str]:
    path = lane.tmp / "no-such-dir" / "train.py"
    return [str(path), "--fast"], f"No such file or directory: {str(path)!r}"


@needs_git
@pytest.mark.parametrize("make", [_typo, _not_executable, _missing_directory],
                         ids=["typo", "not_executable", "missing_directory"])
def test_a_command_known_not_to_start_stops_the_lane_before_any_claim(
        lane: Lane, make: Any) -> None:
    """A typo is bad input: nothing is claimed or written. Claimed first, it cost the todo an
    attempt and, on a held-out todo, the hypothesis its one held-out read (a claim counts as
    one whether or not the command then ran)."""
    with find_workspace(lane.root).store() as store:
        head = store.head()
    command, os_error = make(lane)
    done = lane.lane(*command, max_attempts=0)  # no limit: it must stop by itself
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    want = f"cannot start the command `{' '.join(command)}`: {os_error}"
    assert (report["stopped_because"], report["reason"], report["attempts"]) == (
        "command_cannot_start", want, [])
    assert f"stopping before any claim: {want}; nothing was claimed" in done.stderr
    with find_workspace(lane.root).store() as store:
        assert store.head() == head  # nothing written
    assert (lane.todo("dev-1")["status"], lane.todo("dev-1")["epoch"]) == ("open", 0)
    # The same lane, with a command that works, takes the todo as if nothing had happened.
    again = lane.lane(sys.executable, str(lane.script("scored", SCORED)))
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert json.loads(again.stdout)["completed"] == 1
    assert lane.branches() == ["loopx/dev-1/1"]


@needs_git
def test_a_command_that_cannot_start_once_claimed_is_a_failed_attempt(lane: Lane) -> None:
    # A path relative to the executor's worktree cannot be looked up before the claim makes
    # that worktree: it fails there, as a failed attempt, not a wedged claim.
    command = ["./no-such-train.sh"]
    done = lane.lane(*command, max_attempts=0)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert report["stopped_because"] == "command_cannot_start" and report["reason"] is None
    [attempt] = report["attempts"]  # one attempt, not every attempt of every todo
    want = ("cannot start the command `./no-such-train.sh`: No such file or directory: "
            "'./no-such-train.sh'")
    assert (attempt["outcome"], attempt["reason"]) == ("failed", want)
    # The failure names the command and the OS error, with the unscored packet, in one batch.
    [failure] = [r for r in lane.records("todo_event_v0") if r["payload"]["event"] == "failed"]
    assert (failure["todo_id"], failure["epoch"], failure["payload"]["reason"]) == (
        "dev-1", 1, want)
    [packet] = lane.records("auto_research_evidence_packet_v0")
    assert (packet["payload"]["status"], packet["payload"]["error"]) == ("failed", want)
    assert packet["payload"]["branch"] == "loopx/dev-1/1"
    assert packet["batch_end"] == failure["batch_end"]
    for usage in lane.records("usage_v0"):
        assert usage["batch_end"] == failure["batch_end"]
    assert lane.todo("dev-1")["status"] == "open"  # not left claimed
    # The same lane, with a command that works, runs it again on a fresh branch.
    again = lane.lane(sys.executable, str(lane.script("scored", SCORED)))
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert json.loads(again.stdout)["completed"] == 1
    scored = lane.records("auto_research_evidence_packet_v0")[-1]["payload"]
    assert (scored["status"], scored["branch"]) == ("scored", "loopx/dev-1/2")
    assert lane.branches() == ["loopx/dev-1/1", "loopx/dev-1/2"]


@needs_git
def test_a_crashed_attempt_keeps_its_branch_and_the_resumed_lane_takes_a_fresh_one(
        lane: Lane) -> None:
    pid_file = lane.tmp / "child.pid"
    hang = lane.script("hang", f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    runner = lane.lane(sys.executable, str(hang), wait=False)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), runner.communicate(timeout=30)
    runner.kill()  # a crash: no release, no cleanup
    runner.wait(timeout=30)
    os.killpg(int(pid_file.read_text()), signal.SIGKILL)  # the orphaned command, too
    runner.communicate(timeout=30)
    held = lane.todo("dev-1")
    assert (held["status"], held["holder"], held["epoch"]) == ("claimed", "ex", 1)
    crashed_tree = lane.root / ".loopx" / "worktrees" / "dev-1.1"
    assert crashed_tree.is_dir()
    # The lane comes back while its lease still holds: same todo, same epoch, a fresh branch.
    again = lane.lane(sys.executable, str(lane.script("scored", SCORED)))
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    [attempt] = json.loads(again.stdout)["attempts"]
    assert (attempt["todo_id"], attempt["epoch"], attempt["outcome"]) == ("dev-1", 1,
                                                                          "completed")
    [packet] = lane.records("auto_research_evidence_packet_v0")
    assert packet["payload"]["branch"] == "loopx/dev-1/1-2"
    # Nothing of the crashed attempt was deleted.
    assert lane.branches() == ["loopx/dev-1/1", "loopx/dev-1/1-2"]
    assert crashed_tree.is_dir()


@needs_git
def test_a_repository_without_a_commit_is_refused_before_any_claim(lane: Lane) -> None:
    """No worktree can start: found after the claim, it cost the todo a claim (and a held-out
    todo its hypothesis' one read)."""
    # Nothing pinned yet (a pin would name a commit, and the worktree would start there).
    amend_contract(lane.ledger, lane.r.agents["cur"], "unpin", settings=[("base_commit", None)])
    lane.git("checkout", "-q", "--orphan", "empty")  # HEAD now names no commit
    done = lane.lane(sys.executable, str(lane.script("scored", SCORED)))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "has no commit yet" in json.loads(done.stdout)["message"]
    assert [r for r in lane.records("todo_event_v0") if r["todo_id"] == "dev-1"] == []
    assert (lane.todo("dev-1")["status"], lane.todo("dev-1")["claims"]) == ("open", 0)


@needs_git
def test_a_worktree_that_cannot_be_made_releases_the_claim_and_stops_with_the_reason(
        lane: Lane) -> None:
    head = lane.git("rev-parse", "HEAD")
    taken = [f"loopx/dev-1/1{'' if n == 1 else f'-{n}'}" for n in range(1, 101)]
    subprocess.run(["git", "update-ref", "--stdin"], cwd=lane.root, check=True, text=True,
                   input="".join(f"create refs/heads/{b} {head}\n" for b in taken))
    done = lane.lane(sys.executable, str(lane.script("scored", SCORED)))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "already has 100 worktree branches" in json.loads(done.stdout)["message"]
    [released] = [r for r in lane.records("todo_event_v0") if r["todo_id"] == "dev-1"]
    assert released["payload"]["event"] == "released"
    assert "already has 100 worktree branches" in released["payload"]["reason"]
    assert lane.todo("dev-1")["status"] == "open"


# -- the narrator after a budget stop ---------------------------------------------------------

NARRATE = """
    import json, os, sys
    claim = json.load(sys.stdin)
    out = os.path.join(os.environ["LOOPX_WORKSPACE"], "story.md")
    print(json.dumps({"calls": [{"tool": "story.publish", "args": {
                          "out": out, "surface": "story", "format": "md"}}],
                      "result": {"published": ["story.md"]}}))
"""


def test_the_narrator_tells_the_last_chapter_after_a_budget_stop(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    r = research_workspace(root, "budget")
    ledger, owner = r.ledger, r.owner
    r.contract({**CONTRACT, "budget": {"max_cpu_hours": 1.0}})
    r.propose("h1")
    narr = register_agent(ledger, owner, "narr", "product_narrator")[1]
    add_todos(ledger, owner, [
        {"todo_id": "chapter", "title": "the ending", "role": "product_narrator",
         "action_kind": "render_story"},
        {"todo_id": "costly", "title": "a costly board", "role": "product_narrator",
         "action_kind": "render_board", "estimated_cost": {"cpu_hours": 0.5}},
        {"todo_id": "dev-x", "title": "more work", "role": "research_executor",
         "action_kind": "run_dev_eval", "hypothesis_id": "h1"}])
    transition(ledger, r.agents["cur"], "ready", reason="go")
    add_usage(ledger, r.agents["ex"], {"cpu_hours": 1.0})
    assert evaluate(ledger, r.agents["ev"], dry_run=False)["reasons"] == [
        "budget_exhausted:cpu_hours"]
    ledger.store.close()

    def should_run(agent: str) -> dict[str, Any]:
        done = run_loopx(root, "quota", "should-run", "--agent-id", agent, "--json")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    told = should_run("narr")
    assert (told["run"], told["reason"], told["todo"]["todo_id"]) == (True, "selected",
                                                                      "chapter")
    assert should_run("ex")["reason"] == "campaign_stopped"  # nothing else is handed out
    lane = subprocess.run(
        [sys.executable, "-m", "loopx.cli", "-C", str(root), "lane", "run", "--agent-id",
         "narr", "--poll-seconds", "0.1", "--idle-polls", "20", "--json", "--",
         sys.executable, "-c", textwrap.dedent(NARRATE)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**{k: v for k, v in os.environ.items() if k != "LOOPX_AGENT_ID"},
             "LOOPX_TOKEN": narr})
    assert lane.returncode == 0 and "Traceback" not in lane.stderr, lane.stderr
    report = json.loads(lane.stdout)
    # It tells the ending, passes over the todo that would spend budget, and stops (not idles).
    assert [(a["todo_id"], a["outcome"]) for a in report["attempts"]] == [("chapter",
                                                                          "completed")]
    assert report["stopped_because"] == "campaign_stopped"
    assert "budget_exhausted:cpu_hours" in (root / "story.md").read_text()
    shown = json.loads(run_loopx(root, "todo", "show", "costly", "--json").stdout)
    assert shown["state"] == "open"
    refused = run_loopx(root, "todo", "claim", "costly", "--agent-id", "narr", "--json",
                        token=narr)
    assert refused.returncode != 0 and "over_budget cpu_hours" in refused.stdout


@needs_git
def test_a_persistent_command_that_cannot_start_claims_nothing(lane: Lane) -> None:
    missing = str(lane.tmp / "no-such-worker")
    args = [sys.executable, "-m", "loopx.cli", "-C", str(lane.root), "lane", "run",
            "--agent-id", "ex", "--idle-polls", "1", "--persistent", "--json", "--", missing]
    env = {**os.environ, **GIT_ENV, "LOOPX_TOKEN": str(lane.r.agents["ex"].token)}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["reason"] == (f"cannot start the command `{missing}`: No such file or "
                                f"directory: {missing!r}")
    assert report["attempts"] == [] and lane.todo("dev-1")["epoch"] == 0
