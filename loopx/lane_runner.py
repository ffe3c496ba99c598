"""``loopx lane run``: one lane, driven by a user's command.

The runner loops on should-run with claim. For each claimed todo it starts the command (in its
own git worktree for an executor), hands it the claim packet as JSON on stdin and in the
environment (the token removed), heartbeats the lease while it runs, reads a
``loopx_lane_result_v0`` from its stdout, and records the attempt through the checked path:
the result's records with the completion in one batch, or the failure with its exit status.
A command that fails, hangs past its timeout or prints an invalid result is a failed attempt,
recorded; the attempt's CPU and wall time are recorded as usage. SIGTERM or Ctrl-C releases
the held claim; a crash leaves it to expire and be reclaimed.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loopx.errors import LoopxError, RecordRejected, ResearchRefused, StaleLease, UsageProblem
from loopx.lane_result import LaneResult, parse_result

if TYPE_CHECKING:
    from loopx.checks import Credentials
    from loopx.ledger import Ledger
    from loopx.workspace import Workspace
    from loopx.worktrees import Worktree

PACKET = "auto_research_evidence_packet_v0"
# Environment variables that carry a credential never reach the command.
SECRET_ENV = ("LOOPX_TOKEN", "LOOPX_TOKEN_FILE")
MAX_OUTPUT = 16 * 1024 * 1024
GRACE_SECONDS = 5.0
TICK = 0.2


@dataclass(frozen=True)
class RunnerOptions:
    """How a lane runs: the command, its timeout, and when the runner stops."""

    command: list[str]
    timeout: float = 3600.0
    idle_polls: int = 0  # stop after this many polls in a row with nothing to do (0: never)
    poll_seconds: float = 2.0
    max_attempts: int = 0  # stop after this many attempts (0: never)
    worktrees: bool = True


@dataclass
class Attempt:
    """What happened to one claimed todo."""

    todo_id: str
    epoch: int
    outcome: str  # completed, failed or released
    reason: str | None = None
    exit_status: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The attempt as stable JSON."""
        return {"todo_id": self.todo_id, "epoch": self.epoch, "outcome": self.outcome,
                "reason": self.reason, "exit_status": self.exit_status,
                "wall_seconds": round(self.wall_seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), "seq": self.seq}


