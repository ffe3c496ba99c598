"""The todo change commands: JSON shapes, text, refusals with exit codes, no traceback, and
nothing written when refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_lanes_cli import log_bytes, owner, register, run

ANSWER_KEYS = {"todo_id", "change", "changed", "seq", "record_id", "fenced", "todo"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    assert run(tmp_path, "init", "--goal-id", "cli-changes", "--owner-token-file",
               str(tmp_path / "owner.token")).exit_code == 0
    return tmp_path


def as_owner(ws: Path, *args: str) -> Any:
    return run(ws, *args, token=owner(ws), agent="owner")


def ok(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.stdout + result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def refused(ws: Path, result: Any, code: int, error: str, before: bytes) -> dict[str, Any]:
    assert result.exit_code == code, result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert out["error"] == error
    assert log_bytes(ws) == before, "a refused change must write nothing"
    return out  # type: ignore[no-any-return]


def add(ws: Path, todo_id: str, *extra: str, token: str | None = None,
        agent: str = "owner", role: str = "research_executor",
        action: str = "run_dev_eval") -> None:
    out = run(ws, "todo", "add", "--todo-id", todo_id, "--title", f"do {todo_id}", "--role", role,
              "--action", action, "--hypothesis", "h1", *extra, token=token or owner(ws),
              agent=agent)
    assert out.exit_code == 0, out.stderr


def next_for(ws: Path, agent: str) -> str | None:
    out = ok(run(ws, "quota", "should-run", "--agent-id", agent, "--json"))
    return None if out["todo"] is None else str(out["todo"]["todo_id"])


def test_each_change_through_the_cli(ws: Path) -> None:
    register(ws, "ex-1")
    register(ws, "ex-2")
    for t in ("a", "b", "c"):
        add(ws, t)
    assert next_for(ws, "ex-1") == "a"
    out = ok(as_owner(ws, "todo", "reprioritise", "c", "--priority", "5", "--reason", "first",
                      "--json"))
    assert set(out) == ANSWER_KEYS
    assert (out["changed"], out["change"], out["fenced"], out["todo"]["priority"]) == (
        True, "reprioritise", None, 5)
    assert next_for(ws, "ex-1") == "c"
    text = as_owner(ws, "todo", "reprioritise", "c", "--priority", "5")
    assert text.exit_code == 0 and "c: unchanged, it already has priority 5" in text.stdout

    out = ok(as_owner(ws, "todo", "block", "c", "--by", "a", "--json"))
    assert out["todo"]["state"] == "blocked" and out["todo"]["waiting_on"] == ["a"]
    assert next_for(ws, "ex-1") == "a"
    text = as_owner(ws, "todo", "unblock", "c", "--by", "a")
    assert text.exit_code == 0 and "c: does not wait for a (seq" in text.stdout
    assert next_for(ws, "ex-1") == "c"

    out = ok(as_owner(ws, "todo", "reassign", "b", "--to", "ex-2", "--json"))
    assert out["todo"]["assigned_to"] == "ex-2"
    assert next_for(ws, "ex-2") == "b" and next_for(ws, "ex-1") == "c"
    out = ok(as_owner(ws, "todo", "reassign", "b", "--unassign", "--json"))
    assert out["todo"]["assigned_to"] is None

    out = ok(as_owner(ws, "todo", "cancel", "a", "--reason", "superseded by c", "--json"))
    assert out["todo"]["state"] == "cancelled"
    assert out["todo"]["cancelled"] == {"reason": "superseded by c", "by": "owner",
                                        "seq": out["seq"]}
    listed = ok(run(ws, "todo", "list", "--state", "cancelled", "--json"))["todos"]
    assert [t["todo_id"] for t in listed] == ["a"]
    status = ok(run(ws, "status", "--json"))
    assert status["todos"]["cancelled"] == 1 and status["todos"]["open"] == 2
    shown = ok(run(ws, "todo", "show", "a", "--json"))
    assert (shown["added_role"], shown["changes"]) == ("owner", 1)
    assert ok(run(ws, "verify", "--json"))["ok"]


def test_refusals_name_the_problem_and_write_nothing(ws: Path) -> None:
    ex = register(ws, "ex-1")
    prop = register(ws, "hp-1", "hypothesis_proposer")
    add(ws, "t1")
    add(ws, "t2", "--blocked-by", "t1")
    add(ws, "mine", token=prop, agent="hp-1")
    before = log_bytes(ws)
    # Another role's todo, and a role without the kind at all.
    out = refused(ws, run(ws, "todo", "reprioritise", "t1", "--priority", "9", "--json",
                          token=prop, agent="hp-1"), 7, "forbidden", before)
    assert (out["role"], out["kind"], out["action"]) == (
        "hypothesis_proposer", "todo_change_v0", "reprioritise")
    assert "added by role 'owner'" in out["message"]
    out = refused(ws, run(ws, "todo", "unblock", "t2", "--by", "t1", "--json", token=ex,
                          agent="ex-1"), 7, "forbidden", before)
    assert "may not write todo_change_v0 with action 'unblock'" in out["message"]
    # Bad requests.
    refused(ws, as_owner(ws, "todo", "block", "t1", "--by", "t2", "--json"), 8, "refused",
            before)
    refused(ws, as_owner(ws, "todo", "cancel", "ghost", "--reason", "x", "--json"), 6,
            "not_found", before)
    refused(ws, as_owner(ws, "todo", "reassign", "t1", "--to", "hp-1", "--json"), 8,
            "refused", before)
    refused(ws, as_owner(ws, "todo", "reassign", "t1", "--json"), 2, "usage", before)
    refused(ws, as_owner(ws, "todo", "reassign", "t1", "--to", "ex-1", "--unassign", "--json"),
            2, "usage", before)
    refused(ws, as_owner(ws, "todo", "cancel", "t1", "--reason", "x", "--fence", "1", "--json"),
            4, "stale_lease", before)
    # A secret-shaped reason never reaches the log (the board would show it).
    out = refused(ws, as_owner(ws, "todo", "cancel", "t1", "--reason",
                               "AKIAIOSFODNN7EXAMPLE leaked", "--json"), 2, "invalid_record",
                  before)
    assert out["problems"][0]["field"] == "payload.reason"
    # No token, and no reason at all.
    refused(ws, run(ws, "todo", "cancel", "t1", "--reason", "x", "--json", agent="owner"), 7,
            "unauthorized", before)
    missing = as_owner(ws, "todo", "cancel", "t1")
    assert missing.exit_code == 2 and "--reason" in missing.stderr
    text = run(ws, "todo", "reprioritise", "t1", "--priority", "9", token=prop, agent="hp-1")
    assert text.exit_code == 7 and "hint: ask the owner, or an agent of role 'owner'" in text.stderr
    assert log_bytes(ws) == before


def test_cancel_and_reassign_a_held_todo_by_naming_its_lease(ws: Path) -> None:
    ex1 = register(ws, "ex-1")
    register(ws, "ex-2")
    add(ws, "t1")
    add(ws, "t2")
    got = ok(run(ws, "quota", "should-run", "--claim", "--json", token=ex1, agent="ex-1"))
    assert got["todo"]["todo_id"] == "t1"
    before = log_bytes(ws)
    # A rival executor, and a proposer that did not add the todo, fence or not.
    ex2 = register(ws, "ex-3")
    prop = register(ws, "hp-1", "hypothesis_proposer")
    before = log_bytes(ws)
    for token, agent in ((ex2, "ex-3"), (prop, "hp-1")):
        refused(ws, run(ws, "todo", "cancel", "t1", "--reason", "mine now", "--fence", "1",
                        "--json", token=token, agent=agent), 7, "forbidden", before)
        refused(ws, run(ws, "todo", "reassign", "t1", "--to", "ex-3", "--fence", "1", "--json",
                        token=token, agent=agent), 7, "forbidden", before)
    out = refused(ws, as_owner(ws, "todo", "cancel", "t1", "--reason", "stop", "--json"), 8,
                  "refused", before)
    assert "held by ex-1 under a live lease" in out["message"] and "--fence 1" in out["message"]
    out = ok(as_owner(ws, "todo", "reassign", "t1", "--to", "ex-2", "--fence", "1", "--json"))
    assert out["fenced"] == {"agent_id": "ex-1", "epoch": 1}
    assert (out["todo"]["state"], out["todo"]["holder"]) == ("open", None)
    late = run(ws, "todo", "complete", "t1", "--epoch", "1", "--json", token=ex1, agent="ex-1")
    assert late.exit_code == 4 and json.loads(late.stdout)["error"] == "stale_lease"
    got = ok(run(ws, "quota", "should-run", "--claim", "--json", token=ex1, agent="ex-1"))
    assert got["todo"]["todo_id"] == "t2"
    text = as_owner(ws, "todo", "cancel", "t2", "--reason", "dropped", "--fence", "1")
    assert text.exit_code == 0
    assert "t2: is cancelled (seq" in text.stdout
    assert "lease of ex-1 at epoch 1 ended" in text.stdout
    assert ok(run(ws, "verify", "--json"))["ok"]
