"""``loopx lane run``: one lane, driven by a user's command.

The runner loops on should-run with claim. For each claimed todo it starts the command (in its
own git worktree for an executor), hands it the claim packet as JSON on stdin and in the
environment (the token removed), heartbeats the lease while it runs, reads a
``loopx_lane_result_v0`` from its stdout, and records the attempt through the checked path:
the result's records with the completion in one batch, or the failure with its exit status.
A command that cannot start, fails, hangs past its timeout or prints an invalid result is a
failed attempt, recorded (without whatever part of it is refused, never not at all); the
attempt's CPU and wall time are recorded as usage. A command known not to start (a program
not on ``PATH``, a path that does not exist or is not executable) stops the runner before it
claims anything; one that fails to start only once claimed is a failed attempt and stops it
too, since it would fail every todo the same way. A fault of the runner itself (no worktree
can be made) releases the claim before it stops. SIGTERM or Ctrl-C releases the held claim; a
crash leaves it to expire and be reclaimed (or to the same agent, which resumes it on a fresh
branch). With ``persistent`` the command is started once and handed one todo per line
(``worker.py``), so what it loads it loads once per lane.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loopx.kernel.errors import LoopxError, Refused, StaleLease, UsageProblem
from loopx.kernel.store.moved import moved_refusal
from loopx.research.git_read import repo_root
from loopx.runner.attempt import (
    MAX_OUTPUT,
    Attempt,
    LaneReport,
    OutputReader,
    kill_group,
    start_failure,
)
from loopx.runner.preflight import foreseen_failure, interpreted_script, script_paths
from loopx.runner.recorder import REASON_CHARS, AttemptRecorder
from loopx.runner.worker import Worker

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.runner.worktrees import Worktree
    from loopx.workspace import Workspace

# Environment variables that carry a credential never reach the command.
SECRET_ENV = ("LOOPX_TOKEN", "LOOPX_TOKEN_FILE")
# Should-run reasons worth waiting on after the campaign stopped: a todo held up by others'
# work in progress, or by the owner's pending verdict.
WAIT_AFTER_STOP = ("blocked", "awaiting_approval")
TICK = 0.2


@dataclass(frozen=True)
class RunnerOptions:
    """How a lane runs: the command, its timeout, and when the runner stops."""

    command: list[str]
    timeout: float = 3600.0
    idle_polls: int = 0  # stop after this many polls in a row with nothing to do (0: never)
    poll_seconds: float = 2.0
    max_attempts: int = 0  # stop after this many attempts (0: never)
    # Stop after this many failed attempts in a row (0: never): a command broken for every todo
    # would spend each one's attempts, and each held-out todo's read, in seconds.
    max_failures: int = 3
    worktrees: bool = True
    persistent: bool = False  # one command for the whole lane, a task per line (worker.py)


class _Stop(Exception):
    """SIGTERM or Ctrl-C arrived: release what is held and stop."""


class LaneRunner:
    """Runs one agent's lane until the campaign stops, it idles out, or it is told to stop."""

    def __init__(self, workspace: Workspace, creds: Credentials, options: RunnerOptions, *,
                 role: str | None = None, log: Callable[[str], None] | None = None) -> None:
        if not options.command:
            raise UsageProblem("give the command to run after --, e.g. "
                               "`loopx lane run --role R --agent-id A -- python work.py`")
        self.workspace = workspace
        self.creds = creds
        self.options = options
        self.ledger: Ledger = workspace.ledger()
        self.log = log or (lambda text: print(f"loopx lane: {text}", file=sys.stderr))
        self.stopping = False
        agent = self.ledger.state()["lanes"]["agents"].get(creds.agent_id)
        if agent is None:
            from loopx.kernel.errors import NotFound

            raise NotFound(f"no agent {creds.agent_id!r} is registered",
                           hint="the owner registers it with `loopx agent register`")
        if role is not None and agent["role"] != role:
            raise UsageProblem(f"agent {creds.agent_id!r} has role {agent['role']!r}, "
                               f"not {role!r}")
        self.ledger.identify(creds)  # a wrong token fails now, not at the first claim
        self.report = LaneReport(creds.agent_id, agent["role"])
        self.recorder = AttemptRecorder(workspace, self.ledger, creds, agent["role"])
        self.worker: Worker | None = None
        self._base_checked: str | None = None
        # The repository worktrees are made in (None outside git: the command runs in place).
        self._root = repo_root(workspace.root.resolve()) if self._in_worktrees else None

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> LaneReport:
        """Claim and run todos until there is a reason to stop."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            failure = self._prepare_command()
            if failure is not None:
                # Caught before any claim: a typo must not cost a todo an attempt, nor a
                # hypothesis its held-out read (a claim counts as one, started or not).
                self.log(f"stopping before any claim: {failure}; nothing was claimed")
                self.report.stopped_because, self.report.reason = "command_cannot_start", failure
                return self.report
            self._loop()
        except _Stop:
            self.report.stopped_because = "signal"
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self._stop_worker()
            self.ledger.store.close()
        return self.report

    def _prepare_command(self) -> str | None:
        """Why the command cannot start, if that is known before claiming: a persistent one is
        started now (so its loading overlaps others' work); another is looked up where it will
        run (an executor's worktree does not exist yet: only an absolute path or ``PATH``)."""
        if self.options.persistent:
            try:
                self._start_worker()
            except OSError as exc:
                return start_failure(self.options.command, exc)
            return None
        return foreseen_failure(self.options.command,
                                None if self._in_worktrees else self.workspace.root)

    @property
    def _in_worktrees(self) -> bool:
        return self.options.worktrees and self.report.role == "research_executor"

    def _check_base(self) -> None:
        """Refuse before claiming when no worktree could start, or the command could not run
        in one, or its result would be refused: the contract pins no base commit (write rules
        9), the repository has no commit or lacks the campaign's base commit, or the command's
        script is not in it. After the claim it would cost the todo a claim, and a held-out
        todo its hypothesis' read (a claim counts as one)."""
        # A campaign's base, once fixed and found here, never changes: no need to read again.
        found = self._base_checked not in (None, "HEAD")
        if not self._in_worktrees or self._root is None or found:
            return
        from loopx.governance.state import current_contract
        from loopx.research.state import campaign_base
        from loopx.runner.worktrees import require_committed, start_commit

        view = self.ledger.state()["lanes"]
        fixed = campaign_base(view)
        base = None if fixed is None else fixed["base_commit"]
        if base is None and current_contract(view) is not None:
            start_commit(self._root, None)  # a repository with no commit yet says so first
            raise Refused("the contract pins no base commit, so no experiment can start: a "
                          "scored packet citing commits would be refused (base_unpinned)",
                          hint="the curator pins it (`loopx contract amend --set "
                               "base_commit=SHA --reason ...`), then run the lane again")
        if (base or "HEAD") != self._base_checked:  # a commit stays: each start checked once
            start = start_commit(self._root, base)
            command = self.options.command
            require_committed(self._root, start, script_paths(command),
                              interpreted_script(command))
            self._base_checked = base or "HEAD"

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _check_stop(self) -> None:
        if self.stopping:
            raise _Stop

    def _loop(self) -> None:
        from loopx.work.claims import should_run

        idle = failed = 0
        while True:
            self._check_stop()
            self._check_base()
            answer = should_run(self.ledger, self.creds.agent_id, claim=True, creds=self.creds)
            if answer["todo"] is not None and answer["reason"] in ("selected",
                                                                   "already_holding_lease"):
                idle = 0
                attempt = self._attempt(answer)
                self.report.attempts.append(attempt)
                if not attempt.started:
                    # It will not start next time either: stop before it fails every todo.
                    self.log("stopping: the command cannot start; fix it and run the lane "
                             "again (the failed attempt is recorded)")
                    self.report.stopped_because = "command_cannot_start"
                    return
                failed = failed + 1 if attempt.outcome == "failed" else 0
                if self.options.max_failures and failed >= self.options.max_failures:
                    self.log(f"stopping: {failed} attempts failed in a row (the last: "
                             f"{attempt.reason}); fix the command and run the lane again (each "
                             "failed attempt is recorded)")
                    self.report.stopped_because = "failures_in_a_row"
                    return
                if self.options.max_attempts and \
                        len(self.report.attempts) >= self.options.max_attempts:
                    self.report.stopped_because = "max_attempts"
                    return
                continue
            reason = answer["reason"]
            state = self.ledger.state()["lanes"]["campaign"]["status"]["state"]
            # A finished campaign hands out nothing new except the narrator's last chapter:
            # unless others may still unblock it (or the owner approve), nothing will come.
            if reason == "campaign_stopped" or (state in ("completed", "stopped", "failed")
                                                and reason not in WAIT_AFTER_STOP):
                self.report.stopped_because = f"campaign_{state}"
                return
            idle += 1
            if self.options.idle_polls and idle >= self.options.idle_polls:
                self.report.stopped_because = "idle"
                return
            self._sleep(self.options.poll_seconds)

    def _sleep(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a new record (NOTIFY on PostgreSQL, which costs the
        server nothing while idle; a cheap head check on files), or for a stop signal."""
        store = self.ledger.store
        store.wait(store.head().seq, seconds, stop=lambda: self.stopping)
        self._check_stop()
        moved = store.moved()
        if moved is not None:  # nothing will ever come here: stop as an append would be told
            raise moved_refusal(moved)

    # -- one attempt --------------------------------------------------------------------------

    def _attempt(self, answer: dict[str, Any]) -> Attempt:
        todo, claim = answer["todo"], answer["claim"]
        todo_id, epoch = todo["todo_id"], todo["epoch"]
        self.log(f"{self.creds.agent_id} claimed {todo_id} (epoch {epoch}, "
                 f"{todo['action_kind']})")
        worktree: Worktree | None = None
        attempt = Attempt(todo_id, epoch, "failed")
        try:
            worktree = self._worktree(todo, claim)
            stdout, attempt = self._run_command(todo, claim, worktree, attempt)
            if attempt.reason is None:
                self.recorder.record(todo, worktree, stdout, attempt)
            else:
                self.recorder.record_failure(todo, worktree, attempt, attempt.reason)
        except _Stop:
            self._release(todo_id, epoch, "the lane runner was stopped")
            raise
        except StaleLease as exc:
            # The lease is gone (expired and reclaimed): this attempt may record nothing more.
            attempt.reason = f"lease lost: {exc.message}"
            self.log(f"{todo_id}: {attempt.reason}")
        except LoopxError as exc:
            # The runner cannot go on (no worktree can be made, its grant was revoked, ...):
            # give the todo back rather than leave it claimed for a whole lease, then stop.
            self._release(todo_id, epoch, f"the lane runner stopped: {exc.message}")
            raise
        finally:
            if worktree is not None:
                from loopx.runner.worktrees import remove

                remove(worktree)
        self.log(f"{todo_id}: {attempt.outcome}" + (f" ({attempt.reason})" if attempt.reason
                                                   else ""))
        return attempt

    def _worktree(self, todo: dict[str, Any], claim: dict[str, Any]) -> Worktree | None:
        if not self._in_worktrees:
            return None
        from loopx.runner.worktrees import create

        # The claim packet names the campaign's base commit once one is fixed.
        base = (claim.get("data") or {}).get("base_commit")
        return create(self.workspace.root, todo["todo_id"], todo["epoch"], base)

    def _environment(self, todo: dict[str, Any], claim: dict[str, Any],
                     worktree: Worktree | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env.update({
            "LOOPX_WORKSPACE": str(self.workspace.root), "LOOPX_AGENT_ID": self.creds.agent_id,
            "LOOPX_ROLE": self.report.role, "LOOPX_TODO_ID": todo["todo_id"],
            "LOOPX_EPOCH": str(todo["epoch"]), "LOOPX_ACTION": todo["action_kind"],
            "LOOPX_HYPOTHESIS_ID": todo["hypothesis_id"] or "",
            "LOOPX_CLAIM": json.dumps(claim, sort_keys=True)})
        if worktree is not None:
            env.update({"LOOPX_WORKTREE": str(worktree.path), "LOOPX_BRANCH": worktree.branch,
                        "LOOPX_BASE_COMMIT": worktree.base_commit})
        return env

    def _run_command(self, todo: dict[str, Any], claim: dict[str, Any],
                     worktree: Worktree | None, attempt: Attempt) -> tuple[bytes, Attempt]:
        if self.options.persistent:
            return self._run_task(todo, claim, worktree, attempt)
        from loopx.work.claims import heartbeat

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        try:
            child = subprocess.Popen(
                self.options.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                cwd=str(worktree.path if worktree else self.workspace.root),
                env=self._environment(todo, claim, worktree), start_new_session=True)
        except OSError as exc:
            attempt.wall_seconds = time.monotonic() - started
            attempt.reason = start_failure(self.options.command, exc)
            attempt.started = False
            return b"", attempt
        out = OutputReader(child)
        assert child.stdin is not None
        try:
            child.stdin.write(json.dumps(claim, sort_keys=True).encode() + b"\n")
            child.stdin.close()
        except BrokenPipeError:
            pass  # the command does not read its stdin
        every = max(float(claim.get("heartbeat_seconds") or 60.0), 1.0)
        next_beat = started + every
        try:
            while child.poll() is None:
                self._check_stop()
                now = time.monotonic()
                if now - started > self.options.timeout:
                    kill_group(child)
                    attempt.reason = f"timed out after {self.options.timeout:g} s"
                    break
                if now >= next_beat:
                    heartbeat(self.ledger, self.creds, todo["todo_id"], todo["epoch"])
                    next_beat = now + every
                try:
                    child.wait(timeout=TICK)
                except subprocess.TimeoutExpired:
                    pass
        except BaseException:
            kill_group(child)
            raise
        finally:
            out.join()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            attempt.wall_seconds = time.monotonic() - started
            attempt.cpu_seconds = max((after.ru_utime - before.ru_utime)
                                      + (after.ru_stime - before.ru_stime), 0.0)
        attempt.exit_status = child.returncode
        if attempt.reason is None and child.returncode != 0:
            attempt.reason = f"the command exited with status {child.returncode}"
        if attempt.reason is None and out.overflow:
            attempt.reason = f"the command printed more than {MAX_OUTPUT} bytes"
        return out.data, attempt

    def _run_task(self, todo: dict[str, Any], claim: dict[str, Any],
                  worktree: Worktree | None, attempt: Attempt) -> tuple[bytes, Attempt]:
        """The attempt as one task line to the persistent command, started if need be."""
        from loopx.work.claims import heartbeat

        started = time.monotonic()
        env = self._environment(todo, claim, worktree)
        if self.worker is None or self.worker.child.poll() is not None:
            try:
                self._start_worker()
            except OSError as exc:
                attempt.wall_seconds = time.monotonic() - started
                attempt.reason = start_failure(self.options.command, exc)
                attempt.started = False
                return b"", attempt
        worker = self.worker
        assert worker is not None
        # The first task pays for the command's start-up (already under way, perhaps).
        cpu_before = worker.cpu_seconds() if worker.served else 0.0
        worker.served += 1
        task_env = {k: v for k, v in env.items() if k.startswith("LOOPX_")}
        cwd = str(worktree.path if worktree else self.workspace.root)
        line: bytes | None = b"" if not worker.send(claim, task_env, cwd) else None
        every = max(float(claim.get("heartbeat_seconds") or 60.0), 1.0)
        next_beat = started + every
        try:
            while line is None:
                self._check_stop()
                now = time.monotonic()
                if now - started > self.options.timeout:
                    attempt.reason = f"timed out after {self.options.timeout:g} s"
                    break
                if now >= next_beat:
                    heartbeat(self.ledger, self.creds, todo["todo_id"], todo["epoch"])
                    next_beat = now + every
                line = worker.answer(TICK)
        except BaseException:
            self._stop_worker()
            raise
        attempt.wall_seconds = time.monotonic() - started
        attempt.cpu_seconds = max(worker.cpu_seconds() - cpu_before, 0.0)
        if attempt.reason is None and worker.overflow:
            attempt.reason = f"the command printed more than {MAX_OUTPUT} bytes"
        if attempt.reason is None and not line:
            worker.child.wait()
            attempt.exit_status = worker.child.returncode
            attempt.reason = (f"the command exited with status {worker.child.returncode} "
                              "before it answered")
        if attempt.reason is not None:
            self._stop_worker()  # the next todo gets a fresh command
            return b"", attempt
        attempt.exit_status = 0
        return line or b"", attempt

    def _start_worker(self) -> None:
        """Start the persistent command, with what holds for the whole lane in its
        environment (each task brings the rest)."""
        lane_env = {k: v for k, v in os.environ.items()
                    if k not in SECRET_ENV and not k.startswith("LOOPX_")}
        lane_env.update({"LOOPX_WORKSPACE": str(self.workspace.root),
                         "LOOPX_AGENT_ID": self.creds.agent_id, "LOOPX_ROLE": self.report.role})
        self.worker = Worker(self.options.command, str(self.workspace.root), lane_env)

    def _stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    # -- giving a todo back -------------------------------------------------------------------

    def _release(self, todo_id: str, epoch: int, reason: str) -> None:
        from loopx.work.claims import release

        try:
            release(self.ledger, self.creds, todo_id, epoch, reason[:REASON_CHARS])
            self.log(f"{todo_id}: released ({reason})")
            self.report.attempts.append(Attempt(todo_id, epoch, "released", reason))
        except LoopxError as exc:
            self.log(f"{todo_id}: could not release: {exc.message}")


def run_lane(workspace: Workspace, creds: Credentials, options: RunnerOptions, *,
             role: str | None = None) -> LaneReport:
    """Run one lane until the campaign stops, it idles out, or SIGTERM/Ctrl-C."""
    return LaneRunner(workspace, creds, options, role=role).run()
