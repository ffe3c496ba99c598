"""The PostgreSQL store's connection: opening it with the settings an acknowledgement relies
on, this server's clock as seen from here, bounded retries after transient failures, and
failures turned into loopx errors without credentials.

psycopg is imported in the PostgreSQL modules only, so only a ``postgresql://`` store needs it.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from loopx.kernel.canonical import format_ts, parse_ts
from loopx.kernel.errors import LockTimeout, StorageError
from loopx.kernel.lazy_re import lazy_compile
from loopx.kernel.store.base import Clock
from loopx.kernel.store.location import parse_postgres, passwords, redact
from loopx.kernel.store.moved import Moved, moved_refusal
from loopx.kernel.store.postgres_sql import CLOCK, MOVED_STATE

if TYPE_CHECKING:
    import psycopg

_T = TypeVar("_T")

BAD_URL = "22023"  # the errno of a URL libpq refused (SQLSTATE invalid_parameter_value)

# SQLSTATE classes after which trying again on a new connection can succeed: the connection
# broke (08), the server is shutting down or starting (57P01-57P03), too many connections (53300).
_TRANSIENT = ("08", "57P01", "57P02", "57P03", "53300")
# A server host that vanishes without closing its connections (power lost, a network split)
# would leave a request waiting on its socket for hours (the kernel's keepalive starts after
# 2 h): keepalives find a silent peer in about 25 s, and data the peer never acknowledged is
# given up after 30 s; the append's bounded retry takes over from there. A URL that sets any
# of these (or connect_timeout, or application_name) keeps its own value.
CONNECTION_DEFAULTS = {"application_name": "loopx", "keepalives": "1", "keepalives_idle": "10",
                       "keepalives_interval": "5", "keepalives_count": "3",
                       "tcp_user_timeout": "30000"}
# The server's words for a refused login, in the order tried, and the SQLSTATE each stands for.
_LOGIN_REFUSALS = tuple((lazy_compile(words), state) for words, state in (
    (r'database "[^"]*" does not exist', "3D000"),
    (r"too many clients already|remaining connection slots are reserved", "53300"),
    (r"the database system is (?:starting up|shutting down|in recovery mode)", "57P03"),
    (r'authentication failed|no password supplied|no pg_hba\.conf entry|role "[^"]*" does not '
     r"exist", "28000"),
    (r"permission denied for database", "42501"),
))
# libpq's refusals of a connection option's value, made before it tries any host (a URL that
# does not parse at all comes back from psycopg as a ProgrammingError instead).
_BAD_OPTION = lazy_compile(r"invalid (?:[a-z_]+ value|integer value|port number)\b"
                           r"|could not match \d+ (?:host names|port numbers) to \d+")


class PgSession:
    """One connection to the server holding a log, reopened as needed. One per thread."""

    def __init__(self, location: str, *, clock: Clock | None = None, lock_timeout: float = 60.0,
                 retry_seconds: float = 30.0, connect_timeout: float = 10.0) -> None:
        parsed = parse_postgres(location)
        self.log = parsed.log
        self.display = parsed.display  # the location without its password
        self.channel = f"loopx:{self.log}"
        self._conninfo = parsed.conninfo
        self._secrets = passwords(parsed.conninfo)  # masked in every message shown
        self._clock = clock  # None: the server's clock (``clock_timestamp()``)
        self.lock_timeout = lock_timeout
        self.retry_seconds = retry_seconds
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._cur: psycopg.Cursor[Any] | None = None
        self._mutex = threading.RLock()
        self._listening = False
        self._offset = 0.0  # the server's clock minus this host's, in seconds

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(self._conninfo)
        timeout = str(max(1, int(self.connect_timeout)))
        defaults = {**CONNECTION_DEFAULTS, "connect_timeout": timeout}
        conn = psycopg.connect(self._conninfo, autocommit=True,
                               **{k: v for k, v in defaults.items() if k not in given})
        # An acknowledgement must mean the commit is on disk: never let a session default of
        # synchronous_commit=off weaken it (stronger settings, such as remote_apply, are kept).
        # A writer stuck mid-transaction (stopped, hung) must not hold the log forever.
        limit = f"{int(self.lock_timeout * 1000)}ms"
        before = time.time()
        row = conn.execute(
            "SELECT current_setting('synchronous_commit'),"
            " set_config('lock_timeout', %s, false),"
            f" set_config('idle_in_transaction_session_timeout', %s, false), {CLOCK}",
            (limit, limit)).fetchone()
        after = time.time()
        if row is None or row[0] == "off":
            conn.execute("SET synchronous_commit = on")
        if row is not None:
            self._set_offset(str(row[3]), (before + after) / 2)
        self._conn = conn
        self._listening = False
        return conn

    def _set_offset(self, server_now: str, local: float) -> None:
        self._offset = parse_ts(server_now).timestamp() - local

    def _server_now(self) -> str:
        """This server's clock as estimated here (read at connect; corrected when the server
        refuses an append for being off), or the test clock given."""
        if self._clock is not None:
            return self._clock()
        return format_ts(datetime.now(UTC) + timedelta(seconds=self._offset))

    def _cursor(self, conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
        """The cursor kept for ``conn``: making one per statement costs a hot append as much
        Python as the statement's own."""
        if self._cur is None or self._cur.connection is not conn:
            self._cur = conn.cursor()
        return self._cur

    def _drop(self) -> None:
        self._cur = None
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
                if not transient(exc) or time.monotonic() + delay > deadline:
                    self._fail(exc, doing, outcome)
            delay = backoff(delay)

    def _drop_if_broken(self, exc: Exception) -> None:
        conn = self._conn
        if conn is None or conn.closed or conn.broken or transient(exc):
            self._drop()

    def _fail(self, exc: Exception, doing: str, outcome: str) -> NoReturn:
        import psycopg.errors as pe

        if getattr(exc, "sqlstate", None) == MOVED_STATE:  # the log's trigger: it moved
            diag = exc.diag  # type: ignore[attr-defined]
            seq, _, digest = (diag.message_detail or "").partition(" ")
            raise moved_refusal(Moved(diag.message_primary, int(seq) if seq.isdigit() else None,
                                      digest or None)) from None
        if isinstance(exc, pe.LockNotAvailable):
            raise LockTimeout(f"could not lock the log {self.log!r} on {self.display} in "
                              f"{self.lock_timeout:g} s",
                              hint="another writer may be stuck; a stuck transaction ends after "
                                   "the same time") from None
        state = _state(exc) or "08001"
        text = str(exc).strip()
        # (libpq quotes the part of a URL it cannot parse, which may be the password)
        reason = redact(text.splitlines()[0] if text else type(exc).__name__,
                        secrets=self._secrets)
        raise StorageError(f"cannot {doing} the PostgreSQL store {self.display}: {reason}",
                           path=self.display, errno_name=state, hint=_hint(state),
                           outcome=outcome) from None


