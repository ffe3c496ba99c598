"""Render, preview and publish: the narrator's operations over a ledger.

Rendering reads projections of the folded state and passes the first-screen gate and the
redaction gate before any byte leaves. Publishing then appends a ``publication_v0`` pinning the
snapshot (head seq and hash) and the output's digest, and only after the record is stored moves
the file into place, so a refused or failed publication leaves no file and no record.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx.kernel.errors import Refused, StorageError, UsageProblem
from loopx.kernel.gc_pause import paused_gc
from loopx.narrator import redaction
from loopx.narrator.first_screen import (
    NEUTRAL,
    Choice,
    choose,
    current_screen,
    screen_sha256,
)
from loopx.narrator.state import published_screen
from loopx.narrator.story import Quoted, Story, build
from loopx.research.projections import Row, frontier

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials, Identity
    from loopx.kernel.fold import State
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState

FORMATS = {"story": ("md", "html"), "board": ("html",)}


@dataclass
class Rendered:
    """A rendering that passed both gates: its text, the story it shows and the gate's choice."""

    surface: str
    format: str
    text: str
    story: Story
    choice: Choice
    head_seq: int
    head_hash: str

    @property
    def data(self) -> bytes:
        """The bytes a publication writes."""
        return self.text.encode("utf-8")

    def summary(self) -> dict[str, Any]:
        """What was rendered, as stable JSON (without the text itself)."""
        return {"surface": self.surface, "format": self.format,
                "head": {"seq": self.head_seq, "hash": self.head_hash},
                "output_sha256": hashlib.sha256(self.data).hexdigest(),
                "output_bytes": len(self.data), "first_screen": self.choice.to_json()}


def _register_screen(view: LaneState, story: Story, screen: dict[str, Any]) -> None:
    # A screen kept from an earlier publication is quoted from that record.
    published = published_screen(view)
    if screen == NEUTRAL or published is None or published["first_screen"] != screen:
        return
    record_id = view["publications"][published["publication_id"]]["record_id"]
    story.safe.add(record_id)
    for name in ("title", "headline"):
        story.quoted.append(Quoted(record_id, f"first_screen.{name}", screen[name]))
    story.quoted.append(Quoted(record_id, "first_screen.primary_action.label",
                               screen["primary_action"]["label"]))


def _screen(workspace_root: Path | None) -> Callable[[str], bool]:
    """Whether a todo's free text (a title, a cancel's reason) would pass the redaction gate:
    the board withholds one that would not, rather than let one todo hold back the board."""
    roots = redaction.private_roots(workspace_root)
    return lambda text: not redaction.problems_in(text, roots)


def _story(state: State, workspace_root: Path | None, rows: list[Row] | None = None) -> Story:
    """The case story of the folded ``state`` at its head."""
    return build(state["lanes"], state.seq, state.cursor.hash, screen=_screen(workspace_root),
                 rows=rows, rules_since=state["kernel"]["rules_since"])


def render(ledger: Ledger, surface: str, fmt: str, *, workspace_root: Path | None = None,
           served_head: str | None = None) -> Rendered:
    """Render the story (``md`` or ``html``) or the board (``html``) at the current head; a
    served board's page carries ``served_head`` in place of the script-free policy.

    Raises:
        UsageProblem: an unknown surface or format; RedactionBlocked: listing every finding.
    """
    if fmt not in FORMATS.get(surface, ()):
        raise UsageProblem(f"format {fmt!r} is not one of {surface}'s: "
                           f"{', '.join(FORMATS.get(surface, ())) or 'none'}")
    # The state, the story, the graph and the page hold no cycles (loopx.kernel.gc_pause).
    with paused_gc():
        return _render(ledger, surface, fmt, workspace_root, served_head)


def _render(ledger: Ledger, surface: str, fmt: str, workspace_root: Path | None,
            served_head: str | None) -> Rendered:
    state = ledger.state()
    view = state["lanes"]
    rows = frontier(view)  # the story's and the graph's: computed once
    story = _story(state, workspace_root, rows)
    choice = choose(view, story.doc["first_screen"])
    _register_screen(view, story, choice.screen)
    doc = {**story.doc, "first_screen": choice.screen}
    if surface == "board":
        from loopx.narrator.html import render_board
        from loopx.research.graph import graph_json

        # The picture draws hypotheses and the records about them: no todos, contracts, ...
        graph = graph_json(view, state.seq, rows, evidence_only=True)
        text = render_board(doc, graph, served_head)
    elif fmt == "html":
        from loopx.narrator.html import render_story

        text = render_story(doc)
    else:
        from loopx.narrator.markdown import render as render_markdown

        text = render_markdown(doc)
    redaction.check(story, text, view, redaction.private_roots(workspace_root))
    return Rendered(surface, fmt, text, story, choice, state.seq, state.cursor.hash)


