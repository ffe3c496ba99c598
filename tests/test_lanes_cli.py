"""The lane commands: tokens shown once, JSON shapes, refusals with exit codes and no traceback."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from cli_support import init_with_owner_file, invoke
from click.testing import Result


def run(ws: Path, *args: str, token: str | None = None, agent: str | None = None,
        input: str | None = None) -> Result:
    return invoke(ws, *args, input=input,
                  env={"LOOPX_TOKEN": token or "", "LOOPX_AGENT_ID": agent or ""})


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return init_with_owner_file(tmp_path, "cli-lanes")


def owner(ws: Path) -> str:
    return (ws / "owner.token").read_text().strip()


def register(ws: Path, agent: str, role: str = "research_executor") -> str:
    out = run(ws, "agent", "register", "--agent-id", agent, "--role", role, "--json",
              token=owner(ws))
    assert out.exit_code == 0, out.stdout + out.stderr
    return str(json.loads(out.stdout)["token"])


def log_bytes(ws: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (ws / ".loopx" / "log").iterdir())


def test_register_shows_the_token_once_and_never_stores_it(ws: Path) -> None:
    result = run(ws, "agent", "register", "--agent-id", "ex-1", "--role", "research_executor",
                 token=owner(ws))
    assert result.exit_code == 0
    token = result.stdout.split("keep it secret): ")[1].strip()
    assert token.startswith("lpx_") and len(token) == 47
    assert token.encode() not in log_bytes(ws)
    listed = json.loads(run(ws, "agent", "list", "--json").stdout)["agents"]
    assert [(a["agent_id"], a["role"], a["revoked"]) for a in listed] == [
        ("ex-1", "research_executor", False)]
    assert token not in run(ws, "agent", "list").stdout + run(ws, "status").stdout


def test_register_into_a_private_token_file(ws: Path) -> None:
    path = ws / "ex.token"
    out = run(ws, "agent", "register", "--agent-id", "ex-1", "--role", "research_executor",
              "--out-token-file", str(path), "--json", token=owner(ws))
    assert out.exit_code == 0 and "lpx_" not in out.stdout
    assert json.loads(out.stdout)["token_file"] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ok = run(ws, "quota", "should-run", "--agent-id", "ex-1", "--claim", "--token-file", str(path))
    assert ok.exit_code == 0 and "wait: no_eligible_todo" in ok.stdout


@pytest.mark.parametrize(("args", "token", "code", "error"), [
    (("--agent-id", "ex-1", "--role", "research_executor"), None, 7, "unauthorized"),
    (("--agent-id", "ex-1", "--role", "research_executor"), "lpx_" + "y" * 43, 7, "unauthorized"),
    (("--agent-id", "owner", "--role", "research_executor"), "OWNER", 8, "refused"),
    (("--agent-id", "bad id", "--role", "research_executor"), "OWNER", 2, "invalid_record"),
])
def test_register_refusals_write_nothing(ws: Path, args: tuple[str, ...], token: str | None,
                                         code: int, error: str) -> None:
    before = log_bytes(ws)
    out = run(ws, "agent", "register", *args, "--json",
              token=owner(ws) if token == "OWNER" else token)
    assert out.exit_code == code and json.loads(out.stdout)["error"] == error
    assert log_bytes(ws) == before


def test_an_agent_token_cannot_act_as_owner(ws: Path) -> None:
    token = register(ws, "ex-1")
    out = run(ws, "agent", "register", "--agent-id", "ex-2", "--role", "research_executor",
              token=token)
    assert out.exit_code == 7 and "owner token is wrong" in out.stderr
    forbidden = run(ws, "todo", "add", "--todo-id", "t", "--title", "t", "--role",
                    "research_executor", "--action", "run_dev_eval", "--json", token=token,
                    agent="ex-1")
    assert forbidden.exit_code == 7
    error = json.loads(forbidden.stdout)
    assert (error["error"], error["role"], error["kind"], error["action"]) == (
        "forbidden", "research_executor", "todo_item_v0", "add")


def test_a_todo_through_its_whole_life(ws: Path) -> None:
    token = register(ws, "ex-1")
    add = run(ws, "todo", "add", "--todo-id", "t1", "--title", "dev eval of h1", "--role",
              "research_executor", "--action", "run_dev_eval", "--hypothesis", "h1",
              "--priority", "3", "--json", token=owner(ws), agent="owner")
    assert add.exit_code == 0 and json.loads(add.stdout)["added"][0]["todo_id"] == "t1"
    peek = json.loads(run(ws, "quota", "should-run", "--agent-id", "ex-1", "--json").stdout)
    assert (peek["run"], peek["reason"], peek["claimed"]) == (True, "selected", False)
    got = run(ws, "quota", "should-run", "--claim", "--json", token=token, agent="ex-1")
    decision = json.loads(got.stdout)
    assert len(got.stdout) < 1000  # a few hundred bytes by design
    assert decision["claimed"] and decision["claim"]["schema_version"] == "auto_research_lane_claim_v1"
    assert decision["claim"]["capability_token"] == "research_executor"
    assert decision["claim"]["hypothesis_id"] == "h1" and decision["todo"]["epoch"] == 1
    beat = run(ws, "todo", "heartbeat", "t1", "--epoch", "1", "--json", token=token, agent="ex-1")
    assert json.loads(beat.stdout)["lease_expires_at"] > decision["claim"]["lease_expires_at"]
    shown = json.loads(run(ws, "todo", "show", "t1", "--json").stdout)
    assert (shown["state"], shown["holder"], shown["epoch"]) == ("claimed", "ex-1", 1)
    status = json.loads(run(ws, "status", "--json").stdout)
    assert status["todos"]["claimed"] == 1 and status["leases"][0]["holder"] == "ex-1"
    assert status["agents"][0]["holding"] == ["t1"] and status["profiles_not_applied"] == []
    # The result says dev supports, but no packet is in the log: its word makes no successor
    # (tests/test_successor_graph.py takes successors through their whole life).
    done = run(ws, "todo", "complete", "t1", "--epoch", "1", "--result",
               '{"status": "scored", "dev": {"verdict": "supports"}}', "--json",
               token=token, agent="ex-1")
    assert json.loads(done.stdout)["successors"] == []
    human = run(ws, "todo", "list", "--role", "research_executor").stdout
    assert "t1 " in human and "completed" in human and "judge" not in human
    run(ws, "todo", "add", "--todo-id", "t2", "--title", "dev eval of h2", "--role",
        "research_executor", "--action", "run_dev_eval", "--hypothesis", "h2",
        token=owner(ws), agent="owner")
    listed = json.loads(run(ws, "todo", "list", "--state", "open", "--json").stdout)["todos"]
    assert [t["todo_id"] for t in listed] == ["t2"]
    run(ws, "quota", "should-run", "--claim", token=token, agent="ex-1")
    fail = run(ws, "todo", "fail", "t2", "--epoch", "1", "--reason", "out of memory", "--json",
               token=token, agent="ex-1")
    assert json.loads(fail.stdout)["state"] == "open"
    assert run(ws, "verify").exit_code == 0


def test_lifecycle_refusals(ws: Path) -> None:
    token = register(ws, "ex-1")
    run(ws, "todo", "add", "--todo-id", "t1", "--title", "t", "--role", "research_executor",
        "--action", "run_dev_eval", "--hypothesis", "h1", token=owner(ws), agent="owner")
    run(ws, "quota", "should-run", "--claim", token=token, agent="ex-1")
    before = log_bytes(ws)
    stale = run(ws, "todo", "complete", "t1", "--epoch", "2", "--json", token=token, agent="ex-1")
    assert stale.exit_code == 4 and json.loads(stale.stdout)["error"] == "stale_lease"
    missing = run(ws, "todo", "release", "nope", "--epoch", "1", token=token, agent="ex-1")
    assert missing.exit_code == 6 and "no todo 'nope'" in missing.stderr
    bad_json = run(ws, "todo", "complete", "t1", "--epoch", "1", "--result", "{oops",
                   token=token, agent="ex-1")
    assert bad_json.exit_code == 2 and "--result is not valid JSON" in bad_json.stderr
    not_obj = run(ws, "todo", "complete", "t1", "--epoch", "1", "--result", "[1]",
                  token=token, agent="ex-1")
    assert not_obj.exit_code == 2
    no_agent = run(ws, "todo", "release", "t1", "--epoch", "1", token=token)
    assert no_agent.exit_code == 2 and "--agent-id" in no_agent.stderr
    bad_state = run(ws, "todo", "list", "--state", "sleeping")
    assert bad_state.exit_code == 2 and "unknown state" in bad_state.stderr
    assert log_bytes(ws) == before
    released = run(ws, "todo", "release", "t1", "--epoch", "1", "--reason", "later",
                   token=token, agent="ex-1")
    assert released.exit_code == 0


def test_revoke(ws: Path) -> None:
    token = register(ws, "ex-1")
    out = run(ws, "agent", "revoke", "--agent-id", "ex-1", "--reason", "leaked", "--json",
              token=owner(ws))
    assert out.exit_code == 0 and json.loads(out.stdout)["agent_id"] == "ex-1"
    refused = run(ws, "quota", "should-run", "--claim", "--json", token=token, agent="ex-1")
    assert refused.exit_code == 7 and "revoked" in json.loads(refused.stdout)["message"]
    again = run(ws, "agent", "revoke", "--agent-id", "ex-1", token=owner(ws))
    assert again.exit_code == 8


def test_lanes_apply_records_edits_and_refuses_malformed_profiles(ws: Path) -> None:
    lanes = ws / ".loopx" / "lanes"
    profile = lanes / "product_narrator.toml"
    profile.write_text(profile.read_text().replace("lease_ttl_seconds = 600.0",
                                                   "lease_ttl_seconds = 1200.0"))
    status = json.loads(run(ws, "status", "--json").stdout)
    assert status["profiles_not_applied"] == ["product_narrator.toml"]
    applied = run(ws, "lanes", "apply", "--json", token=owner(ws))
    assert applied.exit_code == 0
    assert [r["role"] for r in json.loads(applied.stdout)["recorded"]] == ["product_narrator"]
    shown = json.loads(run(ws, "lanes", "show", "--json").stdout)["profiles"]
    assert {p["role"]: p["lease_ttl_seconds"] for p in shown}["product_narrator"] == 1200.0
    assert json.loads(run(ws, "lanes", "apply", "--json", token=owner(ws)).stdout)["recorded"] == []

    (lanes / "stargazer.toml").write_text(
        'role = "stargazer"\ncapability_token = "stargazer"\nactions = ["gaze"]\n'
        'max_concurrent_claims = "lots"\n[write_scope]\nrollout_event_v0 = ["dance"]\n')
    before = log_bytes(ws)
    bad = run(ws, "lanes", "apply", "--json", token=owner(ws))
    assert bad.exit_code == 2
    fields = [p["field"] for p in json.loads(bad.stdout)["problems"]]
    assert "lanes/stargazer.toml.max_concurrent_claims" in fields
    assert log_bytes(ws) == before
    (lanes / "stargazer.toml").write_text('role = "stargazer"\ncapability_token = "s"\n'
                                          '[write_scope]\nagent_grant_v0 = ["grant"]\n')
    owner_only = run(ws, "lanes", "apply", token=owner(ws))
    assert owner_only.exit_code == 2 and "written only by the owner" in owner_only.stderr
    (lanes / "stargazer.toml").write_text('role = "stargazer"\ncapability_token = "s"\n'
                                          'actions = ["gaze"]\n')
    assert run(ws, "lanes", "apply", token=owner(ws)).exit_code == 0
    assert register(ws, "star-1", "stargazer").startswith("lpx_")
    agent_token = register(ws, "ex-9")
    assert run(ws, "lanes", "apply", token=agent_token).exit_code == 7


def test_lanes_apply_refuses_files_edited_from_an_older_profile(ws: Path) -> None:
    import shutil

    # A second host's copy of .loopx/ (its lane files and what they were synced with), made
    # before the first host changed a profile: its files are the old versions.
    dot = ws / ".loopx"
    stale = ws.parent / "stale-copy"
    shutil.copytree(dot / "lanes", stale / "lanes")
    shutil.copy(dot / "lanes-synced.json", stale / "lanes-synced.json")
    executor = dot / "lanes" / "research_executor.toml"
    executor.write_text(executor.read_text().replace("max_attempts = 3", "max_attempts = 5"))
    first = run(ws, "lanes", "apply", "--json", token=owner(ws))
    assert [r["role"] for r in json.loads(first.stdout)["recorded"]] == ["research_executor"]

    # The second host edits another profile and applies: its stale executor file would undo
    # the first host's change. Refused, naming it; nothing recorded.
    shutil.rmtree(dot / "lanes")
    shutil.copytree(stale / "lanes", dot / "lanes")
    shutil.copy(stale / "lanes-synced.json", dot / "lanes-synced.json")
    curator = dot / "lanes" / "research_curator.toml"
    curator.write_text(curator.read_text().replace("lease_ttl_seconds = 600.0",
                                                   "lease_ttl_seconds = 1200.0"))
    before = log_bytes(ws)
    refused = run(ws, "lanes", "apply", "--json", token=owner(ws))
    assert refused.exit_code == 4, refused.stdout
    error = json.loads(refused.stdout)
    assert error["error"] == "conflict" and "research_executor" in error["message"]
    assert "research_curator" not in error["message"] and "--force" in error["hint"]
    assert log_bytes(ws) == before
    shown = {p["role"]: p for p in json.loads(run(ws, "lanes", "show", "--json").stdout)
             ["profiles"]}
    assert shown["research_executor"]["max_attempts"] == 5

    # Brought up to date, the edit goes through; so does a deliberate --force.
    executor.write_text(executor.read_text().replace("max_attempts = 3", "max_attempts = 5"))
    done = run(ws, "lanes", "apply", "--json", token=owner(ws))
    assert done.exit_code == 0, done.stdout
    assert [r["role"] for r in json.loads(done.stdout)["recorded"]] == ["research_curator"]
    shutil.copy(stale / "lanes-synced.json", dot / "lanes-synced.json")
    executor.write_text(executor.read_text().replace("max_attempts = 5", "max_attempts = 2"))
    assert run(ws, "lanes", "apply", token=owner(ws)).exit_code == 4
    forced = run(ws, "lanes", "apply", "--force", "--json", token=owner(ws))
    assert [r["role"] for r in json.loads(forced.stdout)["recorded"]] == ["research_executor"]


def _edit(ws: Path, role: str, old: str, new: str) -> None:
    path = ws / ".loopx" / "lanes" / f"{role}.toml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


def _synced(ws: Path) -> dict[str, int]:
    return json.loads((ws / ".loopx" / "lanes-synced.json").read_text())


def test_an_apply_notes_the_bases_of_the_locked_step_not_what_landed_after_it(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another host's profile record landing just after this apply's write must not become
    the base of this host's (older) file for that role: its next edit would undo that record."""
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.tools import ToolContext, call
    from loopx.work.profiles import parse_profile
    from loopx.workspace import find_workspace, record_profiles

    workspace = find_workspace(ws)
    executor = ws / ".loopx" / "lanes" / "research_executor.toml"
    theirs = parse_profile(executor.name, executor.read_bytes().replace(
        b"max_attempts = 3", b"max_attempts = 5"))
    original_write = Ledger.write
    landed: list[int] = []

    def write_then_another_host(self: Ledger, *args: object, **kwargs: object) -> object:
        written = original_write(self, *args, **kwargs)  # type: ignore[arg-type]
        # The other host's apply, between this write and anything after it.
        monkeypatch.setattr(Ledger, "write", original_write)
        with workspace.store() as store:
            done = record_profiles(Ledger(store), Credentials("owner", owner(ws)),
                                   {executor.name: theirs})
        landed.extend(r["seq"] for r in done.records)
        return written

    monkeypatch.setattr(Ledger, "write", write_then_another_host)
    _edit(ws, "research_curator", "lease_ttl_seconds = 600.0", "lease_ttl_seconds = 1200.0")
    before = _synced(ws)
    ctx = ToolContext(workspace, Credentials("owner", owner(ws)))
    try:
        out = call("lanes.apply", ctx, {})
    finally:
        ctx.close()
    monkeypatch.undo()
    assert [r["role"] for r in out["recorded"]] == ["research_curator"] and landed
    synced = _synced(ws)
    assert synced["research_curator"] == out["recorded"][0]["seq"]
    assert synced["research_executor"] == before["research_executor"] != landed[0]
    # So this host's next edit of its (older) executor file is refused, not recorded over the
    # other host's max_attempts = 5.
    _edit(ws, "research_executor", "max_attempts = 3", "max_attempts = 2")
    refused = run(ws, "lanes", "apply", "--json", token=owner(ws))
    assert refused.exit_code == 4 and "research_executor" in json.loads(refused.stdout)["message"]


