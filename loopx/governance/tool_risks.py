"""The catalogue of loopx's own tools and their risk classes, which the contract governs.

A contract names tools as ``loopx.<name>``; judging a proposal needs each tool's risk without
loading the adapters that implement it, so the risk lives here and the tool registry
(:mod:`loopx.tools.registry`) reads it when a tool registers. A tool missing here cannot
register.
"""

from __future__ import annotations

from typing import Literal

RiskClass = Literal["read", "write", "compute", "external", "destructive"]
RISK_CLASSES: tuple[RiskClass, ...] = ("read", "write", "compute", "external", "destructive")

TOOL_RISKS: dict[str, RiskClass] = {
    "action.approve": "write",
    "action.can_execute": "read",
    "action.propose": "write",
    "action.record": "write",
    "action.reject": "write",
    "action.status": "read",
    "agent.list": "read",
    "agent.register": "write",
    "agent.revoke": "destructive",
    "approvals.list": "read",
    "campaign.evaluate": "write",
    "campaign.status": "read",
    "campaign.transition": "write",
    "candidates.list": "read",
    "contract.amend": "write",
    "contract.init": "write",
    "contract.show": "read",
    "decision.decide": "write",
    "evidence.append_packet": "write",
    "evidence.judge": "write",
    "finding.add": "write",
    "finding.list": "read",
    "frontier.show": "read",
    "gate.check": "write",
    "gate.reproduce": "compute",
    "graph.export": "read",
    "grounding.add": "write",
    "grounding.list": "read",
    "hypothesis.propose": "write",
    "lanes.apply": "write",
    "lanes.show": "read",
    "novelty.audit": "write",
    "quota.should_run": "write",
    "record.append": "write",
    "record.show": "read",
    "research_plan.record": "write",
    "research_plan.show": "read",
    "status": "read",
    "story.preview": "write",
    "story.publish": "write",
    "story.render": "read",
    "todo.add": "write",
    "todo.block": "write",
    "todo.cancel": "destructive",
    "todo.claim": "write",
    "todo.complete": "write",
    "todo.fail": "write",
    "todo.heartbeat": "write",
    "todo.list": "read",
    "todo.reassign": "write",
    "todo.release": "write",
    "todo.reprioritise": "write",
    "todo.show": "read",
    "todo.unblock": "write",
    "usage.add": "write",
    "usage.show": "read",
    "verify": "read",
}
