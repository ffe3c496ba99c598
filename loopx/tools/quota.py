"""The should-run tool, alone in its module: agents ask it between every two steps, so a cold
call loads only this tool, not every lane tool's params."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx.tools.registry import ToolContext, tool


@dataclass(frozen=True)
class ShouldRun:
    agent_id: str
    claim: bool = False


@tool("quota.should_run", params=ShouldRun, writes=True)
def quota_should_run(ctx: ToolContext, p: ShouldRun) -> dict[str, Any]:
    """What this agent should do next; with claim, select and claim in one locked step."""
    from loopx.work.claims import should_run

    return should_run(ctx.ledger, p.agent_id, claim=p.claim,
                      creds=ctx.credentials() if p.claim else None)
