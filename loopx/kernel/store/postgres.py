"""The PostgreSQL backend: the same records, bytes and hash chain as the file store, in a
database that agents on many hosts share.

Two tables hold every log of a database, keyed by the log's name: ``loopx_record`` (one row
per record: the exact canonical line, its seq, batch_end, record_id, prev_hash, hash and ts)
and ``loopx_head`` (one row per log: the committed head). Appends (postgres_append.py) commit
only on the head their batch was built and sealed against; the caller is told the records are
stored only once COMMIT has returned and the WAL is flushed past it. This module reads,
waits, and loads copied logs. The schema is in postgres_sql.py, the connection and its retries
in postgres_session.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from loopx.kernel.errors import ConflictError, IntegrityError, NotFound
from loopx.kernel.store.base import Cursor, Record, Store
from loopx.kernel.store.fs import fault
from loopx.kernel.store.moved import Moved
from loopx.kernel.store.postgres_append import PgAppender
from loopx.kernel.store.postgres_rows import checked, columns, parsed
from loopx.kernel.store.postgres_sql import (
    LOCK_HEAD,
    MARK_MOVED,
    READ_MOVED,
    SERVER_NOW,
    WRITE,
)

if TYPE_CHECKING:
    import psycopg

PAGE = 2000  # records fetched per query while reading
SEGMENT_RECORDS = 50_000  # records per "segment" handed to verify (cut at batch ends)


class PostgresStore(PgAppender, Store):
    """One log in a PostgreSQL database. One instance per thread; any number of processes on
    any number of hosts."""

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
        self._seen, self._ahead = None, (0, [])

    # -- moving out -----------------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the log's head row, so that no append from any host gets in, in one transaction
        committed on leaving (rolled back on an error): a move's last steps. Reads inside see
        the log up to its head."""
        import psycopg

        self.create()  # a database from an earlier loopx gets the moved mark's column
        with self._mutex:
            conn = self._connection()
            try:
                conn.execute("BEGIN")
                row = conn.execute(LOCK_HEAD, (self.log,)).fetchone()
                if row is None:
                    raise NotFound(f"no log {self.log!r} on {self.display}")
                seq, digest, ts, _ = row
                self._locked = Cursor(seq, digest, ts, (seq,)) if seq else Cursor()
                yield
                self._locked = None
                conn.execute("COMMIT")  # under the session's synchronous_commit: durable
            except psycopg.Error as exc:
                self._locked = None
                self._rollback(conn)
                self._fail(exc, "lock the log in", "the move is not finished: run the same "
                                                   "command again")
            except BaseException:
                self._locked = None
                self._rollback(conn)
                raise

    def mark_moved(self, to: str, head: Cursor) -> None:
        """Refuse every later append, from any host: the log now lives at ``to`` (shown to
        writers, so no password), from ``head`` (this log's head) on. Call it holding
        :meth:`locked`; the mark commits with it."""
        if self._locked is None or self._locked.seq != head.seq:
            raise ConflictError(f"log is at seq {self.head().seq}, not the copied {head.seq}")
        self._connection().execute(MARK_MOVED, (to, self.log, self.channel))

    def identity(self) -> tuple[Any, ...]:
        """What tells two logs apart whatever URL reached them: the cluster's system
        identifier (set once by initdb), the database and the log's name."""

        def step(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
            import psycopg.errors as pe

            try:
                row = conn.execute("SELECT (SELECT system_identifier FROM pg_control_system()),"
                                   " current_database()").fetchone()
            except (pe.InsufficientPrivilege, pe.UndefinedFunction):
                # A managed server may hide it: the address and port it answers on instead.
                row = conn.execute("SELECT inet_server_addr()::text || ':' || "
                                   "current_setting('port'), current_database()").fetchone()
            return tuple(row or ())

        return (*self._retrying("read", step), self.log)

    def moved(self) -> Moved | None:
        """The mark :meth:`mark_moved` left, if any."""
        import psycopg.errors as pe

        def step(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            try:
                return conn.execute(READ_MOVED, (self.log,)).fetchall()
            except (pe.UndefinedTable, pe.UndefinedColumn):  # no log, or none ever moved here
                return []

        rows = self._retrying("read", step)
        if not rows or rows[0][0] is None:
            return None
        return Moved(rows[0][0], rows[0][1], rows[0][2])

    # -- copying in ----------------------------------------------------------------------

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
                fault("copy-chunk")  # tests: pause with a committed prefix copied
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

        self._retrying("copy into", step, outcome="the records copied so far stay: run the "
                                                  "same `loopx store copy` again to go on")

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

        if self._locked is not None:  # inside our own append: its retries are the append's
            with self._mutex:
                return step(self._connection())
        return self._retrying("read", step)

    def _lines(self, seq: int) -> tuple[list[bytes], bool]:
        """Committed lines from seq + 1 on, and whether more may follow them: first those a
        refused append brought back, else one page from the server."""
        first, ahead = self._ahead
        if first <= seq + 1 < first + len(ahead):
            return ahead[seq + 1 - first:], True
        rows = self._rows("SELECT line FROM loopx_record WHERE log = %s AND seq > %s "
                          "ORDER BY seq LIMIT %s", (self.log, seq, PAGE))
        return [bytes(line) for (line,) in rows], len(rows) == PAGE

    def read(self, after: Cursor | None = None) -> Iterator[tuple[Record, Cursor]]:
        cursor = after or Cursor()
        seq, prev = cursor.seq, cursor.hash
        while True:
            locked = self._locked
            if locked is not None and seq >= locked.seq:
                return  # the builder of our own append: nothing can follow its head
            lines, more = self._lines(seq)
            for line in lines:
                record = checked(line, seq + 1, prev)
                seq, prev = record["seq"], record["hash"]
                cursor = Cursor(seq, prev, record["ts"], (seq,))
                yield record, cursor
                if locked is not None and seq >= locked.seq:
                    return
            if not more:
                if locked is None and (self._seen is None or seq > self._seen.seq):
                    self._seen = cursor  # committed, and the newest this client knows
                return

    def head(self) -> Cursor:
        if self._locked is not None:
            return self._locked
        rows = self._rows("SELECT seq, hash, ts FROM loopx_head WHERE log = %s", (self.log,))
        if not rows or rows[0][0] == 0:
            return Cursor()
        seq, digest, ts = rows[0]
        self._seen = Cursor(seq, digest, ts, (seq,))
        return self._seen

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
        return parsed(bytes(rows[0][0]))

    def find(self, record_id: str) -> Record:
        rows = self._rows("SELECT line FROM loopx_record WHERE log = %s AND record_id = %s",
                          (self.log, record_id))
        if not rows:
            raise NotFound(f"no record with id {record_id!r}")
        return parsed(bytes(rows[0][0]))

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

    # -- waiting --------------------------------------------------------------------------

    def wait(self, after_seq: int, timeout: float, *,
             stop: Callable[[], bool] | None = None) -> bool:
        """See :meth:`Store.wait`: LISTEN on the log's channel, then read the head once and
        again only when a notification arrives (an append's, or the move mark's); an idle
        waiter sends no queries (``stop`` is asked every 0.2 s, locally)."""

        def listen(conn: psycopg.Connection[Any]) -> None:
            if not self._listening:
                conn.execute(f'LISTEN "{self.channel}"')
                self._listening = True

        deadline = time.monotonic() + timeout
        while True:
            self._retrying("listen on", listen)  # before reading the head: no missed NOTIFY
            if self.head().seq > after_seq:
                return True
            if self.moved() is not None:
                return False
            conn = self._connection()
            woken = False
            # psycopg keeps notifications that arrive between calls (3.3); with older ones a
            # notification landing just before notifies() could be missed, so the head and the
            # move mark are read again every 5 s whatever happens (two queries per 5 s idle).
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
