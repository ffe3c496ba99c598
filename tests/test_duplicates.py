"""One idea, one hypothesis: an eager proposer's restatements of an earlier idea (reworded,
recased, renumbered, renested, relaunched as a refinement or a supersession) are refused as
duplicates and the refusal is recorded, through the Python API, the write path by hand and the
CLI; a changed idea, and a correction of an untested one, are not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from lanes_support import lanes, research_loop

from loopx.cli import cli
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import ResearchRefused
from loopx.kernel.verify import verify_store
from loopx.research.decisions import decide
from loopx.research.fingerprint import fingerprint, normal_form
from loopx.research.operations import propose_hypothesis
from loopx.research.projections import candidates, row
from loopx.testing.research import CONTRACT, GOOD, WORSE, ResearchLoop
from loopx.work.claims import complete
from loopx.workspace import init_workspace


def idea(family: str, parameters: dict[str, Any]) -> str:
    return fingerprint({"mechanism_family": family, "parameters": parameters})


# -- the fingerprint --------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b"), [
    (("width", {"width": 64}), ("Width", {"width": 64})),
    (("lr-decay", {}), ("LR_Decay", {})),
    (("lr-decay", {}), ("lr.decay", {})),
    (("width", {"width": 64}), ("width", {"Width": 64})),
    (("width", {"hidden_width": 64}), ("width", {"hidden-width": 64})),
    (("width", {"a": 1, "b": 2}), ("width", {"b": 2, "a": 1})),
    (("opt", {"opt": {"lr": 0.1}}), ("opt", {"opt.lr": 0.1})),
    (("opt", {"opt": {"lr": 0.1}}), ("opt", {"opt_lr": 0.1})),
    (("lr", {"lr": 0.1}), ("lr", {"lr": 0.10})),
    (("lr", {"lr": 0.1}), ("lr", {"lr": 1e-1})),
    (("lr", {"lr": 0.1}), ("lr", {"lr": "0.1"})),
    (("lr", {"lr": 0.1}), ("lr", {"lr": " 1E-1 "})),
    (("lr", {"lr": 0.3}), ("lr", {"lr": 0.1 + 0.2})),
    (("width", {"width": 64}), ("width", {"width": 64.0})),
    (("width", {"width": 64}), ("width", {"width": "64"})),
    (("width", {"width": 64}), ("width", {"width": "+64.000"})),
    (("width", {"shift": 0}), ("width", {"shift": -0.0})),
    (("scale", {"n": 1e20}), ("scale", {"n": "1e20"})),
    (("scale", {"n": 1e20}), ("scale", {"n": 10 ** 20})),
    (("seed", {"n": 2 ** 60 + 1}), ("seed", {"n": float(2 ** 60)})),
    (("width", {"width": 64}), ("width", {"width": 64, "note": None})),
    (("width", {"width": 64}), ("width", {"width": 64, "note": ""})),
    (("width", {"width": 64}), ("width", {"width": 64, "extra": {}})),
    (("width", {"layers": 256}), ("width", {"layers": [256]})),
    (("opt", {"name": "adam"}), ("opt", {"name": "  ADAM "})),
    (("opt", {"fused": True}), ("opt", {"fused": "true"})),
    # A look-alike letter (Cyrillic "i") in a parameter name, and fullwidth digits.
    (("width", {"width": 64}), ("width", {"w\u0456dth": 64})),
    (("width", {"width": 64}), ("width", {"width": "\uff16\uff14"})),
])
def test_restatements_of_one_idea_have_one_fingerprint(a: tuple[str, Any],
                                                       b: tuple[str, Any]) -> None:
    assert idea(*a) == idea(*b), (normal_form({"mechanism_family": a[0], "parameters": a[1]}),
                                  normal_form({"mechanism_family": b[0], "parameters": b[1]}))


@pytest.mark.parametrize(("a", "b"), [
    (("width", {"width": 64}), ("width", {"width": 128})),
    (("width", {"width": 64}), ("depth", {"width": 64})),
    (("width", {"layers": [64, 128]}), ("width", {"layers": [128, 64]})),
    (("width", {"width": 64}), ("width", {"width": 64, "dropout": 0.1})),
    (("lr", {"lr": 0.1}), ("lr", {"lr": 0.11})),
    (("opt", {"fused": True}), ("opt", {"fused": 1})),
    (("seed", {"n": 1234567890123}), ("seed", {"n": 1234567890124})),
    (("opt", {"name": "adam"}), ("opt", {"name": "adamw"})),
])
def test_other_ideas_have_other_fingerprints(a: tuple[str, Any], b: tuple[str, Any]) -> None:
    assert idea(*a) != idea(*b)


def test_the_statement_title_and_grounding_are_not_part_of_the_fingerprint() -> None:
    base = {"mechanism_family": "width", "parameters": {"width": 64}}
    assert fingerprint({**base, "statement": "wider is better", "title": "a"}) == fingerprint(
        {**base, "statement": "a different sentence entirely", "title": "b",
         "grounding_refs": [{"kind": "note", "ref": "x"}], "claims_novelty": True})


# -- the rule, through the Python API -----------------------------------------------------------

def payload(hypothesis_id: str, family: str = "width", parameters: dict[str, Any] | None = None,
            **extra: Any) -> dict[str, Any]:
    return {"hypothesis_id": hypothesis_id, "title": f"t {hypothesis_id}",
            "statement": f"statement of {hypothesis_id}", "mechanism_family": family,
            "parameters": {"width": 64} if parameters is None else parameters,
            "no_grounding_reason": "a test", **extra}


def refused(r: ResearchLoop, doc: dict[str, Any], match: str,
            todos: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Proposing ``doc`` is refused as a duplicate; exactly one refusal record takes its place
    (and the todos in its batch are not written)."""
    under = r.proposer_todo(doc["hypothesis_id"])
    before = r.ledger.store.head().seq
    with pytest.raises(ResearchRefused, match=match) as caught:
        propose_hypothesis(r.ledger, r.agents["prop"], doc, under=under, todos=todos)
    assert caught.value.rule == "duplicate"
    assert r.ledger.store.head().seq == before + 1
    record = r.ledger.store.get(before + 1)
    assert record["schema_version"] == "research_refusal_v0"
    assert record["payload"]["rule"] == "duplicate"
    assert record["payload"]["hypothesis_id"] == doc["hypothesis_id"]
    assert record["payload"]["detail"]["fingerprint"] == fingerprint(doc)
    assert doc["hypothesis_id"] not in lanes(r)["hypotheses"]
    for todo in todos or []:
        assert todo["todo_id"] not in lanes(r)["todos"]
    complete(r.ledger, r.agents["prop"], *under, {"hypotheses": []})
    return record


