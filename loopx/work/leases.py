"""Lease time: store timestamps plus seconds, compared as strings (the format sorts by time)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from loopx.kernel.canonical import TS_FORMAT


def add_seconds(ts: str, seconds: float) -> str:
    """The store timestamp ``seconds`` after ``ts``."""
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return moment.strftime(TS_FORMAT)


def seconds_between(earlier: str, later: str) -> float:
    """``later - earlier`` in seconds (negative when ``later`` is before ``earlier``)."""
    a = datetime.fromisoformat(earlier.replace("Z", "+00:00"))
    b = datetime.fromisoformat(later.replace("Z", "+00:00"))
    return (b - a).total_seconds()


def lease_live(todo: dict[str, Any], agents: Any, now: str) -> bool:
    """Whether a claimed todo's lease still holds at ``now``: not expired, holder not revoked."""
    if todo["status"] != "claimed":
        return False
    holder = agents.get(todo["holder"])
    return now < todo["expires"] and holder is not None and not holder["revoked"]
