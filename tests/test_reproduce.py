"""The reproduced gate: every held-out packet a promotion rests on is re-run from the commit it
cites with the evaluator's command, and a value the code does not give fails the gate.

The executor here wants a promotion and types the held-out values it hoped for into its packet;
its code gives others. Every other gate passes. The re-run is what catches it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import git
from lanes_support import campaign
from test_research import commit, refused_and_recorded, view

from loopx.governance.contract import amend_contract
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Forbidden, Refused, Unauthorized, UsageProblem
from loopx.narrator.publish import render
from loopx.research.decisions import decide
from loopx.research.operations import check_gate, reproduce_gate
from loopx.research.projections import row
from loopx.testing.research import CONTRACT, GOOD, HELDOUT, ResearchLoop

BASELINE = [0.85, 0.86, 0.84]
# The evaluator's re-run command: it reads the request on stdin and scores the checked-out
# code (here a table of what the code gives per seed), as a lane command would.
RERUN = '''
import json, os, sys
request = json.load(sys.stdin)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as out:
        json.dump({"env": sorted(os.environ), "cwd": os.getcwd(), "request": request}, out)
table = json.load(open("quality.json"))
print(json.dumps({"results": [{"seed": s, "value": table[str(s)]} for s in request["seeds"]]}))
'''


def quality(values: list[float]) -> str:
    return json.dumps({str(seed): v for seed, v in enumerate(values)}) + "\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project whose base commit's code gives the baseline's held-out values."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "eval/score.py", "def score(): ...\n", "evaluator")
    commit(repo, "quality.json", quality(BASELINE), "the baseline model")
    return repo


@pytest.fixture
def rerun(tmp_path: Path) -> list[str]:
    script = tmp_path / "rerun.py"
    script.write_text(RERUN)
    return [sys.executable, str(script)]


def reproduced_loop(base: str, tolerance: float | None = None) -> ResearchLoop:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    policy: dict[str, Any] = {"required_gates": ["protected_boundary", "heldout", "reproduced"]}
    if tolerance is not None:
        policy["reproduce_tolerance"] = tolerance
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "base_commit": base,
                "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": policy})
    return r


def measured(r: ResearchLoop, base: str, evaluated: str, heldout: list[float]) -> dict[str, str]:
    """The measured baseline from ``base``, then h1 from ``evaluated`` with the held-out values
    its executor recorded; the protected boundary checked. The packet ids, by name."""
    r.propose("base", mechanism="baseline")
    ids = {"base_dev": r.run("base", "dev", BASELINE, commits=(base, base)),
           "base_heldout": r.run("base", "heldout", BASELINE, commits=(base, base))}
    r.propose("h1")
    ids["dev"] = r.run("h1", "dev", GOOD, commits=(base, evaluated))
    r.judge("h1", "dev")
    ids["heldout"] = r.run("h1", "heldout", heldout, commits=(base, evaluated))
    r.judge("h1", "heldout")
    return ids


def test_values_the_code_does_not_give_fail_the_gate_and_block_the_promotion(
        repo: Path, rerun: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's code gives the baseline's values; it recorded HELDOUT. Every gate that
    reads the log or git passes, and without the re-run h1 would be promoted."""
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "model.py", "width = 128\n", "a change that does nothing")
    r = reproduced_loop(base)
    ids = measured(r, base, evaluated, HELDOUT)
    assert check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)["passed"]
    current = row(view(r), "h1")
    assert current.gates["heldout"].status == "passed"
    assert current.gates["reproduced"].status == "pending"
    assert current.next_action == "review_gate"
    assert current.detail == "re-run the held-out packets (`loopx gate reproduce`)"

    seen = tmp_path / "seen.json"
    token = r.agents["ev"].token or ""
    monkeypatch.setenv("LOOPX_TOKEN", token)
    monkeypatch.setenv("CI_EVALUATOR_SECRET", f"token={token}")
    out = reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=[*rerun, str(seen)],
                         timeout=60)
    assert not out["passed"] and out["gate"] == "reproduced" and out["tolerance"] == 0
    mine, baseline = out["reproductions"]
    assert mine["packet_id"] == ids["heldout"] and mine["outcome"] == "differs"
    assert mine["values"] == [{"seed": s, "recorded": h, "reproduced": b}
                              for s, h, b in zip([0, 1, 2], HELDOUT, BASELINE, strict=True)]
    assert mine["detail"] == ("3 of 3 value(s) differ by more than 0: seed 0: recorded 0.93, "
                              "the re-run gave 0.85; seed 1: recorded 0.94, the re-run gave 0.86; "
                              "seed 2: recorded 0.95, the re-run gave 0.84")
    # The baseline it was compared with is re-run too, from its own commit, and holds.
    assert baseline["packet_id"] == ids["base_heldout"] and baseline["outcome"] == "reproduced"
    current = row(view(r), "h1")
    gate = current.gates["reproduced"]
    assert gate.status == "failed" and gate.rests_on == [out["gate_id"]]
    assert gate.reasons == [f"packet {ids['heldout']}: {mine['detail']}"]
    assert current.promotion is None and current.retirement is not None
    assert current.retirement["reasons"] == ["guardrail_failed"]
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate reproduced failed")
    # A reader of the story is told which guardrail failed.
    story = render(r.ledger, "story", "md").text
    assert ("a re-run of its evaluated commit did not give the held-out values it recorded, to "
            "be retired") in story
    assert "reproduced failed" in story
    assert ("- Gates a promotion needs: heldout, protected boundary, reproduced (each held-out "
            "value re-run from its commit, within 0)") in story

    # Re-running until the values match is optional stopping: a command that now prints the
    # recorded values does not undo the failure.
    recorded = {ids["heldout"]: HELDOUT, ids["base_heldout"]: BASELINE}
    echo = [sys.executable, "-c", "import json, sys; r = json.load(sys.stdin); print(json.dumps("
            "{'results': [{'seed': s, 'value': v} for s, v in zip(r['seeds'], "
            f"{recorded!r}[r['packet_id']])]}}))"]
    again = reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=echo, timeout=60)
    assert again["passed"]
    gate = row(view(r), "h1").gates["reproduced"]
    assert gate.status == "failed" and gate.rests_on == [out["gate_id"]]
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate reproduced failed")
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="guardrail_failed")

    # What the command saw: the held-out request, a checkout of the cited commit, and no
    # loopx variable or token of the evaluator's (the code it runs is the executor's).
    saw = json.loads(seen.read_text())
    assert saw["request"] == {"packet_id": ids["base_heldout"], "hypothesis_id": "base",
                              "split": "heldout", "location": "/data/heldout", "metric": "acc",
                              "seeds": [0, 1, 2], "evaluated_commit": base}
    assert not [k for k in saw["env"] if k.startswith("LOOPX_")]
    assert "CI_EVALUATOR_SECRET" not in saw["env"] and "PATH" in saw["env"]
    # Each re-run's worktree is removed afterwards.
    assert not Path(saw["cwd"]).exists()
    assert git(repo, "worktree", "list").count("\n") == 0


