"""The ``status`` tool: one screen of the campaign. Its body is :func:`loopx.tools.reads.status`,
which a cold ``loopx status --json`` runs without the registry."""

from __future__ import annotations

from typing import Any

from loopx.tools import reads
from loopx.tools.registry import NoParams, ToolContext, tool


@tool("status", params=NoParams, writes=False)
def status(ctx: ToolContext, p: NoParams) -> dict[str, Any]:
    """One screen of the campaign: agents, leases held, todos by state, profile drift."""
    return reads.status(ctx)
