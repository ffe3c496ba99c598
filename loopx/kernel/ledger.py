"""The single checked append path, and the caught-up folded state of one log.

Every write in loopx goes through :meth:`Ledger.write`: under the store lock it catches the fold
up to the head, authenticates the writer, lets the caller plan its records against that state
and the batch's ``ts``, checks every record (scope, fencing, capability rules) and commits.
Everything derived is read through :meth:`Ledger.state`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx.kernel.checkpoint import (
    DELTA_EXTRA,
    SAVE_EXTRA,
    load_checkpoint,
    save_checkpoint,
)
from loopx.kernel.domains import Domains, View, installed
from loopx.kernel.errors import ResearchRefused, WorkspaceError
from loopx.kernel.fold import (
    DomainsReducer,
    KernelReducer,
    Reducer,
    State,
    advance,
    fold_version,
)
from loopx.kernel.rules import upgrade_record
from loopx.kernel.store.base import Cursor, Encoded, Record, Store, encode

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity

Plan = Callable[[View, "Identity", str], Sequence[Record | Encoded]]
Settings = Mapping[str, Any]

CHECKPOINT_EVERY = 1000
# A state loaded from a checkpoint saves the rows it changed as a delta (cheap) this many times
# as often as a whole checkpoint is written, so readers fold short tails.
DELTAS_PER_CHECKPOINT = 10


def draft(payload: dict[str, Any], *, kind: str | None = None,
          under: tuple[str, int] | None = None) -> dict[str, Any]:
    """A draft of ``payload``, tied to the held todo ``under`` (todo id, epoch) if given."""
    out: dict[str, Any] = {"payload": payload}
    if kind is not None:
        out["schema_version"] = kind
    if under is not None:
        out.update(todo_id=under[0], epoch=under[1])
    return out


class Ledger:
    """A store plus the fold over it. One instance per thread; any number of processes."""

    def __init__(self, store: Store, *, checkpoint_path: Path | None = None,
                 checkpoint_every: int = CHECKPOINT_EVERY,
                 reducers: Sequence[Reducer] | None = None,
                 domains: Domains | None = None,
                 settings: Settings | Callable[[], Settings] | None = None) -> None:
        self.store = store
        # The workspace's settings the write checks may read (or how to read them, again on
        # every write, so an edit of the settings file applies to the next one); None for a
        # bare store.
        self._settings = settings
        self.domains = domains or installed()
        if reducers is None:
            reducers = (KernelReducer(), DomainsReducer(self.domains))
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every
        self.reducers = tuple(reducers)
        self.version = fold_version(self.reducers)
        self.checkpoint_status = "not loaded"
        self._state: State | None = None
        self._saved_seq = 0
        self._no_delta = False  # the state has no delta to save: wait for a whole checkpoint
        self._goal_id: str | None = None
        # The head a batch is being planned after, while the store lock is held (see write).
        self._locked_head: int | None = None

    def state(self) -> State:
        """State folded up to the committed head; saves a checkpoint when far enough ahead."""
        state = self._advance()
        ahead = state.seq - self._saved_seq
        every = self.checkpoint_every
        if self.checkpoint_path is not None and ahead >= (
                every if self._no_delta else max(1, every // DELTAS_PER_CHECKPOINT)):
            try:
                # A whole file every checkpoint_every records, and the first one as soon as a
                # delta would be due (a fold from the first record has no file to delta from).
                saved = save_checkpoint(self.checkpoint_path, state, self.version,
                                        full=ahead >= every or self._saved_seq == 0,
                                        extras=self.domains.extensions(SAVE_EXTRA),
                                        delta_extras=self.domains.extensions(DELTA_EXTRA))
                if saved:
                    self._saved_seq = state.seq
                self._no_delta = not saved
            except OSError as exc:  # a read-only workspace still answers queries
                print(f"loopx: checkpoint not saved: {exc}", file=sys.stderr)
        return state

    def _advance(self) -> State:
        if self._state is None:
            loaded = None
            if self.checkpoint_path is not None:
                loaded, self.checkpoint_status = load_checkpoint(
                    self.checkpoint_path, self.store, self.version)
            self._state = loaded or State.initial(self.reducers)
            self._saved_seq = self._state.seq
        advance(self._state, self.store.read(self._state.cursor), self.reducers)
        return self._state

    def _catch_up(self, head: Cursor) -> State:
        """The fold caught up to exactly ``head``, the committed head the store found under its
        lock: nothing is read when the fold is there already, and the read stops at ``head``
        (under the lock nothing committed follows it, so it need not look for more).

        Raises:
            WorkspaceError: the fold cannot reach ``head``.
        """
        state = self._state
        if state is None or state.seq != head.seq:
            if state is None:
                state = self._advance()
            else:
                entries = self.store.read(state.cursor)
                try:
                    advance(state, _through(entries, head.seq), self.reducers)
                finally:
                    close = getattr(entries, "close", None)
                    if close is not None:
                        close()  # the read's open segment, at once
            if state.seq != head.seq:
                raise WorkspaceError(f"the fold is at seq {state.seq} but the head is at "
                                     f"{head.seq}", hint="run `loopx verify`")
        return state

    def folded_seq(self) -> int:
        """The seq the folded state has reached; inside a plan, the head its batch follows."""
        if self._locked_head is not None:
            return self._locked_head  # caught up under the lock: nothing follows it
        return self._advance().seq

    def now(self) -> str:
        """The time a read-only query is answered at: the clock, never before the head."""
        from loopx.kernel.store.base import batch_ts

        return batch_ts(self._advance().cursor, self.store.now())

    def write(self, creds: Credentials, plan: Plan, *,
              expect_seq: int | None = None) -> list[Record]:
        """The one checked append path: authenticate, plan, check and commit in one locked step.

        ``plan(lanes, who, now)`` sees the lanes state caught up to the head (an overlay it may
        not change) and the ``ts`` the batch will carry, and returns unsealed records (see
        :meth:`prepare`), or those records already encoded (:func:`encode`, before the lock).
        Every record is then checked against that state before anything is written.

        Raises:
            Unauthorized, Forbidden, StaleLease, Refused: a write check failed; nothing written.
            RecordRejected: a malformed draft, naming the field; nothing written.
            ConflictError: the head is not at ``expect_seq``.
        """
        from loopx.kernel.checks import authenticate, check_batch

        settings = self.settings()
        # Catch up just before the lock (one stat when nothing is new), so the locked step
        # folds only what other writers commit while this one waits.
        self._advance()
        refused: list[ResearchRefused] = []
        upgraded: list[int] = []

        def build(head: Cursor, now: str) -> list[Record | Encoded]:
            # A store may run the builder again (PostgreSQL, when overtaken): only the run
            # that is written may leave its refusal and its upgrade count behind.
            refused.clear()
            upgraded.clear()
            state = self._catch_up(head)
            self._locked_head = head.seq
            # A log written under older rules is upgraded in front of this batch, which is
            # then checked (and later verified) under the rules in force now.
            rules, logged = self.domains.rules, state["kernel"]["rules"]
            if logged > rules:
                # Checked under older rules, the batch could pass what the log's rules refuse.
                raise WorkspaceError(
                    f"this log is written under write rules version {logged}, newer than this "
                    f"loopx knows ({rules}): nothing was written",
                    hint="upgrade loopx on this host to the version the other hosts run; "
                         "reading the log still works")
            upgrade = ([upgrade_record(state["kernel"]["goal_id"], logged, rules)]
                       if logged < rules else [])
            first = head.seq + 1 + len(upgrade)
            lanes = self.domains.overlay(state["lanes"], settings, rules)
            who = authenticate(state["kernel"], lanes, creds, self.domains)
            records = list(plan(lanes, who, now))
            if not records:
                return records
            try:
                check_batch(lanes, [r.record if isinstance(r, Encoded) else r for r in records],
                            now, first, self.domains)
            except ResearchRefused as exc:
                # A research rule's refusal is kept for the audit trail, in the request's
                # place; the caller still gets the error.
                refusal = self.refusal_record(who, exc)
                check_batch(self.domains.overlay(state["lanes"], settings, rules), [refusal],
                            now, first, self.domains)
                refused.append(exc)
                records = [refusal]
            upgraded.append(len(upgrade))
            return [*upgrade, *records]

        try:
            written = self.store.append(build, expect_seq=expect_seq)
        finally:
            self._locked_head = None
        written = written[upgraded[-1]:] if upgraded else written  # the caller's records only
        if refused:
            exc = refused[-1]
            exc.recorded_seq = written[0]["seq"]
            exc.message = f"{exc.message} (refusal recorded at seq {exc.recorded_seq})"
            exc.args = (exc.message,)
            raise exc
        return written

    def settings(self) -> Settings | None:
        """The workspace's settings the write checks read (None for a bare store).

        Raises:
            WorkspaceError: the workspace's settings are malformed.
        """
        source = self._settings
        return source() if callable(source) else source

    def refusal_record(self, who: Identity, exc: ResearchRefused) -> Record:
        """The record that takes a refused request's place in the log (its domain builds it)."""
        if self.domains.refusal is None:
            raise exc
        kind, payload = self.domains.refusal(who, exc)
        return self.loopx_record(who, kind, None, None, payload)

    def prepare(self, docs: Any, who: Identity, *, kind: str | None = None,
                by_loopx: bool = False) -> list[Record]:
        """Check drafts (one, or a list committed as one batch) and stamp them with ``who``.

        ``by_loopx`` admits kinds only loopx's own tools write (gate results), which
        ``loopx append`` refuses.

        Raises:
            RecordRejected: naming every refused field; nothing written.
        """
        from loopx.kernel.kinds import (  # pydantic loads only to write
            Author,
            prepare_batch,
        )

        author = Author(goal_id=self.goal_id(), agent_id=who.agent_id, lane_role=who.role,
                        capability=who.capability, authenticated=True)
        allow = frozenset({"agents", "owner", "loopx"} if by_loopx else {"agents", "owner"})
        return prepare_batch(docs, author, kind=kind, allow=allow)

    def loopx_record(self, who: Identity, kind: str, todo_id: str | None, epoch: int | None,
                     payload: dict[str, Any]) -> Record:
        """A record loopx builds itself from checked state: a claim, a todo event, a refusal.

        Built without pydantic because it runs under the lock; ``payload`` must already be in
        the kind's dumped form (every field, defaults included), which the tests hold it to.
        """
        from loopx.kernel.kinds import KINDS, new_record_id

        spec = KINDS[kind]
        return {"schema_version": kind, "record_id": new_record_id(), "goal_id": self.goal_id(),
                "agent_id": who.agent_id, "lane_role": who.role, "capability": who.capability,
                "todo_id": todo_id, "epoch": epoch, "visibility": spec.visibility,
                "provenance": spec.provenance, "payload": payload}

    def identify(self, creds: Credentials) -> Identity:
        """Authenticate ``creds`` against the current state (the write path checks again)."""
        from loopx.kernel.checks import authenticate

        state = self._advance()
        return authenticate(state["kernel"], state["lanes"], creds, self.domains)

    def append(self, docs: Any, *, creds: Credentials, kind: str | None = None,
               expect_seq: int | None = None) -> list[Record]:
        """Check and commit drafts as one batch under ``creds``; returns the sealed records.

        The drafts are validated before the lock, so a malformed one never waits for it.

        Raises:
            RecordRejected, Unauthorized, Forbidden, StaleLease, Refused, ConflictError.
        """
        self.goal_id()  # a log without its genesis record says so before any token check
        records = self.prepare(docs, self.identify(creds), kind=kind)
        encoded = [encode(record) for record in records]  # serialized before the lock

        def plan(lanes: View, who: Identity, now: str) -> list[Record | Encoded]:
            if who.role != records[0]["lane_role"] or who.capability != records[0]["capability"]:
                from loopx.kernel.errors import Unauthorized

                raise Unauthorized(f"agent {who.agent_id!r}'s grant changed while writing")
            return encoded

        return self.write(creds, plan, expect_seq=expect_seq)

    def goal_id(self) -> str:
        """The workspace's goal, fixed by the genesis record.

        Raises:
            WorkspaceError: the log has no genesis record.
        """
        if self._goal_id is None:
            goal_id = self._advance()["kernel"]["goal_id"]
            if goal_id is None:
                raise WorkspaceError("this log has no workspace record", hint="run `loopx init`")
            self._goal_id = goal_id
        return self._goal_id

    def append_genesis(self, payload: dict[str, Any], *, agent_id: str) -> Record:
        """Write the workspace record; only ever the first record of a log."""
        from loopx.kernel.kinds import Author, prepare

        payload = {"rules_version": self.domains.rules, **payload}  # a new log: today's rules
        record = prepare({"payload": payload}, Author(goal_id=payload["goal_id"],
                         agent_id=agent_id, lane_role="owner"),
                         kind="workspace_v0", allow=frozenset({"init"}))

        def build(head: Cursor, now: str) -> list[Record]:
            if head.seq != 0:
                raise WorkspaceError("this log already has records; it is initialised")
            return [record]

        return self.store.append(build)[0]


def _through(entries: Iterator[tuple[Record, Cursor]],
             seq: int) -> Iterator[tuple[Record, Cursor]]:
    """``entries`` up to and including the record ``seq``."""
    for record, cursor in entries:
        yield record, cursor
        if cursor.seq >= seq:
            return
