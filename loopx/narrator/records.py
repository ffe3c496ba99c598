"""The narrator's records: first-screen previews and publications pinned to a graph snapshot."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from loopx.kernel.types import Identifier, Model, Sha256, ShortText

Surface = Literal["story", "board"]


class CallToAction(Model):
    """The first screen's primary call to action: a label and an anchor in the page."""

    label: Annotated[str, Field(min_length=1, max_length=120)]
    href: Annotated[str, Field(pattern=r"^#[a-z0-9][a-z0-9\-]*$", max_length=64)]


class FirstScreen(Model):
    """What a reader sees before scrolling: title, headline summary, primary call to action."""

    title: Annotated[str, Field(min_length=1, max_length=200)]
    headline: Annotated[str, Field(min_length=1, max_length=512)]
    primary_action: CallToAction


class PublicationPreviewV0(Model):
    """A first screen shown to the owner before it may be published (``approval_v0`` subject
    kind ``preview``); pinned to the graph snapshot it was rendered from."""

    preview_id: Identifier
    first_screen: FirstScreen
    first_screen_sha256: Sha256 = Field(description="sha256 of the first screen's canonical JSON")
    head_seq: Annotated[int, Field(ge=1)]
    head_hash: Sha256


class PublicationV0(Model):
    """One published story or board: the snapshot it was made from, the digest of the bytes
    written, and which first screen it carries (and why)."""

    publication_id: Identifier
    surface: Surface
    format: Literal["md", "html"]
    head_seq: Annotated[int, Field(ge=1)]
    head_hash: Sha256
    output_sha256: Sha256
    output_bytes: Annotated[int, Field(ge=0)]
    first_screen: FirstScreen
    first_screen_sha256: Sha256
    first_screen_status: Literal["unchanged", "approved_change", "held_back"] = Field(
        description="unchanged: as last published; approved_change: a new first screen with "
                    "an approved preview; held_back: the rendered change awaits approval and "
                    "the previous (or the neutral) first screen was kept")
    preview_id: Identifier | None = Field(
        default=None, description="the approved preview an approved_change publishes")
    held_back_sha256: Sha256 | None = Field(
        default=None, description="the first screen that was held back, if any")
    note: ShortText | None = None
