"""Governance rules: which tools a contract admits, which actions need approval, whether a
proposal may execute now, which campaign state moves are legal, and when agents must wait.

Pure functions of the checked state (and, for budgets, of recorded usage); the write checks,
should-run and the CLI all ask these, so they cannot disagree.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from loopx.governance.state import TERMINAL, current_contract
from loopx.governance.stopping import exhausted, over_budget
from loopx.governance.tool_risks import RISK_CLASSES, TOOL_RISKS
from loopx.kernel.plain import Frozen, Value
from loopx.work.extensions import Block, PassOver

MODES = ("assistant", "guided", "bounded")
LOOPX_TOOL_PREFIX = "loopx."

# The seed's state machine, plus stop and fail from every state that is not finished (a stop
# reason can apply before the first claim, and an owner must be able to end a paused campaign
# without resuming it first, which would hand out work), and paused -> completed: the owner's
# approval of the promotion that reached the target ends a campaign paused to wait for it.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "created": ("planned", "stopped", "failed"),
    "planned": ("ready", "stopped", "failed"),
    "ready": ("running", "stopped", "failed"),
    "running": ("paused", "completed", "stopped", "failed"),
    "paused": ("running", "completed", "stopped", "failed"),
    "completed": (),
    "stopped": (),
    "failed": (),
}
STATES = tuple(TRANSITIONS)


def tool_eligible(contract: dict[str, Any], tool: str) -> tuple[bool, str]:
    """The seed's rule: denied tools are always blocked; an empty allowlist admits everything
    not denied; otherwise only listed tools. Entries may be glob patterns (``loopx.*``)."""
    for pattern in contract["denied_tools"]:
        if fnmatchcase(tool, pattern):
            return False, f"denied by the contract ({pattern})"
    allowed = contract["allowed_tools"]
    if not allowed:
        return True, "the allowlist is empty and the tool is not denied"
    for pattern in allowed:
        if fnmatchcase(tool, pattern):
            return True, f"allowed by the contract ({pattern})"
    return False, "not on the contract's allowlist"


def approval_required(contract: dict[str, Any], risk: str) -> bool:
    """Whether an action of ``risk`` needs the owner's approval under the contract's mode.

    assistant: every non-read action; guided: write, compute, external and destructive, unless
    ``guided_auto_approve`` relaxes write or compute; bounded: only the risk classes listed in
    ``approval_required_for``. In every mode destructive actions and the listed classes need it.
    """
    if risk == "destructive" or risk in contract["approval_required_for"]:
        return True
    mode = contract["mode"]
    if mode == "assistant":
        return risk != "read"
    if mode == "guided":
        return risk != "read" and risk not in contract["guided_auto_approve"]
    return False


def action_phrase(risk: str, contract: dict[str, Any]) -> str:
    """``an external action in guided mode``: how messages name what needs approval."""
    article = "an" if risk[0] in "aeiou" else "a"
    return f"{article} {risk} action in {contract['mode']} mode"


def loopx_tool_risk(tool: str) -> str | None:
    """The registered risk class of a ``loopx.*`` tool (None if ``tool`` is not a loopx name).

    Raises:
        KeyError: a ``loopx.`` name that is not a registered tool.
    """
    if not tool.startswith(LOOPX_TOOL_PREFIX):
        return None
    return TOOL_RISKS[tool[len(LOOPX_TOOL_PREFIX):]]


class ToolRisk(Frozen):
    """The risk class loopx holds a proposal of a tool to, and where it comes from:
    ``registered`` (a loopx tool), ``declared`` (the contract's ``tool_risks`` entry
    ``pattern``) or ``undeclared`` (a tool outside loopx no entry matches: destructive)."""

    _fields = ("risk", "source", "pattern")
    risk: str
    source: str
    pattern: str | None

    def __init__(self, risk: str, source: str, pattern: str | None = None) -> None:
        self.__dict__.update(risk=risk, source=source, pattern=pattern)


def tool_risk(contract: dict[str, Any], tool: str) -> ToolRisk | None:
    """The risk a proposal of ``tool`` must state under ``contract``, reconstructed by loopx
    rather than taken from the proposer (002: risk is reconstructed locally, conservatively).

    A loopx tool has its registered risk. A campaign's own tool has the most restrictive risk
    among the contract's ``tool_risks`` entries matching it, or ``destructive`` when none does,
    so an undeclared lab tool needs the owner's approval in every mode. None: a contract
    version stored before ``tool_risks`` existed, under which the proposer's risk stands (its
    proposals keep verifying as they were written).

    Raises:
        KeyError: a ``loopx.`` name that is not a registered tool.
    """
    registered = loopx_tool_risk(tool)
    if registered is not None:
        return ToolRisk(registered, "registered")
    declared = contract.get("tool_risks")
    if declared is None:
        return None
    matching = [(RISK_CLASSES.index(risk), pattern, risk) for pattern, risk in declared.items()
                if fnmatchcase(tool, pattern)]
    if not matching:
        return ToolRisk("destructive", "undeclared")
    _, pattern, risk = max(matching)
    return ToolRisk(risk, "declared", pattern)


def unknown_tool(tool: str) -> str:
    """Why a ``loopx.`` name that is no registered tool is refused, with the nearest names."""
    import difflib  # an error message's suggestions only

    near = difflib.get_close_matches(tool.removeprefix(LOOPX_TOOL_PREFIX), sorted(TOOL_RISKS), n=3,
                                     cutoff=0.75)
    return (f"{tool!r} is not a registered loopx tool"
            + (f" (did you mean {', '.join(LOOPX_TOOL_PREFIX + n for n in near)}?)"
               if near else "")
            + "; a campaign's own tools must not use the loopx. prefix")


def transition_allowed(current: str, target: str) -> bool:
    """Whether the campaign may move from ``current`` to ``target``."""
    return target in TRANSITIONS.get(current, ())


class Verdict(Value):
    """Whether a proposal may execute now, and every reason it may not."""

    _fields = ("proposal_id", "can_execute", "reasons", "state")

    def __init__(self, proposal_id: str, can_execute: bool, reasons: list[str] | None = None,
                 state: str = "pending") -> None:
        self.proposal_id = proposal_id
        self.can_execute = can_execute
        self.reasons = [] if reasons is None else reasons
        self.state = state


def proposal_state(proposal: dict[str, Any]) -> str:
    """ineligible, executed, failed, rejected, approved, pending (approval) or not_required."""
    if proposal["result"] is not None:
        return "executed" if proposal["result"]["success"] else "failed"
    if not proposal["eligible"]:
        return "ineligible"
    approval = proposal["approval"]
    if approval is not None:
        return str(approval["verdict"])
    return "pending" if proposal["requires_approval"] else "not_required"


def can_execute(view: dict[str, Any], proposal_id: str) -> Verdict:
    """Judge a proposal under the contract, campaign and budget in force now.

    Eligibility and approval are separate: an approved proposal for a tool the contract now
    denies may not execute, and approval never executes anything by itself.
    """
    proposal = view["proposals"][proposal_id]
    state = proposal_state(proposal)
    reasons = []
    contract = current_contract(view)
    assert contract is not None  # a proposal is only accepted under a contract
    eligible, why = tool_eligible(contract, proposal["tool"])
    if not eligible:
        reasons.append(f"tool {proposal['tool']!r} is not eligible: {why}")
    approval = proposal["approval"]
    if approval is not None and approval["verdict"] == "rejected":
        reasons.append(f"rejected by the owner at seq {approval['seq']}")
    elif approval is None and approval_required(contract, proposal["risk"]):
        reasons.append(f"{action_phrase(proposal['risk'], contract)} needs the owner's "
                       "approval (`loopx approve`)")
    if proposal["result"] is not None:
        reasons.append(f"already executed (result recorded at seq {proposal['result']['seq']})")
    status = view["campaign"]["status"]
    if status["state"] in TERMINAL or status["state"] == "paused":
        reasons.append(f"the campaign is {status['state']}")
    used = view["campaign"]["usage"]["total"]
    spent = exhausted(contract, used)
    if spent:
        reasons.append(f"budget exhausted: {', '.join(spent)}")
    over = [r for r in over_budget(contract, used, proposal["estimated_cost"]) if r not in spent]
    if over:
        reasons.append(f"estimated cost exceeds the remaining budget: {', '.join(over)}")
    return Verdict(proposal_id, not reasons, reasons, state)


# A finished campaign's last chapter is told after the loop ends: the narrator still renders.
NARRATOR = "product_narrator"


def _role(view: dict[str, Any], agent_id: str) -> str | None:
    agent = view["agents"].get(agent_id)
    return None if agent is None else agent["role"]


def campaign_block(view: dict[str, Any], agent_id: str) -> Block | None:
    """Whether the campaign stops ``agent_id`` from taking work now, and why (a stopped
    campaign holds back every role but the narrator, which tells how it ended)."""
    campaign = view["campaign"]
    status = campaign["status"]
    ending = status["state"] in TERMINAL
    if ending and _role(view, agent_id) != NARRATOR:
        return Block("campaign_stopped", {"state": status["state"],
                                          "stop_reasons": list(status["stop_reasons"])})
    if status["state"] == "paused":
        return Block("campaign_paused", {"state": "paused", "since_seq": status["since_seq"],
                                         "pause_reasons": list(status["pause_reasons"])})
    contract = current_contract(view)
    spent = exhausted(contract, campaign["usage"]["total"])
    # A spent budget (often why it stopped) does not hold back the narrator's last chapter; a
    # todo of its with an estimated cost is still passed over (todo_over_budget).
    if spent and not ending:
        return Block("budget_exhausted", {"exhausted": spent})
    waiting = awaiting_for(view, agent_id)
    if waiting:
        return Block("awaiting_approval", {"proposals": waiting})
    return None


def awaits_owner(contract: dict[str, Any], proposal: dict[str, Any]) -> bool:
    """Whether a proposal waits for the owner's verdict under ``contract``: its tool is
    eligible and its risk needs approval now, and it has neither a verdict nor a result.

    Judged under the contract in force, not the one it was proposed under: an amendment may
    have lifted the need for approval, or made the tool ineligible (then no approval helps).
    """
    return (proposal["approval"] is None and proposal["result"] is None
            and tool_eligible(contract, proposal["tool"])[0]
            and approval_required(contract, proposal["risk"]))


def awaiting_for(view: dict[str, Any], agent_id: str) -> list[str]:
    """The agent's proposals waiting for the owner now (oldest first)."""
    contract = current_contract(view)
    if contract is None:
        return []
    return [pid for pid in view["campaign"]["open_proposals"].get(agent_id, ())
            if awaits_owner(contract, view["proposals"][pid])]


def awaiting(view: dict[str, Any]) -> dict[str, list[str]]:
    """Per agent, its proposals waiting for the owner now (oldest first)."""
    waiting = {agent_id: awaiting_for(view, agent_id)
               for agent_id in sorted(view["campaign"]["open_proposals"])}
    return {agent_id: ids for agent_id, ids in waiting.items() if ids}


def todo_over_budget(view: dict[str, Any], todo: dict[str, Any]) -> list[str]:
    """Resources for which a todo's estimated cost exceeds what the budget has left."""
    cost = todo.get("cost") or {}
    if not cost:
        return []
    return over_budget(current_contract(view), view["campaign"]["usage"]["total"], cost)


def pass_over(view: dict[str, Any], todo: dict[str, Any]) -> PassOver | None:
    """Selection passes over a todo whose estimated cost exceeds what the budget has left."""
    return OVER_BUDGET if todo.get("cost") and todo_over_budget(view, todo) else None


OVER_BUDGET = PassOver("budget_exhausted", "over_budget_todos")