def test_lanes_pull_brings_unedited_files_up_and_never_drops_an_edit(ws: Path) -> None:
    lanes = ws / ".loopx" / "lanes"
    assert json.loads(run(ws, "lanes", "pull", "--json").stdout) == {
        "written": [], "pending": [], "unwritable": [],
        "current": sorted(p.stem for p in lanes.glob("*.toml"))}
    stale = {p.name: p.read_bytes() for p in lanes.glob("*.toml")}
    stale_synced = _synced(ws)
    # Another host's changes, recorded here: executor and curator move on.
    _edit(ws, "research_executor", "max_attempts = 3", "max_attempts = 5")
    _edit(ws, "research_curator", "lease_ttl_seconds = 600.0", "lease_ttl_seconds = 900.0")
    applied = json.loads(run(ws, "lanes", "apply", "--json", token=owner(ws)).stdout)
    in_force = {r["role"]: r["seq"] for r in applied["recorded"]}
    # This host: its files from before, the curator's edited there (on the old version), the
    # narrator's edited on the version in force (not applied yet), the evaluator's gone, and a
    # new role's file that no profile in force has.
    for name, data in stale.items():
        (lanes / name).write_bytes(data)
    (ws / ".loopx" / "lanes-synced.json").write_text(json.dumps(stale_synced))
    _edit(ws, "research_curator", "max_attempts = 3", "max_attempts = 4")
    _edit(ws, "product_narrator", "max_attempts = 3", "max_attempts = 2")
    (lanes / "evaluator_promoter.toml").unlink()
    (lanes / "stargazer.toml").write_text('role = "stargazer"\ncapability_token = "s"\n')
    files = {p.name: p.read_bytes() for p in lanes.iterdir()}

    # The curator's edit was made on an older version: refused, naming it; nothing written.
    refused = run(ws, "lanes", "pull", "--json")
    assert refused.exit_code == 4, refused.stdout
    error = json.loads(refused.stdout)
    assert error["error"] == "conflict" and "research_curator" in error["message"]
    assert "research_executor" not in error["message"] and "--force" in error["hint"]
    assert {p.name: p.read_bytes() for p in lanes.iterdir()} == files
    assert _synced(ws) == stale_synced

    # Redone on the version in force, the pull goes through: the unedited executor file is
    # brought up, the missing evaluator written, the pending edits and the new role kept.
    (lanes / "research_curator.toml").write_bytes(stale["research_curator.toml"])
    _edit(ws, "research_curator", "lease_ttl_seconds = 600.0", "lease_ttl_seconds = 900.0")
    _edit(ws, "research_curator", "max_attempts = 3", "max_attempts = 4")
    (ws / ".loopx" / "lanes-synced.json").write_text(json.dumps(
        {**stale_synced, "research_curator": in_force["research_curator"]}))
    pulled = run(ws, "lanes", "pull", "--json")
    assert pulled.exit_code == 0, pulled.stdout
    assert json.loads(pulled.stdout) == {
        "written": ["evaluator_promoter", "research_executor"],
        "pending": ["product_narrator", "research_curator"],
        "current": ["hypothesis_proposer"], "unwritable": []}
    assert "max_attempts = 5" in (lanes / "research_executor.toml").read_text()
    assert (lanes / "stargazer.toml").read_bytes() == files["stargazer.toml"]
    assert (lanes / "product_narrator.toml").read_bytes() == files["product_narrator.toml"]
    shown = {p["role"]: p["seq"] for p in json.loads(run(ws, "lanes", "show", "--json").stdout)
             ["profiles"]}
    assert _synced(ws) == shown
    # The pending edits apply on top of the other host's; the written files record nothing.
    stargazer = lanes / "stargazer.toml"
    stargazer.unlink()
    done = json.loads(run(ws, "lanes", "apply", "--json", token=owner(ws)).stdout)
    assert [r["role"] for r in done["recorded"]] == ["product_narrator", "research_curator"]

    # --force drops edits: a broken file and an edit of an unknown base are rewritten.
    (lanes / "hypothesis_proposer.toml").write_text("max_attempts = [")
    synced = _synced(ws)
    del synced["research_executor"]
    (ws / ".loopx" / "lanes-synced.json").write_text(json.dumps(synced))
    _edit(ws, "research_executor", "max_attempts = 5", "max_attempts = 6")
    assert run(ws, "lanes", "pull").exit_code == 4
    forced = json.loads(run(ws, "lanes", "pull", "--force", "--json").stdout)
    assert forced["written"] == ["hypothesis_proposer", "research_executor"]
    assert run(ws, "status", "--json").stdout.count("toml") == 0  # nothing differs from the log


