"""The narrator's slices of folded state: first-screen previews (with the owner's verdicts),
publications, and the first screen currently published.

Updated copy-on-write like every other slice, so write checks can fold a batch into an overlay.
"""

from __future__ import annotations

from typing import Any

SLICES = ("previews", "publications", "narrator")


def published_screen(view: dict[str, Any]) -> dict[str, Any] | None:
    """The first screen of the latest publication (``first_screen``, ``sha256``, ``seq``)."""
    return view["narrator"].get("first_screen")


def _preview(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    view["previews"][p["preview_id"]] = {
        "preview_id": p["preview_id"], "first_screen": p["first_screen"],
        "first_screen_sha256": p["first_screen_sha256"], "head_seq": p["head_seq"],
        "record_id": record["record_id"], "seq": record["seq"],
        "agent_id": record["agent_id"], "approval": None}


def _approval(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    if p["subject"]["kind"] != "preview":
        return
    preview = view["previews"].get(p["subject"]["id"])
    if preview is not None:
        view["previews"][p["subject"]["id"]] = {**preview, "approval": {
            "verdict": p["verdict"], "record_id": record["record_id"], "seq": record["seq"],
            "agent_id": record["agent_id"]}}


def _publication(view: dict[str, Any], record: dict[str, Any], p: dict[str, Any]) -> None:
    view["narrator"]["first_screen"] = {
        "first_screen": p["first_screen"], "sha256": p["first_screen_sha256"],
        "publication_id": p["publication_id"], "seq": record["seq"]}
    view["publications"][p["publication_id"]] = {
        "publication_id": p["publication_id"], "seq": record["seq"],
        "record_id": record["record_id"], "surface": p["surface"], "format": p["format"],
        "head_seq": p["head_seq"], "head_hash": p["head_hash"],
        "output_sha256": p["output_sha256"],
        "first_screen_status": p["first_screen_status"]}


FOLDS = {
    "publication_preview_v0": _preview,
    "approval_v0": _approval,
    "publication_v0": _publication,
}
