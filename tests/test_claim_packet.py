"""The claim packet describes itself truthfully (004's Lane Claim Packet): a claim appended by
hand carries exactly the capability token, actions, write scope, hypothesis and blockers loopx
computes for that todo and agent, through the library, through `loopx append`, and in
`loopx verify` for a claim appended around both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import init_with_owner_file, invoke
from lanes_support import Campaign, campaign

from loopx.kernel.errors import Refused
from loopx.kernel.kinds import new_record_id
from loopx.kernel.verify import verify_store
from loopx.work.claims import complete, should_run
from loopx.work.should_run import claim_fields
from loopx.workspace import find_workspace

KIND = "auto_research_lane_claim_v1"


def evaluator_packet(c: Campaign) -> dict[str, Any]:
    """What an evaluator's claim would say of itself: the role an executor might pose as."""
    c.agent("ev-1", "evaluator_promoter")
    c.todo("ev-work", role="evaluator_promoter", action_kind="judge_evidence")
    return claim_fields(c.lanes, "ev-1", "ev-work")


# Each forgery: the field it changes, and the value (a function of the evaluator's packet and
# the honest one) it states instead.
FORGERIES = {
    "capability_token": lambda ev, honest: ev["capability_token"],
    "allowed_actions": lambda ev, honest: ev["allowed_actions"],
    "write_scope": lambda ev, honest: ev["write_scope"],
    "hypothesis_id": lambda ev, honest: "h-other",
    "blocked_by": lambda ev, honest: ["ev-work"],
}


@pytest.mark.parametrize("field", sorted(FORGERIES))
def test_a_claim_stating_another_roles_packet_is_refused_naming_the_field(field: str) -> None:
    c = campaign()
    ex = c.agent("ex-1", "research_executor")
    c.todo("t1")
    evaluator = evaluator_packet(c)
    honest = claim_fields(c.lanes, "ex-1", "t1")
    forged = {**honest, field: FORGERIES[field](evaluator, honest)}
    assert forged[field] != honest[field]
    head = c.head()
    with pytest.raises(Refused, match=f"must carry {field} ") as err:
        c.ledger.append({"todo_id": "t1", "epoch": 1, "payload": forged}, creds=ex, kind=KIND)
    assert repr(honest[field]) in str(err.value)
    assert c.head() == head and c.lanes["todos"]["t1"]["status"] == "open"
    # The truthful packet, appended the same way by hand, is accepted and verifies.
    c.ledger.append({"todo_id": "t1", "epoch": 1, "payload": honest}, creds=ex, kind=KIND)
    assert c.lanes["todos"]["t1"]["holder"] == "ex-1"
    assert verify_store(c.ledger.store).ok


def test_the_packet_shown_the_record_written_and_the_check_agree() -> None:
    c = campaign()
    ex = c.agent("ex-1", "research_executor")
    c.todo("t0")
    c.todo("t1", blocked_by=["t0"], hypothesis_id="h7")
    should_run(c.ledger, "ex-1", claim=True, creds=ex)
    complete(c.ledger, ex, "t0", 1, {"status": "failed"})
    got = should_run(c.ledger, "ex-1", claim=True, creds=ex)
    record = c.records(KIND)[-1]
    assert record["todo_id"] == got["todo"]["todo_id"] == "t1"
    for name, value in record["payload"].items():
        if name not in ("context", "via"):
            assert got["claim"][name] == value, name
    p = record["payload"]
    assert (p["hypothesis_id"], p["blocked_by"], p["capability_token"]) == (
        "h7", ["t0"], "research_executor")
    assert "auto_research_evidence_packet_v0" in p["write_scope"]
    assert "research_decision_v0" not in p["write_scope"]
    assert verify_store(c.ledger.store).ok


# -- through the command line --------------------------------------------------------------------

def run(ws: Path, *args: str, token: str | None = None, agent: str | None = None,
        input: str | None = None) -> Any:
    return invoke(ws, *args, input=input,
                  env={"LOOPX_TOKEN": token or "", "LOOPX_AGENT_ID": agent or ""})


def log_bytes(ws: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((ws / ".loopx" / "log").iterdir()))


def register(ws: Path, agent: str, role: str) -> str:
    owner = (ws / "owner.token").read_text().strip()
    out = run(ws, "agent", "register", "--agent-id", agent, "--role", role, "--json",
              token=owner)
    assert out.exit_code == 0, out.stderr
    return str(json.loads(out.stdout)["token"])


def add_todo(ws: Path, todo_id: str, role: str, action: str) -> None:
    owner = (ws / "owner.token").read_text().strip()
    out = run(ws, "todo", "add", "--todo-id", todo_id, "--title", todo_id, "--role", role,
              "--action", action, "--hypothesis", "h1", "--json", token=owner, agent="owner")
    assert out.exit_code == 0, out.stderr


def test_loopx_append_refuses_a_forged_packet_and_verify_reports_one_appended_around_it(
        tmp_path: Path) -> None:
    ws = init_with_owner_file(tmp_path, "claim-packet")
    token = register(ws, "ex-1", "research_executor")
    register(ws, "ev-1", "evaluator_promoter")
    add_todo(ws, "t1", "research_executor", "run_dev_eval")
    add_todo(ws, "ev-work", "evaluator_promoter", "judge_evidence")
    ledger = find_workspace(ws).ledger()
    try:
        lanes = ledger.state()["lanes"]
        honest = claim_fields(lanes, "ex-1", "t1")
        evaluator = claim_fields(lanes, "ev-1", "ev-work")
        grant = lanes["agents"]["ex-1"]["grant_id"]
    finally:
        ledger.store.close()
    # An executor claims its todo but states the evaluator's capability and write scope.
    forged = {**honest, "capability_token": evaluator["capability_token"],
              "write_scope": evaluator["write_scope"]}
    before = log_bytes(ws)
    out = run(ws, "append", "-k", KIND, "-f", "-", "--json", token=token, agent="ex-1",
              input=json.dumps({"todo_id": "t1", "epoch": 1, "payload": forged}))
    assert out.exit_code == 8, out.stdout + out.stderr
    error = json.loads(out.stdout)
    assert error["error"] == "refused"
    assert "must carry capability_token 'research_executor', not 'evaluator_promoter'" in (
        error["message"])
    assert log_bytes(ws) == before
    assert run(ws, "verify").exit_code == 0

    # The same claim written straight to the store, around the library and the CLI.
    store = find_workspace(ws).ledger().store
    try:
        store.append([{"schema_version": KIND, "record_id": new_record_id(),
                       "goal_id": "claim-packet", "agent_id": "ex-1",
                       "lane_role": "research_executor", "capability": grant, "todo_id": "t1",
                       "epoch": 1, "visibility": "public", "provenance": "computed",
                       "payload": {**forged, "context": {}, "via": "should_run"}}])
    finally:
        store.close()
    report = run(ws, "verify", "--json")
    assert report.exit_code == 5
    verdict = json.loads(report.stdout)
    assert not verdict["ok"] and "fails the write checks" in verdict["problem"]
    assert "must carry capability_token 'research_executor'" in verdict["problem"]
