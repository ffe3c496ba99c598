"""A retry candidate (004 Promotion And Retirement: "unscored but resumable attempt with a
branch/ref and needs_retry evidence") names the attempt to resume, its branch and evaluated
commit, and the evidence that it needs another turn, which it rests on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_support import invoke
from lanes_support import campaign, workspace_loop

from loopx.governance.contract import amend_contract
from loopx.research.projections import candidates, row
from loopx.testing.research import CONTRACT, ResearchLoop

BASE, EVALUATED = "a" * 40, "b" * 40


def loop() -> ResearchLoop:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "base_commit": BASE})
    r.propose("h1")
    return r


def retry_of(r: ResearchLoop) -> dict[str, Any]:
    view = r.ledger.state()["lanes"]
    current = row(view, "h1")
    assert (current.state, current.next_action) == ("needs_retry", "retry_attempt")
    [listed] = candidates(view)["retry"]
    assert listed == {"hypothesis_id": "h1", "title": current.title,
                      "revision": current.revision, **(current.retry or {})}
    return listed


def test_a_failed_attempt_is_the_retry_with_its_branch_and_commit() -> None:
    r = loop()
    packet = r.run("h1", "dev", None, status="failed", commits=(BASE, EVALUATED),
                   branch="exp/h1-wide")
    retry = retry_of(r)
    assert (retry["packet_id"], retry["branch"], retry["evaluated_commit"]) == (
        packet, "exp/h1-wide", EVALUATED)
    # The needs-retry evidence is the attempt itself: unscored, judged by nobody.
    assert (retry["packet_status"], retry["judgement"], retry["verdict"]) == (
        "failed", None, None)
    assert retry["rests_on"] == [packet] and retry["attempts_left"] == 2


def test_a_needs_retry_judgement_is_the_evidence_the_retry_rests_on() -> None:
    r = loop()
    # Two of the contract's three seeds: the judgement cannot be made and says needs_retry.
    packet = r.run("h1", "dev", [0.95, 0.96], commits=(BASE, EVALUATED), branch="exp/h1-short")
    event = r.judge("h1", "dev")
    assert event["verdict"] == "needs_retry"
    retry = retry_of(r)
    assert (retry["branch"], retry["evaluated_commit"], retry["packet_status"]) == (
        "exp/h1-short", EVALUATED, "scored")
    assert (retry["judgement"], retry["verdict"]) == (event["event_id"], "needs_retry")
    assert retry["rests_on"] == [packet, event["event_id"]]


def test_an_inconclusive_judgement_also_rests_the_retry_on_itself() -> None:
    r = loop()
    packet = r.run("h1", "dev", [0.899, 0.90, 0.901])
    event = r.judge("h1", "dev")
    retry = retry_of(r)
    assert (retry["judgement"], retry["verdict"]) == (event["event_id"], "inconclusive")
    assert retry["rests_on"] == [packet, event["event_id"]]
    # Without a branch of its own the run's default one is named (never left out).
    assert retry["branch"] and retry["evaluated_commit"] is None


def test_loopx_candidates_shows_the_branch_ref_and_evidence(tmp_path: Path) -> None:
    ws, r = workspace_loop(tmp_path, "retry")
    ledger = r.ledger
    amend_contract(ledger, r.agents["cur"], "pin the base", settings=[("base_commit", BASE)])
    r.propose("h1")
    packet = r.run("h1", "dev", [0.95, 0.96], commits=(BASE, EVALUATED), branch="exp/h1")
    event = r.judge("h1", "dev")
    ledger.store.close()
    out = invoke(tmp_path, "candidates", "--json")
    assert out.exit_code == 0, out.stderr
    [retry] = json.loads(out.stdout)["retry"]
    assert {k: retry[k] for k in ("packet_id", "branch", "evaluated_commit", "packet_status",
                                  "judgement", "verdict", "rests_on")} == {
        "packet_id": packet, "branch": "exp/h1", "evaluated_commit": EVALUATED,
        "packet_status": "scored", "judgement": event["event_id"], "verdict": "needs_retry",
        "rests_on": [packet, event["event_id"]]}
    [row_json] = json.loads(invoke(tmp_path, "frontier", "--json").stdout)["hypotheses"]
    assert row_json["retry"]["branch"] == "exp/h1"
