"""The example scripts the README and docs point to run to the end on a fresh workspace, and the
governance and research examples end where docs/governance.md and docs/research.md say they do."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, tmp_path: Path) -> str:
    loopx = Path(sys.executable).parent / "loopx"
    if not loopx.exists():
        pytest.skip("the loopx entry point is not installed beside this interpreter")
    env = {**os.environ, "LOOPX": str(loopx), "TMPDIR": str(tmp_path),
           "PATH": f"{loopx.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("LOOPX_TOKEN", None)
    env.pop("LOOPX_AGENT_ID", None)
    result = subprocess.run(["bash", str(EXAMPLES / name)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_walkthrough_runs_to_the_end(tmp_path: Path) -> None:
    out = run_example("walkthrough.sh", tmp_path)
    assert "\nok: " in out


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_governance_example_takes_a_campaign_from_contract_to_stop(tmp_path: Path) -> None:
    out = run_example("governance.sh", tmp_path)
    assert "h-w128 dev: contradicts" in out
    assert "d-w128: h-w128 retired (contradicted) at revision 33, seq 36" in out
    assert "campaign stopped since seq 38 (budget_exhausted:experiments)" in out
    assert "iterations 1, best -, without improvement 1" in out
    assert '"reason": "campaign_stopped"' in out
    assert "cannot move from stopped to running" in out
    assert "\nok: 38 records" in out


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None,
                    reason="needs bash and git")
def test_research_example_promotes_the_honest_hypothesis_and_retires_the_tampered_one(
        tmp_path: Path) -> None:
    out = run_example("research.sh", tmp_path)
    # The held-out location: withheld from `contract show`, given in the held-out claim packet.
    assert "(withheld: given only in a held-out todo's claim packet)" in out
    assert out.count("/data/mnist/heldout") == 2  # the contract init command line and claim.data
    # ... with the commit every experiment starts from: the one the contract pins.
    base = re.search(r'"base_commit": "([0-9a-f]{40})"', out)
    assert base is not None
    assert (f'{{"base_commit": "{base[1]}", "location": "/data/mnist/heldout", "name": '
            '"heldout", "split": "heldout"}') in out
    # The honest hypothesis: dev-only promotion refused, then promoted once every gate passed.
    assert "(dev-only lift is never a promotion)" in out
    assert "h-w128 heldout: supports" in out
    assert "protected boundary of h-w128: passed (2 packet(s)" in out
    assert "promotion  h-w128" in out
    assert "h-w128 promoted (gates_passed)" in out
    # The tampered one: its packet said clean; git says otherwise.
    assert "protected boundary of h-w256: FAILED (1 packet(s)" in out
    assert "eval/score.py: modified in" in out
    assert "retire it (guardrail_failed)" in out
    assert "h-w256 retired (guardrail_failed)" in out
    # Refused and recorded: a duplicate of the retired idea and a second held-out read.
    assert "duplicates 'h-w256' (retired, guardrail_failed;" in out
    assert '"detail": {"heldout_budget_spent": ["heldout-w128-again"]}' in out
    assert "has used its held-out read budget (1 of 1)" in out
    assert "one held-out claim admits one held-out packet" in out
    assert "the first held-out judgement is final" in out
    assert out.count("refusal recorded at seq") == 5
    for rule in ("dev_only_lift research_decision_v0 promote h-w128",
                 "duplicate research_hypothesis_v0 propose h-w256-again",
                 "heldout_once auto_research_evidence_packet_v0 record h-w128",
                 "heldout_budget auto_research_lane_claim_v1 claim h-w128",
                 "heldout_final research_evidence_event_v0 judge h-w128"):
        assert rule in out
    assert out.count("(exit status 8)") == 5
    assert "h-w128                   promoted" in out
    # The narrator: the new first screen is held back until the owner approves its preview.
    assert "first screen held back: the first screen changed and has no approved preview" in out
    assert "preview   preview-1            by narr" in out
    assert "first screen approved change" in out
    assert "> Promoted: width 128. Held-out accuracy improved by +0.008333" in out
    assert "anchor seq 71 matches" in out
    assert "/data/mnist/heldout" not in out.split("registered narr as product_narrator")[1]
    assert "h-w256                   retired" in out
    assert "iterations 2, best 0.978" in out
    assert "\nok: " in out
