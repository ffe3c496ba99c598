"""Store time that one wrong clock cannot bend: the host's monotonic clock keeps the wall clock
honest.

Every process of a file store runs on one host (network filesystems are unsupported), and that
host has a clock no NTP step moves: ``CLOCK_BOOTTIME``, shared by all its processes. The lock
holder keeps an *anchor* beside the log, the (boot id, monotonic reading, wall time) of the last
append whose wall clock it trusted. At the next append the wall time the anchor predicts is
``expected = anchor.ts + elapsed`` (elapsed on the monotonic clock), and a wall clock is
trusted only inside the envelope ``expected +- (bound + rate * age)``, where ``bound`` is the
workspace's ``max_clock_skew_seconds`` and ``age`` the anchor's age. Outside it, the batch gets
the nearest edge of the envelope and the store records a ``store_clock_v0`` once per wrong
clock (again only when a clock is off by a different amount):

- a writer whose clock is ahead by more than the bound is held to ``expected + bound``, so it
  cannot expire a lease that still has more than ``bound`` seconds to run;
- a clock stepped back (one writer, or the whole host) no longer freezes store time: time keeps
  moving at least ``1 - rate`` times real speed, so leases still expire;
- a host clock stepped on purpose is adopted gradually: the envelope widens by ``rate`` seconds
  per second until the wall clock is inside it, so a 1 h step settles within ``1 h / rate``.

Store time never goes back (the head's ``ts`` is a floor). Without an anchor (the first append,
a reboot, a lost or unreadable anchor file) the wall clock is taken as it is, as before. The
anchor is a reading of the host's clock, not state derived from the log: losing it loses only
this protection until the next append.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loopx.kernel.canonical import add_seconds
from loopx.kernel.errors import WorkspaceError
from loopx.kernel.plain import Frozen
from loopx.kernel.store.base import Encoded, Record
from loopx.kernel.store.quarantine import STORE_AGENT

DEFAULT_BOUND = 60.0  # seconds a wall clock may differ from the host's monotonic account
RATE = 0.25  # how fast (s/s) the envelope widens while a wall clock stays outside it
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_SIZE = 256  # the anchor file is rewritten in place at a fixed size: no truncate, no rename


class Anchor(Frozen):
    """The host's monotonic reading (ns) and the trusted wall time at one append."""

    _fields = ("boot_id", "mono_ns", "ts", "flagged_offset")
    boot_id: str
    mono_ns: int
    ts: str
    flagged_offset: float | None  # the last wrong clock recorded, by its offset

    def __init__(self, boot_id: str, mono_ns: int, ts: str,
                 flagged_offset: float | None = None) -> None:
        self.__dict__.update(boot_id=boot_id, mono_ns=mono_ns, ts=ts,
                             flagged_offset=flagged_offset)


class Stamp(Frozen):
    """The ``ts`` a batch gets, the anchor to keep, and a ``store_clock_v0`` payload when the
    wall clock was overruled and this episode was not flagged yet."""

    _fields = ("ts", "anchor", "flag")
    ts: str
    anchor: Anchor | None
    flag: dict[str, Any] | None

    def __init__(self, ts: str, anchor: Anchor | None, flag: dict[str, Any] | None = None) -> None:
        self.__dict__.update(ts=ts, anchor=anchor, flag=flag)


_boot: list[str | None] = []  # read once per process: the boot id cannot change under it


def host_monotonic() -> tuple[str, int] | None:
    """(boot id, CLOCK_BOOTTIME in ns) on Linux; None where the host offers no such clock."""
    if not _boot:
        try:
            _boot.append(_BOOT_ID.read_text().strip() if hasattr(time, "CLOCK_BOOTTIME")
                         else None)
        except OSError:
            _boot.append(None)
    boot_id = _boot[0]
    return None if boot_id is None else (boot_id, time.clock_gettime_ns(time.CLOCK_BOOTTIME))