def test_profile_files_written_from_the_log_read_back_the_same() -> None:
    from loopx.kernel.errors import RecordRejected
    from loopx.work.profiles import (
        normal_profile,
        packaged_profiles,
        parse_profile,
        profile_toml,
    )

    for name, data in packaged_profiles().items():
        profile = parse_profile(name, data)
        assert parse_profile(name, profile_toml({**profile, "seq": 4}, 4).encode()) == profile
    profile = parse_profile("research_executor.toml",
                            packaged_profiles()["research_executor.toml"])
    profile["summary"] = 'quotes " and \\ backslash, tab\t, DEL \x7f, é, a "key"'
    profile["write_scope"]["finding_v0"] = ["add"]
    profile["successor_todos"].append({
        "rule_id": "odd", "after_action": "run_dev_eval", "conditions": ["not attempt_scored"],
        "when": [{"path": "a.b-c", "op": "eq", "value": {"k y": [1, 2.5, True, "z"]}},
                 {"path": "n", "op": "exists"}],
        "target_role": "research_executor", "action_kind": "retry_attempt",
        "title": "multi\nline", "assign_to_completer": True, "priority": -3})
    read = parse_profile("research_executor.toml", profile_toml({**profile, "seq": 9}, 9).encode())
    assert read == normal_profile(profile) and read["summary"] == profile["summary"]
    assert read["successor_todos"][-1]["when"][0]["value"] == {"k y": [1, 2.5, True, "z"]}
    # A null inside a condition's value has no TOML form: refused, not written as something else.
    profile["successor_todos"][-1]["when"][0]["value"] = {"k": None}
    with pytest.raises(RecordRejected, match="cannot be written as TOML"):
        profile_toml({**profile, "seq": 9}, 9)


