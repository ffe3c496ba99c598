"""The first paths a new user takes: what cannot work is refused up front, naming the field or
the option, with nothing written; --out creates its directory; roles are listed and completed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from loopx.cli import cli
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import RecordRejected
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace

ROLES = ["evaluator_promoter", "hypothesis_proposer", "product_narrator", "research_curator",
         "research_executor"]


def run(ws: Path, *args: str, token: str = "", agent: str = "") -> Result:
    env = {"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": agent}
    result = CliRunner().invoke(cli, ["-C", str(ws), *args], env=env)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def loopx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process (its console entry point), with only ``env`` added."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPX_")}
    return subprocess.run([sys.executable, "-m", "loopx.cli", *args], capture_output=True,
                          text=True, env={**clean, **env}, timeout=60, check=False)


def complete(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return loopx(env=env)


def log_bytes(ws: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((ws / ".loopx" / "log").iterdir()))


def owner(ws: Path) -> str:
    return (ws / "owner.token").read_text().strip()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    assert run(tmp_path, "init", "--goal-id", "first-paths", "--owner-token-file",
               str(tmp_path / "owner.token")).exit_code == 0
    return tmp_path


def register(ws: Path, agent: str, role: str) -> str:
    out = run(ws, "agent", "register", "--agent-id", agent, "--role", role, "--json",
              token=owner(ws))
    assert out.exit_code == 0, out.stdout + out.stderr
    return str(json.loads(out.stdout)["token"])


# -- evaluation todos name their hypothesis --------------------------------------------------

@pytest.mark.parametrize("action", ["run_dev_eval", "run_holdout_eval", "retry_attempt"])
def test_an_evaluation_todo_without_a_hypothesis_is_refused_naming_the_field(
        ws: Path, action: str) -> None:
    before = log_bytes(ws)
    out = run(ws, "todo", "add", "--todo-id", "t1", "--title", "evaluate", "--role",
              "research_executor", "--action", action, "--json", token=owner(ws), agent="owner")
    assert out.exit_code == 2
    error = json.loads(out.stdout)
    assert error["error"] == "invalid_record"
    assert [p["field"] for p in error["problems"]] == ["payload.hypothesis_id"]
    assert action in error["message"] and "--hypothesis" in error["message"]
    assert log_bytes(ws) == before
    named = run(ws, "todo", "add", "--todo-id", "t1", "--title", "evaluate", "--role",
                "research_executor", "--action", action, "--hypothesis", "h1",
                token=owner(ws), agent="owner")
    assert named.exit_code == 0, named.stderr


def test_the_library_and_a_batch_refuse_it_too_and_write_nothing(ws: Path) -> None:
    with find_workspace(ws).store() as store:
        from loopx.kernel.ledger import Ledger

        ledger = Ledger(store)
        before = store.head().seq
        with pytest.raises(RecordRejected) as refused:
            add_todos(ledger, Credentials("owner", owner(ws)), [
                {"todo_id": "ok", "title": "t", "role": "research_executor",
                 "action_kind": "run_dev_eval", "hypothesis_id": "h1"},
                {"todo_id": "bad", "title": "t", "role": "research_executor",
                 "action_kind": "run_holdout_eval"}])
        assert refused.value.fields == ["payload.hypothesis_id"]
        assert "record 1 of the batch" in refused.value.message
        assert store.head().seq == before
    # A todo of another action needs no hypothesis.
    story = run(ws, "todo", "add", "--todo-id", "story", "--title", "t", "--role",
                "product_narrator", "--action", "render_story", token=owner(ws), agent="owner")
    assert story.exit_code == 0, story.stderr


def test_an_appended_evaluation_todo_without_a_hypothesis_is_refused(ws: Path) -> None:
    before = log_bytes(ws)
    draft = json.dumps({"payload": {"todo_id": "t1", "title": "t", "role": "research_executor",
                                    "action_kind": "run_dev_eval"}})
    out = CliRunner().invoke(cli, ["-C", str(ws), "append", "-k", "todo_item_v0", "-f", "-",
                                   "--json"], input=draft,
                             env={"LOOPX_TOKEN": owner(ws), "LOOPX_AGENT_ID": "owner"})
    assert out.exit_code == 2
    assert json.loads(out.stdout)["problems"][0]["field"] == "payload.hypothesis_id"
    assert log_bytes(ws) == before


# -- log --kind --------------------------------------------------------------------------------

def test_log_refuses_an_unknown_kind_naming_the_nearest(ws: Path) -> None:
    near = run(ws, "log", "--kind", "research_decision", "--json")
    assert near.exit_code == 2
    error = json.loads(near.stdout)
    assert error["error"] == "usage"
    assert "'research_decision' is not a record kind" in error["message"]
    assert "did you mean research_decision_v0" in error["message"]
    far = run(ws, "log", "--kind", "todo_item_v0", "--kind", "zzz")
    assert far.exit_code == 2 and far.stdout == ""
    assert "known kinds: action_proposal_v0," in far.stderr and "workspace_v0" in far.stderr
    known = run(ws, "log", "--kind", "lane_profile_v0", "--json")
    assert known.exit_code == 0 and len(known.stdout.splitlines()) == 5


# -- story / board --out -------------------------------------------------------------------------

def test_out_creates_missing_directories(ws: Path) -> None:
    token = register(ws, "narr", "product_narrator")
    board = ws / "public" / "site" / "board.html"
    out = run(ws, "board", "--out", str(board), "--agent-id", "narr", "--json", token=token)
    assert out.exit_code == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["path"] == str(board)
    assert board.read_text().startswith("<!DOCTYPE html>")
    story = ws / "docs-out" / "story.md"
    assert run(ws, "story", "--out", str(story), "--agent-id", "narr",
               token=token).exit_code == 0
    assert story.read_text().startswith("# ")


def test_a_refused_publication_leaves_no_directory_behind(ws: Path) -> None:
    register(ws, "narr", "product_narrator")
    before = log_bytes(ws)
    out = run(ws, "board", "--out", str(ws / "pub" / "x" / "board.html"), "--agent-id", "narr",
              "--json", token="lpx_" + "x" * 43)
    assert out.exit_code == 7 and json.loads(out.stdout)["error"] == "unauthorized"
    assert not (ws / "pub").exists()
    (ws / "afile").write_text("")
    blocked = run(ws, "story", "--out", str(ws / "afile" / "story.md"), "--agent-id", "narr",
                  "--json", token=owner(ws))
    assert blocked.exit_code == 2
    assert "afile is a file, not a directory" in json.loads(blocked.stdout)["message"]
    assert log_bytes(ws) == before


# -- roles: listed, checked, completed --------------------------------------------------------

@pytest.mark.parametrize("command", [("agent", "register"), ("todo", "add"), ("todo", "list")])
def test_role_choices_are_listed_in_help(command: tuple[str, ...]) -> None:
    out = CliRunner().invoke(cli, [*command, "--help"])
    assert out.exit_code == 0
    assert "[" + "|".join(ROLES) + "]" in out.stdout


def test_an_unknown_role_is_a_usage_error_naming_the_roles(ws: Path) -> None:
    before = log_bytes(ws)
    named = "'astrologer' is not a role; roles: " + ", ".join(ROLES)
    text = run(ws, "agent", "register", "--agent-id", "a1", "--role", "astrologer",
               token=owner(ws))
    assert text.exit_code == 2 and named in text.stderr
    # The console entry point (a real process) answers --json with a JSON error.
    out = loopx("-C", str(ws), "todo", "add", "--todo-id", "t", "--title", "t", "--role",
                 "astrologer", "--action", "gaze", "--json", env={"LOOPX_TOKEN": owner(ws),
                                                                 "LOOPX_AGENT_ID": "owner"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    error = json.loads(out.stdout)
    assert error["error"] == "usage" and named in error["message"]
    assert log_bytes(ws) == before


def test_a_role_the_workspace_added_is_accepted(ws: Path) -> None:
    (ws / ".loopx" / "lanes" / "stargazer.toml").write_text(
        'role = "stargazer"\ncapability_token = "stargazer"\nactions = ["gaze"]\n')
    assert run(ws, "lanes", "apply", token=owner(ws)).exit_code == 0
    assert register(ws, "s1", "stargazer").startswith("lpx_")
    listed = run(ws, "todo", "list", "--role", "stargazer", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == {"todos": []}


@pytest.mark.parametrize(("shell", "needle"), [("bash", "complete -o nosort -F _loopx_completion"),
                                               ("zsh", "#compdef loopx"),
                                               ("fish", "complete --no-files --command loopx")])
def test_the_completion_script_is_produced(shell: str, needle: str) -> None:
    out = complete({"_LOOPX_COMPLETE": f"{shell}_source"})
    assert out.returncode == 0, out.stderr
    assert needle in out.stdout and "_LOOPX_COMPLETE" in out.stdout


def test_role_completion_offers_the_roles() -> None:
    every = complete({"_LOOPX_COMPLETE": "bash_complete",
                       "COMP_WORDS": "loopx agent register --agent-id a --role ",
                       "COMP_CWORD": "6"})
    assert every.returncode == 0, every.stderr
    assert every.stdout.split() == [f"plain,{role}" for role in ROLES]
    some = complete({"_LOOPX_COMPLETE": "bash_complete",
                      "COMP_WORDS": "loopx todo add --role research_", "COMP_CWORD": "4"})
    assert some.stdout.split() == ["plain,research_curator", "plain,research_executor"]
    kinds = complete({"_LOOPX_COMPLETE": "bash_complete",
                       "COMP_WORDS": "loopx log --kind research_dec", "COMP_CWORD": "3"})
    assert kinds.stdout.split() == ["plain,research_decision_v0"]
