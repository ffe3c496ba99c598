"""Who writes: the credentials a writer presents, and the identity the log records."""

from __future__ import annotations

from loopx.kernel.plain import Frozen

OWNER_ROLE = "owner"
OWNER_CAPABILITY = "owner"


class Credentials(Frozen):
    """What a writer presents: its agent id and its token (never stored, never logged)."""

    _fields = ("agent_id", "token")
    agent_id: str
    token: str | None

    def __init__(self, agent_id: str, token: str | None) -> None:
        self.__dict__.update(agent_id=agent_id, token=token)

    def __repr__(self) -> str:
        return f"Credentials(agent_id={self.agent_id!r}, token=<hidden>)"


class Identity(Frozen):
    """An authenticated writer: its role and the grant id it writes under."""

    _fields = ("agent_id", "role", "capability")
    agent_id: str
    role: str
    capability: str

    def __init__(self, agent_id: str, role: str, capability: str) -> None:
        self.__dict__.update(agent_id=agent_id, role=role, capability=capability)

    @property
    def is_owner(self) -> bool:
        """Whether this is the workspace owner (the person holding the owner token)."""
        return self.role == OWNER_ROLE


OWNER = Identity("owner", OWNER_ROLE, OWNER_CAPABILITY)