def test_a_profile_toml_cannot_express_is_left_out_of_a_pull_not_the_others(ws: Path) -> None:
    from loopx.kernel.checks import Credentials
    from loopx.work.profiles import packaged_profiles, parse_profile
    from loopx.workspace import find_workspace, record_profiles

    # Recorded through the API (a file could not hold it): a rule testing a nested null.
    name = "research_executor.toml"
    profile = parse_profile(name, packaged_profiles()[name])
    profile["successor_todos"][0]["when"] = [{"path": "a", "op": "eq", "value": [None]}]
    ledger = find_workspace(ws).ledger()
    try:
        seq = record_profiles(ledger, Credentials("owner", owner(ws)), {name: profile}
                              ).records[0]["seq"]
    finally:
        ledger.store.close()
    lanes = ws / ".loopx" / "lanes"
    for path in lanes.glob("*.toml"):
        path.unlink()
    out = run(ws, "lanes", "pull", "--json")
    assert out.exit_code == 0, out.stdout
    pulled = json.loads(out.stdout)
    assert [u["role"] for u in pulled["unwritable"]] == ["research_executor"]
    assert f"seq {seq} cannot be written as TOML" in pulled["unwritable"][0]["problem"]
    assert len(pulled["written"]) == 4 and not (lanes / name).exists()
    assert "research_executor" not in _synced(ws) or _synced(ws)["research_executor"] != seq
    assert "not written: research_executor" in run(ws, "lanes", "pull").stdout
