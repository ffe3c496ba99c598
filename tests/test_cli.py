"""The CLI: thin over the library, --json everywhere, user mistakes never print a traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import init_with_owner_file
from cli_support import invoke as run
from click.testing import CliRunner

from loopx.cli import cli
from loopx.kernel.kinds import kind_names
from loopx.testing.lanes import Writer, executor_writer
from loopx.workspace import find_workspace

Env = dict[str, str]


def note(writer: Writer) -> str:
    """A rollout_event_v0 draft tied to the writer's todo, as JSON text."""
    return json.dumps(writer.tie({"payload": {"event": "note", "detail": {"k": "v"}}}))


def new_writer(ws: Path, agent_id: str) -> Writer:
    """Register ``agent_id`` as an executor holding its own todo; its token goes to a file."""
    owner_token = (ws / "owner.token").read_text().strip()
    with find_workspace(ws).store() as store:
        from loopx.kernel.ledger import Ledger

        writer = executor_writer(Ledger(store), owner_token, agent_id)
    assert writer.creds.token is not None
    (ws / f"{agent_id}.token").write_text(writer.creds.token + "\n")
    return writer


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A fresh workspace (seq 1-6: genesis and the role profiles); owner token in owner.token."""
    return init_with_owner_file(tmp_path, "cli-test")


@pytest.fixture
def writer(ws: Path) -> Writer:
    """Executor agent-1 (seq 7-9: grant, todo, claim), holding its todo."""
    return new_writer(ws, "agent-1")


@pytest.fixture
def as_writer(writer: Writer) -> Env:
    """The environment that makes agent-1 the acting agent (LOOPX_AGENT_ID and LOOPX_TOKEN)."""
    assert writer.creds.token is not None
    return {"LOOPX_AGENT_ID": writer.creds.agent_id, "LOOPX_TOKEN": writer.creds.token}


def test_init_shows_the_token_once_and_stores_only_its_digest(tmp_path: Path) -> None:
    result = run(tmp_path, "init", "--json")
    assert result.exit_code == 0
    out = json.loads(result.stdout)
    token = out["owner_token"]
    assert token.startswith("lpx_") and len(token) >= 40
    assert out["goal_id"] == tmp_path.name
    log_bytes = b"".join(p.read_bytes() for p in (tmp_path / ".loopx").rglob("*") if p.is_file())
    assert token.encode() not in log_bytes
    assert sorted(p.name for p in (tmp_path / ".loopx" / "lanes").iterdir()) == [
        "evaluator_promoter.toml", "hypothesis_proposer.toml", "product_narrator.toml",
        "research_curator.toml", "research_executor.toml"]
    again = run(tmp_path, "init")
    assert again.exit_code == 3 and "already holds a loopx workspace" in again.stderr


def test_owner_token_file_is_private(tmp_path: Path) -> None:
    token_file = tmp_path / "owner.token"
    result = run(tmp_path, "init", "--owner-token-file", str(token_file))
    assert result.exit_code == 0 and "lpx_" not in result.stdout
    assert token_file.read_text().startswith("lpx_")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


def test_invalid_goal_id_writes_nothing(tmp_path: Path) -> None:
    result = run(tmp_path, "init", "--goal-id", "not a valid id")
    assert result.exit_code == 2 and "goal_id" in result.stderr
    assert not (tmp_path / ".loopx").exists()


def test_append_log_show(ws: Path, writer: Writer, as_writer: Env) -> None:
    # agent-1 from the environment (LOOPX_AGENT_ID, LOOPX_TOKEN); seq 1-9 are init and its setup
    one = run(ws, "append", "-k", "rollout_event_v0", "-f", "-", "--json", input=note(writer),
              env=as_writer)
    assert one.exit_code == 0
    appended = json.loads(one.stdout)
    assert appended["head"]["seq"] == 10 and appended["records"][0]["seq"] == 10
    agent7 = new_writer(ws, "agent-7")  # seq 11-13
    batch = f"[{note(agent7)}, {note(agent7)}]"
    # agent-7 from the options, overriding the environment
    two = run(ws, "append", "-k", "rollout_event_v0", "-f", "-", "--agent-id", "agent-7",
              "--token-file", str(ws / "agent-7.token"), input=batch, env=as_writer)
    assert two.exit_code == 0 and "seq 14-15" in two.stdout

    lines = run(ws, "log", "--json").stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["seq"] for r in records] == list(range(1, 16))
    assert records[9]["agent_id"] == "agent-1"
    assert records[13]["agent_id"] == records[14]["agent_id"] == "agent-7"
    assert [json.loads(x)["seq"] for x in run(ws, "log", "--json", "--since", "13").stdout.splitlines()] == [14, 15]
    assert len(run(ws, "log", "--json", "--limit", "1").stdout.splitlines()) == 1
    assert [json.loads(x)["seq"] for x in
            run(ws, "log", "--json", "-k", "workspace_v0").stdout.splitlines()] == [1]
    human = run(ws, "log").stdout.splitlines()
    assert len(human) == 15 and "rollout_event_v0" in human[9]

    by_id = run(ws, "show", records[13]["record_id"], "--json")
    assert json.loads(by_id.stdout) == records[13]
    by_seq = run(ws, "show", "14", "--json")
    assert json.loads(by_seq.stdout) == records[13]
    missing = run(ws, "show", "rec_nope")
    assert missing.exit_code == 6 and "rec_nope" in missing.stderr


def test_append_file_argument(ws: Path, tmp_path: Path, writer: Writer, as_writer: Env) -> None:
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(writer.tie({"schema_version": "rollout_event_v0",
                                            "payload": {"event": "started"}})))
    assert run(ws, "append", "--file", str(draft), env=as_writer).exit_code == 0
    assert run(ws, "append", "--file", str(tmp_path / "absent.json"),
               env=as_writer).exit_code == 2


@pytest.mark.parametrize(("text", "words"), [
    ("{not json", "not valid JSON"),
    ('{"payload": {"event": "note"}, "payload": {}}', "duplicate key"),
    ('{"payload": {"event": "note", "detail": {"x": NaN}}}', "NaN"),
    ('{"payload": {"event": "teleported"}}', "payload.event"),
    ('{"payload": {"event": "note", "colour": 1}}', "payload.colour: unknown field"),
    ("[]", "non-empty array"),
])
def test_bad_input_is_refused_and_nothing_written(ws: Path, as_writer: Env, text: str,
                                                  words: str) -> None:
    before = (ws / ".loopx" / "log" / "000000000001.jsonl").read_bytes()
    result = run(ws, "append", "-k", "rollout_event_v0", "-f", "-", input=text, env=as_writer)
    assert result.exit_code == 2
    assert words in result.stderr
    assert (ws / ".loopx" / "log" / "000000000001.jsonl").read_bytes() == before


def test_errors_as_json(ws: Path, as_writer: Env) -> None:
    result = run(ws, "append", "-k", "rollout_event_v0", "-f", "-", "--json",
                 input='{"payload": {"event": "bad"}}', env=as_writer)
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["error"] == "invalid_record"
    assert error["problems"][0]["field"] == "payload.event"


def test_unknown_kind_lists_known_ones(ws: Path, as_writer: Env) -> None:
    result = run(ws, "append", "-k", "made_up_v0", "-f", "-", input='{"payload": {}}',
                 env=as_writer)
    assert result.exit_code == 2 and "unknown kind 'made_up_v0'" in result.stderr
    assert "research_contract_v0" in result.stderr


def test_expect_seq_conflict(ws: Path, writer: Writer, as_writer: Env) -> None:
    # the head is at seq 9 (init and agent-1's setup)
    result = run(ws, "append", "-k", "rollout_event_v0", "-f", "-", "--expect-seq", "7",
                 input=note(writer), env=as_writer)
    assert result.exit_code == 4 and "not the expected 7" in result.stderr
    assert "log is at seq 9" in result.stderr


def test_no_workspace(tmp_path: Path) -> None:
    result = run(tmp_path, "log")
    assert result.exit_code == 3 and "no loopx workspace" in result.stderr
    assert "loopx init" in result.stderr


def test_workspace_found_from_a_subdirectory_and_env(ws: Path) -> None:
    sub = ws / "a" / "b"
    sub.mkdir(parents=True)
    env = {**os.environ, "LOOPX_WORKSPACE": ""}
    found = subprocess.run([sys.executable, "-m", "loopx", "log", "--json"], cwd=sub, env=env,
                           capture_output=True, text=True)
    assert found.returncode == 0 and json.loads(found.stdout.splitlines()[0])["seq"] == 1
    elsewhere = ws.parent
    via_env = subprocess.run([sys.executable, "-m", "loopx", "verify"], cwd=elsewhere,
                             env={**os.environ, "LOOPX_WORKSPACE": str(ws)},
                             capture_output=True, text=True)
    assert via_env.returncode == 0 and via_env.stdout.startswith("ok:")


def test_unknown_format_names_migrate(ws: Path) -> None:
    config = ws / ".loopx" / "workspace.json"
    config.write_text(json.dumps({"format_version": 99, "store": "file"}))
    result = run(ws, "log")
    assert result.exit_code == 3 and "loopx migrate" in result.stderr
    assert "99" in result.stderr


def test_migrate_reports_current_format(ws: Path) -> None:
    result = run(ws, "migrate", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"workspace": str(ws.resolve()), "format_version": 1,
                                         "migrated": False}


def test_verify_json_shape(ws: Path) -> None:
    result = run(ws, "verify", "--json")
    report = json.loads(result.stdout)
    # init writes the genesis record and the 5 role profiles
    assert report["ok"] is True and report["records"] == 6 and report["segments"] == 1
    assert set(report) == {"ok", "records", "segments", "head", "first_bad_seq", "problem",
                           "where", "notes", "anchor"}


def test_schemas_export_and_check(tmp_path: Path) -> None:
    out = tmp_path / "s"
    result = CliRunner().invoke(cli, ["schemas", "export", "--out", str(out), "--json"])
    # every record kind plus the draft schema
    assert result.exit_code == 0 and len(json.loads(result.stdout)["written"]) == len(kind_names()) + 1
    check = CliRunner().invoke(cli, ["schemas", "export", "--out", str(out), "--check"])
    assert check.exit_code == 0
    (out / "todo_item_v0.schema.json").write_text("{}")
    stale = CliRunner().invoke(cli, ["schemas", "export", "--out", str(out), "--check", "--json"])
    assert stale.exit_code == 1 and json.loads(stale.stdout)["stale"] == ["todo_item_v0.schema.json"]


def test_python_dash_m_and_version() -> None:
    result = subprocess.run([sys.executable, "-m", "loopx", "--version"], capture_output=True,
                            text=True)
    assert result.returncode == 0 and "0.1.0" in result.stdout


def test_owner_token_file_in_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    result = run(tmp_path, "init", "--owner-token-file", str(tmp_path / "no" / "such" / "t"))
    assert result.exit_code == 2 and "cannot create" in result.stderr
    assert not (tmp_path / ".loopx").exists()


def test_init_given_the_loopx_directory_itself(tmp_path: Path) -> None:
    assert run(tmp_path / ".loopx", "init").exit_code == 0
    assert (tmp_path / ".loopx" / "workspace.json").is_file()
    assert not (tmp_path / ".loopx" / ".loopx").exists()


def test_show_out_of_range_seqs(ws: Path) -> None:
    for seq in ("0", "99"):
        result = run(ws, "show", seq)
        assert result.exit_code == 6 and f"no record with seq {seq}" in result.stderr


def test_migrate_refuses_a_newer_format(ws: Path) -> None:
    (ws / ".loopx" / "workspace.json").write_text(
        json.dumps({"format_version": 7, "store": "file"}))
    result = run(ws, "migrate")
    assert result.exit_code == 3 and "upgrade loopx" in result.stderr


@pytest.mark.parametrize(("data", "words"), [
    ('{"payload": {"event": "note", "detail": {"x": ' + "9" * 5000 + "}}}", "digits"),
    ('{"payload": {"event": "note"}}'.encode("utf-16"), "not UTF-8"),
    ('{"payload": {"event": "note"}, "record_id": "rec_mine"}', "record_id: assigned by loopx"),
])
def test_more_bad_input(ws: Path, as_writer: Env, data: str | bytes, words: str) -> None:
    source = ws / "draft.json"
    source.write_bytes(data.encode() if isinstance(data, str) else data)
    result = run(ws, "append", "-k", "rollout_event_v0", "-f", str(source), env=as_writer)
    assert result.exit_code == 2 and words in result.stderr


def test_click_usage_errors_honour_json(ws: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "loopx", "-C", str(ws), "log", "--limit", "0",
                             "--json"], capture_output=True, text=True)
    assert result.returncode == 2
    error = json.loads(result.stdout)
    assert error["error"] == "usage" and "--limit" in error["message"]
    plain = subprocess.run([sys.executable, "-m", "loopx", "-C", str(ws), "log", "--limit", "0"],
                           capture_output=True, text=True)
    assert plain.returncode == 2 and "--limit" in plain.stderr and "Traceback" not in plain.stderr