def test_the_honest_executor_is_reproduced_and_promoted(repo: Path, rerun: list[str]) -> None:
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "quality.json", quality(HELDOUT), "a better model")
    r = reproduced_loop(base)
    ids = measured(r, base, evaluated, HELDOUT)
    check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    out = reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=rerun, timeout=60)
    assert out["passed"] and out["reasons"] == []
    assert [x["packet_id"] for x in out["reproductions"]] == [ids["heldout"], ids["base_heldout"]]
    assert row(view(r), "h1").gates["reproduced"].status == "passed"
    assert decide(r.ledger, r.agents["ev"], "h1", "promoted")["outcome"] == "promoted"


def test_a_re_run_that_cannot_be_made_proves_nothing_and_keeps_the_gate_pending(
        repo: Path, rerun: list[str], tmp_path: Path) -> None:
    """A command that fails, hangs, or answers for the wrong seeds says nothing about the
    executor's values: the gate stays pending (promotion still blocked), never failed."""
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "quality.json", quality(HELDOUT), "a better model")
    r = reproduced_loop(base)
    ids = measured(r, base, evaluated, HELDOUT)
    check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
    script = tmp_path / "broken.py"
    cases = {
        "import sys; sys.exit('no GPU here')": "the command exited with status 1: no GPU here",
        "import time; time.sleep(30)": "the command did not finish within 0.5 s",
        "print('done')": "the command's answer: its output is not JSON",
        'print(\'{"results": [{"seed": 0, "value": 0.93}]}\')':
            "the command's answer: results lack seed(s) 1, 2",
        'print(\'{"results": [{"seed": 7, "value": 0.93}]}\')':
            "the command's answer: results[0].seed: 7 is not one of the packet's seeds [0, 1, 2]",
        'print(\'{"results": [{"seed": 0, "value": "NaN"}]}\')':
            "the command's answer: results[0].value: 'NaN' is not a finite number",
        "import sys; sys.stdout.buffer.write(bytes([0xff, 0xfe]))":
            "the command's answer: its output is not JSON",
    }
    for code, said in cases.items():
        script.write_text(code)
        out = reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo,
                             command=[sys.executable, str(script)], timeout=0.5)
        assert not out["passed"]
        assert {x["outcome"] for x in out["reproductions"]} == {"not_run"}
        assert out["reproductions"][0]["detail"].startswith(said), out["reproductions"][0]
        gate = row(view(r), "h1").gates["reproduced"]
        assert gate.status == "pending" and gate.reasons[0].startswith(
            f"could not be re-run: packet {ids['heldout']}: {said}")
        assert row(view(r), "h1").retirement is None
    missing = reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo,
                             command=[str(tmp_path / "no-such-command")], timeout=5)
    assert missing["reproductions"][0]["detail"].startswith("the command could not start")
    assert git(repo, "worktree", "list").count("\n") == 0
    # A working command afterwards settles it.
    assert reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=rerun,
                          timeout=60)["passed"]
    assert row(view(r), "h1").gates["reproduced"].status == "passed"


