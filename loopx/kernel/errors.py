"""The loopx exception hierarchy: one root, a few leaves, each owning its exit code."""

from __future__ import annotations

import errno as errno_module
import os

from loopx.kernel.plain import Frozen


class LoopxError(Exception):
    """Root of every error loopx raises on purpose; the CLI prints its message, never a traceback."""

    exit_code = 1
    code = "error"

    def __init_subclass__(cls, *, exit_code: int | None = None, code: str | None = None) -> None:
        # A subclass names its exit code and JSON code in its class line; what it leaves out
        # it inherits.
        super().__init_subclass__()
        if exit_code is not None:
            cls.exit_code = exit_code
        if code is not None:
            cls.code = code

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_json(self) -> dict[str, object]:
        """A stable JSON shape for `--json` error output."""
        out: dict[str, object] = {"error": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        return out


class FieldProblem(Frozen):
    """One refused field: a dotted path into the submitted document and what is wrong with it."""

    _fields = ("field", "problem")
    field: str
    problem: str

    def __init__(self, field: str, problem: str) -> None:
        self.__dict__.update(field=field, problem=problem)

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"


class RecordRejected(LoopxError, exit_code=2, code="invalid_record"):
    """A submitted record or batch is malformed (unknown kind or field, wrong type, too large).

    Nothing is written when this is raised.
    """

    def __init__(self, problems: list[FieldProblem], *, context: str = "record") -> None:
        self.problems = problems
        lines = "; ".join(str(p) for p in problems)
        super().__init__(f"{context} refused: {lines}")

    @property
    def fields(self) -> list[str]:
        """The dotted paths of every refused field, in report order."""
        return [p.field for p in self.problems]

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["problems"] = [{"field": p.field, "problem": p.problem} for p in self.problems]
        return out


class UsageProblem(LoopxError, exit_code=2, code="usage"):
    """The command was called wrongly (a bad option value, a missing file)."""


class WorkspaceError(LoopxError, exit_code=3, code="workspace"):
    """No workspace was found, one already exists, or its format is not one this loopx reads."""


class ConflictError(LoopxError, exit_code=4, code="conflict"):
    """An optimistic append lost a race: the log is no longer at the expected sequence number."""


class LockTimeout(LoopxError, exit_code=4, code="lock_timeout"):
    """The store lock could not be taken in time (another writer is stuck or very slow)."""


class IntegrityError(LoopxError, exit_code=5, code="integrity"):
    """The log is not what was written: a broken chain, an edited line, corruption mid-log."""

    def __init__(self, message: str, *, seq: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.seq = seq

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["seq"] = self.seq
        return out


class Refused(LoopxError, exit_code=8, code="refused"):
    """A well-formed request the campaign's current state does not allow (a todo that is not
    claimable, a capability rule). Nothing is written."""


class ResearchRefused(Refused, code="research_refused"):
    """A research rule refused a well-formed, authorised request (a held-out read over budget, a
    duplicate of an earlier idea, a promotion without its candidate). Unlike other
    refusals it is recorded: a ``research_refusal_v0`` takes the request's place in the log."""

    def __init__(self, rule: str, message: str, *, hypothesis_id: str | None = None,
                 cites: list[str] | None = None, detail: dict[str, object] | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.rule = rule
        self.hypothesis_id = hypothesis_id
        self.cites = list(cites or [])
        self.detail = dict(detail or {})
        self.request: dict[str, object] | None = None  # the refused record, set by the checks
        self.recorded_seq: int | None = None

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["rule"] = self.rule
        out["recorded_seq"] = self.recorded_seq
        return out


class Unauthorized(Refused, exit_code=7, code="unauthorized"):
    """No token, a wrong token, a revoked grant, or a token of another agent."""


class Forbidden(Refused, exit_code=7, code="forbidden"):
    """The writer's role may not append this kind with this action; the message names all three."""

    def __init__(self, role: str, kind: str, action: str, *, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"role {role!r} may not write {kind} with action {action!r}{detail}",
                         hint="see the role's write_scope with `loopx lanes show`")
        self.role, self.kind, self.action = role, kind, action

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out.update(role=self.role, kind=self.kind, action=self.action)
        return out


class StaleLease(Refused, exit_code=4, code="stale_lease"):
    """A write tied to a todo whose epoch is no longer current, or whose lease had expired."""


class NotFound(LoopxError, exit_code=6, code="not_found"):
    """A record, segment or file that was asked for does not exist."""


class StorageError(LoopxError, exit_code=11, code="storage"):
    """The filesystem refused what loopx needed to do: read-only, full, or not permitted.

    Carries the path and the errno's name (``EROFS``, ``ENOSPC``, ``EACCES``, ...), and a hint
    fitting that errno; the message says what was (not) written.
    """

    def __init__(self, message: str, *, path: str | None, errno_name: str,
                 hint: str | None = None, outcome: str = "") -> None:
        super().__init__(f"{message}; {outcome}" if outcome else message, hint=hint)
        self.path = path
        self.errno_name = errno_name
        self.problem = message
        self.outcome = outcome

    def with_outcome(self, outcome: str) -> StorageError:
        """The same error, telling what became of the request as ``outcome`` instead."""
        return StorageError(self.problem, path=self.path, errno_name=self.errno_name,
                            hint=self.hint, outcome=outcome)

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out.update(path=self.path, errno=self.errno_name)
        return out

    @classmethod
    def from_os(cls, exc: OSError, doing: str, *, path: str | os.PathLike[str] | None = None,
                outcome: str = "") -> StorageError:
        """Describe ``exc``, raised while trying ``doing`` (``"write to"``) ``path``.

        ``outcome`` says what happened to the user's request (``"nothing was written"``); it
        ends the message, so a caller that cannot know leaves it out.
        """
        where = os.fspath(path) if path is not None else exc.filename
        where = os.fsdecode(where) if where is not None else None
        name = errno_module.errorcode.get(exc.errno or 0, "EUNKNOWN")
        reason = exc.strerror or str(exc)
        message = f"cannot {doing} {where}: {reason} ({name})" if where else \
            f"cannot {doing}: {reason} ({name})"
        return cls(message, path=where, errno_name=name, hint=_storage_hint(exc.errno, where),
                   outcome=outcome)


def _storage_hint(code: int | None, path: str | None) -> str:
    """What a user can do about one errno."""
    if code == errno_module.EROFS:
        return ("the filesystem is mounted read-only: remount it read-write, or use a writable "
                "location (commands that only read the workspace still work)")
    if code in (errno_module.ENOSPC, errno_module.EDQUOT):
        return "the disk (or your quota) is full: free some space, then run the command again"
    if code in (errno_module.EACCES, errno_module.EPERM):
        owner = ""
        for candidate in (path, os.path.dirname(path)) if path else ():
            try:
                st = os.stat(candidate)
            except OSError:
                continue
            owner = f" ({candidate} is owned by uid {st.st_uid}, mode {st.st_mode & 0o7777:o})"
            break
        return (f"check the owner and permissions of the workspace{owner}; this process runs "
                f"as uid {os.geteuid()}")
    return "check the disk and the system log (dmesg); then run the command again"


class RedactionBlocked(LoopxError, exit_code=10, code="redaction"):
    """The narrator's output would publish something not meant for the public; nothing was
    written. ``findings`` name each record and field, never the value."""

    def __init__(self, findings: list[dict[str, str | None]]) -> None:
        self.findings = findings
        lines = "".join(f"\n  {f['record_id'] or 'output'} {f['field']}: {f['problem']}"
                        for f in findings)
        super().__init__(f"the redaction gate found {len(findings)} problem(s); nothing was "
                         f"written:{lines}",
                         hint="correct or supersede the records named; there is no override")

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["findings"] = self.findings
        return out
