"""What ``loopx verify`` remembers of the records it has passed: every record id (ids must be
unique across the whole log) and the hash of every batch end (a publication pins one of them).

Both grow with the log, so they live in a private temporary SQLite database on disk (the
standard library's ``sqlite3``; the file is deleted when closed) with a small page cache:
verify's memory stays flat however long the log is. A record id of the form loopx writes
(``rec_`` and 32 lowercase hex digits) is kept as its 16 bytes, any other id as its text;
the two never compare equal, and each form maps to one id only, so the check stays exact.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from loopx.kernel.errors import StorageError

_LOOPX_ID = re.compile(r"rec_[0-9a-f]{32}")
# The page cache SQLite may hold, in KiB (a negative cache_size is KiB): pages beyond it are
# read back from the temporary file (the OS page cache), not kept in the process.
CACHE_KIB = 2048


@contextmanager
def _storage_errors() -> Iterator[None]:
    """A failure of the temporary database (no writable temp directory, a full disk) is a
    storage error naming it, not a traceback."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StorageError(f"verify's temporary index of record ids failed: {exc}", path=None,
                           errno_name="SQLITE",
                           hint="point TMPDIR at a writable directory with free space") from None


def _key(record_id: str) -> bytes | str:
    """What the index keeps of a record id: 16 bytes for loopx's own form, else the text."""
    return bytes.fromhex(record_id[4:]) if _LOOPX_ID.fullmatch(record_id) else record_id


class SeenIndex:
    """Record ids and batch-end hashes seen so far, on disk; close it when done."""

    def __init__(self) -> None:
        with _storage_errors():
            self._open()

    def _open(self) -> None:
        # "" is a private temporary on-disk database, removed when the connection closes.
        self._db = sqlite3.connect("", isolation_level=None)
        for pragma in (f"cache_size=-{CACHE_KIB}", "journal_mode=OFF", "synchronous=OFF",
                       "temp_store=FILE"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE ids(id BLOB PRIMARY KEY, seq INTEGER NOT NULL)"
                         " WITHOUT ROWID")
        self._db.execute("CREATE TABLE heads(seq INTEGER PRIMARY KEY, hash BLOB NOT NULL)")
        # One transaction, never committed: with no journal, nothing here is ever rolled back
        # either (a reused id is found by the seq stored with it, see add_ids).
        self._db.execute("BEGIN")

    def add_ids(self, records: list[tuple[str, int]]) -> int | None:
        """Remember each (record id, seq); the index of the first whose id was seen before
        (earlier in the list or in an earlier call), or None if all are new."""
        rows = [(_key(record_id), seq) for record_id, seq in records]
        with _storage_errors():
            return self._first_seen(rows)

    def _first_seen(self, rows: list[tuple[bytes | str, int]]) -> int | None:
        before = self._db.total_changes
        self._db.executemany("INSERT OR IGNORE INTO ids VALUES (?, ?)", rows)
        if self._db.total_changes - before == len(rows):
            return None
        # Rare (the log is bad): the first id kept with another record's seq is the reuse.
        for index, (key, seq) in enumerate(rows):
            (first,) = self._db.execute("SELECT seq FROM ids WHERE id = ?", (key,)).fetchone()
            if first != seq:
                return index
        raise AssertionError("an id was ignored but none was seen before")

    def add_heads(self, heads: list[tuple[int, str]]) -> None:
        """Remember that the batch ending at each seq has that hash (64 hex digits)."""
        with _storage_errors():
            self._db.executemany("INSERT INTO heads VALUES (?, ?)",
                                 [(seq, bytes.fromhex(digest)) for seq, digest in heads])

    def head(self, seq: int) -> bytes | None:
        """The hash of the batch ending at ``seq``, or None if no batch ends there."""
        with _storage_errors():
            found = self._db.execute("SELECT hash FROM heads WHERE seq = ?", (seq,)).fetchone()
        return None if found is None else found[0]

    def close(self) -> None:
        """Drop the database (its temporary file goes with it)."""
        self._db.close()
