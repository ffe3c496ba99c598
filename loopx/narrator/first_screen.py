"""The first-screen gate: a change to what a reader sees first (title, headline, primary call
to action) is published only with an owner-approved preview of exactly that screen; otherwise
the screen published last (or the neutral one, before any) is kept and the reason reported.

The same rules are the write check of ``publication_v0`` and ``publication_preview_v0``, so a
publication appended around the narrator cannot change the first screen unapproved either.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from loopx.kernel.canonical import dumps
from loopx.kernel.errors import Refused
from loopx.narrator.state import published_screen

View = dict[str, Any]

# Shown until the owner approves a first screen: it claims nothing, so it needs no approval.
NEUTRAL: dict[str, Any] = {
    "title": "Research case",
    "headline": "The headline of this case awaits the owner's review.",
    "primary_action": {"label": "Read the evidence", "href": "#evidence"},
}


def screen_sha256(screen: dict[str, Any]) -> str:
    """The digest of a first screen: sha256 of its canonical JSON."""
    return hashlib.sha256(dumps(screen)).hexdigest()


def current_screen(view: View) -> dict[str, Any]:
    """The first screen published last, or the neutral one before any publication."""
    published = published_screen(view)
    return NEUTRAL if published is None else published["first_screen"]


@dataclass(frozen=True)
class Choice:
    """Which first screen a publication carries, and why."""

    screen: dict[str, Any]
    status: str  # unchanged, approved_change or held_back
    preview_id: str | None = None
    held_back: dict[str, Any] | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The gate's outcome as stable JSON."""
        return {"status": self.status, "first_screen": self.screen,
                "first_screen_sha256": screen_sha256(self.screen), "preview_id": self.preview_id,
                "held_back": self.held_back, "reason": self.reason}


def _latest_preview(view: View, digest: str, verdict: str | None) -> dict[str, Any] | None:
    """The latest preview of the screen with ``digest`` whose owner's verdict is ``verdict``
    (None: no verdict yet)."""
    found = [p for p in view["previews"].values() if p["first_screen_sha256"] == digest
             and (p["approval"] or {}).get("verdict") == verdict]
    return max(found, key=lambda p: p["seq"]) if found else None


def approved_preview(view: View, digest: str) -> dict[str, Any] | None:
    """The latest preview of the screen with ``digest`` that the owner approved, if any."""
    return _latest_preview(view, digest, "approved")


def pending_preview(view: View, digest: str) -> dict[str, Any] | None:
    """A preview of the screen with ``digest`` still awaiting the owner, if any."""
    return _latest_preview(view, digest, None)


def choose(view: View, wanted: dict[str, Any]) -> Choice:
    """The first screen to publish when the story's own first screen is ``wanted``."""
    current = current_screen(view)
    digest = screen_sha256(wanted)
    if digest == screen_sha256(current):
        return Choice(current, "unchanged")
    preview = approved_preview(view, digest)
    if preview is not None:
        return Choice(wanted, "approved_change", preview_id=preview["preview_id"])
    pending = pending_preview(view, digest)
    if pending is not None:
        why = (f"the new first screen awaits the owner's approval of preview "
               f"{pending['preview_id']} (`loopx approve {pending['preview_id']}`)")
    else:
        rejected = [p for p in view["previews"].values() if p["first_screen_sha256"] == digest]
        why = ("the owner rejected this first screen" if rejected else
               "the first screen changed and has no approved preview "
               "(`loopx preview`, then the owner runs `loopx approve`)")
    kept = ("the previous first screen was kept" if published_screen(view) is not None
            else "the neutral first screen was used")
    return Choice(current, "held_back", held_back=wanted, reason=f"{why}; {kept}")


def check_preview(view: View, who: Any, record: dict[str, Any]) -> None:
    """Write check of ``publication_preview_v0``: a true digest, a new id, a real change."""
    p = record["payload"]
    if p["preview_id"] in view["previews"]:
        raise Refused(f"preview {p['preview_id']!r} exists already")
    if p["first_screen_sha256"] != screen_sha256(p["first_screen"]):
        raise Refused("first_screen_sha256 is not the digest of first_screen")
    if p["first_screen_sha256"] == screen_sha256(current_screen(view)):
        raise Refused("this first screen is already the one published: there is nothing to "
                      "preview")
    pending = pending_preview(view, p["first_screen_sha256"])
    if pending is not None:
        raise Refused(f"preview {pending['preview_id']!r} of this first screen already awaits "
                      "the owner")


def check_publication(view: View, who: Any, record: dict[str, Any]) -> None:
    """Write check of ``publication_v0``: the first screen obeys the gate."""
    p = record["payload"]
    if p["publication_id"] in view["publications"]:
        raise Refused(f"publication {p['publication_id']!r} exists already")
    digest = p["first_screen_sha256"]
    if digest != screen_sha256(p["first_screen"]):
        raise Refused("first_screen_sha256 is not the digest of first_screen")
    current = screen_sha256(current_screen(view))
    status = p["first_screen_status"]
    if status == "approved_change":
        preview = view["previews"].get(p.get("preview_id") or "")
        if (digest == current or preview is None or preview["first_screen_sha256"] != digest
                or preview["approval"] is None or preview["approval"]["verdict"] != "approved"):
            raise Refused("an approved_change publishes a new first screen with the owner's "
                          "approved preview of exactly that screen (preview_id)")
    elif digest != current:
        raise Refused("the first screen differs from the one published last: that change needs "
                      "an approved preview (first_screen_status approved_change)",
                      hint="`loopx preview`, then the owner runs `loopx approve`")
    elif status == "held_back" and p.get("held_back_sha256") in (None, current):
        raise Refused("a held_back publication names the held-back first screen's digest "
                      "(held_back_sha256), which differs from the one kept")
    elif status == "unchanged" and p.get("held_back_sha256") is not None:
        raise Refused("an unchanged publication holds nothing back (held_back_sha256)")


NARRATOR_CHECKS = {"publication_preview_v0": check_preview, "publication_v0": check_publication}