def accepted(r: ResearchLoop, doc: dict[str, Any]) -> dict[str, Any]:
    under = r.proposer_todo(doc["hypothesis_id"])
    try:
        return propose_hypothesis(r.ledger, r.agents["prop"], doc, under=under)
    finally:
        complete(r.ledger, r.agents["prop"], *under, {"hypotheses": [doc["hypothesis_id"]]})


def test_a_reworded_restatement_of_a_live_hypothesis_is_refused_naming_it() -> None:
    r = research_loop()
    first = accepted(r, payload("h1"))
    assert first["fingerprint"] == fingerprint(payload("h1"))
    eager = payload("h1-again", "WIDTH", {"Width": "64.0", "note": None},
                    statement="A totally reworded claim", title="New and improved",
                    grounding_refs=[{"kind": "paper", "ref": "arXiv:0000.00001"}],
                    claims_novelty=True, expected_effect="huge")
    dev_todo = {"todo_id": "dev-again", "title": "dev", "role": "research_executor",
                "action_kind": "run_dev_eval", "hypothesis_id": "h1-again"}
    record = refused(r, eager, r"duplicates 'h1' \(live; record rec_", todos=[dev_todo])
    assert record["payload"]["cites"] == [first["record_id"]]
    assert record["payload"]["detail"]["duplicates"] == ["h1"]
    assert verify_store(r.ledger.store).ok


