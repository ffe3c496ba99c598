"""The in-process CLI for the command tests: run ``loopx -C WS ...`` and make a workspace."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from loopx.cli import cli


def invoke(ws: Path, *args: str, input: str | None = None,
           env: dict[str, str] | None = None) -> Result:
    """Run ``loopx -C ws ARGS`` in this process; a traceback in its output fails the test."""
    result = CliRunner().invoke(cli, ["-C", str(ws), *args], input=input, env=env)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def init_with_owner_file(root: Path, goal_id: str) -> Path:
    """``loopx init`` at ``root``, the owner token written to ``root/owner.token``."""
    assert invoke(root, "init", "--goal-id", goal_id, "--owner-token-file",
                  str(root / "owner.token")).exit_code == 0
    return root
