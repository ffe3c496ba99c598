"""Moving a log between backends byte for byte: the stored lines are copied as they are (never
sealed again), so seq, ts, hashes and the head hash are the same on both sides."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from loopx.kernel.canonical import dumps
from loopx.kernel.errors import ConflictError, IntegrityError
from loopx.kernel.store.base import Store
from loopx.kernel.verify import Anchor, verify_store

FILE_SEGMENT_BYTES = 64 * 1024 * 1024  # as the file store's default rollover


@dataclass(frozen=True)
class Copied:
    """What a copy moved: the record count and the head both sides now share."""

    records: int
    head_seq: int
    head_hash: str


def batches(store: Store) -> Iterator[list[bytes]]:
    """The committed lines of ``store``, one list per batch, exactly as stored (a verified
    log's lines are the canonical serialization of its records)."""
    lines: list[bytes] = []
    for record, _ in store.read():
        lines.append(dumps(record))
        if record["seq"] == record["batch_end"]:
            yield lines
            lines = []


def copy_log(source: Store, target: Store) -> Copied:
    """Copy every committed record of ``source`` into the empty ``target``; verify both.

    Raises:
        ConflictError: the target already has records.
        IntegrityError: the source does not verify, or the copy does not reach its head.
        StorageError: either side refused a read or a write.
    """
    if target.head().seq != 0:
        raise ConflictError("the target log already has records; nothing was copied",
                            hint="copy into a new, empty log (another ?log= name or directory)")
    checked = verify_store(source)
    if not checked.ok:
        raise IntegrityError(f"the source log does not verify (first bad seq "
                             f"{checked.first_bad_seq}: {checked.problem}); nothing was copied",
                             seq=checked.first_bad_seq, hint="run `loopx verify`")
    load = getattr(target, "load", None)
    if load is not None:
        load(batches(source))
    else:
        from loopx.kernel.store.file import FileStore

        if not isinstance(target, FileStore):
            raise TypeError(f"cannot copy into a {type(target).__name__}")
        _load_file(target, batches(source))
    anchor = Anchor(checked.head_seq, checked.head_hash) if checked.head_seq else None
    copied = verify_store(target, anchor)
    if not copied.ok:
        raise IntegrityError(f"the copy does not verify (first bad seq {copied.first_bad_seq}: "
                             f"{copied.problem})", seq=copied.first_bad_seq,
                             hint="delete the copy and run `loopx store copy` again")
    return Copied(checked.head_seq, copied.head_seq, copied.head_hash)


def _load_file(target: object, source: Iterator[list[bytes]]) -> None:
    """Write whole batches into an empty file store's segments under its lock, durably."""
    from loopx.kernel.store.file import FileStore
    from loopx.kernel.store.fs import fsync_dir, write_all
    from loopx.kernel.store.lines import segment_name

    assert isinstance(target, FileStore)
    target.create()
    with target.locked():
        if target.segments() != [1] or os.path.getsize(target.segment_path(1)) != 0:
            raise ConflictError("the target log already has records; nothing was copied")
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
