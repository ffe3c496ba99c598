"""A whole campaign over MCP only: the owner sets up the workspace and grants the agents, then
each lane (curator, proposer, executor, evaluator/promoter, narrator) is one `loopx mcp`
subprocess with its own agent id and token, driven by the official MCP SDK's stdio client. The
contract, the hypothesis, both evidence packets, the judgements, the novelty audit, the
protected-boundary gate, the promotion and the published story all arrive through MCP tools;
afterwards `loopx verify` passes, the hypothesis is promoted and the story is published."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from helpers import git

from loopx.governance.actions import decide_approval
from loopx.kernel.checks import Credentials
from loopx.research.projections import row
from loopx.testing.research import CONTRACT, HELDOUT
from loopx.work.agents import register_agent
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

pytest.importorskip("mcp", reason="the MCP server needs the [mcp] extra")
anyio = pytest.importorskip("anyio")

pytestmark = pytest.mark.slow

ROLES = {"cur": "research_curator", "prop": "hypothesis_proposer", "ex": "research_executor",
         "ev": "evaluator_promoter", "narr": "product_narrator"}
DEV = [0.95, 0.96, 0.97]



class Owner:
    """The person: a project in git, a workspace, one grant per lane and the first todos."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        (root / "eval").mkdir()
        (root / "eval" / "score.py").write_text("def score(): ...\n")
        (root / "model.py").write_text("width = 64\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "the project: model.py, and eval/ (protected)")
        workspace, token = init_workspace(root, "mcp-campaign")
        self.ledger = workspace.ledger()
        self.creds = Credentials("owner", token)
        self.tokens: dict[str, str] = {}
        for agent, role in ROLES.items():
            _, self.tokens[agent] = register_agent(self.ledger, self.creds, agent, role)
        add_todos(self.ledger, self.creds, [
            {"todo_id": "define-contract", "title": "Write the research contract",
             "role": "research_curator", "action_kind": "define_contract"},
            {"todo_id": "propose-1", "title": "Propose the first hypothesis",
             "role": "hypothesis_proposer", "action_kind": "propose_hypothesis",
             "blocked_by": ["define-contract"]}])

    def approve(self, subject_id: str) -> None:
        decide_approval(self.ledger, self.creds, subject_id, approved=True, note="go ahead")

    def view(self) -> dict[str, Any]:
        return self.ledger.state()["lanes"]

    def records(self) -> list[dict[str, Any]]:
        store = find_workspace(self.root).store()
        try:
            return [record for record, _ in store.read()]
        finally:
            store.close()


class Lane:
    """One agent's MCP client: a tool call returns the result's JSON; a tool error fails."""

    def __init__(self, agent: str, client: Any) -> None:
        self.agent = agent
        self.client = client

    async def tools(self) -> set[str]:
        return {t.name for t in (await self.client.list_tools()).tools}

    async def __call__(self, name: str, /, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(name, args)
        body = "".join(c.text for c in result.content)
        assert not result.is_error, f"{self.agent} {name}: {body}"
        return json.loads(body)


async def open_lanes(stack: AsyncExitStack, owner: Owner) -> dict[str, Lane]:
    """One `loopx mcp` subprocess and SDK client per agent, all open at once."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    lanes: dict[str, Lane] = {}
    for agent in ROLES:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "loopx.cli", "-C", str(owner.root), "mcp", "--agent-id", agent],
            env={"LOOPX_TOKEN": owner.tokens[agent]})
        read, write = await stack.enter_async_context(stdio_client(params))
        client = await stack.enter_async_context(ClientSession(read, write))
        await client.initialize()
        lanes[agent] = Lane(agent, client)
    return lanes


async def claim_next(lane: Lane, action_kind: str) -> tuple[str, int, dict[str, Any]]:
    got = await lane("should_run", claim=True)
    assert got["claimed"], f"{lane.agent} got nothing: {got}"
    assert got["todo"]["action_kind"] == action_kind, got
    return got["todo"]["todo_id"], got["todo"]["epoch"], got["claim"]


def packet(split: str, values: list[float], commits: tuple[str, str], todo: str,
           epoch: int) -> dict[str, Any]:
    return {"hypothesis_id": "h1", "status": "scored", "branch": f"loopx/{todo}/{epoch}",
            "base_commit": commits[0], "evaluated_commit": commits[1],
            "results": [{"split": split, "metric": "acc", "seed": s, "value": v}
                        for s, v in zip(CONTRACT["metric"]["seeds"], values, strict=True)]}


async def curator(cur: Lane, owner: Owner) -> None:
    todo, epoch, _ = await claim_next(cur, "define_contract")
    contract = {**CONTRACT, "mode": "bounded", "approval_required_for": ["compute"],
                "tool_risks": {"gpu.train": "compute"},
                "base_commit": git(owner.root, "rev-parse", "HEAD"),  # experiments start here
                "editable_scope": ["model.py"], "protected_scope": ["eval/"],
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}}
    made = await cur("init_contract", contract=contract)
    assert made["contract"]["version"] == 1
    amended = await cur("amend_contract", reason="a GPU budget for training runs",
                        settings={"budget.max_gpu_hours": 2.0})
    assert amended["version"] == 2
    await cur("transition_campaign", to_state="ready", reason="the contract is written")
    await cur("complete", todo_id=todo, epoch=epoch, result={"contract_version": 2})


async def proposer(prop: Lane) -> None:
    todo, epoch, _ = await claim_next(prop, "propose_hypothesis")
    hypothesis = {"hypothesis_id": "h1", "title": "A wider model",
                  "statement": "doubling the width lifts accuracy", "mechanism_family": "width",
                  "parameters": {"width": 128}, "claims_novelty": True,
                  "grounding_refs": [{"kind": "paper", "ref": "arXiv:1605.07146"}]}
    dev_todo = {"todo_id": "dev-h1", "title": "Dev evaluation of h1",
                "role": "research_executor", "action_kind": "run_dev_eval",
                "hypothesis_id": "h1"}
    await prop("propose_hypothesis", hypothesis=hypothesis, under_todo_id=todo,
               under_epoch=epoch, todos=[dev_todo])
    # More ideation material, recorded on its own: an auditor must look elsewhere.
    await prop("add_grounding", ref={"kind": "url", "ref": "https://example.org/wide-nets"},
               hypothesis_id="h1")
    await prop("complete", todo_id=todo, epoch=epoch, result={"hypotheses": ["h1"]})


async def executor_dev(ex: Lane, owner: Owner) -> tuple[str, str]:
    todo, epoch, claim = await claim_next(ex, "run_dev_eval")
    assert claim["data"]["split"] == "dev"
    # Training needs a GPU: a compute action, which this contract puts before the owner.
    asked = await ex("propose_action", name="train the wider model", tool="gpu.train",
                     reason="the dev run needs a trained model", risk="compute",
                     arguments={"width": 128}, estimated_cost={"gpu_hours": 0.5})
    assert asked["state"] == "pending"
    owner.approve(asked["proposal_id"])
    assert (await ex("action_status", proposal_id=asked["proposal_id"]))["can_execute"]
    # The experiment itself is the executor's own work, with its own tools: a commit.
    base = git(owner.root, "rev-parse", "HEAD")
    (owner.root / "model.py").write_text("width = 128\n")
    git(owner.root, "commit", "-qam", "wider")
    evaluated = git(owner.root, "rev-parse", "HEAD")
    await ex("heartbeat", todo_id=todo, epoch=epoch)
    await ex("record_action_result", proposal_id=asked["proposal_id"], success=True,
             result={"checkpoint": "width-128"}, usage={"gpu_hours": 0.4})
    await ex("add_usage", cpu_hours=0.1, note="dev evaluation", under_todo_id=todo,
             under_epoch=epoch)
    await ex("append_evidence_packet", packet=packet("dev", DEV, (base, evaluated), todo, epoch),
             under_todo_id=todo, under_epoch=epoch)
    await ex("complete", todo_id=todo, epoch=epoch,
             result={"status": "scored", "dev": {"verdict": "supports"}})
    return base, evaluated


async def executor_heldout(ex: Lane, commits: tuple[str, str]) -> None:
    # The held-out todo is a successor, so the executor may claim it by name.
    [todo_row] = (await ex("todo_list", role="research_executor", states=["open"]))["todos"]
    assert todo_row["action_kind"] == "run_holdout_eval"
    claimed = await ex("claim", todo_id=todo_row["todo_id"])
    todo, epoch = claimed["todo"]["todo_id"], claimed["todo"]["epoch"]
    assert claimed["claim"]["data"]["split"] == "heldout"
    await ex("append_evidence_packet",
             packet=packet("heldout", HELDOUT, commits, todo, epoch),
             under_todo_id=todo, under_epoch=epoch)
    await ex("complete", todo_id=todo, epoch=epoch, result={"status": "scored"})


async def evaluator_dev(ev: Lane) -> None:
    todo, epoch, _ = await claim_next(ev, "judge_evidence")
    judged = await ev("judge_evidence", hypothesis_id="h1", split="dev")
    assert judged["verdict"] == "supports"
    await ev("complete", todo_id=todo, epoch=epoch, result={"split": "dev",
                                                            "verdict": "supports"})


async def evaluator_heldout(ev: Lane) -> None:
    # The chain of successor todos: the held-out judgement asks for a gate check, the gate check
    # for a decision, the decision for the narrator's story (each read from the log).
    todo, epoch, _ = await claim_next(ev, "judge_evidence")
    judged = await ev("judge_evidence", hypothesis_id="h1", split="heldout")
    assert judged["verdict"] == "supports"
    await ev("complete", todo_id=todo, epoch=epoch, result={"split": "heldout"})
    todo, epoch, _ = await claim_next(ev, "review_gate")
    [h1] = (await ev("frontier"))["hypotheses"]
    assert h1["next_action"] == "audit_novelty"  # the hypothesis claims novelty
    await ev("audit_novelty", hypothesis_id="h1", verdict="novel", note="not seen before",
             refs=[{"kind": "paper", "ref": "arXiv:1512.03385"}])
    gate = await ev("check_gate", hypothesis_id="h1")
    assert gate["passed"], gate
    await ev("complete", todo_id=todo, epoch=epoch, result={"gate": "passed"})
    todo, epoch, _ = await claim_next(ev, "decide")
    [candidate] = (await ev("candidates"))["promotion"]
    assert candidate["hypothesis_id"] == "h1"
    await ev("decide", hypothesis_id="h1", outcome="promoted")
    await ev("add_finding", kind="computed_result",
             statement="the wider model beats the baseline on held-out data",
             evidence=[{"kind": "record", "ref": judged["event_id"]}], confidence="high")
    await ev("complete", todo_id=todo, epoch=epoch, result={"decided": "promoted"})


async def narrator(narr: Lane, owner: Owner) -> list[dict[str, Any]]:
    todo, epoch, _ = await claim_next(narr, "render_story")
    draft = await narr("story")
    assert "h1" in draft["text"]
    # A promotion changes the story's first screen: the owner sees it before it goes out.
    preview = await narr("preview_story")
    owner.approve(preview["preview_id"])
    published = [await narr("publish_story", out="story.md"),
                 await narr("publish_story", out="board.html", surface="board",
                            format="html")]
    await narr("complete", todo_id=todo, epoch=epoch,
               result={"published": [p["publication_id"] for p in published]})
    return published


def test_a_whole_campaign_runs_over_mcp_one_client_per_lane(tmp_path: Path) -> None:
    owner = Owner(tmp_path / "project")
    owner_head = owner.records()[-1]["seq"]
    published: list[dict[str, Any]] = []

    async def main() -> None:
        async with AsyncExitStack() as stack:
            lanes = await open_lanes(stack, owner)
            assert "init_contract" in await lanes["cur"].tools()
            assert "publish_story" in await lanes["narr"].tools()
            await curator(lanes["cur"], owner)
            await proposer(lanes["prop"])
            commits = await executor_dev(lanes["ex"], owner)
            await evaluator_dev(lanes["ev"])
            await executor_heldout(lanes["ex"], commits)
            await evaluator_heldout(lanes["ev"])
            published.extend(await narrator(lanes["narr"], owner))

    anyio.run(main)

    verified = subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(owner.root),
                               "verify", "--json"], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True

    view = owner.view()
    assert row(view, "h1").state == "promoted"
    assert {g: row(view, "h1").gates[g].status for g in ("protected_boundary", "heldout",
                                                         "novelty")} == dict.fromkeys(
        ("protected_boundary", "heldout", "novelty"), "passed")
    assert view["campaign"]["usage"]["total"]["gpu_hours"] == pytest.approx(0.4)

    records = owner.records()
    publications = [r for r in records if r["schema_version"] == "publication_v0"]
    assert [(p["agent_id"], p["payload"]["surface"]) for p in publications] == [
        ("narr", "story"), ("narr", "board")]
    assert publications[0]["payload"]["first_screen_status"] == "approved_change"
    story = (owner.root / "public" / "story.md").read_text()
    assert "Promoted: A wider model" in story  # the first screen the owner approved
    assert [p["path"] for p in published] == [str(owner.root / "public" / "story.md"),
                                              str(owner.root / "public" / "board.html")]

    # After the owner's setup, only the lanes wrote (and the owner's two approvals): every
    # lane record came through MCP, each from the agent whose lane it is.
    writers: dict[str, set[str]] = {}
    for record in records[owner_head:]:
        writers.setdefault(record["schema_version"], set()).add(record["agent_id"])
    assert writers.pop("approval_v0") == {"owner"}
    assert writers["research_contract_v0"] == {"cur"}
    assert writers["research_hypothesis_v0"] == {"prop"}
    assert writers["auto_research_evidence_packet_v0"] == {"ex"}
    assert writers["research_evidence_event_v0"] == writers["research_decision_v0"] == {"ev"}
    assert writers["novelty_audit_v0"] == writers["gate_result_v0"] == {"ev"}
    assert writers["publication_preview_v0"] == writers["publication_v0"] == {"narr"}
    assert set().union(*writers.values()) <= set(ROLES)