def test_a_duplicate_of_a_promoted_or_any_retired_hypothesis_is_refused() -> None:
    r = research_loop()
    r.supported("h-won", GOOD, GOOD, parameters={"width": 512})
    decide(r.ledger, r.agents["ev"], "h-won", "promoted")
    refused(r, payload("h-won-2", parameters={"width": 512}), r"duplicates 'h-won' \(promoted;")
    r.propose("h-flaky", parameters={"width": 32})
    for _ in range(3):
        r.run("h-flaky", "dev", None, status="failed")
    decide(r.ledger, r.agents["ev"], "h-flaky", "retired", reason="retry_exhausted")
    refused(r, payload("h-flaky-2", parameters={"width": 32.0}),
            r"duplicates 'h-flaky' \(retired, retry_exhausted;")


def test_a_contradicted_hypothesis_is_closed_before_it_is_retired() -> None:
    r = research_loop()
    r.supported("h-bad", WORSE, None, parameters={"width": 16})
    assert row(lanes(r), "h-bad").retirement is not None
    refused(r, payload("h-bad-2", parameters={"width": 16}), r"duplicates 'h-bad' \(contradicted;")


def test_a_refinement_must_change_the_parameters() -> None:
    r = research_loop()
    accepted(r, payload("h1"))
    refused(r, payload("h1-child", parent_id="h1"),
            "a refinement must change the parameters")
    out = accepted(r, payload("h1-child", parameters={"width": 96}, parent_id="h1"))
    assert out["hypothesis_id"] == "h1-child"
    # A grandchild with its grandparent's parameters is the grandparent's idea again.
    refused(r, payload("h1-grandchild", parent_id="h1-child"), r"duplicates 'h1' \(live;")


def test_a_supersession_may_keep_the_fingerprint_only_while_nothing_was_measured() -> None:
    r = research_loop()
    accepted(r, payload("h1", statement="badly worded"))
    # A correction of an untested hypothesis keeps its idea, down a chain of corrections.
    accepted(r, payload("h1b", statement="well worded", supersedes="h1"))
    accepted(r, payload("h1c", statement="better worded", supersedes="h1b"))
    assert row(lanes(r), "h1").retirement["reasons"] == ["superseded"]  # type: ignore[index]
    assert row(lanes(r), "h1b").retirement["reasons"] == ["superseded"]  # type: ignore[index]
    assert row(lanes(r), "h1c").retirement is None  # not a duplicate of what it corrected
    # Not superseding: the idea is taken (by the first of the chain, which cites all three).
    record = refused(r, payload("h1d"), r"duplicates 'h1' \(superseded by h1b;")
    assert record["payload"]["detail"]["duplicates"] == ["h1", "h1b", "h1c"]
    # Superseding an earlier member of the chain again: h1c is live and not in that chain.
    refused(r, payload("h1e", supersedes="h1"), r"duplicates 'h1b' \(superseded by h1c;")


def test_a_supersession_never_buys_a_fresh_measurement_of_an_idea() -> None:
    r = research_loop()
    r.propose("h2", parameters={"width": 256})
    r.run("h2", "dev", None, status="failed")  # one failed attempt is a measurement
    refused(r, payload("h2b", parameters={"width": 256}, supersedes="h2"),
            "a supersession keeps the idea's fingerprint only while nothing was measured")
    # Changed parameters are a new idea, superseding or not.
    accepted(r, payload("h2b", parameters={"width": 320}, supersedes="h2"))


def test_superseding_an_untested_hypothesis_does_not_launder_another_ones_idea() -> None:
    r = research_loop()
    r.propose("h-empty", parameters={"width": 1})
    r.supported("h-tested", GOOD, None, parameters={"width": 2})
    refused(r, payload("h-laundered", parameters={"width": 2}, supersedes="h-empty"),
            r"duplicates 'h-tested' \(live;")