def backoff(delay: float) -> float:
    """Sleep about ``delay`` (jittered) and return the next, doubled up to 2 s."""
    time.sleep(delay * (0.5 + random.random()))
    return min(delay * 2, 2.0)


def transient(exc: Exception) -> bool:
    """Whether trying again on a new connection can succeed after ``exc``."""
    import psycopg

    state = _state(exc)
    if state is None:  # the client lost or could not open the connection
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith(_TRANSIENT)


def _state(exc: Exception) -> str | None:
    """``exc``'s SQLSTATE: the server's; else one read from a refused login's words (a client
    that never connected gets no SQLSTATE); else :data:`BAD_URL` for a URL libpq refused before
    trying any host (the user's to fix); None for a connection lost or never made."""
    import psycopg

    state = getattr(exc, "sqlstate", None)
    if state is not None:
        return state
    text = str(exc)
    for pattern, login_state in _LOGIN_REFUSALS:
        if pattern.search(text):
            return login_state
    if isinstance(exc, psycopg.ProgrammingError) or _BAD_OPTION.search(text):
        return BAD_URL  # (a URL that does not parse at all is a ProgrammingError)
    return None


def _hint(state: str) -> str:
    if state == "53300":
        return ("the server has no free connection slot: raise max_connections (one per loopx "
                "process), or put a pooler in session mode in front; loopx retried for a while "
                "before giving up")
    if state == "42501":
        return "this user may not connect to the database: GRANT CONNECT ON DATABASE to it"
    if state == BAD_URL:
        return ("fix the store URL where it was given (`--store`, `--to`, LOOPX_STORE, or "
                "`store` in .loopx/workspace.json); its parameters are libpq's")
    if state.startswith("28"):
        return ("check the user and the password: loopx takes it from LOOPX_STORE, PGPASSWORD or "
                "~/.pgpass, never from workspace.json")
    if state == "3D000":
        return "create the database first (createdb), or fix the database name in the URL"
    if state.startswith("42"):
        return "the loopx tables are missing or not readable by this user: check its grants"
    return ("check that the server is running and reachable from this host (host, port, "
            "pg_hba.conf); loopx retried for a while before giving up")
