"""Governance from the command line and across processes: refusals exit non-zero with a clear
message and write nothing; a campaign driven by several processes (one killed) reads back the
same, field by field, in a fresh process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import head_seq as head
from helpers import run_loopx as loopx
from lanes_support import MINIMAL_CONTRACT

from loopx.governance.contract import init_contract
from loopx.kernel.checks import Credentials
from loopx.kernel.ledger import Ledger
from loopx.kernel.verify import verify_store
from loopx.tools import ToolContext, call
from loopx.work.agents import register_agent
from loopx.workspace import find_workspace, init_workspace

WORKER = Path(__file__).resolve().parent / "workers" / "governance_worker.py"
CONTRACT: dict[str, Any] = {
    **MINIMAL_CONTRACT,
    "contract_id": "digits",
    "objective": {"name": "digits", "prompt": "beat the linear baseline", "domain": "vision"},
    "metric": {**MINIMAL_CONTRACT["metric"], "baseline": 0.9},
    "budget": {"max_cpu_hours": 100.0},
    # The campaign's own tools and their risk classes (an undeclared one is destructive).
    "tool_risks": {"lab.train": "compute", "lab.fetch": "external", "lab.peek": "read",
                   "lab.write": "write"},
}


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Any]:
    workspace, owner_token = init_workspace(tmp_path, "gov")
    ledger = workspace.ledger()
    owner = Credentials("owner", owner_token)
    tokens = {"owner": owner_token}
    for agent_id, role in (("cur", "research_curator"), ("ex1", "research_executor"),
                           ("ex2", "research_executor"), ("ex3", "research_executor"),
                           ("ev", "evaluator_promoter")):
        tokens[agent_id] = register_agent(ledger, owner, agent_id, role)[1]
    ledger.store.close()
    return {"root": tmp_path, "tokens": tokens}


def refused(ws: dict[str, Any], code: int, needle: str, *args: str, token: str) -> dict[str, Any]:
    """Run a command that must be refused: its exit code, its JSON error, an unchanged log."""
    before = head(ws["root"])
    result = loopx(ws["root"], *args, "--json", token=token)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    error = json.loads(result.stdout)
    assert needle in error["message"], error
    assert head(ws["root"]) == before
    return error


def test_cli_refusals_name_the_problem_and_write_nothing(ws: dict[str, Any]) -> None:
    t = ws["tokens"]
    contract_args = ("contract", "init", "--agent-id", "cur", "--prompt", "Beat the baseline.",
                     "--metric", "acc", "--direction", "maximize", "--baseline", "0.9",
                     "--seeds", "0,1", "--protected", "eval/", "--tool-risk", "lab.train=compute",
                     "--tool-risk", "lab.peek=read", "--tool-risk", "lab.x=read", "--tool-risk",
                     "lab.fetch=external")
    err = refused(ws, 2, "both allowed and denied", *contract_args, "--allow-tool", "lab.x",
                  "--deny-tool", "lab.x", token=t["cur"])
    assert err["problems"][0]["field"] == "payload.denied_tools"
    refused(ws, 7, "may not write research_contract_v0 with action 'create'", *contract_args,
            "--agent-id", "ex1", token=t["ex1"])
    bare = contract_args[:2] + contract_args[4:]  # no --agent-id
    refused(ws, 2, "missing --agent-id", *bare, token="")
    dry = loopx(ws["root"], *bare, "--dry-run", "--json", token="")
    assert dry.returncode == 0 and json.loads(dry.stdout)["contract"]["version"] == 1
    refused(ws, 2, "contract_id: cannot be set with --set", *contract_args, "--set",
            "contract_id=other", token=t["cur"])
    made = loopx(ws["root"], *contract_args, "--json", token=t["cur"])
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["campaign_state"] == "planned"
    refused(ws, 7, "may not write research_contract_v0 with action 'amend'", "contract",
            "amend", "--agent-id", "ev", "--set", "mode=bounded", "--reason", "mine",
            token=t["ev"])
    refused(ws, 2, "payload.cpu_hours", "usage", "add", "--agent-id", "ex1", "--cpu-hours",
            "-1", token=t["ex1"])
    err = refused(ws, 2, "AWS access key", "propose", "--agent-id", "ex1", "--name", "fetch",
                  "--tool", "lab.fetch", "--risk", "external", "--reason", "data",
                  "--args", '{"aws": "AKIAIOSFODNN7EXAMPLE"}', token=t["ex1"])
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(err)
    proposed = loopx(ws["root"], "propose", "--agent-id", "ex1", "--name", "train", "--tool",
                     "lab.train", "--risk", "compute", "--reason", "bigger", "--json",
                     token=t["ex1"])
    pid = json.loads(proposed.stdout)["proposal_id"]
    refused(ws, 7, "owner token is wrong", "approve", pid, "--note", "ok", token=t["ex1"])
    refused(ws, 7, "may not write approval_v0", "approve", pid, "--note", "ok", "--agent-id",
            "ex1", token=t["ex1"])
    refused(ws, 8, "no one approves their own proposal", "propose", "--agent-id", "owner",
            "--name", "mine", "--tool", "lab.train", "--risk", "compute", "--reason", "r",
            token=t["owner"])
    own = json.loads(loopx(ws["root"], "propose", "--agent-id", "owner", "--name", "mine",
                           "--tool", "lab.peek", "--risk", "read", "--reason", "r",
                           "--json", token=t["owner"]).stdout)["proposal_id"]
    refused(ws, 8, "no one approves their own", "approve", own, "--note", "me",
            token=t["owner"])
    refused(ws, 8, "cannot move from planned to running", "campaign", "transition",
            "running", "--agent-id", "owner", "--reason", "skip", token=t["owner"])
    refused(ws, 2, "--cost: unknown resource", "propose", "--agent-id", "ex1", "--name", "x",
            "--tool", "lab.x", "--risk", "read", "--reason", "r", "--cost", "gold=1",
            token=t["ex1"])

    no = loopx(ws["root"], "can-execute", pid, "--json")
    assert no.returncode == 9 and json.loads(no.stdout)["can_execute"] is False
    ok = loopx(ws["root"], "approve", pid, "--note", "fine", "--json", token=t["owner"])
    assert ok.returncode == 0 and json.loads(ok.stdout)["can_execute"]["can_execute"] is True
    assert loopx(ws["root"], "can-execute", pid).returncode == 0
    assert verify_store(find_workspace(ws["root"]).store()).ok


def test_contract_init_takes_scope_splits_and_a_measured_baseline_as_flags(
        ws: dict[str, Any]) -> None:
    t = ws["tokens"]
    base = ("contract", "init", "--agent-id", "cur", "--prompt", "Beat the baseline.",
            "--metric", "acc", "--direction", "maximize", "--seeds", "0,1")
    refused(ws, 2, "missing --baseline", *base, token=t["cur"])
    refused(ws, 2, "--protected must not be empty", *base, "--baseline", "0.9", "--protected",
            "eval/", "--protected", " ", token=t["cur"])
    refused(ws, 2, "--heldout-location must not be empty", *base, "--baseline", "0.9",
            "--heldout-location", "", token=t["cur"])
    err = refused(ws, 2, "protected_commit", *base, "--baseline", "0.9", "--protected-commit",
                  "main", token=t["cur"])
    assert [p["field"] for p in err["problems"]] == ["payload.protected_commit"]
    err = refused(ws, 2, "base_commit", *base, "--baseline", "0.9", "--base-commit", "HEAD",
                  token=t["cur"])
    assert [p["field"] for p in err["problems"]] == ["payload.base_commit"]
    pin = "0123456789abcdef0123456789abcdef01234567"
    made = loopx(ws["root"], *base, "--baseline-hypothesis", "base", "--protected", "eval/",
                 "--protected", "data/**", "--protected-commit", pin, "--base-commit", pin,
                 "--editable", "train.py",
                 "--dev-location", "data/dev.csv", "--heldout-location", "/srv/heldout",
                 "--set", "evaluation.dev.location=elsewhere", "--json", token=t["cur"])
    assert made.returncode == 0, made.stdout + made.stderr
    with find_workspace(ws["root"]).store() as store:
        stored = store.get(json.loads(made.stdout)["seq"])["payload"]
    assert stored["protected_scope"] == ["eval/", "data/**"]
    assert stored["editable_scope"] == ["train.py"] and stored["protected_commit"] == pin
    assert stored["base_commit"] == pin
    status = json.loads(loopx(ws["root"], "status", "--json").stdout)
    assert status["campaign"]["base_commit"] == pin  # a joining host knows what to fetch
    assert stored["metric"]["baseline_hypothesis"] == "base"
    assert stored["evaluation"]["dev"]["location"] == "elsewhere"  # --set is applied last
    assert stored["evaluation"]["heldout"]["location"] == "/srv/heldout"
    shown = json.loads(loopx(ws["root"], "contract", "show", "--json").stdout)["contract"]
    assert shown["evaluation"]["heldout"]["location"].startswith("(withheld")
    text = loopx(ws["root"], "contract", "show").stdout
    assert "from the measured baseline base" in text
    assert f"\nbase: experiments start from {pin} (pinned)\n" in text


def test_contract_init_flags_apply_over_a_file(ws: dict[str, Any], tmp_path: Path) -> None:
    source = tmp_path / "contract.json"
    source.write_text(json.dumps(CONTRACT))
    dry = loopx(ws["root"], "contract", "init", "--file", str(source), "--protected", "eval/",
                "--heldout-location", "/srv/h", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    contract = json.loads(dry.stdout)["contract"]
    assert contract["protected_scope"] == ["eval/"]
    assert contract["evaluation"]["heldout"]["location"] == "/srv/h"


def start(root: Path, agent_id: str, token: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LOOPX_TOKEN": token}
    return subprocess.Popen([sys.executable, str(WORKER), str(root), "--agent-id", agent_id,
                             *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)


def tool_view(ledger: Ledger, root: Path) -> dict[str, Any]:
    """What the read tools say, answered from ``ledger`` in this process."""
    ctx = ToolContext(find_workspace(root), None, ledger)
    out = {name: call(name, ctx, {}) for name in ("campaign.status", "approvals.list",
                                                   "usage.show", "contract.show",
                                                   "finding.list")}
    out["campaign.status"].pop("head")
    return out


def test_a_campaign_driven_by_several_processes_rehydrates_exactly(ws: dict[str, Any]) -> None:
    root, t = ws["root"], ws["tokens"]
    ledger = find_workspace(root).ledger()
    init_contract(ledger, Credentials("cur", t["cur"]), CONTRACT)
    ledger.store.close()
    agents = {a: start(root, a, t[a], "--rounds", "6") for a in ("ex1", "ex2")}
    victim = start(root, "ex3", t["ex3"], "--rounds", "1000")
    owner = start(root, "owner", t["owner"])
    assert victim.stdout is not None
    seen = [victim.stdout.readline() for _ in range(9)]  # three full rounds acknowledged
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    for proc in agents.values():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.splitlines()[-1] == "DONE", out[-300:]
    assert owner.stdin is not None
    owner.stdin.close()
    owner_out = owner.stdout.read() if owner.stdout else ""
    assert owner.wait(timeout=120) == 0, owner_out[-300:]

    # A fresh process answers every read command ...
    fresh = {}
    for name, args in (("campaign.status", ("campaign", "status")),
                       ("approvals.list", ("approvals",)), ("usage.show", ("usage", "show")),
                       ("contract.show", ("contract", "show")),
                       ("finding.list", ("finding", "list"))):
        result = loopx(root, *args, "--json")
        assert result.returncode == 0, result.stderr
        fresh[name] = json.loads(result.stdout)
    fresh["campaign.status"].pop("head")
    # ... exactly as a fold of the log from scratch, with no checkpoint, and as one from the
    # workspace's checkpoint.
    from_scratch = tool_view(Ledger(find_workspace(root).store()), root)
    from_checkpoint = tool_view(find_workspace(root).ledger(), root)
    for name in fresh:
        assert fresh[name] == from_scratch[name] == from_checkpoint[name], name

    acked = sum(1 for line in seen if line.startswith("USED"))
    usage = fresh["usage.show"]
    assert usage["agents"]["ex1"] == usage["agents"]["ex2"] == {
        "cpu_hours": 1.5, "download_gb": 0.0, "experiments": 6, "gpu_hours": 0.0,
        "storage_gb": 0.0}
    assert usage["agents"]["ex3"]["experiments"] >= acked  # acknowledged writes survive a kill
    assert fresh["approvals.list"]["pending"] == []  # the owner decided every one
    decided = {line.split()[1] for line in owner_out.splitlines() if line.startswith("DECIDED")}
    proposals = find_workspace(root).ledger().state()["lanes"]["proposals"]
    assert decided == {p for p, row in proposals.items() if row["requires_approval"]}
    established = {f["finding_id"] for f in fresh["finding.list"]["established"]}
    assert {f"ex1-f{i}" for i in range(6)} | {f"ex2-f{i}" for i in range(6)} <= established
    assert verify_store(find_workspace(root).store()).ok