def test_the_tolerance_is_the_contracts_and_cannot_be_loosened_after_evidence(
        repo: Path, rerun: list[str]) -> None:
    """Re-runs that differ by float noise pass within the tolerance the curator set; an
    amendment that widens it once evidence exists is refused and recorded, as any loosened
    guardrail is."""
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "quality.json", quality([0.934, 0.936, 0.95]), "a better model")
    r = reproduced_loop(base, tolerance=0.005)
    measured(r, base, evaluated, HELDOUT)
    out = reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=rerun, timeout=60)
    assert out["passed"] and out["tolerance"] == 0.005
    record = refused_and_recorded(r, lambda: amend_contract(
        r.ledger, r.agents["cur"], "the re-runs are noisy",
        settings=[("promotion_policy.reproduce_tolerance", 0.05)]),
        "guardrail_loosened", "widens the reproduce tolerance from 0.005")
    assert record["payload"]["detail"]["changes"] == [
        {"field": "promotion_policy.reproduce_tolerance", "before": 0.005, "after": 0.05}]
    # Tightening it is no loosening.
    amend_contract(r.ledger, r.agents["cur"], "exact re-runs",
                   settings=[("promotion_policy.reproduce_tolerance", 0.0)])


def test_nothing_to_re_run_is_refused_and_writes_nothing(repo: Path, rerun: list[str]) -> None:
    base = git(repo, "rev-parse", "HEAD")
    r = reproduced_loop(base)
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", BASELINE, commits=(base, base))
    r.propose("h1")
    r.run("h1", "dev", GOOD, commits=(base, base))
    r.judge("h1", "dev")
    before = r.ledger.store.head().seq
    with pytest.raises(Refused, match="has no final held-out judgement yet"):
        reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=rerun, timeout=60)
    with pytest.raises(UsageProblem, match="needs a command"):
        reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=[], timeout=60)
    assert r.ledger.store.head().seq == before
    assert row(view(r), "h1").gates["reproduced"].status == "pending"


def test_a_writer_that_may_not_record_it_runs_nothing(repo: Path, tmp_path: Path) -> None:
    """The executor asks for the re-run of its own packet: refused before its code runs."""
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "quality.json", quality(HELDOUT), "a better model")
    r = reproduced_loop(base)
    measured(r, base, evaluated, HELDOUT)
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    before = r.ledger.store.head().seq
    with pytest.raises(Forbidden, match="gate_result_v0"):
        reproduce_gate(r.ledger, r.agents["ex"], "h1", repo=repo, command=command, timeout=60)
    with pytest.raises(Unauthorized):
        reproduce_gate(r.ledger, Credentials("ev", "lpx_" + "x" * 43), "h1", repo=repo,
                       command=command, timeout=60)
    assert not marker.exists() and r.ledger.store.head().seq == before
    # A contract that does not require it leaves it out.
    c = campaign()
    plain = ResearchLoop(c.ledger, c.owner)
    plain.contract()
    plain.supported("h1", GOOD, HELDOUT)
    current = row(view(plain), "h1")
    assert current.gates["reproduced"].status == "not_required"
    assert current.promotion is not None


