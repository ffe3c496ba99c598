"""docs/demo.md's "Your own experiment" walk-through, run as written: every bash block between
its first-path markers, in order, in one bash process in a new directory, with real loopx, git
and lane processes. The end state is a promotion, a published story and board, and a log that
verifies."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "docs" / "demo.md"
BEGIN = "<!-- first-path:begin"
END = "<!-- first-path:end -->"
BLOCK = re.compile(r"^```bash\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SHOWN = re.compile(r"^```console\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# What differs between runs in the output the page shows: ids, hashes and sequence numbers.
VARYING = re.compile(r"((?<=seq )\d+|(?<=rev )\d+|(?<=revision )\d+|(?<=ok: )\d+"
                     r"|[0-9a-f]{12,})")

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None,
                                reason="the walk-through needs git and bash")


def section() -> str:
    """The marked part of docs/demo.md."""
    text = DEMO.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "one pair of first-path markers"
    return text[text.index(BEGIN):text.index(END)]


def shown_lines() -> list[re.Pattern[str]]:
    """The output the page shows (its console blocks), as patterns in which ids, hashes and
    sequence numbers may differ."""
    out = []
    for block in SHOWN.findall(section()):
        for line in block.splitlines():
            if line.strip() and "..." not in line:
                parts = VARYING.split(line)
                out.append(re.compile("".join(
                    re.escape(p) if i % 2 == 0 else (r"\d+" if p.isdigit() else "[0-9a-f]+")
                    for i, p in enumerate(parts))))
    return out


def walkthrough() -> list[str]:
    """The bash blocks of the marked section, in order."""
    blocks = BLOCK.findall(section())
    # Every bash fence in the section is a block that runs: none is skipped by a typo.
    assert len(blocks) == section().count("```bash"), "a bash block the extraction missed"
    return blocks


def test_the_markers_hold_the_whole_path() -> None:
    script = "\n".join(walkthrough())
    for step in ("git init", "loopx init", "loopx agent register", "loopx contract init",
                 "--protected", "--heldout-location", "--baseline-hypothesis",
                 "loopx hypothesis propose", "--dev-todo", "loopx lane run", "--idle-polls",
                 "loopx evidence judge", "loopx gate check", "loopx decide promote",
                 "loopx story --out", "loopx board --out", "loopx verify"):
        assert step in script, f"the walk-through lost its {step!r} step"


def loopx_json(cwd: Path, env: dict[str, str], *args: str) -> list[dict[str, object]]:
    out = subprocess.run(["loopx", *args, "--json"], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_your_own_experiment_runs_as_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = str(Path(sys.executable).parent)  # the venv's loopx and python3 come first
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOOPX_", "GIT_", "PYTHON"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
               HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="New User",
               GIT_AUTHOR_EMAIL="new@example.org", GIT_COMMITTER_NAME="New User",
               GIT_COMMITTER_EMAIL="new@example.org")
    script = "set -euo pipefail\n" + "\n".join(walkthrough())
    done = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    printed = (done.stdout + done.stderr).splitlines()
    expected = shown_lines()
    assert len(expected) >= 10
    for pattern in expected:
        assert any(pattern.fullmatch(line) for line in printed), \
            f"docs/demo.md shows a line the walk-through did not print: {pattern.pattern}"

    project = work / "my-experiment"
    decisions = loopx_json(project, env, "log", "--kind", "research_decision_v0")
    assert [(d["payload"]["hypothesis_id"], d["payload"]["outcome"]) for d in decisions] == [
        ("h-learned", "promoted")]
    assert loopx_json(project, env, "log", "--kind", "research_refusal_v0") == []
    packets = loopx_json(project, env, "log", "--kind", "auto_research_evidence_packet_v0")
    assert sorted((p["payload"]["hypothesis_id"], p["payload"]["results"][0]["split"],
                   p["payload"]["status"], len(p["payload"]["results"])) for p in packets) == [
        ("base", "dev", "scored", 5), ("base", "heldout", "scored", 5),
        ("h-learned", "dev", "scored", 5), ("h-learned", "heldout", "scored", 5)]
    [heldout] = [e["payload"] for e in loopx_json(project, env, "log", "--kind",
                                                  "research_evidence_event_v0")
                 if e["payload"]["split"] == "heldout"]
    assert heldout["verdict"] == "supports" and heldout["control"]["discovery"] is True
    assert len(heldout["baseline_values"]) == 5  # measured, not assumed

    story = (project / "public" / "story.md").read_text()
    assert story.startswith("# Does a learned threshold beat the fixed 0.5")
    assert "Promoted: A learned threshold." in story
    assert (project / "public" / "board.html").read_text().startswith("<!DOCTYPE html>")
    published = loopx_json(project, env, "log", "--kind", "publication_v0")
    assert [p["payload"]["surface"] for p in published] == ["story", "board"]
    assert published[0]["payload"]["first_screen_status"] == "approved_change"
    [verified] = loopx_json(project, env, "verify")
    assert verified["ok"] is True

    # The executor worked in worktrees that are gone again, on branches that stay.
    branches = subprocess.run(["git", "branch", "--list", "loopx/*", "--format",
                               "%(refname:short)"], cwd=project, env=env, capture_output=True,
                              text=True, check=True).stdout.split()
    assert sorted(branches) == ["loopx/dev-base/1", "loopx/dev-learned/1",
                                "loopx/heldout-base/1", "loopx/heldout-learned/1"]
    assert not any((project / ".loopx" / "worktrees").iterdir())
    # No token was written into the project; they live where the walk-through put them.
    assert sorted(p.name for p in (home / ".loopx-tokens" / "my-experiment").iterdir()) == [
        "cur.token", "ev.token", "ex.token", "narr.token", "owner.token", "prop.token"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project, env=env,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    assert [line for line in status if line and "public/" not in line] == []