def publish(ledger: Ledger, creds: Credentials, surface: str, fmt: str, out: Path, *,
            workspace_root: Path | None = None,
            publication_id: str | None = None) -> dict[str, Any]:
    """Render, append the ``publication_v0`` pinning it, then move the file into place.

    Raises:
        RedactionBlocked, Refused, Forbidden, UsageProblem: nothing written; StorageError:
        the output could not be written (or, after the record, moved into place).
    """
    import tempfile  # only a publication writes a file, names a record and a temp file
    import uuid

    rendered = render(ledger, surface, fmt, workspace_root=workspace_root)
    out = Path(out)
    if out.is_dir():
        raise UsageProblem(f"--out {out} is a directory; give a file path")
    if not out.parent.is_dir():
        raise UsageProblem(f"--out {out}: the directory {out.parent} does not exist")
    pid = publication_id or f"pub-{uuid.uuid4().hex[:12]}"
    data = rendered.data
    choice = rendered.choice
    payload: dict[str, Any] = {
        "publication_id": pid, "surface": surface, "format": fmt,
        "head_seq": rendered.head_seq, "head_hash": rendered.head_hash,
        "output_sha256": hashlib.sha256(data).hexdigest(), "output_bytes": len(data),
        "first_screen": choice.screen, "first_screen_sha256": screen_sha256(choice.screen),
        "first_screen_status": choice.status}
    if choice.preview_id:
        payload["preview_id"] = choice.preview_id
    if choice.held_back is not None:
        payload["held_back_sha256"] = screen_sha256(choice.held_back)
    if rendered.head_seq < 1:
        raise Refused("the log is empty: there is nothing to publish")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    except OSError as exc:
        raise StorageError.from_os(exc, "write", path=out,
                                   outcome="nothing was published") from None
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise StorageError.from_os(exc, "write", path=out,
                                       outcome="nothing was published") from None

        def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
            return ledger.prepare({"schema_version": "publication_v0", "payload": payload}, who)

        [record] = ledger.write(creds, plan)
        try:
            os.replace(tmp, out)
        except OSError as exc:
            raise StorageError.from_os(
                exc, "move the output into place at", path=out,
                outcome=f"the publication was recorded at seq {record['seq']} but the file is "
                        "not there: publish again") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"publication_id": pid, "seq": record["seq"], "record_id": record["record_id"],
            "path": str(out), **rendered.summary()}


def preview(ledger: Ledger, creds: Credentials, *, workspace_root: Path | None = None,
            preview_id: str | None = None) -> dict[str, Any]:
    """Record a preview of the story's own first screen for the owner to approve.

    Raises:
        Refused: the first screen has not changed, or a preview of it already waits;
        RedactionBlocked: the screen quotes something not publishable.
    """
    import uuid

    state = ledger.state()
    view = state["lanes"]
    story = _story(state, workspace_root)
    screen = story.doc["first_screen"]
    if screen_sha256(screen) == screen_sha256(current_screen(view)):
        raise Refused("the first screen has not changed since it was last published: there is "
                      "nothing to preview")
    text = "\n".join([screen["title"], screen["headline"], screen["primary_action"]["label"]])
    redaction.check(story, text, view, redaction.private_roots(workspace_root))
    vid = preview_id or f"preview-{uuid.uuid4().hex[:12]}"
    payload = {"preview_id": vid, "first_screen": screen,
               "first_screen_sha256": screen_sha256(screen), "head_seq": state.seq,
               "head_hash": state.cursor.hash}

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        return ledger.prepare({"schema_version": "publication_preview_v0", "payload": payload},
                              who)

    [record] = ledger.write(creds, plan)
    return {"preview_id": vid, "seq": record["seq"], "record_id": record["record_id"],
            "first_screen": screen, "first_screen_sha256": payload["first_screen_sha256"],
            "head": {"seq": state.seq, "hash": state.cursor.hash}}
