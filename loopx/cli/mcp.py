"""``loopx mcp``: serve the agent's tools over the Model Context Protocol on stdio."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli.app import (
    agent_option,
    cli,
    token_file_option,
    workspace_of,
)
from loopx.cli.direct import credentials
from loopx.kernel.errors import UsageProblem


@cli.command("mcp")
@agent_option
@token_file_option
def mcp(agent_id: str, token_file: Path | None) -> None:
    """Serve this agent's loopx tools to an MCP client on stdin/stdout (logs on stderr): only
    its role's tools, under the contract in force."""
    try:
        import mcp as _sdk  # noqa: F401
    except ImportError:
        raise UsageProblem("the MCP server needs the MCP Python SDK: pip install "
                           "'loopx[mcp]'") from None
    from loopx.mcp.server import serve

    ctx = click.get_current_context()
    serve(workspace_of(ctx), credentials(agent_id, token_file))
