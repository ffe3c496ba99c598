"""The tool registry: every loopx operation as one registered, typed, deterministic function.

The CLI calls these tools and the MCP server lists and calls the same ones, so the two cannot
drift. Importing this package registers every tool.
"""

from loopx.tools import kernel, lanes  # noqa: E402,F401  (registration)
from loopx.tools.registry import TOOLS, Tool, ToolContext, call, get_tool, tool

__all__ = ["TOOLS", "Tool", "ToolContext", "call", "get_tool", "tool"]
