"""The tool registry: every loopx operation as one registered, typed, deterministic function.

The CLI calls these tools and the MCP server lists and calls the same ones, so the two cannot
drift. Tool modules register on first use (``get_tool``); ``all_tools()`` loads them all.
The names below load the registry on first use, so a cold read that only needs
:mod:`loopx.tools.context` does not define the tool params.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Tool", "ToolContext", "all_tools", "call", "get_tool", "tool"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'loopx.tools' has no attribute {name!r}")
    from loopx.tools import registry

    return getattr(registry, name)
