"""A log that moved to another store (``loopx store copy --use``): the mark both backends keep
where the old log was, and the refusal every later append to it gets.

The mark is where writers look under the log's lock (a file in the log directory; a column of
the head row, enforced by a trigger, on PostgreSQL), so that no process on any host that opened
the old log before the move goes on being acknowledged where nobody reads.
"""

from __future__ import annotations

from loopx.kernel.errors import WorkspaceError
from loopx.kernel.plain import Frozen


class Moved(Frozen):
    """Where the log went (shown to writers, so never with a password), and the head both sides
    shared then; None where a mark could not be read."""

    _fields = ("to", "seq", "hash")
    to: str | None
    seq: int | None
    hash: str | None

    def __init__(self, to: str | None, seq: int | None, hash: str | None) -> None:
        self.__dict__.update(to=to, seq=seq, hash=hash)


def follow_command(to: str | None) -> str:
    """The command that switches a workspace to where its log went."""
    return f"`loopx store copy --to '{to or 'URL'}' --use`"


def moved_refusal(moved: Moved) -> WorkspaceError:
    """The error an append to a moved log gets: where it went, and how to follow it."""
    to = moved.to or "another store"
    return WorkspaceError(
        f"this log moved to {to} at seq {'?' if moved.seq is None else moved.seq} (`loopx store "
        "copy --use`); nothing was written",
        hint="open the workspace again: its store is the new one now (a process that opened the "
             "log before the move must restart); if this host's .loopx/workspace.json still "
             "names the old log (the move stopped before its switch, or it was made on another "
             f"host), run {follow_command(moved.to)} here to switch to it")
