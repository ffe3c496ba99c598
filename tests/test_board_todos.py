"""The board's todo view follows todo changes: priority (from the record that set it), blockers,
holders and assignees, and cancellations with their reasons; never a private hypothesis."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from narrator_support import Fixed, check_numbers, fixed_campaign

from loopx.narrator.publish import render
from loopx.work.todo_changes import block, cancel, reassign, reprioritise
from loopx.work.todos import add_todos


def section(html: str) -> str:
    return html.split('<section id="todos">')[1].split("</section>")[0]


def rows(html: str) -> list[tuple[str, str, str]]:
    """(todo id, state, the row's text) of every named row, in order."""
    found = re.findall(r'<tr data-todo="([^"]+)" data-state="([^"]+)">(.*?)</tr>', section(html))
    return [(t, s, unescape(re.sub(r"<[^>]+>", " ", body))) for t, s, body in found]


def todo(f: Fixed, todo_id: str, **payload: Any) -> None:
    add_todos(f.c.ledger, f.c.owner, [{"todo_id": todo_id, "title": f"run {todo_id}",
                                       "role": "research_executor", "action_kind": "run_dev_eval",
                                       "hypothesis_id": "h-norm", **payload}])


@pytest.fixture(scope="module")
def changed() -> Fixed:
    f = fixed_campaign()
    for t in ("later", "urgent", "waits", "dropped", "mine"):
        todo(f, t)
    reprioritise(f.c.ledger, f.c.owner, "urgent", 7, reason="the deadline moved")
    block(f.c.ledger, f.c.owner, "waits", "later")
    reassign(f.c.ledger, f.c.owner, "mine", "ex")
    cancel(f.c.ledger, f.c.owner, "dropped", "superseded by the wider run")
    return f


def test_the_board_lists_todos_in_selection_order_with_their_changes(changed: Fixed) -> None:
    rendered = render(changed.c.ledger, "board", "html")
    listed = [(t, s) for t, s, _ in rows(rendered.text)]
    executor = [t for t, _ in listed if t in ("later", "urgent", "waits", "dropped", "mine")]
    # Priority first, then age; the cancelled todos after everything still to do.
    assert executor == ["urgent", "later", "waits", "mine", "dropped"]
    text = {t: body for t, _, body in rows(rendered.text)}
    states = dict(listed)
    assert (states["urgent"], states["waits"], states["dropped"]) == ("open", "blocked",
                                                                       "cancelled")
    assert " 7 " in text["urgent"]
    assert "waiting on later" in text["waits"]
    assert "assigned to ex" in text["mine"]
    assert "cancelled by owner: superseded by the wider run" in text["dropped"]
    # The judge todos the executor's rules added are listed too, by role.
    assert [t for t, _ in listed][0].endswith("judge_dev_attempt")
    assert "completed and" in section(rendered.text)


def test_the_priority_shown_names_the_record_that_set_it(changed: Fixed) -> None:
    story = render(changed.c.ledger, "board", "html").story
    [urgent] = [r for r in story.doc["todos"]["rows"] if r.get("todo_id") == "urgent"]
    assert urgent["priority"] == 7
    payloads = {r["record_id"]: r["payload"] for r, _ in changed.c.ledger.store.read()}
    check_numbers(story.numbers, payloads.__getitem__)
    [setting] = [n for n in story.numbers if n.get("field") == "priority" and n["value"] == 7]
    assert payloads[setting["record_id"]]["change"] == "reprioritise"
    [dropped] = [r for r in story.doc["todos"]["rows"] if r.get("todo_id") == "dropped"]
    assert dropped["cancelled"]["reason"] == "superseded by the wider run"


def test_a_todo_of_a_private_hypothesis_is_not_named() -> None:
    f = fixed_campaign()
    todo_id, epoch = f.r.proposer_todo("h-hidden")
    f.c.ledger.append({"todo_id": todo_id, "epoch": epoch, "visibility": "private", "payload": {
        "hypothesis_id": "h-hidden", "title": "A secret direction", "statement": "s",
        "mechanism_family": "width", "claimed_by": "prop", "no_grounding_reason": "test"}},
        creds=f.r.agents["prop"], kind="research_hypothesis_v0")
    todo(f, "run-h-hidden", hypothesis_id="h-hidden", priority=3)
    todo(f, "after-it", blocked_by=["run-h-hidden"])
    text = render(f.c.ledger, "board", "html").text
    assert "h-hidden" not in text
    assert "a private todo" in section(text)
    assert "waiting on a private todo" in dict((t, b) for t, _, b in rows(text))["after-it"]


def test_a_todo_text_the_gate_would_refuse_is_withheld_not_published() -> None:
    """A title or cancel reason is written once and never corrected: rather than hold back the
    whole board for good, the board withholds that one text (the gate still judges the rest)."""
    f = fixed_campaign()
    todo(f, "t1")
    todo(f, "t2", title="copy results to /tmp/scratch first")
    out = cancel(f.c.ledger, f.c.owner, "t1", "see /home/alice/notes.txt")
    text = render(f.c.ledger, "board", "html").text
    assert "/home/alice" not in text and "/tmp/scratch" not in text
    body = {t: b for t, _, b in rows(text)}
    assert "cancelled by owner: (the reason is withheld: it would not pass the redaction gate)" \
        in body["t1"]
    assert "title withheld" in body["t2"]
    # Without the screen the story quotes the text, and the gate names its record and field.
    from loopx.narrator import redaction
    from loopx.narrator.story import build

    state = f.c.ledger.state()
    story = build(state["lanes"], state.seq, state.cursor.hash)
    found = redaction.findings(story, "", state["lanes"])
    assert {"record_id": out["record_id"], "field": "reason",
            "problem": "a home directory path"} in found


def test_an_open_todo_should_run_never_hands_out_says_why() -> None:
    """A held-out todo of a hypothesis already promoted, and a dev run of one out of attempts,
    stay open in the log forever; listed bare, they read as work still to do."""
    f = fixed_campaign()
    todo(f, "again", hypothesis_id="h-wide", action_kind="run_holdout_eval",
         title="held-out run of h-wide, again")
    todo(f, "still-to-do", hypothesis_id="h-norm")
    rendered = render(f.c.ledger, "board", "html")
    body = {t: (s, b) for t, s, b in rows(rendered.text)}
    assert body["again"][0] == "open"
    assert "never handed out: h-wide is already decided (promoted, d-wide)" in body["again"][1]
    assert "never handed out" not in body["still-to-do"][1]
    [again] = [r for r in rendered.story.doc["todos"]["rows"] if r.get("todo_id") == "again"]
    assert again["passed_over"] == "h-wide is already decided (promoted, d-wide)"
