"""The single checked append path, and the caught-up folded state of one log.

Every write in loopx goes through :meth:`Ledger.append`: the batch is checked against the
schemas (and for tokens) before the lock, then sealed and written in one locked step. Checks
against current state belong in a store batch builder, which runs under that same lock.
Everything derived is read through :meth:`Ledger.state`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopx.checkpoint import load_checkpoint, save_checkpoint
from loopx.errors import WorkspaceError
from loopx.fold import REDUCERS, Reducer, State, advance, fold_version
from loopx.store.base import Cursor, Record, Store

CHECKPOINT_EVERY = 1000


class Ledger:
    """A store plus the fold over it. One instance per thread; any number of processes."""

    def __init__(self, store: Store, *, checkpoint_path: Path | None = None,
                 checkpoint_every: int = CHECKPOINT_EVERY,
                 reducers: Sequence[Reducer] = REDUCERS) -> None:
        self.store = store
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every
        self.reducers = tuple(reducers)
        self.version = fold_version(self.reducers)
        self.checkpoint_status = "not loaded"
        self._state: State | None = None
        self._saved_seq = 0
        self._goal_id: str | None = None

    def state(self) -> State:
        """State folded up to the committed head; saves a checkpoint when far enough ahead."""
        state = self._advance()
        if (self.checkpoint_path is not None
                and state.seq - self._saved_seq >= self.checkpoint_every):
            try:
                save_checkpoint(self.checkpoint_path, state, self.version)
                self._saved_seq = state.seq
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

    def append(self, docs: Any, *, agent_id: str | None = None, lane_role: str | None = None,
               capability: str | None = None, kind: str | None = None,
               expect_seq: int | None = None) -> list[Record]:
        """Check and commit a batch (a draft or a list of drafts); returns the sealed records.

        Raises:
            RecordRejected: a malformed draft, naming the field; nothing written.
            WorkspaceError: the log has no genesis record.
            ConflictError: the head is not at ``expect_seq``.
        """
        from loopx.records.registry import Author, prepare_batch  # pydantic loads only to write

        goal_id = self._goal_id or self.state()["kernel"]["goal_id"]
        if goal_id is None:
            raise WorkspaceError("this log has no workspace record", hint="run `loopx init`")
        author = Author(goal_id=goal_id, agent_id=agent_id, lane_role=lane_role,
                        capability=capability)
        self._goal_id = goal_id  # fixed by the genesis record for the life of the workspace
        records = prepare_batch(docs, author, kind=kind)
        return self.store.append(records, expect_seq=expect_seq)

    def append_genesis(self, payload: dict[str, Any], *, agent_id: str) -> Record:
        """Write the workspace record; only ever the first record of a log."""
        from loopx.records.registry import Author, prepare

        record = prepare({"payload": payload}, Author(goal_id=payload["goal_id"],
                         agent_id=agent_id, lane_role="owner"),
                         kind="workspace_v0", allow=frozenset({"init"}))

        def build(head: Cursor) -> list[Record]:
            if head.seq != 0:
                raise WorkspaceError("this log already has records; it is initialised")
            return [record]

        return self.store.append(build)[0]
