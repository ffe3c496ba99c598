"""Narrator tools: render the case story or the board (publishing nothing), publish one with a
record pinning its snapshot, and record a first-screen preview for the owner."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx.tools.registry import ToolContext, tool


@dataclass(frozen=True)
class Render:
    surface: str = "story"
    format: str = "md"


@tool("story.render", params=Render, writes=False)
def story_render(ctx: ToolContext, p: Render) -> dict[str, Any]:
    """Render the case story or the board through both gates; returns the text, publishes
    nothing."""
    from loopx.narrator.publish import render

    rendered = render(ctx.ledger, p.surface, p.format, workspace_root=ctx.workspace.root)
    return {**rendered.summary(), "text": rendered.text, "numbers": rendered.story.numbers}


@dataclass(frozen=True)
class Publish:
    out: str
    surface: str = "story"
    format: str = "md"
    publication_id: str | None = None


@tool("story.publish", params=Publish, writes=True)
def story_publish(ctx: ToolContext, p: Publish) -> dict[str, Any]:
    """Publish the story or the board to a file, with a record pinning the snapshot it shows."""
    from loopx.narrator.publish import publish

    return publish(ctx.ledger, ctx.credentials(), p.surface, p.format, Path(p.out),
                   workspace_root=ctx.workspace.root, publication_id=p.publication_id)


@dataclass(frozen=True)
class Preview:
    preview_id: str | None = None


@tool("story.preview", params=Preview, writes=True)
def story_preview(ctx: ToolContext, p: Preview) -> dict[str, Any]:
    """Record a preview of the story's new first screen for the owner to approve."""
    from loopx.narrator.publish import preview

    return preview(ctx.ledger, ctx.credentials(), workspace_root=ctx.workspace.root,
                   preview_id=p.preview_id)
