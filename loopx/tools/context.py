"""What a tool runs against (:class:`ToolContext`), apart from the registry, so the cold reads
(``loopx/cli/direct.py``) open one without loading every tool's typed params."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.kernel.plain import Value

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.workspace import Workspace


class ToolContext(Value):
    """What a tool runs against: the workspace, and the caller's credentials for writes."""

    _fields = ("workspace", "creds")

    def __init__(self, workspace: Workspace, creds: Credentials | None = None,
                 _ledger: Ledger | None = None) -> None:
        self.workspace = workspace
        self.creds = creds
        self._ledger = _ledger

    @property
    def ledger(self) -> Ledger:
        """The workspace's ledger, opened on first use and kept for the context's life."""
        if self._ledger is None:
            self._ledger = self.workspace.ledger()
        return self._ledger

    def view(self) -> dict[str, Any]:
        """The checked state (lanes, campaign and research slices), caught up to the head."""
        return self.ledger.state()["lanes"]

    def credentials(self) -> Credentials:
        """The caller's credentials.

        Raises:
            Unauthorized: none were given.
        """
        from loopx.kernel.errors import Unauthorized

        if self.creds is None or not self.creds.token:
            raise Unauthorized("this operation writes and needs a token",
                               hint="set LOOPX_TOKEN or pass --token-file")
        return self.creds

    def close(self) -> None:
        """Release the store's file handles."""
        if self._ledger is not None:
            self._ledger.store.close()
