"""Whether a lease holds: store timestamps compared as strings (the format sorts by time)."""

from __future__ import annotations

from typing import Any


def lease_live(todo: dict[str, Any], agents: Any, now: str) -> bool:
    """Whether a claimed todo's lease still holds at ``now``: not expired, holder not revoked."""
    if todo["status"] != "claimed":
        return False
    holder = agents.get(todo["holder"])
    return now < todo["expires"] and holder is not None and not holder["revoked"]
