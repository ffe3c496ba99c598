"""The tool registry: every loopx operation as one registered, typed, deterministic function.

The CLI calls these tools and the MCP server lists and calls the same ones, so the two cannot
drift. Tool modules register on first use (``get_tool``); ``all_tools()`` loads them all.
"""

from loopx.tools.registry import Tool, ToolContext, all_tools, call, get_tool, tool

__all__ = ["Tool", "ToolContext", "all_tools", "call", "get_tool", "tool"]
