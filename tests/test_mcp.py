"""`loopx mcp` launched as a real subprocess and driven by the official MCP SDK's client over
stdio: per role the listed tools are the role's scope, denied tools are absent and refused,
approval-gated calls return a pending proposal, and bad calls are readable tool errors that
write nothing."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from loopx.governance.actions import decide_approval
from loopx.kernel.checks import Credentials
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.agents import register_agent
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

pytest.importorskip("mcp", reason="the MCP server needs the [mcp] extra")
anyio = pytest.importorskip("anyio")

LANES = Path(__file__).resolve().parent.parent / "lanes"
EVERY_ROLE = {"should_run", "claim", "heartbeat", "complete", "fail", "release", "frontier",
              "candidates", "graph", "story", "contract_show", "action_status",
              "campaign_status", "todo_list", "todo_show", "finding_list", "grounding_list",
              "research_plan_show"}
BY_KIND = {"research_contract_v0": {"init_contract", "amend_contract"},
           "research_plan_v0": {"record_research_plan"},
           "campaign_transition_v0": {"transition_campaign"},
           "research_hypothesis_v0": {"propose_hypothesis"}, "todo_item_v0": {"add_todos"},
           "auto_research_evidence_packet_v0": {"append_evidence_packet"},
           "research_evidence_event_v0": {"judge_evidence"},
           "novelty_audit_v0": {"audit_novelty"}, "gate_result_v0": {"check_gate"},
           "research_decision_v0": {"decide"},
           "publication_preview_v0": {"preview_story"}, "publication_v0": {"publish_story"},
           "action_proposal_v0": {"propose_action"}, "action_result_v0": {"record_action_result"},
           "usage_v0": {"add_usage"}, "finding_v0": {"add_finding"},
           "grounding_ref_v0": {"add_grounding"},
           "todo_change_v0": {"reprioritise_todo", "block_todo", "unblock_todo",
                              "cancel_todo", "reassign_todo"}}


class Workspace:
    """A file workspace with a contract, hypothesis h1, a dev todo and an agent per role."""

    def __init__(self, root: Path, **contract: Any) -> None:
        self.root = root
        workspace, owner_token = init_workspace(root, "mcp-test")
        self.ledger = workspace.ledger()
        self.owner = Credentials("owner", owner_token)
        self.r = ResearchLoop(self.ledger, self.owner)
        # bounded: nothing needs the owner unless listed (guided would gate every write)
        self.r.contract({**CONTRACT, "mode": "bounded", **contract})
        self.r.propose("h1")
        add_todos(self.ledger, self.r.agents["ev"], [{
            "todo_id": "dev-1", "title": "dev run", "role": "research_executor",
            "action_kind": "run_dev_eval", "hypothesis_id": "h1"}])
        _, token = register_agent(self.ledger, self.owner, "narr", "product_narrator")
        self.r.agents["narr"] = Credentials("narr", token)

    def head(self) -> int:
        store = find_workspace(self.root).store()
        try:
            return store.head().seq
        finally:
            store.close()

    def session(self, agent: str, body: Callable[[Any], Awaitable[None]]) -> None:
        """Run ``body(client session)`` against `loopx mcp` as ``agent``, a real subprocess."""
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "loopx.cli", "-C", str(self.root), "mcp", "--agent-id", agent],
            env={"LOOPX_TOKEN": str(self.r.agents[agent].token)})

        async def main() -> None:
            async with stdio_client(params) as (read, write), \
                    ClientSession(read, write) as client:
                await client.initialize()
                await body(client)

        anyio.run(main)


def text(result: Any) -> str:
    return "".join(c.text for c in result.content)


def role_scope(role: str) -> set[str]:
    profile = tomllib.loads((LANES / f"{role}.toml").read_text())
    return EVERY_ROLE.union(*(tools for kind, tools in BY_KIND.items()
                              if kind in profile["write_scope"]))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


def test_an_executor_claims_appends_a_packet_and_reads_the_frontier(ws: Workspace) -> None:
    async def body(client: Any) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == role_scope("research_executor")
        assert tools["frontier"].annotations.read_only_hint is True
        assert tools["append_evidence_packet"].annotations.read_only_hint is False
        assert tools["complete"].annotations.idempotent_hint is True
        assert tools["append_evidence_packet"].annotations.destructive_hint is False
        assert "packet" in tools["append_evidence_packet"].input_schema["required"]
        assert "agent_id" not in tools["should_run"].input_schema["properties"]

        answer = await client.call_tool("should_run", {"claim": True})
        assert not answer.is_error, text(answer)
        claim = json.loads(text(answer))
        assert claim["claimed"] and claim["todo"]["todo_id"] == "dev-1"
        packet = {"hypothesis_id": "h1", "status": "scored",
                  "results": [{"split": "dev", "metric": "acc", "seed": s, "value": v}
                              for s, v in zip((0, 1, 2), (0.95, 0.96, 0.97), strict=True)]}
        added = await client.call_tool("append_evidence_packet", {
            "packet": packet, "under_todo_id": "dev-1", "under_epoch": claim["todo"]["epoch"]})
        assert not added.is_error, text(added)
        packet_id = json.loads(text(added))["packet_id"]
        frontier = json.loads(text(await client.call_tool("frontier", {})))
        [row] = frontier["hypotheses"]
        assert (row["hypothesis_id"], row["state"]) == ("h1", "running")
        done = await client.call_tool("complete", {"todo_id": "dev-1", "epoch": 1,
                                                   "result": {"status": "scored"}})
        assert not done.is_error, text(done)
        story = json.loads(text(await client.call_tool("story", {"format": "md"})))
        assert story["text"].startswith("# Research case") and packet_id in story["text"]

    ws.session("ex", body)
    # The story was rendered, not published.
    store = find_workspace(ws.root).store()
    assert not [r for r, _ in store.read() if r["schema_version"] == "publication_v0"]
    store.close()


@pytest.mark.parametrize("agent,role", [
    ("cur", "research_curator"), ("prop", "hypothesis_proposer"),
    ("ev", "evaluator_promoter"), ("narr", "product_narrator")])
def test_each_role_lists_exactly_its_scope(ws: Workspace, agent: str, role: str) -> None:
    async def body(client: Any) -> None:
        assert {t.name for t in (await client.list_tools()).tools} == role_scope(role)

    ws.session(agent, body)


def test_a_denied_tool_is_neither_listed_nor_callable(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", denied_tools=["loopx.graph.*", "loopx.evidence.*"])
    head = ws.head()

    async def body(client: Any) -> None:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "graph" not in names and "append_evidence_packet" not in names
        assert "frontier" in names
        refused = await client.call_tool("graph", {})
        assert refused.is_error and "graph" in text(refused)

    ws.session("ex", body)
    assert ws.head() == head


def test_bad_arguments_and_out_of_scope_calls_are_readable_and_write_nothing(
        ws: Workspace) -> None:
    head = ws.head()

    async def body(client: Any) -> None:
        wrong_type = await client.call_tool("heartbeat", {"todo_id": "dev-1", "epoch": "one"})
        assert wrong_type.is_error and "epoch" in text(wrong_type)
        no_claim = await client.call_tool("append_evidence_packet", {
            "packet": {"hypothesis_id": "h1", "status": "failed"},
            "under_todo_id": "dev-1", "under_epoch": 1})
        assert no_claim.is_error
        assert "loopx: " in text(no_claim) and "Traceback" not in text(no_claim)
        missing = await client.call_tool("append_evidence_packet", {
            "packet": {"status": "scored"}, "under_todo_id": "dev-1", "under_epoch": 1})
        assert missing.is_error and "payload.hypothesis_id" in text(missing)
        not_mine = await client.call_tool("judge_evidence", {"hypothesis_id": "h1",
                                                             "split": "dev"})
        assert not_mine.is_error and "judge_evidence" in text(not_mine)

    ws.session("ex", body)
    assert ws.head() == head


def test_a_call_that_needs_approval_returns_a_pending_proposal_then_runs(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", approval_required_for=["write"])
    ws.r.run("h1", "dev", [0.95, 0.96, 0.97])
    pending: dict[str, Any] = {}

    async def ask(client: Any) -> None:
        first = json.loads(text(await client.call_tool(
            "judge_evidence", {"hypothesis_id": "h1", "split": "dev"})))
        assert first["pending"] is True and "loopx approve" in first["message"]
        again = json.loads(text(await client.call_tool(
            "judge_evidence", {"hypothesis_id": "h1", "split": "dev"})))
        assert again["proposal_id"] == first["proposal_id"]  # one proposal, not two
        pending.update(first)

    ws.session("ev", ask)
    view = ws.ledger.state()["lanes"]
    assert not view["hypotheses"]["h1"]["judgements"]  # nothing ran yet
    decide_approval(ws.ledger, ws.owner, pending["proposal_id"], approved=True, note="go")

    async def run(client: Any) -> None:
        out = json.loads(text(await client.call_tool(
            "judge_evidence", {"hypothesis_id": "h1", "split": "dev"})))
        assert out["verdict"] == "supports" and out["proposal_id"] == pending["proposal_id"]

    ws.session("ev", run)
    view = ws.ledger.state()["lanes"]
    assert view["hypotheses"]["h1"]["judgements"]["dev"]["verdict"] == "supports"
    assert view["proposals"][pending["proposal_id"]]["result"]["success"] is True


def test_a_wrong_token_is_refused_before_serving(ws: Workspace) -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(ws.root), "mcp",
                           "--agent-id", "ex"], capture_output=True, text=True, timeout=60,
                          env={"LOOPX_TOKEN": "lpx_" + "0" * 43, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 7 and done.stdout == ""
    assert "loopx: " in done.stderr and "Traceback" not in done.stderr


def test_a_tool_denied_by_an_amendment_during_the_session_is_refused(ws: Workspace) -> None:
    from loopx.governance.contract import amend_contract

    async def body(client: Any) -> None:
        assert "graph" in {t.name for t in (await client.list_tools()).tools}
        assert not (await client.call_tool("graph", {})).is_error
        amend_contract(ws.ledger, ws.r.agents["cur"], "no graph exports",
                       settings=[("denied_tools", ["loopx.graph.export"])])
        head = ws.head()
        refused = await client.call_tool("graph", {})
        assert refused.is_error
        assert "loopx.graph.export is denied by the contract" in text(refused)
        assert ws.head() == head

    ws.session("ex", body)


# Each role's own tools over MCP (beyond the lease lifecycle and the reads every role has):
# everything its lane does, written out by hand rather than derived from the server's table.
TODO_CHANGES = {"reprioritise_todo", "block_todo", "unblock_todo", "cancel_todo", "reassign_todo"}
LANE_TOOLS = {
    "research_curator": {"init_contract", "amend_contract", "transition_campaign",
                         "add_grounding", "record_research_plan"},
    "hypothesis_proposer": {"propose_hypothesis", "add_todos", "add_grounding", *TODO_CHANGES},
    "research_executor": {"append_evidence_packet"},
    "evaluator_promoter": {"judge_evidence", "audit_novelty", "check_gate", "decide",
                           "add_todos", "transition_campaign", *TODO_CHANGES},
    "product_narrator": {"preview_story", "publish_story"},
}
BOOKKEEPING = {"propose_action", "record_action_result", "add_usage", "add_finding"}


def test_every_mcp_tool_is_a_registry_tool_with_its_parameters() -> None:
    import dataclasses

    from loopx.mcp.catalog import MCP_TOOLS, SESSION_PARAMS, UNGATED
    from loopx.mcp.server import _signature
    from loopx.tools import get_tool
    from loopx.work.scope import KIND_ACTIONS

    lifecycle = {"should_run", "claim", "heartbeat", "complete", "fail", "release"}
    assert UNGATED <= set(MCP_TOOLS)
    for name, (registry, kind) in MCP_TOOLS.items():
        tool = get_tool(registry)
        # A read is every role's; a write is listed by the kind it appends (lifecycle aside).
        assert (kind is None) == (tool.read_only or name in lifecycle), name
        assert kind is None or kind in KIND_ACTIONS, name
        fields = [f.name for f in dataclasses.fields(tool.params)]
        skipped = SESSION_PARAMS.get(name, ())
        assert list(_signature(registry, skipped).parameters) == [
            f for f in fields if f not in skipped], name


@pytest.mark.parametrize("agent,role", [
    ("cur", "research_curator"), ("prop", "hypothesis_proposer"), ("ex", "research_executor"),
    ("ev", "evaluator_promoter"), ("narr", "product_narrator")])
def test_each_role_lists_exactly_its_lane_tools_and_reaches_every_kind_it_writes(
        ws: Workspace, agent: str, role: str) -> None:
    from loopx.mcp.catalog import MCP_TOOLS
    from loopx.mcp.server import Session

    session = Session(find_workspace(ws.root), ws.r.agents[agent])
    try:
        listed = {t.name for t in session.tools}
    finally:
        session.ledger.store.close()
    bookkeeping = BOOKKEEPING - ({"add_finding"} if role == "product_narrator" else set())
    assert listed == EVERY_ROLE | LANE_TOOLS[role] | bookkeeping
    # Every record kind the role's profile lets it write, some listed tool writes; rollout
    # events alone have no tool of their own (`loopx append` writes them).
    scope = set(tomllib.loads((LANES / f"{role}.toml").read_text())["write_scope"])
    reached = {MCP_TOOLS[name][1] for name in listed}
    assert scope - reached <= {"rollout_event_v0"}


def test_a_publication_over_mcp_is_written_only_inside_public(ws: Workspace,
                                                              tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws.root / "public").mkdir()
    (ws.root / "public" / "link").symlink_to(elsewhere)
    head = ws.head()

    async def body(client: Any) -> None:
        for out in ("../escape.md", str(elsewhere / "story.md"), "link/story.md", ""):
            refused = await client.call_tool("publish_story", {"out": out})
            assert refused.is_error and "loopx: out: " in text(refused), out
        assert ws.head() == head and not list(elsewhere.iterdir())
        done = json.loads(text(await client.call_tool("publish_story", {"out": "story.md"})))
        assert done["path"] == str(ws.root / "public" / "story.md")

    ws.session("narr", body)
    assert (ws.root / "public" / "story.md").read_text().startswith("# Research case")
    assert ws.head() == head + 1
