"""Recording a lane attempt through the checked path: the command's result with the completion
in one batch, or the failure with its usage and (for a hypothesis) an unscored packet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.kernel.errors import LoopxError, RecordRejected, StaleLease
from loopx.runner.attempt import Attempt
from loopx.runner.result import LaneResult, parse_result

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.runner.worktrees import Worktree
    from loopx.workspace import Workspace

PACKET = "auto_research_evidence_packet_v0"
REASON_CHARS = 512  # a todo event's reason (ShortText)
ERROR_CHARS = 2048  # an attempt's error as the report and the packet carry it


class AttemptRecorder:
    """Records one agent's attempts, in its role, on the workspace's ledger."""

    def __init__(self, workspace: Workspace, ledger: Ledger, creds: Credentials,
                 role: str) -> None:
        self.workspace = workspace
        self.ledger = ledger
        self.creds = creds
        self.role = role

    def _usage(self, attempt: Attempt) -> list[dict[str, Any]]:
        """The attempt's usage record, or none when it measured nothing (a command that never
        started): a usage record needs a positive increment."""
        payload: dict[str, Any] = {"note": f"lane attempt of {attempt.todo_id}"[:512]}
        wall = round(attempt.wall_seconds, 3)
        if wall > 0:
            payload["wall_seconds"] = wall
        cpu_hours = round(attempt.cpu_seconds / 3600, 9)
        if cpu_hours > 0:
            payload["cpu_hours"] = cpu_hours
        if len(payload) == 1:
            return []
        return [{"schema_version": "usage_v0", "payload": payload}]

    def record(self, todo: dict[str, Any], worktree: Worktree | None, stdout: bytes,
                attempt: Attempt) -> None:
        from loopx.work.claims import complete, fail, release

        try:
            result = parse_result(stdout)
        except RecordRejected as exc:
            self.record_failure(todo, worktree, attempt, f"invalid result: {exc.message}",
                                 status="invalid_output")
            return
        if worktree is not None:
            from loopx.runner.worktrees import dirty_paths

            dirty = dirty_paths(worktree)
            if dirty and result.outcome == "completed":
                self.record_failure(todo, worktree, attempt, "the worktree is dirty "
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
            try:
                attempt.seq = fail(self.ledger, self.creds, todo_id, epoch,
                                   attempt.reason[:REASON_CHARS], dict(result.result),
                                   before=[*records, *self._usage(attempt)])["seq"]
            except StaleLease:
                raise
            except LoopxError as exc:
                # Its records were refused: the failure is still recorded, without them.
                self.record_failure(todo, worktree, attempt, f"{attempt.reason}; its records "
                                     f"were refused: {exc.message}")
            return
        try:
            self._calls(result, todo_id, epoch)
            done = complete(self.ledger, self.creds, todo_id, epoch, dict(result.result),
                            before=[*records, *self._usage(attempt)])
        except StaleLease:
            raise
        except LoopxError as exc:
            self.record_failure(todo, worktree, attempt, f"result refused: {exc.message}")
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
        from loopx.runner.worktrees import head_commit

        payload = dict(doc.get("payload") or {})  # type: ignore[arg-type]
        payload.setdefault("branch", worktree.branch)
        payload.setdefault("base_commit", worktree.base_commit)
        payload.setdefault("evaluated_commit", head_commit(worktree))
        return {**doc, "payload": payload}

    def record_failure(self, todo: dict[str, Any], worktree: Worktree | None,
                        attempt: Attempt, reason: str, status: str | None = None) -> None:
        """A failed attempt, with (for an executor's hypothesis) an unscored evidence packet and
        the usage. If those are refused, the failure is recorded without them: a failed attempt
        is never lost, and its todo never left claimed."""
        from loopx.work.claims import fail

        attempt.outcome, attempt.reason = "failed", reason[:ERROR_CHARS]
        if status is None:
            status = "timeout" if reason.startswith("timed out") else "failed"
        usage = self._usage(attempt)
        tiers: list[tuple[str, list[dict[str, Any]]]] = [("usage", usage)] if usage else []
        view = self.ledger.state()["lanes"]
        scope = view["profiles"].get(self.role, {}).get("write_scope", {})
        if todo["hypothesis_id"] and PACKET in scope:
            tiers.insert(0, ("packet", [self._failure_packet(todo, worktree, attempt, status),
                                        *usage]))
        tiers.append(("", []))
        for what, before in tiers:
            try:
                attempt.seq = fail(self.ledger, self.creds, todo["todo_id"], todo["epoch"],
                                   attempt.reason[:REASON_CHARS],
                                   {"exit_status": attempt.exit_status}, before=before)["seq"]
                return
            except StaleLease:
                raise
            except LoopxError as exc:
                if not before:
                    raise
                # E.g. another attempt used the hypothesis' last one meanwhile: the packet's
                # refusal is recorded, and the failure goes in without it.
                attempt.reason = (f"{attempt.reason}; its {what} was refused: "
                                  f"{exc.message}")[:ERROR_CHARS]

    def _failure_packet(self, todo: dict[str, Any], worktree: Worktree | None,
                        attempt: Attempt, status: str) -> dict[str, Any]:
        """The unscored evidence packet of a failed attempt."""
        payload: dict[str, Any] = {
            "hypothesis_id": todo["hypothesis_id"], "status": status,
            "error": attempt.reason, "wall_seconds": round(attempt.wall_seconds, 3),
            "cpu_seconds": round(attempt.cpu_seconds, 3)}
        if attempt.exit_status is not None:
            payload["exit_status"] = attempt.exit_status
        doc = {"schema_version": PACKET, "payload": payload}
        try:
            return self._fill(doc, worktree)
        except LoopxError:
            return doc  # the command removed its worktree: the packet goes without commits