def test_two_restatements_in_one_batch_are_refused_together() -> None:
    r = research_loop()
    under = r.proposer_todo("batch")
    drafts = [{"todo_id": under[0], "epoch": under[1], "payload": {
        **payload(hid, parameters=params), "claimed_by": "prop"}}
        for hid, params in (("hb1", {"width": 7}), ("hb2", {"WIDTH": 7.0}))]
    before = r.ledger.store.head().seq
    with pytest.raises(ResearchRefused, match=r"duplicates 'hb1'"):
        r.ledger.append(drafts, creds=r.agents["prop"], kind="research_hypothesis_v0")
    assert r.ledger.store.head().seq == before + 1  # the refusal, and nothing of the batch
    assert "hb1" not in lanes(r)["hypotheses"] and "hb2" not in lanes(r)["hypotheses"]
    complete(r.ledger, r.agents["prop"], *under, {"hypotheses": []})


def test_duplicates_are_no_longer_candidates_in_a_checked_log() -> None:
    r = research_loop()
    accepted(r, payload("h1"))
    with pytest.raises(ResearchRefused):
        accepted(r, payload("h2", "Width"))
    assert candidates(lanes(r))["retirement"] == []


# -- the rule, through the CLI ------------------------------------------------------------------

def run(ws: Path, *args: str, token: str = "") -> Result:
    result = CliRunner().invoke(cli, ["-C", str(ws), *args],
                                env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": ""})
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def test_the_cli_refuses_a_restated_idea_records_it_and_exits_8(tmp_path: Path) -> None:
    ws, owner_token = init_workspace(tmp_path, "dup-cli")
    r = ResearchLoop(ws.ledger(), Credentials("owner", owner_token))
    try:
        r.contract(CONTRACT)
        first = r.propose("h-w64", parameters={"width": 64, "opt": {"lr": 0.1}})
        under = r.proposer_todo("h-w64-again")
    finally:
        r.ledger.store.close()
    token = r.agents["prop"].token
    assert token is not None
    common = ("hypothesis", "propose", "--agent-id", "prop", "--under", f"{under[0]}:{under[1]}",
              "--title", "width 64, again", "--statement", "Reworded: 64 units are enough",
              "--no-grounding-reason", "another try", "--dev-todo", "dev-again")
    out = run(tmp_path, *common, "--hypothesis-id", "h-w64-again", "--mechanism", "WIDTH",
              "--param", "width=64.0", "--param", "opt.lr=1e-1", "--json", token=token)
    assert out.exit_code == 8
    error = json.loads(out.stdout)
    assert error["error"] == "research_refused" and error["rule"] == "duplicate"
    assert f"duplicates 'h-w64' (live; record {first['record_id']})" in error["message"]
    assert "rewording the statement makes no new idea" in error["hint"]
    logged = run(tmp_path, "log", "--kind", "research_refusal_v0", "--json")
    [line] = [json.loads(x) for x in logged.stdout.splitlines()]
    assert line["seq"] == error["recorded_seq"]
    assert line["payload"]["cites"] == [first["record_id"]]
    shown = run(tmp_path, "todo", "list", "--json")
    assert "dev-again" not in shown.stdout
    # Without --json: the message on stderr, no traceback, the same exit code.
    again = run(tmp_path, *common, "--hypothesis-id", "h-w64-b", "--mechanism", "width",
                "--param", "opt.lr=0.1", "--param", "width=64", token=token)
    assert again.exit_code == 8 and "duplicates 'h-w64'" in again.stderr
    # Another idea is written, and its fingerprint printed.
    made = run(tmp_path, *common, "--hypothesis-id", "h-w96", "--mechanism", "width",
               "--param", "width=96", "--json", token=token)
    assert made.exit_code == 0, made.stdout + made.stderr
    assert json.loads(made.stdout)["fingerprint"] == idea("width", {"width": 96})
    assert run(tmp_path, "verify").exit_code == 0
