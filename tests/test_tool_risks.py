"""Conservative risk classification (002): loopx reconstructs the risk of a campaign's own tool
from the contract's ``tool_risks`` instead of taking the proposer's word, and a tool the
contract does not declare is treated as destructive (the owner approves it in every mode)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import init_with_owner_file, invoke
from lanes_support import Campaign, campaign

from loopx.governance.actions import propose
from loopx.governance.contract import amend_contract, init_contract
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import RecordRejected, Refused, UsageProblem
from loopx.kernel.kinds import new_record_id
from loopx.kernel.verify import verify_store
from loopx.testing.research import CONTRACT as RESEARCH_CONTRACT

CONTRACT: dict[str, Any] = {
    **RESEARCH_CONTRACT,
    "mode": "bounded",  # only destructive actions (and listed classes) need approval
    "tool_risks": {"lab.*": "read", "lab.wipe_*": "destructive", "lab.train": "compute"},
}


def setup(contract: dict[str, Any] | None = CONTRACT) -> tuple[Campaign, Credentials,
                                                               Credentials]:
    """A campaign with a curator (who wrote ``contract``) and an executor."""
    c = campaign()
    curator = c.agent("cur", "research_curator")
    ex = c.agent("ex", "research_executor")
    if contract is not None:
        init_contract(c.ledger, curator, contract)
    return c, curator, ex


def hand_proposal(tool: str, risk: str, needs: bool, pid: str = "p-hand") -> dict[str, Any]:
    return {"payload": {"proposal_id": pid, "name": "n", "tool": tool, "risk": risk,
                        "reason": "r", "eligible": True, "requires_approval": needs,
                        "contract_version": 1}}


def test_a_destructive_lab_tool_proposed_as_read_is_refused_naming_the_field() -> None:
    c, _, ex = setup()
    head = c.head()
    # Declared destructive (by the most restrictive of the two globs that match it).
    with pytest.raises(Refused, match=r"^risk: the contract declares lab.wipe_cluster "
                                      r"destructive \(tool_risks entry 'lab.wipe_\*'\), not read"):
        propose(c.ledger, ex, name="free the cluster", tool="lab.wipe_cluster", risk="read",
                reason="disk is full")
    # The same proposal appended by hand, with the verdicts a read tool would get.
    with pytest.raises(Refused, match="^risk: the contract declares lab.wipe_cluster "):
        c.ledger.append(hand_proposal("lab.wipe_cluster", "read", False), creds=ex,
                        kind="action_proposal_v0")
    assert c.head() == head
    # Stated as what it is, it is recorded and waits for the owner, even in bounded mode.
    out = propose(c.ledger, ex, name="free the cluster", tool="lab.wipe_cluster",
                  risk="destructive", reason="disk is full")
    assert (out["risk"], out["requires_approval"], out["can_execute"]) == (
        "destructive", True, False)
    assert verify_store(c.ledger.store).ok


def test_an_undeclared_tool_is_raised_to_destructive_whatever_its_proposer_says() -> None:
    c, _, ex = setup({**CONTRACT, "tool_risks": {"lab.train": "compute"}})
    out = propose(c.ledger, ex, name="drop the results table", tool="db.drop_table",
                  risk="read", reason="start over")
    assert (out["risk"], out["risk_raised_from"]) == ("destructive", "read")
    assert (out["requires_approval"], out["state"], out["can_execute"]) == (
        True, "pending", False)
    assert any("destructive action in bounded mode needs the owner's approval" in r
               for r in out["reasons"])
    # No risk stated: the reconstructed one, and nothing was raised.
    quiet = propose(c.ledger, ex, name="drop it again", tool="db.drop_table", reason="again")
    assert (quiet["risk"], quiet["risk_raised_from"]) == ("destructive", None)
    # Around the library's raising, a hand-written proposal is held to it.
    head = c.head()
    with pytest.raises(Refused, match="^risk: db.drop_table is not in the contract's "
                                      "tool_risks, so it is treated as destructive, not read"):
        c.ledger.append(hand_proposal("db.drop_table", "read", False), creds=ex,
                        kind="action_proposal_v0")
    assert c.head() == head
    assert verify_store(c.ledger.store).ok


def test_a_declared_tool_takes_exactly_its_risk_and_defaults_to_it() -> None:
    c, _, ex = setup()
    look = propose(c.ledger, ex, name="look", tool="lab.inspect", reason="see")
    assert (look["risk"], look["requires_approval"], look["can_execute"]) == ("read", False, True)
    train = propose(c.ledger, ex, name="train", tool="lab.train", reason="bigger")
    assert train["risk"] == "compute"  # lab.* says read, lab.train compute: the stricter wins
    # Overstating the risk is refused too: the contract, not the proposer, classifies.
    with pytest.raises(Refused, match="declares lab.inspect read .* not external"):
        propose(c.ledger, ex, name="look", tool="lab.inspect", risk="external", reason="see")


def test_loopx_tools_cannot_be_reclassified_by_the_contract() -> None:
    c, curator, _ = setup(None)
    head = c.head()
    with pytest.raises(RecordRejected) as err:
        init_contract(c.ledger, curator, {**CONTRACT, "tool_risks": {"loopx.agent.revoke": "read"}})
    assert err.value.problems[0].field == "payload.tool_risks"
    assert "loopx tools carry their registered risk" in err.value.problems[0].problem
    assert c.head() == head


def test_an_amendment_declares_a_tool_and_later_proposals_follow_it() -> None:
    c, curator, ex = setup({**CONTRACT, "tool_risks": {}})
    before = propose(c.ledger, ex, name="peek", tool="lab.peek", risk="read", reason="r")
    assert before["risk"] == "destructive"
    record = amend_contract(c.ledger, curator, "lab.peek only reads",
                            settings=[("tool_risks", {"lab.peek": "read"})])
    assert record["payload"]["amendment"]["changed"] == ["tool_risks.lab.peek"]
    after = propose(c.ledger, ex, name="peek", tool="lab.peek", risk="read", reason="r")
    assert (after["risk"], after["risk_raised_from"], after["can_execute"]) == (
        "read", None, True)
    assert verify_store(c.ledger.store).ok


def test_a_contract_stored_before_tool_risks_keeps_the_proposers_risk() -> None:
    # A contract version written by a loopx that had no tool_risks (no such key in the stored
    # payload): its campaign's proposals were accepted with their proposer's risk, and a log
    # holding them must verify as it did.
    from loopx.governance.records import ResearchContractV0

    c, _, ex = setup(None)
    curator = c.lanes["agents"]["cur"]
    old_payload = ResearchContractV0.model_validate(
        {**RESEARCH_CONTRACT, "version": 1}).model_dump(mode="json")
    del old_payload["tool_risks"]
    c.ledger.store.append([{
        "schema_version": "research_contract_v0", "record_id": new_record_id(),
        "goal_id": "lanes-test", "agent_id": "cur", "lane_role": "research_curator",
        "capability": curator["grant_id"], "todo_id": None, "epoch": None,
        "visibility": "public", "provenance": "computed",
        "payload": old_payload}])
    old = propose(c.ledger, ex, name="fetch", tool="fetch_data", risk="external", reason="r")
    assert (old["risk"], old["risk_raised_from"]) == ("external", None)
    with pytest.raises(UsageProblem, match="--risk is required"):
        propose(c.ledger, ex, name="fetch", tool="fetch_data", reason="r")
    assert verify_store(c.ledger.store).ok


# -- through the command line --------------------------------------------------------------------

def run(ws: Path, *args: str, token: str, agent: str, input: str | None = None) -> Any:
    return invoke(ws, *args, input=input, env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": agent})


def test_the_cli_declares_tool_risks_and_refuses_a_lowered_one(tmp_path: Path) -> None:
    ws = init_with_owner_file(tmp_path, "risks")
    owner = (ws / "owner.token").read_text().strip()
    tokens = {}
    for agent, role in (("cur", "research_curator"), ("ex", "research_executor")):
        out = run(ws, "agent", "register", "--agent-id", agent, "--role", role, "--json",
                  token=owner, agent="owner")
        tokens[agent] = json.loads(out.stdout)["token"]
    made = run(ws, "contract", "init", "--prompt", "Is wider better?", "--metric", "acc",
               "--direction", "maximize", "--baseline", "0.9", "--seeds", "0,1",
               "--protected", "eval/", "--tool-risk", "lab.*=read", "--tool-risk", "lab.wipe_*=destructive", "--json",
               token=tokens["cur"], agent="cur")
    assert made.exit_code == 0, made.stdout + made.stderr
    assert json.loads(made.stdout)["contract"]["tool_risks"] == {
        "lab.*": "read", "lab.wipe_*": "destructive"}
    shown = run(ws, "contract", "show", token="", agent="")
    assert "tool risks: lab.* read, lab.wipe_* destructive" in shown.stdout

    log = ws / ".loopx" / "log"
    before = b"".join(p.read_bytes() for p in sorted(log.iterdir()))
    lowered = run(ws, "propose", "--name", "wipe", "--tool", "lab.wipe_disk", "--risk", "read",
                  "--reason", "space", "--json", token=tokens["ex"], agent="ex")
    assert lowered.exit_code == 8
    assert json.loads(lowered.stdout)["message"].startswith(
        "risk: the contract declares lab.wipe_disk destructive")
    appended = run(ws, "append", "-k", "action_proposal_v0", "-f", "-", "--json",
                   token=tokens["ex"], agent="ex",
                   input=json.dumps(hand_proposal("lab.wipe_disk", "read", False)))
    assert appended.exit_code == 8 and "risk: the contract declares" in appended.stdout
    assert b"".join(p.read_bytes() for p in sorted(log.iterdir())) == before

    raised = run(ws, "propose", "--name", "call out", "--tool", "net.post", "--risk", "read",
                 "--reason", "notify", "--json", token=tokens["ex"], agent="ex")
    row = json.loads(raised.stdout)
    assert (row["risk"], row["risk_raised_from"], row["state"]) == (
        "destructive", "read", "pending")
    defaulted = run(ws, "propose", "--name", "look", "--tool", "lab.inspect", "--reason", "see",
                    "--json", token=tokens["ex"], agent="ex")
    assert json.loads(defaulted.stdout)["risk"] == "read"
    assert run(ws, "verify", token="", agent="").exit_code == 0