def stamp(anchor: Anchor | None, head_ts: str | None, wall: str,
          host: tuple[str, int] | None, bound: float = DEFAULT_BOUND) -> Stamp:
    """The time a batch committed now gets (see the module doc); a pure function."""

    def floor(ts: str) -> str:
        return ts if head_ts is None or ts > head_ts else head_ts

    if host is None:
        return Stamp(floor(wall), None)
    boot_id, mono_ns = host
    if anchor is None or anchor.boot_id != boot_id or mono_ns < anchor.mono_ns:
        return Stamp(floor(wall), Anchor(boot_id, mono_ns, wall))
    age = (mono_ns - anchor.mono_ns) / 1e9
    slack = bound + RATE * age
    # Every append takes this path: plain seconds, no timestamp formatting until needed.
    offset = _seconds(wall) - _seconds(anchor.ts) - age
    if abs(offset) <= slack:
        return Stamp(floor(wall), Anchor(boot_id, mono_ns, wall, anchor.flagged_offset))
    expected = add_seconds(anchor.ts, age)
    edge = add_seconds(expected, slack if offset > 0 else -slack)
    flag = None
    seen = anchor.flagged_offset
    if seen is None or abs(offset - seen) > bound:
        way = "ahead of" if offset > 0 else "behind"
        flag = {"wall": wall, "assigned": floor(edge), "expected": expected,
                "offset_seconds": round(offset, 6), "bound_seconds": bound,
                "reason": f"a writer's wall clock is {abs(offset):.0f} s {way} the host's "
                          f"monotonic clock since the last trusted append ({anchor.ts}); "
                          "store time follows the monotonic clock within the bound"}
    kept = Anchor(anchor.boot_id, anchor.mono_ns, anchor.ts,
                  offset if flag is not None else seen)
    return Stamp(floor(edge), kept, flag)


def _seconds(ts: str) -> float:
    """A store timestamp as seconds since the epoch (exact to the microsecond it carries)."""
    # The anchor's ts is the wall time the previous append parsed: remembered, not re-parsed.
    seconds = _parsed.get(ts)
    if seconds is None:
        if len(_parsed) >= 4:
            _parsed.clear()
        seconds = _parsed[ts] = datetime.fromisoformat(ts[:-1]).replace(tzinfo=UTC).timestamp()
    return seconds


_parsed: dict[str, float] = {}


class AnchorFile:
    """The anchor beside the log, read and rewritten in place by the lock holder through one
    descriptor kept open (an append must not pay for opening it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        # The bytes last read or written and their anchor: an unchanged file is not re-parsed.
        self._last: tuple[bytes, Anchor | None] = (b"", None)

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def read(self) -> Anchor | None:
        """The anchor, or None if there is none or it cannot be read (torn, foreign)."""
        try:
            data = os.pread(self._open(), _SIZE, 0)
            if data == self._last[0]:
                return self._last[1]
            boot_id, mono_ns, ts, seen = data.decode().split()
            anchor = Anchor(boot_id, int(mono_ns), ts, None if seen == "-" else float(seen))
        except (OSError, ValueError):
            return None
        self._last = (data, anchor)
        return anchor

    def write(self, anchor: Anchor) -> None:
        """Rewrite the anchor (no fsync: after a crash the boot id changes anyway). One line,
        ``boot-id monotonic-ns ts flagged-offset`` (``-`` for none), padded to a fixed size."""
        seen = "-" if anchor.flagged_offset is None else repr(anchor.flagged_offset)
        line = f"{anchor.boot_id} {anchor.mono_ns} {anchor.ts} {seen}\n".encode()
        data = line.ljust(_SIZE)
        os.pwrite(self._open(), data, 0)
        self._last = (data, anchor)

    def close(self) -> None:
        """Close the descriptor (a later read or write opens it again)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def skew_setting(config: Path) -> float:
    """``max_clock_skew_seconds`` from a workspace file; the default without one.

    Raises:
        WorkspaceError: the setting is there but not a positive number.
    """
    try:
        value = json.loads(config.read_text()).get("max_clock_skew_seconds", DEFAULT_BOUND)
    except (OSError, ValueError, AttributeError):
        return DEFAULT_BOUND  # no workspace file (a bare store): the default
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise WorkspaceError(f"{config}: max_clock_skew_seconds must be a number of seconds "
                             f"above 0, got {value!r}")
    return float(value)


def clock_record(flag: dict[str, object], first: Record | Encoded) -> Record:
    """The ``store_clock_v0`` record of a wall clock the store overruled (once per wrong clock)."""
    from loopx.kernel.kinds import new_record_id

    return {"schema_version": "store_clock_v0", "record_id": new_record_id(),
            "goal_id": (first.record if isinstance(first, Encoded) else first)["goal_id"],
            "agent_id": STORE_AGENT, "lane_role": "store", "capability": None, "todo_id": None,
            "epoch": None, "visibility": "private", "provenance": "observed", "payload": flag}