@dataclass
class LaneReport:
    """Why the runner stopped, and its attempts."""

    agent_id: str
    role: str
    stopped_because: str = ""
    attempts: list[Attempt] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The run as stable JSON."""
        counts = {o: sum(1 for a in self.attempts if a.outcome == o)
                  for o in ("completed", "failed", "released")}
        return {"agent_id": self.agent_id, "role": self.role,
                "stopped_because": self.stopped_because, **counts,
                "attempts": [a.to_json() for a in self.attempts]}


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
            from loopx.errors import NotFound

            raise NotFound(f"no agent {creds.agent_id!r} is registered",
                           hint="the owner registers it with `loopx agent register`")
        if role is not None and agent["role"] != role:
            raise UsageProblem(f"agent {creds.agent_id!r} has role {agent['role']!r}, "
                               f"not {role!r}")
        self.ledger.identify(creds)  # a wrong token fails now, not at the first claim
        self.report = LaneReport(creds.agent_id, agent["role"])

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> LaneReport:
        """Claim and run todos until there is a reason to stop."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._loop()
        except _Stop:
            self.report.stopped_because = "signal"
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.ledger.store.close()
        return self.report

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _check_stop(self) -> None:
        if self.stopping:
            raise _Stop

    def _loop(self) -> None:
        from loopx.claims import should_run

        idle = 0
        while True:
            self._check_stop()
            answer = should_run(self.ledger, self.creds.agent_id, claim=True, creds=self.creds)
            if answer["todo"] is not None and answer["reason"] in ("selected",
                                                                   "already_holding_lease"):
                idle = 0
                self.report.attempts.append(self._attempt(answer))
                if self.options.max_attempts and \
                        len(self.report.attempts) >= self.options.max_attempts:
                    self.report.stopped_because = "max_attempts"
                    return
                continue
            reason = answer["reason"]
            state = self.ledger.state()["lanes"]["campaign"]["status"]["state"]
            if reason == "campaign_stopped" or (state in ("completed", "stopped", "failed")
                                                and reason == "no_eligible_todo"):
                self.report.stopped_because = f"campaign_{state}"
                return
            idle += 1
            if self.options.idle_polls and idle >= self.options.idle_polls:
                self.report.stopped_because = "idle"
                return
            self._sleep(self.options.poll_seconds)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._check_stop()
            time.sleep(min(TICK, max(end - time.monotonic(), 0)))

    # -- one attempt --------------------------------------------------------------------------

    def _attempt(self, answer: dict[str, Any]) -> Attempt:
        todo, claim = answer["todo"], answer["claim"]
        todo_id, epoch = todo["todo_id"], todo["epoch"]
        self.log(f"{self.creds.agent_id} claimed {todo_id} (epoch {epoch}, "
                 f"{todo['action_kind']})")
        worktree = self._worktree(todo)
        attempt = Attempt(todo_id, epoch, "failed")
        try:
            stdout, attempt = self._run_command(todo, claim, worktree, attempt)
            if attempt.reason is None:
                self._record(todo, worktree, stdout, attempt)
            else:
                self._record_failure(todo, worktree, attempt, attempt.reason)
        except _Stop:
            self._release(todo_id, epoch, "the lane runner was stopped")
            raise
        except StaleLease as exc:
            # The lease is gone (expired and reclaimed): this attempt may record nothing more.
            attempt.reason = f"lease lost: {exc.message}"
            self.log(f"{todo_id}: {attempt.reason}")
        finally:
            if worktree is not None:
                from loopx.worktrees import remove

                remove(worktree)
        self.log(f"{todo_id}: {attempt.outcome}" + (f" ({attempt.reason})" if attempt.reason
                                                   else ""))
        return attempt

    def _worktree(self, todo: dict[str, Any]) -> Worktree | None:
        if not self.options.worktrees or self.report.role != "research_executor":
            return None
        from loopx.worktrees import create

        return create(self.workspace.root, todo["todo_id"], todo["epoch"])

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
        from loopx.claims import heartbeat

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        try:
            child = subprocess.Popen(
                self.options.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                cwd=str(worktree.path if worktree else self.workspace.root),
                env=self._environment(todo, claim, worktree), start_new_session=True)
        except OSError as exc:
            attempt.reason = f"cannot start the command: {exc.strerror or exc}"
            return b"", attempt
        out = _Reader(child)
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
                    _kill(child)
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
            _kill(child)
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

    # -- recording ----------------------------------------------------------------------------

    def _usage(self, attempt: Attempt) -> dict[str, Any]:
        payload: dict[str, Any] = {"wall_seconds": round(attempt.wall_seconds, 3),
                                   "note": f"lane attempt of {attempt.todo_id}"[:512]}
        cpu_hours = round(attempt.cpu_seconds / 3600, 9)
        if cpu_hours > 0:
            payload["cpu_hours"] = cpu_hours
        return {"schema_version": "usage_v0", "payload": payload}

    def _record(self, todo: dict[str, Any], worktree: Worktree | None, stdout: bytes,
                attempt: Attempt) -> None:
        from loopx.claims import complete, fail, release

        try:
            result = parse_result(stdout)
        except RecordRejected as exc:
            self._record_failure(todo, worktree, attempt, f"invalid result: {exc.message}",
                                 status="invalid_output")
            return
        if worktree is not None:
            from loopx.worktrees import dirty_paths

            dirty = dirty_paths(worktree)
            if dirty and result.outcome == "completed":
                self._record_failure(todo, worktree, attempt, "the worktree is dirty "
                                     f"({len(dirty)} uncommitted path(s)): commit or discard "
                                     "changes before the attempt is evaluated")
                return
        todo_id, epoch = todo["todo_id"], todo["epoch"]
        records = [self._fill(d, worktree) for d in result.records]
        if result.outcome == "released":
            attempt.outcome = "released"
            attempt.reason = result.reason
            attempt.seq = release(self.ledger, self.creds, todo_id, epoch,
                                  result.reason)["seq"]
            return
        if result.outcome == "failed":
            attempt.reason = result.reason or "the command reported a failure"
            attempt.seq = fail(self.ledger, self.creds, todo_id, epoch, attempt.reason,
                               dict(result.result),
                               before=[*records, self._usage(attempt)])["seq"]
            return
        try:
            self._calls(result, todo_id, epoch)
            done = complete(self.ledger, self.creds, todo_id, epoch, dict(result.result),
                            before=[*records, self._usage(attempt)])
        except StaleLease:
            raise
        except LoopxError as exc:
            self._record_failure(todo, worktree, attempt, f"result refused: {exc.message}")
            return
        attempt.outcome, attempt.seq = "completed", done["seq"]

    def _calls(self, result: LaneResult, todo_id: str, epoch: int) -> None:
        from loopx.tools import ToolContext, call
        from loopx.tools.registry import get_tool, params_of

        ctx = ToolContext(self.workspace, self.creds, _ledger=self.ledger)
        for item in result.calls:
            args = dict(item.args)
            if "under_todo_id" in params_of(get_tool(item.tool)):
                args.setdefault("under_todo_id", todo_id)
                args.setdefault("under_epoch", epoch)
            try:
                call(item.tool, ctx, args)
            except LoopxError as exc:
                exc.message = f"call {item.tool}: {exc.message}"
                raise

    def _fill(self, doc: dict[str, Any], worktree: Worktree | None) -> dict[str, Any]:
        """A packet gets the worktree's branch and commits unless it names its own."""
        if worktree is None or doc.get("schema_version") != PACKET:
            return dict(doc)
        from loopx.worktrees import head_commit

        payload = dict(doc.get("payload") or {})  # type: ignore[arg-type]
        payload.setdefault("branch", worktree.branch)
        payload.setdefault("base_commit", worktree.base_commit)
        payload.setdefault("evaluated_commit", head_commit(worktree))
        return {**doc, "payload": payload}

    def _record_failure(self, todo: dict[str, Any], worktree: Worktree | None,
                        attempt: Attempt, reason: str, status: str | None = None) -> None:
        """A failed attempt, with (for an executor's hypothesis) an unscored evidence packet."""
        from loopx.claims import fail

        attempt.outcome, attempt.reason = "failed", reason[:2048]
        if status is None:
            status = "timeout" if reason.startswith("timed out") else "failed"
        before = [self._usage(attempt)]
        view = self.ledger.state()["lanes"]
        scope = view["profiles"].get(self.report.role, {}).get("write_scope", {})
        if todo["hypothesis_id"] and PACKET in scope:
            payload: dict[str, Any] = {
                "hypothesis_id": todo["hypothesis_id"], "status": status,
                "error": attempt.reason, "wall_seconds": round(attempt.wall_seconds, 3),
                "cpu_seconds": round(attempt.cpu_seconds, 3)}
            if attempt.exit_status is not None:
                payload["exit_status"] = attempt.exit_status
            before.insert(0, self._fill({"schema_version": PACKET, "payload": payload},
                                        worktree))
        try:
            attempt.seq = fail(self.ledger, self.creds, todo["todo_id"], todo["epoch"],
                               attempt.reason, {"exit_status": attempt.exit_status},
                               before=before)["seq"]
        except ResearchRefused as exc:
            # The packet itself was refused (another attempt used the last one meanwhile); the
            # refusal is recorded in its place, and the todo must not stay claimed.
            attempt.reason = f"{attempt.reason}; its packet was refused: {exc.message}"[:2048]
            attempt.seq = fail(self.ledger, self.creds, todo["todo_id"], todo["epoch"],
                               attempt.reason, {"exit_status": attempt.exit_status},
                               before=[self._usage(attempt)])["seq"]

    def _release(self, todo_id: str, epoch: int, reason: str) -> None:
        from loopx.claims import release

        try:
            release(self.ledger, self.creds, todo_id, epoch, reason)
            self.log(f"{todo_id}: released ({reason})")
            self.report.attempts.append(Attempt(todo_id, epoch, "released", reason))
        except LoopxError as exc:
            self.log(f"{todo_id}: could not release: {exc.message}")


class _Reader:
    """Reads a child's stdout on a thread, so a chatty command never blocks on a full pipe."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.thread = threading.Thread(target=self._read, args=(child,), daemon=True)
        self.thread.start()

    def _read(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        for chunk in iter(lambda: child.stdout.read(65536), b""):  # type: ignore[union-attr]
            self.size += len(chunk)
            if self.size <= MAX_OUTPUT:
                self.chunks.append(chunk)
            else:
                self.overflow = True

    def join(self) -> None:
        self.thread.join(timeout=GRACE_SECONDS)

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


def _kill(child: subprocess.Popen[bytes]) -> None:
    """Stop the command and everything it started: SIGTERM, then SIGKILL after a grace."""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, GRACE_SECONDS)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_lane(workspace: Workspace, creds: Credentials, options: RunnerOptions, *,
             role: str | None = None) -> LaneReport:
    """Run one lane until the campaign stops, it idles out, or SIGTERM/Ctrl-C."""
    return LaneRunner(workspace, creds, options, role=role).run()
