"""The PostgreSQL backend: the same records, bytes and hash chain as the file store, in a
database that agents on many hosts share.

Two tables hold every log of a database, keyed by the log's name: ``loopx_record`` (one row
per record: the exact canonical line, its seq, batch_end, record_id, prev_hash, hash and ts)
and ``loopx_head`` (one row per log: the committed head). An append is one transaction: lock
the log's head row (``SELECT ... FOR UPDATE``; appends to one log queue there, other logs are
not held up), read the server's clock, run the batch builder against that head, seal with the
shared :func:`~loopx.kernel.store.base.seal`, insert the rows, move the head, ``NOTIFY``, and
COMMIT. The caller is told the records are stored only once COMMIT has returned.

psycopg is imported here and nowhere else, so only a ``postgresql://`` store needs it.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from loopx.kernel.canonical import GENESIS_HASH
from loopx.kernel.errors import (
    ConflictError,
    FieldProblem,
    IntegrityError,
    LockTimeout,
    NotFound,
    RecordRejected,
    StorageError,
)
from loopx.kernel.store.base import (
    BatchBuilder,
    Clock,
    Cursor,
    Encoded,
    Record,
    Store,
    batch_ts,
    encode,
    seal,
)
from loopx.kernel.store.fs import fault
from loopx.kernel.store.location import parse_postgres, redact

if TYPE_CHECKING:
    import psycopg

PAGE = 2000  # records fetched per query while reading
SEGMENT_RECORDS = 50_000  # records per "segment" handed to verify (cut at batch ends)
_T = TypeVar("_T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS loopx_head (
    log text PRIMARY KEY,
    seq bigint NOT NULL,
    hash text NOT NULL,
    ts text
);
CREATE TABLE IF NOT EXISTS loopx_record (
    log text NOT NULL,
    seq bigint NOT NULL,
    batch_end bigint NOT NULL,
    record_id text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    ts text NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (log, seq),
    UNIQUE (log, record_id)
);
CREATE TABLE IF NOT EXISTS loopx_sync (
    pid integer PRIMARY KEY,
    n bigint NOT NULL
);
"""
# The outer select list is evaluated after the row lock is granted, so the clock is read once
# this writer holds the log, not before it queued.
LOCK_HEAD = """
SELECT h.seq, h.hash, h.ts,
       to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM (SELECT seq, hash, ts FROM loopx_head WHERE log = %s FOR UPDATE) h
"""
WRITE = """
WITH ins AS (
    INSERT INTO loopx_record (log, seq, batch_end, record_id, prev_hash, hash, ts, line)
    SELECT %(log)s, t.seq, t.batch_end, t.record_id, t.prev_hash, t.hash, t.ts, t.line
    FROM unnest(%(seqs)s::bigint[], %(ends)s::bigint[], %(ids)s::text[], %(prevs)s::text[],
                %(hashes)s::text[], %(tss)s::text[], %(lines)s::bytea[])
         AS t(seq, batch_end, record_id, prev_hash, hash, ts, line)
)
UPDATE loopx_head SET seq = %(head_seq)s, hash = %(head_hash)s, ts = %(ts)s
WHERE log = %(log)s
RETURNING pg_notify(%(channel)s, %(head_seq)s::text)
"""
# One row per server process: a tiny write that makes its transaction's COMMIT wait for the
# WAL flush, without contending with other writers.
SYNC = """
INSERT INTO loopx_sync (pid, n) VALUES (pg_backend_pid(), 1)
ON CONFLICT (pid) DO UPDATE SET n = loopx_sync.n + 1
"""
SERVER_NOW = """SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC',
                               'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""

# SQLSTATE classes after which trying again on a new connection can succeed: the connection
# broke (08), the server is shutting down or starting (57P01-57P03), too many connections (53300).
_TRANSIENT = ("08", "57P01", "57P02", "57P03", "53300")


class _Unknown(Exception):
    """The connection failed while COMMIT was in flight: the batch may or may not be stored."""

    def __init__(self, records: list[Record], cause: Exception) -> None:
        super().__init__(str(cause))
        self.records = records
        self.cause = cause


class _Missing(Exception):
    """The log has no head row yet (never created)."""


class PostgresStore(Store):
    """One log in a PostgreSQL database. One instance per thread; any number of processes on
    any number of hosts."""

    def __init__(self, location: str, *, clock: Clock | None = None, lock_timeout: float = 60.0,
                 retry_seconds: float = 30.0, connect_timeout: float = 10.0) -> None:
        parsed = parse_postgres(location)
        self.log = parsed.log
        self.display = parsed.display  # the location without its password
        self.channel = f"loopx:{self.log}"
        self._conninfo = parsed.conninfo
        self._clock = clock  # None: the server's clock (``clock_timestamp()``)
        self.lock_timeout = lock_timeout
        self.retry_seconds = retry_seconds
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._mutex = threading.RLock()
        self._locked: Cursor | None = None  # the head an append in progress holds
        self._listening = False

    # -- connections ----------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        import psycopg

        conn = psycopg.connect(self._conninfo, autocommit=True, application_name="loopx",
                               connect_timeout=max(1, int(self.connect_timeout)))
        # An acknowledgement must mean the commit is on disk: never let a session default of
        # synchronous_commit=off weaken it (stronger settings, such as remote_apply, are kept).
        # A writer stuck mid-transaction (stopped, hung) must not hold the log forever.
        row = conn.execute(
            "SELECT current_setting('synchronous_commit'),"
            " set_config('lock_timeout', %s, false),"
            " set_config('idle_in_transaction_session_timeout', %s, false)",
            (f"{int(self.lock_timeout * 1000)}ms", f"{int(self.lock_timeout * 1000)}ms"),
        ).fetchone()
        sync = row[0] if row else "on"
        if sync == "off":
            conn.execute("SET synchronous_commit = on")
        self._conn = conn
        self._listening = False
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close
                conn.close()

    def _retrying(self, doing: str, step: Callable[[psycopg.Connection[Any]], _T], *,
                  outcome: str = "") -> _T:
        """Run ``step`` on a connection, reconnecting after a transient failure until
        ``retry_seconds`` have passed; anything else becomes a loopx error."""
        import psycopg

        deadline = time.monotonic() + self.retry_seconds
        delay = 0.05
        while True:
            try:
                with self._mutex:
                    return step(self._connection())
            except psycopg.Error as exc:
                self._drop_if_broken(exc)
                if not _transient(exc) or time.monotonic() + delay > deadline:
                    self._fail(exc, doing, outcome)
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    def _drop_if_broken(self, exc: Exception) -> None:
        conn = self._conn
        if conn is None or conn.closed or conn.broken or _transient(exc):
            self._drop()

    def _fail(self, exc: Exception, doing: str, outcome: str) -> NoReturn:
        import psycopg.errors as pe

        if isinstance(exc, pe.LockNotAvailable):
            raise LockTimeout(f"could not lock the log {self.log!r} on {self.display} in "
                              f"{self.lock_timeout:g} s",
                              hint="another writer may be stuck; a stuck transaction ends after "
                                   "the same time") from None
        state = getattr(exc, "sqlstate", None) or ("28000" if _auth_problem(exc) else "08001")
        reason = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        raise StorageError(f"cannot {doing} the PostgreSQL store {self.display}: {reason}",
                           path=self.display, errno_name=state, hint=_hint(state),
                           outcome=outcome) from None

    # -- layout ---------------------------------------------------------------------------

    def create(self) -> None:
        """Create the tables (if missing) and this log's head row (idempotent)."""

        def step(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                # Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('loopx schema'))")
                conn.execute(SCHEMA)
                conn.execute("INSERT INTO loopx_head (log, seq, hash, ts) VALUES (%s, 0, %s, "
                             "NULL) ON CONFLICT (log) DO NOTHING", (self.log, GENESIS_HASH))

        self._retrying("create the log in", step, outcome="nothing was written")

    def drop(self) -> None:
        """Delete this log's records and head (the tests and benchmarks clean up with it)."""

        def step(conn: psycopg.Connection[Any]) -> None:
            import psycopg.errors as pe

            try:
                with conn.transaction():
                    conn.execute("DELETE FROM loopx_record WHERE log = %s", (self.log,))
                    conn.execute("DELETE FROM loopx_head WHERE log = %s", (self.log,))
            except pe.UndefinedTable:
                pass

        self._retrying("delete the log in", step)

    # -- reading --------------------------------------------------------------------------

    def _rows(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        import psycopg.errors as pe

        def step(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            try:
                return conn.execute(query, params).fetchall()
            except pe.UndefinedTable:
                if conn.info.transaction_status != 0:  # inside an append: let it fail
                    raise
                return []  # no log was ever created here: an empty one

        if self._locked is not None:  # inside our own append's transaction: no retries
            with self._mutex:
                return step(self._connection())
        return self._retrying("read", step)

    def read(self, after: Cursor | None = None) -> Iterator[tuple[Record, Cursor]]:
        seq, prev = (after.seq, after.hash) if after else (0, GENESIS_HASH)
        while True:
            locked = self._locked
            if locked is not None and seq >= locked.seq:
                return  # the builder of our own append: nothing can follow the locked head
            rows = self._rows("SELECT line FROM loopx_record WHERE log = %s AND seq > %s "
                              "ORDER BY seq LIMIT %s", (self.log, seq, PAGE))
            for (line,) in rows:
                record = _checked(bytes(line), seq + 1, prev)
                seq, prev = record["seq"], record["hash"]
                yield record, Cursor(seq, prev, record["ts"], (seq,))
            if len(rows) < PAGE:
                return

    def head(self) -> Cursor:
        if self._locked is not None:
            return self._locked
        rows = self._rows("SELECT seq, hash, ts FROM loopx_head WHERE log = %s", (self.log,))
        if not rows or rows[0][0] == 0:
            return Cursor()
        seq, digest, ts = rows[0]
        return Cursor(seq, digest, ts, (seq,))

    def seek(self, seq: int) -> Cursor:
        if seq == 0:
            return Cursor()
        rows = self._rows("SELECT hash, ts FROM loopx_record WHERE log = %s AND seq = %s",
                          (self.log, seq))
        if not rows:
            raise NotFound(f"the log has no record with seq {seq}")
        return Cursor(seq, rows[0][0], rows[0][1], (seq,))

    def get(self, seq: int) -> Record:
        rows = self._rows("SELECT line FROM loopx_record WHERE log = %s AND seq = %s",
                          (self.log, seq))
        if not rows:
            raise NotFound(f"the log has no record with seq {seq}")
        return _parsed(bytes(rows[0][0]))

    def find(self, record_id: str) -> Record:
        rows = self._rows("SELECT line FROM loopx_record WHERE log = %s AND record_id = %s",
                          (self.log, record_id))
        if not rows:
            raise NotFound(f"no record with id {record_id!r}")
        return _parsed(bytes(rows[0][0]))

    def cursor_matches(self, cursor: Cursor) -> bool:
        if cursor.seq == 0:
            return True
        rows = self._rows("SELECT hash FROM loopx_record WHERE log = %s AND seq = %s",
                          (self.log, cursor.seq))
        return bool(rows) and rows[0][0] == cursor.hash

    def raw_segments(self) -> Iterator[tuple[str, int | None, bytes]]:
        """The stored lines, newline-terminated exactly as the file store's segments hold them,
        cut into pieces of about 50,000 records at batch ends."""
        seq, first, chunks = 0, 1, []
        while True:
            rows = self._rows("SELECT seq, batch_end, line FROM loopx_record WHERE log = %s "
                              "AND seq > %s ORDER BY seq LIMIT %s", (self.log, seq, PAGE))
            for seq, batch_end, line in rows:
                chunks.append(bytes(line) + b"\n")
                if seq == batch_end and len(chunks) >= SEGMENT_RECORDS:
                    yield self._segment_name(first), first, b"".join(chunks)
                    first, chunks = seq + 1, []
            if len(rows) < PAGE:
                break
        if chunks or first == 1:
            yield self._segment_name(first), first, b"".join(chunks)

    def _segment_name(self, first: int) -> str:
        return f"{self.log}:{first:012d}"

    def now(self) -> str:
        """The server's clock (or the test clock given), before the never-go-back rule."""
        if self._clock is not None:
            return self._clock()
        return str(self._rows(SERVER_NOW, ())[0][0])

    # -- writing --------------------------------------------------------------------------

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
        while True:
            try:
                with self._mutex:
                    if pending is not None:
                        stored = self._stored(self._connection(), pending)
                        if stored is not None:
                            return stored
                        pending = None
                    return self._append_once(self._connection(), batch, expect_seq)
            except _Missing:
                self.create()
                continue
            except _Unknown as exc:
                pending = exc.records
                error: Exception = exc.cause
            except psycopg.Error as exc:
                error = exc
            self._drop_if_broken(error)
            if not _transient(error) or time.monotonic() + delay > deadline:
                outcome = ("the batch may or may not be stored: look for its first record id "
                           f"{pending[0]['record_id']} with `loopx show`" if pending is not None
                           else "nothing was written")
                self._fail(error, "append to", outcome)
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    def _append_once(self, conn: psycopg.Connection[Any],
                     batch: Sequence[Record | Encoded] | BatchBuilder,
                     expect_seq: int | None) -> list[Record]:
        import psycopg
        import psycopg.errors as pe

        committing = False
        sealed_records: list[Record] = []
        try:
            # BEGIN with the head lock, then the write with COMMIT: two round trips. The
            # COMMIT does not wait for the disk, so the log is free for the next writer at
            # once; the flush is awaited after it (below), and shared with other writers'.
            try:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    conn.execute("SET LOCAL synchronous_commit = off")
                    cur = conn.execute(LOCK_HEAD, (self.log,))
                row = cur.fetchone()
            except pe.UndefinedTable:
                row = None
            if row is None:
                raise _Missing
            seq, digest, ts, server_now = row
            head = Cursor(seq, digest, ts, (seq,)) if seq else Cursor()
            if expect_seq is not None and head.seq != expect_seq:
                raise ConflictError(f"log is at seq {head.seq}, not the expected {expect_seq}",
                                    hint="re-read the log and retry")
            now = batch_ts(head, self._clock() if self._clock is not None else server_now)
            self._locked = head
            try:
                records = batch(head, now) if callable(batch) else batch
            finally:
                self._locked = None
            if not records:
                conn.execute("ROLLBACK")
                return []
            sealed = seal([records], head, now)
            sealed_records = sealed.records
            lines = sealed.data.split(b"\n")[:-1]
            action = fault("pg-commit")
            if action == "reset":  # tests: the connection drops before COMMIT reaches the server
                conn.close()
                raise psycopg.OperationalError("test fault: connection lost before COMMIT")
            committing = True
            try:
                with conn.pipeline():
                    conn.execute(WRITE, {
                        "log": self.log, "ts": sealed.head_ts, "channel": self.channel,
                        "seqs": [r["seq"] for r in sealed.records],
                        "ends": [r["batch_end"] for r in sealed.records],
                        "ids": [r["record_id"] for r in sealed.records],
                        "prevs": [r["prev_hash"] for r in sealed.records],
                        "hashes": [r["hash"] for r in sealed.records],
                        "tss": [sealed.head_ts] * len(lines), "lines": lines,
                        "head_seq": sealed.head_seq, "head_hash": sealed.head_hash,
                    })
                    conn.execute("COMMIT")
            except pe.UniqueViolation:
                self._rollback(conn)
                return self._duplicate(conn, sealed.records)
            if action == "lostack":  # tests: committed, but the client never heard so
                conn.close()
                raise psycopg.OperationalError("test fault: connection lost during COMMIT")
            # Durable before acknowledged: a transaction that writes (one row of this
            # connection's own) commits under the session's synchronous_commit (on or
            # stronger), so it returns only once the WAL is flushed (and replicated, if
            # configured) past its commit record, which follows ours. Concurrent writers'
            # flushes are one device flush. (A transaction that writes nothing is not flushed
            # at commit, even with an xid: a crash test lost acknowledged batches that way.)
            try:
                conn.execute(SYNC)
            except psycopg.Error as exc:  # committed, not yet known to be durable
                raise _Unknown(sealed_records, exc) from None
            return sealed.records
        except psycopg.Error as exc:
            # The server's own refusal means nothing was committed; a lost connection while
            # COMMIT was on its way leaves the outcome to be looked up.
            if committing and (getattr(exc, "sqlstate", None) is None or _transient(exc)):
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
        if not rows:
            return None
        stored = self._duplicate(conn, records)
        conn.execute(SYNC)  # committed; acknowledged only once surely on disk
        return stored

    def _duplicate(self, conn: psycopg.Connection[Any], records: list[Record]) -> list[Record]:
        """A batch whose record ids are already stored: the stored batch, when it is this very
        batch committed before (a retry), else a refusal naming the id."""
        ids = [r["record_id"] for r in records]
        rows = conn.execute("SELECT line FROM loopx_record WHERE log = %s AND record_id = ANY(%s)"
                            " ORDER BY seq", (self.log, ids)).fetchall()
        stored = [_parsed(bytes(line)) for (line,) in rows]
        body = _without_store_fields
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
                chunk.append(_parsed(line))
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
                    "seqs": [r["seq"] for r in records],
                    "ends": [r["batch_end"] for r in records],
                    "ids": [r["record_id"] for r in records],
                    "prevs": [r["prev_hash"] for r in records],
                    "hashes": [r["hash"] for r in records],
                    "tss": [r["ts"] for r in records],
                    "lines": lines, "head_seq": last["seq"], "head_hash": last["hash"],
                })

        self._retrying("copy into", step, outcome="records copied so far stay; delete the log "
                                                  "and copy again")

    # -- waiting --------------------------------------------------------------------------

    def wait(self, after_seq: int, timeout: float, *,
             stop: Callable[[], bool] | None = None) -> bool:
        """See :meth:`Store.wait`: LISTEN on the log's channel, then read the head once and
        again only when a notification arrives; an idle waiter sends no queries (``stop`` is
        asked every 0.2 s, locally)."""

        def listen(conn: psycopg.Connection[Any]) -> None:
            if not self._listening:
                conn.execute(f'LISTEN "{self.channel}"')
                self._listening = True

        deadline = time.monotonic() + timeout
        while True:
            self._retrying("listen on", listen)  # before reading the head: no missed NOTIFY
            if self.head().seq > after_seq:
                return True
            conn = self._connection()
            woken = False
            # psycopg keeps notifications that arrive between calls (3.3); with older ones a
            # notification landing just before notifies() could be missed, so the head is
            # read again every 5 s whatever happens (one query per 5 s while idle).
            recheck = time.monotonic() + 5.0
            try:
                while not woken and time.monotonic() < recheck:
                    left = deadline - time.monotonic()
                    if left <= 0 or (stop is not None and stop()):
                        return False
                    for _ in conn.notifies(timeout=min(0.2, left), stop_after=1):
                        woken = True
            except Exception:  # noqa: BLE001  (a broken connection: listen again, re-read)
                self._drop()
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        with self._mutex:
            self._drop()


def _transient(exc: Exception) -> bool:
    import psycopg

    state = getattr(exc, "sqlstate", None)
    if state is None:
        # No SQLSTATE: the client lost or could not open the connection.
        return isinstance(exc, psycopg.OperationalError) and not _auth_problem(exc)
    return state.startswith(_TRANSIENT)


def _auth_problem(exc: Exception) -> bool:
    """Refused at login (no SQLSTATE reaches a client that never connected): retrying the same
    credentials cannot help."""
    text = str(exc)
    return any(words in text for words in ("password authentication failed",
                                           "no password supplied", "authentication failed",
                                           "does not exist", "no pg_hba.conf entry"))


def _hint(state: str) -> str:
    if state.startswith("28"):
        return ("check the user and the password: loopx takes it from LOOPX_STORE, PGPASSWORD or "
                "~/.pgpass, never from workspace.json")
    if state == "3D000":
        return "create the database first (createdb), or fix the database name in the URL"
    if state.startswith("42"):
        return "the loopx tables are missing or not readable by this user: check its grants"
    return ("check that the server is running and reachable from this host (host, port, "
            "pg_hba.conf); loopx retried for a while before giving up")


def _parsed(line: bytes) -> Record:
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
        raise IntegrityError("a stored row is not a sealed record", hint="run `loopx verify`")
    return record


def _checked(line: bytes, expected: int, prev: str) -> Record:
    record = _parsed(line)
    if record["seq"] != expected:
        raise IntegrityError(f"expected seq {expected}, found {record['seq']}", seq=expected,
                             hint="run `loopx verify`")
    if record.get("prev_hash") != prev:
        raise IntegrityError(f"seq {expected} does not chain to seq {expected - 1}",
                             seq=expected, hint="run `loopx verify`")
    return record


def _without_store_fields(record: Record) -> Record:
    return {k: v for k, v in record.items()
            if k not in ("seq", "ts", "batch_end", "prev_hash", "hash")}
