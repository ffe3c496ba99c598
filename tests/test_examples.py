"""The example scripts the README and docs point to run to the end on a fresh workspace, and the
governance example ends where docs/governance.md says it does."""

from __future__ import annotations

import os
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
    assert "campaign stopped since seq 28 (budget_exhausted:experiments)" in out
    assert '"reason": "campaign_stopped"' in out
    assert "cannot move from stopped to running" in out
    assert "\nok: 28 records" in out
