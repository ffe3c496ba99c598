"""Who writes: the credentials a writer presents, and the identity the log records."""

from __future__ import annotations

from dataclasses import dataclass

OWNER_ROLE = "owner"
OWNER_CAPABILITY = "owner"


@dataclass(frozen=True)
class Credentials:
    """What a writer presents: its agent id and its token (never stored, never logged)."""

    agent_id: str
    token: str | None

    def __repr__(self) -> str:
        return f"Credentials(agent_id={self.agent_id!r}, token=<hidden>)"


@dataclass(frozen=True)
class Identity:
    """An authenticated writer: its role and the grant id it writes under."""

    agent_id: str
    role: str
    capability: str

    @property
    def is_owner(self) -> bool:
        """Whether this is the workspace owner (the person holding the owner token)."""
        return self.role == OWNER_ROLE


OWNER = Identity("owner", OWNER_ROLE, OWNER_CAPABILITY)