def test_gate_reproduce_on_the_command_line(repo: Path, rerun: list[str]) -> None:
    from loopx.cli import cli
    from loopx.workspace import init_workspace

    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "model.py", "width = 128\n", "a change that does nothing")
    workspace, owner = init_workspace(repo, "reproduce")
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner))
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "base_commit": base,
                "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": {"required_gates": ["heldout", "reproduced"]}})
    ids = measured(r, base, evaluated, HELDOUT)
    r.ledger.store.close()
    env = {"LOOPX_TOKEN": r.agents["ev"].token or "", "LOOPX_AGENT_ID": "ev"}
    runner = CliRunner()
    text = runner.invoke(cli, ["-C", str(repo), "gate", "reproduce", "h1", "--", *rerun], env=env)
    assert text.exit_code == 0, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("reproduced gate of h1: FAILED (2 packet(s), tolerance 0, seq ")
    assert lines[1] == (f"  {ids['heldout']}: differs: 3 of 3 value(s) differ by more than 0: "
                        "seed 0: recorded 0.93, the re-run gave 0.85; seed 1: recorded 0.94, "
                        "the re-run gave 0.86; seed 2: recorded 0.95, the re-run gave 0.84")
    assert lines[2] == f"  {ids['base_heldout']}: reproduced"
    as_json = runner.invoke(cli, ["-C", str(repo), "gate", "reproduce", "h1", "--json",
                                  "--timeout", "60", "--", *rerun], env=env)
    assert as_json.exit_code == 0, as_json.stdout + as_json.stderr
    out = json.loads(as_json.stdout)
    assert sorted(out) == ["gate", "gate_id", "hypothesis_id", "passed", "reasons",
                           "reproductions", "revision", "seq", "tolerance"]
    assert out["passed"] is False and out["reproductions"][0]["outcome"] == "differs"
    # A mistake of the user's: a clear error, exit 2, nothing written.
    head = json.loads(runner.invoke(cli, ["-C", str(repo), "status", "--json"]).stdout)
    bad = runner.invoke(cli, ["-C", str(repo), "gate", "reproduce", "h1", "--timeout", "0",
                              "--", *rerun], env=env)
    assert bad.exit_code == 2 and "--timeout" in bad.stderr and "Traceback" not in bad.stderr
    after = json.loads(runner.invoke(cli, ["-C", str(repo), "status", "--json"]).stdout)
    assert after["head"] == head["head"]


def test_a_re_run_that_differs_blocks_the_promotion_even_when_the_contract_asks_for_none(
        repo: Path, rerun: list[str]) -> None:
    """The contract does not require the gate, but the evaluator re-ran the packet anyway and
    its code gave other values: no promotion rests on values shown not to reproduce."""
    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "model.py", "width = 128\n", "a change that does nothing")
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "base_commit": base,
                "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": {"required_gates": ["heldout"]}})
    measured(r, base, evaluated, HELDOUT)
    assert row(view(r), "h1").gates["reproduced"].status == "not_required"
    assert row(view(r), "h1").promotion is not None
    assert not reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=rerun,
                              timeout=60)["passed"]
    current = row(view(r), "h1")
    gate = current.gates["reproduced"]
    assert gate.required and gate.status == "failed"
    assert current.promotion is None and current.retirement is not None
    refused_and_recorded(r, lambda: decide(r.ledger, r.agents["ev"], "h1", "promoted"),
                         "no_candidate", "gate reproduced failed")


def test_a_hypothesis_that_moved_during_the_re_run_is_refused_and_nothing_written(
        repo: Path, rerun: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-runs happen before the lock, on the hypothesis as it stood: a record that touches
    it meanwhile (here a gate check) refuses the result, which would describe an old revision."""
    import loopx.research.reproduce as reproduce

    base = git(repo, "rev-parse", "HEAD")
    evaluated = commit(repo, "quality.json", quality(HELDOUT), "a better model")
    r = reproduced_loop(base)
    measured(r, base, evaluated, HELDOUT)
    real = reproduce.rerun

    def meanwhile(*args: Any, **kwargs: Any) -> Any:
        check_gate(r.ledger, r.agents["ev"], "h1", repo=repo)
        return real(*args, **kwargs)

    monkeypatch.setattr(reproduce, "rerun", meanwhile)
    with pytest.raises(Refused, match="check it again"):
        reproduce_gate(r.ledger, r.agents["ev"], "h1", repo=repo, command=rerun, timeout=60)
    assert view(r)["hypotheses"]["h1"]["reproduction"] is None
