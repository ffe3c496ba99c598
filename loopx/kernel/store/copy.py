"""Moving a log between backends byte for byte: the stored lines are copied as they are (never
sealed again), so seq, ts, hashes and the head hash are the same on both sides."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from loopx.kernel.canonical import dumps
from loopx.kernel.errors import ConflictError, IntegrityError, NotFound
from loopx.kernel.store.base import Cursor, Store
from loopx.kernel.verify import Anchor, verify_store

FILE_SEGMENT_BYTES = 64 * 1024 * 1024  # as the file store's default rollover


@dataclass(frozen=True)
class Copied:
    """What a copy moved: the record count, the head both sides now share, where the
    source's reading stopped (for :func:`copy_rest`), and the seq an earlier, stopped copy had
    reached (0 for a copy into an empty log)."""

    records: int
    head_seq: int
    head_hash: str
    source_cursor: Cursor | None = None
    resumed_from: int = 0


class Batches:
    """The committed lines of a store after ``after``, one list per batch, exactly as stored
    (a verified log's lines are the canonical serialization of its records); ``cursor`` is
    where the last whole batch read ended."""

    def __init__(self, store: Store, after: Cursor | None = None) -> None:
        self.store, self.cursor, self.records = store, after, 0

    def __iter__(self) -> Iterator[list[bytes]]:
        lines: list[bytes] = []
        for record, cursor in self.store.read(self.cursor):
            lines.append(dumps(record))
            if record["seq"] == record["batch_end"]:
                yield lines
                self.cursor, self.records = cursor, self.records + len(lines)
                lines = []


def copy_log(source: Store, target: Store) -> Copied:
    """Copy every committed record of ``source`` into ``target``; verify both. A target that
    already holds the start of this same log (a copy stopped part way, by a kill or a dropped
    connection) is continued from its head: its head hash must be the source's at that seq.

    Raises:
        ConflictError: the target holds other records than the start of this log.
        IntegrityError: the source does not verify, or the copy does not reach its head.
        StorageError: either side refused a read or a write.
    """
    start = target.head()
    load = getattr(target, "load", None)
    if start.seq and load is None:
        raise _taken(f"{start.seq} records, and a file log is copied into only when empty")
    checked = verify_store(source)
    if not checked.ok:
        raise IntegrityError(f"the source log does not verify (first bad seq "
                             f"{checked.first_bad_seq}: {checked.problem}); nothing was copied",
                             seq=checked.first_bad_seq, hint="run `loopx verify`")
    read = Batches(source, _resume_at(source, start) if start.seq else None)
    if load is not None:
        load(read)
    else:
        from loopx.kernel.store.file import FileStore

        if not isinstance(target, FileStore):
            raise TypeError(f"cannot copy into a {type(target).__name__}")
        _load_file(target, read)
    anchor = Anchor(checked.head_seq, checked.head_hash) if checked.head_seq else None
    copied = verify_store(target, anchor)
    if not copied.ok:
        raise IntegrityError(f"the copy does not verify (first bad seq {copied.first_bad_seq}: "
                             f"{copied.problem})", seq=copied.first_bad_seq,
                             hint="delete the copy and run `loopx store copy` again")
    return Copied(read.records, copied.head_seq, copied.head_hash, read.cursor, start.seq)


def copy_rest(source: Store, target: Store, copied: Copied) -> Copied:
    """Copy what ``source`` committed after ``copied`` (the result of :func:`copy_log` into
    ``target``) as stored, for a source whose writers the caller holds off; returns the head
    both now share. ``target`` checks that every line continues its chain.

    Raises:
        IntegrityError: a line does not chain, or the two heads differ afterwards.
    """
    read = Batches(source, copied.source_cursor)
    load = getattr(target, "load", None)
    if load is None:
        raise TypeError(f"cannot copy the rest into a {type(target).__name__}")
    load(read)
    head = target.head()
    end = read.cursor or Cursor()
    if (head.seq, head.hash) != (end.seq, end.hash):
        raise IntegrityError(f"the copy ends at seq {head.seq}, the source at {end.seq}",
                             seq=min(head.seq, end.seq) + 1,
                             hint="delete the copy and run `loopx store copy` again")
    return Copied(copied.records + read.records, head.seq, head.hash, read.cursor,
                  copied.resumed_from)


def _resume_at(source: Store, head: Cursor) -> Cursor:
    """The source's cursor just past ``head``, the head of a target a stopped copy left: the
    hash chain makes a matching hash at that seq mean the target holds this log up to there
    (and, a head being a batch's last record, that the batch is whole)."""
    try:
        cursor = source.seek(head.seq)
    except NotFound:
        cursor = None
    if cursor is None or cursor.hash != head.hash:
        raise _taken(f"{head.seq} records that are not this log's first {head.seq}")
    return cursor


def _taken(what: str) -> ConflictError:
    return ConflictError(f"the target log already holds {what}; nothing was copied",
                         hint="copy into a new, empty log (another ?log= name or directory)")


def _load_file(target: object, source: Iterator[list[bytes]]) -> None:
    """Write whole batches into an empty file store's segments under its lock, durably."""
    from loopx.kernel.store.file import FileStore
    from loopx.kernel.store.fs import fsync_dir, write_all
    from loopx.kernel.store.lines import segment_name

    assert isinstance(target, FileStore)
    target.create()
    with target.locked():
        if target.segments() != [1] or os.path.getsize(target.segment_path(1)) != 0:
            raise _taken(f"{target.head().seq} records, and a file log is copied into only "
                         "when empty")
        seg, size, seq = 1, 0, 0
        fd = os.open(target.segment_path(1), os.O_WRONLY | os.O_APPEND)
        try:
            for lines in source:
                data = b"".join(line + b"\n" for line in lines)
                if size and size + len(data) > FILE_SEGMENT_BYTES:
                    os.fsync(fd)
                    os.close(fd)
                    seg, size = seq + 1, 0
                    fd = os.open(target.log_dir / segment_name(seg),
                                 os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
                    fsync_dir(target.log_dir)
                write_all(fd, data)
                size += len(data)
                seq += len(lines)
            os.fsync(fd)
        finally:
            os.close(fd)
