"""The should-run tool, alone in its module: agents ask it between every two steps, so a call
loads only this tool, not every lane tool's params. Its body is
:func:`loopx.tools.reads.should_run`, which a cold ``--json`` call runs without the registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx.tools import reads
from loopx.tools.registry import ToolContext, tool


@dataclass(frozen=True)
class ShouldRun:
    agent_id: str
    claim: bool = False


@tool("quota.should_run", params=ShouldRun, writes=True)
def quota_should_run(ctx: ToolContext, p: ShouldRun) -> dict[str, Any]:
    """What this agent should do next; with claim, select and claim in one locked step."""
    return reads.should_run(ctx, p.agent_id, p.claim)
