"""Appending to a PostgreSQL log, in one round trip when it can be: a plain batch is sealed by
the server on the head it locks (``loopx_append_sealed_v2``); a built batch (its write checks run
against the head this client knows) is committed by ``loopx_append`` only if that is still the
head (else nothing is written, and the new head and the lines before it come back for the
builder to run again), and under the head row's lock while others keep overtaking it. Either
way nothing is acknowledged before its commit is flushed, and a batch whose acknowledgement was
lost is found by record id rather than written twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from loopx.kernel.canonical import GENESIS_HASH
from loopx.kernel.errors import (
    ConflictError,
    FieldProblem,
    IntegrityError,
    RecordRejected,
)
from loopx.kernel.store.base import (
    MAX_BATCH_BYTES,
    MAX_RECORD_BYTES,
    BatchBuilder,
    Cursor,
    Encoded,
    Record,
    batch_ts,
    encode,
    seal,
)
from loopx.kernel.store.fs import FAULT_ENV, fault
from loopx.kernel.store.postgres_rows import (
    columns,
    parsed,
    refuse_size,
    sealing_input,
    without_store_fields,
)
from loopx.kernel.store.postgres_session import PgSession, backoff, transient
from loopx.kernel.store.postgres_sql import (
    APPEND,
    APPEND_SEALED,
    CATCH_UP_LINES,
    LOCK_HEAD,
    SCHEMA,
    SIZE_STATE,
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
        """Create the tables and the append routines (if missing) and this log's head row
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
                    if not callable(batch) and expect_seq is None:
                        return self._append_sealed(conn, batch)
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

    def _append_sealed(self, conn: psycopg.Connection[Any],
                       batch: list[Encoded]) -> list[Record]:
        """One round trip: the server seals the batch on the head it locks, commits, and waits
        for the flush; its answer is checked by sealing the batch here too."""
        import psycopg

        if not batch:
            return []
        records, faulting = [e.record for e in batch], bool(os.environ.get(FAULT_ENV))
        params = (self.log, self._clock() if self._clock is not None else None, self.channel,
                  *sealing_input(batch), MAX_RECORD_BYTES, MAX_BATCH_BYTES,
                  not faulting)  # faulting: the procedure leaves its COMMIT to _round_trip
        try:
            row = self._round_trip(conn, APPEND_SEALED, params, records, faulting=faulting)
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == SIZE_STATE:
                refuse_size(batch, self._seen or Cursor())
            raise
        if row is None:
            return self._committed(conn, records)
        seq, digest, ts, head_hash = row
        if seq is None:
            raise _Missing
        sealed = seal([batch], Cursor(seq, digest), ts)
        if sealed.head_hash != head_hash:  # (each line holds the hash of the one before)
            raise IntegrityError(f"the server sealed seq {seq + 1} differently from this client:"
                                 " stored as the server sealed it, not acknowledged",
                                 seq=seq + 1, hint="run `loopx verify`; the server's "
                                 "loopx_append_sealed_v2 procedure may be from another version")
        self._seen = Cursor(sealed.head_seq, sealed.head_hash, ts, (sealed.head_seq,))
        return sealed.records

    def _append_optimistic(self, conn: psycopg.Connection[Any],
                           batch: Sequence[Record | Encoded] | BatchBuilder,
                           expect_seq: int | None) -> list[Record] | None:
        """One round trip; None when the head had moved (nothing written, head learnt)."""
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
            now_head = head if fresh else self._read_head(conn)
            return [] if (now_head.seq, now_head.hash) == (head.seq, head.hash) else None
        sealed = seal([records], head, now)
        lines = sealed.data.split(b"\n")[:-1]
        params = (self.log, head.seq, head.hash, None if self._clock else clock, CLOCK_SLACK,
                  self.channel, sealed.head_hash, sealed.head_ts, CATCH_UP,
                  *columns(sealed.records).values(), lines)
        row = self._round_trip(conn, APPEND, params, sealed.records,
                               faulting=bool(os.environ.get(FAULT_ENV)))
        if row is None:
            return self._committed(conn, sealed.records)
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

    def _round_trip(self, conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...],
                    records: list[Record], *, faulting: bool) -> tuple[Any, ...] | None:
        """Send one statement that commits ``records`` and answers once they are flushed (in an
        explicit transaction split by the fault hooks when ``faulting``: tests); None when their
        record ids were stored already (a duplicate, or this batch retried).

        Raises:
            _Unknown: the connection failed while the statement was on its way.
        """
        import psycopg
        import psycopg.errors as pe

        action = None
        committing = False
        try:
            if faulting:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    cur = conn.execute(query, params)
                action = fault("pg-commit")  # pause: rows in, head locked, no COMMIT
                if action == "reset":  # the connection drops before COMMIT is sent
                    conn.close()
                    raise psycopg.OperationalError("test fault: connection lost before COMMIT")
                committing = True
                conn.execute("COMMIT")
            else:
                committing = True
                cur = self._cursor(conn).execute(query, params)
            row = cur.fetchone()
        except (pe.UndefinedFunction, pe.UndefinedTable):
            self._rollback(conn)
            raise _Missing from None
        except pe.UniqueViolation:
            self._rollback(conn)
            return None
        except psycopg.Error as exc:
            self._failed(conn, exc, records, committing=committing)
        if action == "lostack":  # tests: committed, but the client never heard so
            conn.close()
            raise _Unknown(records, psycopg.OperationalError("test fault: connection lost "
                                                             "during COMMIT"))
        assert row is not None
        return tuple(row)

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
            self._failed(conn, exc, sealed_records, committing=committing)
        except BaseException:
            self._rollback(conn)
            raise

    def _failed(self, conn: psycopg.Connection[Any], exc: Exception, records: list[Record], *,
                committing: bool) -> NoReturn:
        """Raise for a failed statement: a server's refusal (nothing committed) as is, after a
        rollback; a connection lost while it or its COMMIT was on its way as :class:`_Unknown`."""
        if committing and (getattr(exc, "sqlstate", None) is None or transient(exc)):
            raise _Unknown(records, exc) from None
        self._rollback(conn)
        raise exc

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


def _conflict(seq: int, expected: int) -> ConflictError:
    return ConflictError(f"log is at seq {seq}, not the expected {expected}",
                         hint="re-read the log and retry")
