"""The narrator as a kernel domain: first-screen previews and publications."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from loopx.kernel.domains import Domain
from loopx.narrator import state

if TYPE_CHECKING:
    from loopx.kernel.kinds import KindSpec


def kinds() -> Sequence[KindSpec]:
    """The narrator's record kinds (loads their pydantic models)."""
    from loopx.kernel.kinds import KindSpec
    from loopx.narrator.records import PublicationPreviewV0, PublicationV0

    return (
        KindSpec("publication_preview_v0", PublicationPreviewV0, "public", "computed", "agents",
                 "a first screen the narrator shows the owner before publishing it",
                 pins_head=True),
        KindSpec("publication_v0", PublicationV0, "public", "computed", "agents",
                 "a published story or board, pinned to the graph snapshot it was made from",
                 pins_head=True),
    )


DOMAIN = Domain(
    name="narrator",
    slices={name: dict for name in state.SLICES},
    folds=state.FOLDS,
    checks=lambda: import_module("loopx.narrator.first_screen").NARRATOR_CHECKS,
    kinds=kinds,
)
