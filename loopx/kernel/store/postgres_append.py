"""Appending to a PostgreSQL log: optimistically in one round trip against the head this client
last saw, under the head row's lock when that keeps failing, and idempotently by record id when
an acknowledgement was lost.

An optimistic append seals the batch (its builder run against the known head, so the write
checks see that head) and sends one statement in autocommit, ``loopx_append``: rows in and head
moved only if the head is still the one sealed against, committed and flushed before it
answers, like a plain INSERT. When the head has moved nothing is written; the answer brings the
new head and the lines in between, and the builder runs again on them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from loopx.kernel.canonical import GENESIS_HASH
from loopx.kernel.errors import (
    ConflictError,
    FieldProblem,
    IntegrityError,
    RecordRejected,
)
from loopx.kernel.store.base import (
    BatchBuilder,
    Cursor,
    Encoded,
    Record,
    batch_ts,
    encode,
    seal,
)
from loopx.kernel.store.fs import FAULT_ENV, fault
from loopx.kernel.store.postgres_rows import columns, parsed, without_store_fields
from loopx.kernel.store.postgres_session import PgSession, backoff, transient
from loopx.kernel.store.postgres_sql import (
    APPEND,
    CATCH_UP_LINES,
    LOCK_HEAD,
    SCHEMA,
    SYNC,
    WRITE,
)

if TYPE_CHECKING:
    import psycopg

CATCH_UP = 500  # lines a refused optimistic append brings back (more: the reader queries)
CLOCK_SLACK = 2.0  # seconds this host's estimate of the server's clock may be off
OPTIMISTIC_TRIES = 2  # refused optimistic appends before one waits for the head row's lock
# After a refusal, this many appends wait for the lock before trying optimistically again:
# while other writers keep overtaking, a refused attempt is a round trip spent for nothing.
CONTENDED_RUN = 16


class _Unknown(Exception):
    """The connection failed while COMMIT was in flight: the batch may or may not be stored."""

    def __init__(self, records: list[Record], cause: Exception) -> None:
        super().__init__(str(cause))
        self.records = records
        self.cause = cause


class _Missing(Exception):
    """The log has no head row (or the database lacks the tables or the append function)."""


class PgAppender(PgSession):
    """The writing half of :class:`~loopx.kernel.store.postgres.PostgresStore`."""

    def __init__(self, location: str, **options: Any) -> None:
        super().__init__(location, **options)
        self._locked: Cursor | None = None  # the head a batch is being built against
        self._seen: Cursor | None = None  # the newest committed head this client has seen
        self._ahead: tuple[int, list[bytes]] = (0, [])  # committed lines from seq, unread
        self._contended = 0  # appends left to make under the lock (see CONTENDED_RUN)

    def create(self) -> None:
        """Create the tables and the append function (if missing) and this log's head row
        (idempotent)."""

        def step(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                # Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('loopx schema'))")
                conn.execute(SCHEMA)
                conn.execute("INSERT INTO loopx_head (log, seq, hash, ts) VALUES (%s, 0, %s, "
                             "NULL) ON CONFLICT (log) DO NOTHING", (self.log, GENESIS_HASH))

        self._retrying("create the log in", step, outcome="nothing was written")

    def append(self, batch: Sequence[Record | Encoded] | BatchBuilder, *,
               expect_seq: int | None = None) -> list[Record]:
        """See :meth:`Store.append`. A connection lost before COMMIT is retried (the builder
        runs again); lost during COMMIT, the batch is looked up by its first record id and
        returned if it is there, so a retry never writes it twice. Raises StorageError when
        the server stays unreachable for ``retry_seconds``, with nothing acknowledged."""
        import psycopg

        if not callable(batch):
            batch = [encode(record) for record in batch]
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.05
        pending: list[Record] | None = None
        refused = 0
        while True:
            try:
                with self._mutex:
                    conn = self._connection()
                    if pending is not None:
                        stored = self._stored(conn, pending)
                        if stored is not None:
                            return stored
                        pending = None
                    if refused >= OPTIMISTIC_TRIES or self._contended > 0:
                        self._contended = max(0, self._contended - 1)
                        return self._append_locked(conn, batch, expect_seq)
                    written = self._append_optimistic(conn, batch, expect_seq)
                    if written is not None:
                        return written
                    refused += 1
                    continue
            except _Missing:
                self.create()
                continue
            except _Unknown as exc:
                pending = exc.records
                error: Exception = exc.cause
            except psycopg.Error as exc:
                error = exc
            self._drop_if_broken(error)
            if not transient(error) or time.monotonic() + delay > deadline:
                outcome = ("the batch may or may not be stored: look for its first record id "
                           f"{pending[0]['record_id']} with `loopx show`" if pending is not None
                           else "nothing was written")
                self._fail(error, "append to", outcome)
            delay = backoff(delay)

    def _build(self, head: Cursor, now: str,
               batch: Sequence[Record | Encoded] | BatchBuilder) -> Sequence[Record | Encoded]:
        self._locked = head  # reads inside the builder stop at this head
        try:
            return batch(head, now) if callable(batch) else batch
        finally:
            self._locked = None

    def _append_optimistic(self, conn: psycopg.Connection[Any],
                           batch: Sequence[Record | Encoded] | BatchBuilder,
                           expect_seq: int | None) -> list[Record] | None:
        """One round trip; None when the head had moved (nothing written, head learnt)."""
        import psycopg
        import psycopg.errors as pe

        head, fresh = self._seen, False
        if head is None or (expect_seq is not None and head.seq != expect_seq):
            head, fresh = self._read_head(conn), True
        if expect_seq is not None and head.seq != expect_seq:
            raise _conflict(head.seq, expect_seq)
        clock = self._server_now()
        now = batch_ts(head, clock)
        records = self._build(head, now, batch)
        if not records:
            # Nothing to write is a decision too: it must have been made at the real head.
            return [] if fresh or _same(self._read_head(conn), head) else None
        sealed = seal([records], head, now)
        lines = sealed.data.split(b"\n")[:-1]
        params = (self.log, head.seq, head.hash, None if self._clock else clock, CLOCK_SLACK,
                  self.channel, sealed.head_hash, sealed.head_ts, CATCH_UP,
                  *columns(sealed.records).values(), lines)
        action = None
        committing = False
        try:
            if os.environ.get(FAULT_ENV):  # tests: the same call in an explicit transaction
                with conn.pipeline():
                    conn.execute("BEGIN")
                    cur = conn.execute(APPEND, params)
                action = fault("pg-commit")  # pause: rows in, head locked, no COMMIT
                if action == "reset":  # the connection drops before COMMIT is sent
                    conn.close()
                    raise psycopg.OperationalError("test fault: connection lost before COMMIT")
                committing = True
                conn.execute("COMMIT")
            else:
                # One statement in autocommit: it returns once committed and flushed.
                committing = True
                cur = conn.execute(APPEND, params)
            row = cur.fetchone()
        except (pe.UndefinedFunction, pe.UndefinedTable):
            self._rollback(conn)
            raise _Missing from None
        except pe.UniqueViolation:
            self._rollback(conn)
            return self._committed(conn, sealed.records)
        except psycopg.Error as exc:
            # The server's own refusal means nothing was committed; a lost connection while
            # the statement (or COMMIT) was on its way leaves the outcome to be looked up.
            if committing and (getattr(exc, "sqlstate", None) is None or transient(exc)):
                raise _Unknown(sealed.records, exc) from None
            self._rollback(conn)
            raise
        if action == "lostack":  # tests: committed, but the client never heard so
            conn.close()
            raise _Unknown(sealed.records, psycopg.OperationalError("test fault: connection "
                                                                    "lost during COMMIT"))
        assert row is not None
        status, seq, digest, ts, server_now, ahead = row
        if status == "missing":
            raise _Missing
        self._seen = Cursor(seq, digest, ts, (seq,)) if seq else Cursor()
        if status == "ok":
            return sealed.records
        if status == "clock":
            self._set_offset(server_now, time.time())
        else:  # moved: other writers are getting in first
            self._contended = CONTENDED_RUN
            if ahead:
                self._ahead = (head.seq + 1, [bytes(line) for line in ahead])
        if expect_seq is not None and seq != expect_seq:
            raise _conflict(seq, expect_seq)
        return None

    def _read_head(self, conn: psycopg.Connection[Any]) -> Cursor:
        import psycopg.errors as pe

        try:
            row = conn.execute("SELECT seq, hash, ts FROM loopx_head WHERE log = %s",
                               (self.log,)).fetchone()
        except pe.UndefinedTable:
            row = None
        if row is None:
            raise _Missing
        self._seen = Cursor(row[0], row[1], row[2], (row[0],)) if row[0] else Cursor()
        return self._seen

    def _append_locked(self, conn: psycopg.Connection[Any],
                       batch: Sequence[Record | Encoded] | BatchBuilder,
                       expect_seq: int | None) -> list[Record]:
        """Two round trips holding the head row: lock it and read the clock, then write,
        COMMIT and wait for the flush; for when optimistic appends keep being overtaken."""
        import psycopg
        import psycopg.errors as pe

        committing = False
        sealed_records: list[Record] = []
        try:
            # The lines after the head this client knew come back in the same round trip, so
            # the builder catching up does not query while the log is held.
            known = self._seen.seq if self._seen is not None else 0
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute("SET LOCAL synchronous_commit = off")
                cur = conn.execute(LOCK_HEAD, (self.log,))
                ahead = conn.execute(CATCH_UP_LINES, (self.log, known, CATCH_UP))
            row = cur.fetchone()
            if row is None:
                raise _Missing
            self._ahead = (known + 1, [bytes(line) for (line,) in ahead.fetchall()])
            seq, digest, ts, server_now = row
            head = Cursor(seq, digest, ts, (seq,)) if seq else Cursor()
            if expect_seq is not None and head.seq != expect_seq:
                raise _conflict(head.seq, expect_seq)
            now = batch_ts(head, self._clock() if self._clock is not None else server_now)
            records = self._build(head, now, batch)
            if not records:
                conn.execute("ROLLBACK")
                return []
            sealed = seal([records], head, now)
            sealed_records = sealed.records
            committing = True
            with conn.pipeline():
                conn.execute(WRITE, {
                    "log": self.log, "ts": sealed.head_ts, "channel": self.channel,
                    **columns(sealed.records), "tss": [sealed.head_ts] * len(sealed.records),
                    "lines": sealed.data.split(b"\n")[:-1],
                    "head_seq": sealed.head_seq, "head_hash": sealed.head_hash})
                conn.execute("COMMIT")
                conn.execute(SYNC)
            self._seen = Cursor(sealed.head_seq, sealed.head_hash, sealed.head_ts,
                                (sealed.head_seq,))
            return sealed.records
        except pe.UndefinedTable:
            self._rollback(conn)
            raise _Missing from None
        except pe.UniqueViolation:
            self._rollback(conn)
            return self._committed(conn, sealed_records)
        except psycopg.Error as exc:
            if committing and (getattr(exc, "sqlstate", None) is None or transient(exc)):
                raise _Unknown(sealed_records, exc) from None
            self._rollback(conn)
            raise
        except BaseException:
            self._rollback(conn)
            raise

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        if conn.closed or conn.broken:
            return
        try:
            if conn.info.transaction_status != 0:
                conn.execute("ROLLBACK")
        except Exception:  # noqa: BLE001  (the connection is dropped on the next failure)
            self._drop()

    def _stored(self, conn: psycopg.Connection[Any], records: list[Record]) -> list[Record] | None:
        """``records`` as committed, if the batch whose COMMIT went unanswered is there."""
        rows = conn.execute("SELECT seq FROM loopx_record WHERE log = %s AND record_id = %s",
                            (self.log, records[0]["record_id"])).fetchall()
        return self._committed(conn, records) if rows else None

    def _committed(self, conn: psycopg.Connection[Any], records: list[Record]) -> list[Record]:
        """A batch committed earlier (its ids are stored), as stored; acknowledged only once
        surely on disk."""
        stored = self._duplicate(conn, records)
        conn.execute(SYNC)
        return stored

    def _duplicate(self, conn: psycopg.Connection[Any], records: list[Record]) -> list[Record]:
        """A batch whose record ids are already stored: the stored batch, when it is this very
        batch committed before (a retry), else a refusal naming the id."""
        ids = [r["record_id"] for r in records]
        rows = conn.execute("SELECT line FROM loopx_record WHERE log = %s AND record_id = ANY(%s)"
                            " ORDER BY seq", (self.log, ids)).fetchall()
        stored = [parsed(bytes(line)) for (line,) in rows]
        body = without_store_fields
        end = stored[-1]["seq"] if stored else 0
        if ([r["record_id"] for r in stored] == ids
                and [r["seq"] for r in stored] == list(range(end - len(ids) + 1, end + 1))
                and all(r["batch_end"] == end for r in stored)
                and [body(r) for r in stored] == [body(r) for r in records]):
            return stored
        taken = [r["record_id"] for r in stored]
        raise RecordRejected([FieldProblem("record_id", f"{taken[0] if taken else ids[0]} is "
                                           "already in the log; nothing was written")])

    def load(self, batches: Iterable[list[bytes]]) -> None:
        """Store already-sealed lines as they are (``loopx store copy``): whole batches, in
        transactions of about 5,000 records, each continuing the chain from the head it locks.

        Raises:
            ConflictError: the log moved under the copy (someone else appended).
            IntegrityError: a line does not continue the chain.
        """
        self.create()
        chunk: list[Record] = []
        lines: list[bytes] = []
        for batch in batches:
            for line in batch:
                chunk.append(parsed(line))
                lines.append(line)
            if len(chunk) >= 5000:
                self._load_chunk(chunk, lines)
                chunk, lines = [], []
        if chunk:
            self._load_chunk(chunk, lines)

    def _load_chunk(self, records: list[Record], lines: list[bytes]) -> None:
        def step(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                row = conn.execute(LOCK_HEAD, (self.log,)).fetchone()
                if row is None or row[0] != records[0]["seq"] - 1:
                    raise ConflictError("the target log moved while it was being copied into",
                                        hint="copy into a log nobody else writes to")
                prev = row[1]
                for record in records:
                    if record["prev_hash"] != prev:
                        raise IntegrityError(f"seq {record['seq']} does not chain",
                                             seq=record["seq"], hint="run `loopx verify`")
                    prev = record["hash"]
                last = records[-1]
                conn.execute(WRITE, {
                    "log": self.log, "ts": last["ts"], "channel": self.channel,
                    **columns(records), "tss": [r["ts"] for r in records], "lines": lines,
                    "head_seq": last["seq"], "head_hash": last["hash"]})

        self._retrying("copy into", step, outcome="records copied so far stay; delete the log "
                                                  "and copy again")


def _conflict(seq: int, expected: int) -> ConflictError:
    return ConflictError(f"log is at seq {seq}, not the expected {expected}",
                         hint="re-read the log and retry")


def _same(a: Cursor, b: Cursor) -> bool:
    return (a.seq, a.hash) == (b.seq, b.hash)
