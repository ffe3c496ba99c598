"""The write checks: who may append what, fencing of todo-bound writes, and the capability rules.

:func:`check_batch` runs under the store lock against an overlay of the state caught up to the
head, with the ``ts`` the batch will carry; ``loopx verify`` re-runs it over the whole log, so a
record appended around the library is reported. Token checks are separate (:func:`authenticate`)
because tokens never reach the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopx.kernel.errors import (
    FieldProblem,
    Forbidden,
    LoopxError,
    RecordRejected,
    Refused,
    ResearchRefused,
    StaleLease,
    Unauthorized,
)
from loopx.governance.checks import GOVERNANCE_CHECKS, claim_block, stop_transition
from loopx.work.state import LaneState, apply_record, effective
from loopx.work.leases import lease_live
from loopx.narrator.first_screen import NARRATOR_CHECKS
from loopx.research.checks import (
    RESEARCH_CHECKS,
    check_decision,
    check_evaluation_claim,
    check_hypothesis,
)
from loopx.research.state import EVALUATION_SPLITS
from loopx.work.scope import OWNER_ROLE, action_of, allowed
from loopx.work.should_run import blockers, live_holdings, quota_left, select
from loopx.work.successors import successor_todos
from loopx.kernel.tokens import token_matches

OWNER_CAPABILITY = "owner"
RESERVED_AGENTS = ("owner", "loopx-store")
TODO_BOUND = ("research_hypothesis_v0", "auto_research_evidence_packet_v0", "rollout_event_v0")


@dataclass(frozen=True)
class Credentials:
    """What a writer presents: its agent id and its token (never stored, never logged)."""

    agent_id: str
    token: str | None

    def __repr__(self) -> str:
        return f"Credentials(agent_id={self.agent_id!r}, token=<hidden>)"


@dataclass(frozen=True)
class Identity:
    """An authenticated writer: its role and the grant id it writes under."""

    agent_id: str
    role: str
    capability: str

    @property
    def is_owner(self) -> bool:
        """Whether this is the workspace owner (the person holding the owner token)."""
        return self.role == OWNER_ROLE


def authenticate(kernel: dict[str, Any], lanes: LaneState, creds: Credentials) -> Identity:
    """Check a presented token against the owner digest or the agent's live grant.

    Raises:
        Unauthorized: no token, a wrong one, a revoked grant, or another agent's token.
    """
    if not creds.token:
        raise Unauthorized(f"agent {creds.agent_id!r} presented no token",
                           hint="set LOOPX_TOKEN or pass --token-file")
    if creds.agent_id == "owner":
        digest = kernel.get("owner_token_sha256")
        if digest is None or not token_matches(creds.token, digest):
            raise Unauthorized("the owner token is wrong")
        return Identity("owner", OWNER_ROLE, OWNER_CAPABILITY)
    agent = lanes["agents"].get(creds.agent_id)
    if agent is None:
        raise Unauthorized(f"agent {creds.agent_id!r} is not registered",
                           hint="the owner registers agents with `loopx agent register`")
    if agent["revoked"]:
        raise Unauthorized(f"agent {creds.agent_id!r} was revoked")
    if not token_matches(creds.token, agent["token_sha256"]):
        raise Unauthorized(f"the token is not agent {creds.agent_id!r}'s")
    return Identity(creds.agent_id, agent["role"], agent["grant_id"])


def check_batch(lanes: LaneState, records: list[dict[str, Any]], now: str, first_seq: int) -> None:
    """Check a batch record by record against ``lanes`` (an overlay), folding each in as it passes.

    Raises:
        Unauthorized, Forbidden, StaleLease, Refused: naming the record and the rule.
    """
    expected: list[Expected] = []
    for index, record in enumerate(records):
        provisional = {**record, "seq": first_seq + index, "ts": now}
        try:
            if expected:
                writer_of(lanes, provisional)
                expected.pop(0).check(record)
            else:
                _check_record(lanes, provisional, now)
            successors = _successors_of(lanes, provisional)
            apply_record(lanes, provisional)
            expected += successors + _stop_after(lanes, provisional)
        except LoopxError as exc:
            if isinstance(exc, ResearchRefused):
                exc.request = provisional  # what the write path records the refusal of
            if len(records) > 1:
                exc.message = f"record {index} of the batch: {exc.message}"
                exc.args = (exc.message,)
            raise
    if expected:
        raise Refused("records that must follow in the same batch are missing: "
                      + ", ".join(e.label for e in expected))


@dataclass(frozen=True)
class Expected:
    """A record the batch must carry next: a successor todo, or the stop a decision fires."""

    label: str
    check: Callable[[dict[str, Any]], None]


def writer_of(lanes: LaneState, record: dict[str, Any]) -> Identity:
    """The identity a stored record claims, checked against the grants in force.

    Raises:
        Unauthorized: the agent, role or capability does not match a live grant.
    """
    agent_id, role, capability = record["agent_id"], record["lane_role"], record["capability"]
    if agent_id == "owner":
        if role != OWNER_ROLE or capability != OWNER_CAPABILITY:
            raise Unauthorized("owner records carry lane_role 'owner' and capability 'owner'")
        return Identity(agent_id, role, capability)
    agent = lanes["agents"].get(agent_id)
    if agent is None or agent["revoked"]:
        raise Unauthorized(f"agent {agent_id!r} holds no live grant")
    if role != agent["role"] or capability != agent["grant_id"]:
        raise Unauthorized(f"agent {agent_id!r} writes as role {agent['role']!r} under grant "
                           f"{agent['grant_id']}, not {role!r} under {capability}")
    return Identity(agent_id, role, capability)


def _check_record(lanes: LaneState, record: dict[str, Any], now: str) -> None:
    who = writer_of(lanes, record)
    kind = record["schema_version"]
    action = action_of(record)
    payload = record["payload"]
    profile = None if who.is_owner else lanes["profiles"].get(who.role)
    if not who.is_owner and profile is None:
        raise Forbidden(who.role, kind, action, why="the role has no profile")
    if kind == "todo_item_v0" and payload.get("successor_rule_id") is not None:
        raise Refused("successor_rule_id is set only by a successor rule firing on a completion")
    if not allowed(None if profile is None else profile["write_scope"], kind, action):
        raise Forbidden(who.role, kind, action)
    if who.is_owner and record["todo_id"] is not None:
        raise Refused("the owner holds no todos; owner records carry no todo_id")
    if kind == "auto_research_lane_claim_v1":
        _check_claim(lanes, who, record, now)
        return
    if kind == "todo_event_v0" and action == "expired":
        _check_expiry(lanes, record, now)
        return
    if record["todo_id"] is not None:
        _check_fenced(lanes, who, record, now)
    elif kind == "todo_event_v0" or kind in TODO_BOUND:
        raise Refused(f"{kind} must name the todo it works under (todo_id and epoch)",
                      hint="claim a todo first: `loopx quota should-run --claim`")
    check = _KIND_CHECKS.get(kind)
    if check is not None:
        check(lanes, who, record)


def _check_fenced(lanes: LaneState, who: Identity, record: dict[str, Any], now: str) -> None:
    todo_id, epoch = record["todo_id"], record["epoch"]
    todo = lanes["todos"].get(todo_id)
    if todo is None:
        raise Refused(f"todo {todo_id!r} does not exist")
    if epoch is None:
        raise StaleLease(f"a write tied to todo {todo_id!r} must carry its epoch")
    if todo["holder"] != who.agent_id or epoch != todo["epoch"]:
        now_held = (f"held by {todo['holder']} at epoch {todo['epoch']}" if todo["holder"]
                    else f"{todo['status']}, last epoch {todo['epoch']}")
        raise StaleLease(f"todo {todo_id!r}: {who.agent_id} does not hold epoch {epoch} "
                         f"(the todo is {now_held})", hint="ask `loopx quota should-run` again")
    if not lease_live(todo, lanes["agents"], now):
        raise StaleLease(f"todo {todo_id!r}: the lease of {who.agent_id} expired at "
                         f"{todo['expires']}", hint="claim it again to continue")


def _check_claim(lanes: LaneState, who: Identity, record: dict[str, Any], now: str) -> None:
    todo_id, payload = record["todo_id"], record["payload"]
    todo = lanes["todos"].get(todo_id or "")
    if todo is None:
        raise Refused(f"cannot claim todo {todo_id!r}: it does not exist")
    if who.is_owner or todo["role"] != who.role:
        raise Refused(f"todo {todo_id!r} is for role {todo['role']!r}, not {who.role!r}")
    if todo["assigned_to"] not in (None, who.agent_id):
        raise Refused(f"todo {todo_id!r} is assigned to {todo['assigned_to']!r}")
    if todo["status"] != "open":
        if todo["status"] == "claimed" and not lease_live(todo, lanes["agents"], now):
            raise Refused(f"todo {todo_id!r}: its lapsed lease must be recorded as expired "
                          "in the same batch, before the claim")
        raise Refused(f"todo {todo_id!r} is {todo['status']}"
                      + (f" by {todo['holder']}" if todo["holder"] else ""))
    if record["epoch"] != todo["epoch"] + 1:
        raise StaleLease(f"a claim of todo {todo_id!r} takes epoch {todo['epoch'] + 1}, "
                         f"not {record['epoch']}")
    waiting = blockers(todo, lanes)
    if waiting:
        raise Refused(f"todo {todo_id!r} is blocked by {', '.join(waiting)}")
    check_evaluation_claim(lanes, todo_id, todo)
    block = claim_block(lanes, who.agent_id, todo)
    if block is not None:
        raise Refused(f"the campaign refuses claims now ({block.reason}: "
                      f"{_detail(block.detail)})")
    profile = lanes["profiles"][who.role]
    if len(live_holdings(lanes, who.agent_id, now)) >= profile["max_concurrent_claims"]:
        raise Refused(f"{who.agent_id} already holds {profile['max_concurrent_claims']} lease(s), "
                      "the role's max_concurrent_claims")
    if quota_left(lanes, who.agent_id) == 0:
        raise Refused(f"{who.agent_id} has used its claim quota")
    if payload["lease_ttl_seconds"] != effective(todo, lanes["profiles"], "lease_ttl_seconds"):
        raise Refused(f"a claim of todo {todo_id!r} must use its lease_ttl_seconds "
                      f"({effective(todo, lanes['profiles'], 'lease_ttl_seconds')})")
    if payload.get("via", "should_run") == "should_run":
        chosen = select(lanes, who.agent_id, now)
        if chosen.todo_id != todo_id or chosen.reason != "selected":
            raise Refused(f"should-run selects {chosen.todo_id or 'nothing'} for {who.agent_id}, "
                          f"not {todo_id!r}")
    elif profile["explicit_claims"] == "none" or (
            profile["explicit_claims"] == "successors_only" and todo["rule"] is None):
        raise Refused(f"role {who.role!r} may claim explicitly only "
                      + ("nothing" if profile["explicit_claims"] == "none"
                         else "successor todos") + f"; {todo_id!r} is not one",
                      hint="take the todo `loopx quota should-run --claim` selects")


def _check_expiry(lanes: LaneState, record: dict[str, Any], now: str) -> None:
    todo_id = record["todo_id"]
    todo = lanes["todos"].get(todo_id or "")
    if todo is None or todo["status"] != "claimed" or record["epoch"] != todo["epoch"]:
        raise Refused(f"todo {todo_id!r} epoch {record['epoch']} is not a held lease")
    if lease_live(todo, lanes["agents"], now):
        raise Refused(f"todo {todo_id!r}: the lease of {todo['holder']} holds until "
                      f"{todo['expires']}")
    if record["payload"].get("expired_agent_id") != todo["holder"]:
        raise Refused(f"todo {todo_id!r}: expired_agent_id must name the holder {todo['holder']}")


def _check_todo(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    p = record["payload"]
    todos, profiles = lanes["todos"], lanes["profiles"]
    todo_id, role = p["todo_id"], p["role"]
    if todo_id in todos:
        raise Refused(f"todo {todo_id!r} already exists")
    target = profiles.get(role)
    if target is None:
        raise Refused(f"todo {todo_id!r}: no role {role!r} (roles: {', '.join(sorted(profiles))})")
    if p["action_kind"] not in target["actions"]:
        raise Refused(f"todo {todo_id!r}: role {role!r} does not take action "
                      f"{p['action_kind']!r} (it takes {', '.join(target['actions']) or 'none'})")
    if p["action_kind"] in EVALUATION_SPLITS and p.get("hypothesis_id") is None:
        # An evaluation todo reads a split for one hypothesis: without one, its packet could
        # name any hypothesis and its successors (judge, held-out) would name none.
        raise RecordRejected([FieldProblem(
            "payload.hypothesis_id", f"todo {todo_id!r}: a {p['action_kind']} todo evaluates a "
            "hypothesis and must name it (`loopx todo add --hypothesis ID`)")], context="todo")
    if not who.is_owner and role not in lanes["profiles"][who.role]["adds_todos_for"]:
        raise Forbidden(who.role, "todo_item_v0", "add",
                        why=f"it may not add todos for role {role!r}")
    assignee = p.get("assigned_to")
    if assignee is not None:
        agent = lanes["agents"].get(assignee)
        if agent is None or agent["revoked"] or agent["role"] != role:
            raise Refused(f"todo {todo_id!r}: assigned_to {assignee!r} is not a live {role} agent")
    _check_links(lanes, todo_id, p.get("blocked_by", []), p.get("unblocks_todo_id"))


def _check_links(lanes: LaneState, todo_id: str, blocked_by: list[str], unblocks: str | None) -> None:
    todos = lanes["todos"]
    missing = [b for b in blocked_by if b not in todos]
    if missing or todo_id in blocked_by:
        raise Refused(f"todo {todo_id!r}: blocked_by names "
                      + (f"unknown todos {', '.join(missing)}" if missing else "itself"))
    if unblocks is None:
        return
    target = todos.get(unblocks)
    if target is None or target["status"] != "open":
        raise Refused(f"todo {todo_id!r}: unblocks_todo_id {unblocks!r} must be an open todo")
    # A cycle would block both forever: refuse if the target already (transitively) blocks us.
    stack, seen = list(blocked_by), set()
    while stack:
        current = stack.pop()
        if current == unblocks:
            raise Refused(f"todo {todo_id!r}: blocking {unblocks!r} would make a cycle")
        if current not in seen:
            seen.add(current)
            stack += todos.get(current, {}).get("blocked_by", [])


def _check_hypothesis(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    p = record["payload"]
    if p["claimed_by"] != who.agent_id:
        raise Refused(f"hypothesis {p['hypothesis_id']!r}: claimed_by must be the writer "
                      f"{who.agent_id!r}, not {p['claimed_by']!r}")
    if not p.get("grounding_refs") and not p.get("no_grounding_reason"):
        raise Refused(f"hypothesis {p['hypothesis_id']!r} needs grounding_refs or a "
                      "no_grounding_reason")
    check_hypothesis(lanes, who, record)


def _check_decision(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    GOVERNANCE_CHECKS["research_decision_v0"](lanes, who, record)
    check_decision(lanes, who, record)


def _check_grant(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    p = record["payload"]
    if p["agent_id"] in RESERVED_AGENTS:
        raise Refused(f"agent id {p['agent_id']!r} is reserved")
    if p["role"] not in lanes["profiles"]:
        raise Refused(f"no role {p['role']!r} (roles: {', '.join(sorted(lanes['profiles']))})")
    current = lanes["agents"].get(p["agent_id"])
    if current is not None and not current["revoked"]:
        raise Refused(f"agent {p['agent_id']!r} is already registered (grant "
                      f"{current['grant_id']}); revoke it first")


def _check_revocation(lanes: LaneState, who: Identity, record: dict[str, Any]) -> None:
    p = record["payload"]
    agent = lanes["agents"].get(p["agent_id"])
    if agent is None or agent["revoked"] or agent["grant_id"] != p["grant_id"]:
        raise Refused(f"agent {p['agent_id']!r} has no live grant {p['grant_id']}")


def _detail(detail: dict[str, Any]) -> str:
    return "; ".join(f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in detail.items())


_KIND_CHECKS: dict[str, Callable[[LaneState, Identity, dict[str, Any]], None]] = {
    "todo_item_v0": _check_todo,
    "research_hypothesis_v0": _check_hypothesis,
    "agent_grant_v0": _check_grant,
    "agent_revocation_v0": _check_revocation,
    **GOVERNANCE_CHECKS,
    **RESEARCH_CHECKS,
    **NARRATOR_CHECKS,
    "research_decision_v0": _check_decision,
}


def _stop_after(lanes: LaneState, record: dict[str, Any]) -> list[Expected]:
    """The stop a decision (already folded into ``lanes``) fires, if the policy says so."""
    if record["schema_version"] != "research_decision_v0":
        return []
    stop = stop_transition(lanes, record)
    if stop is None:
        return []
    return [Expected(f"the stop transition the policy fires ({', '.join(stop['stop_reasons'])})",
                     lambda r: _check_stop(r, stop))]


def _successors_of(lanes: LaneState, record: dict[str, Any]) -> list[Expected]:
    """Successor todos a completion (not yet folded in) must be followed by in its batch."""
    if record["schema_version"] != "todo_event_v0" or record["payload"]["event"] != "completed":
        return []
    todo = lanes["todos"][record["todo_id"]]
    profile = lanes["profiles"].get(record["lane_role"], {})
    wanted = successor_todos(profile, record["todo_id"], todo, record["agent_id"],
                             record["payload"].get("result", {}), lanes["todos"])
    return [Expected(f"successor todo {w['todo_id']}", lambda r, w=w: _check_successor(r, w))
            for w in wanted]


def _check_successor(record: dict[str, Any], want: dict[str, Any]) -> None:
    from loopx.work.records import TodoItemV0

    normal = TodoItemV0.model_validate(want).model_dump(mode="json")
    if (record["schema_version"] != "todo_item_v0" or record["payload"] != normal
            or record["todo_id"] is not None):
        raise Refused(f"a completion must be followed by its successor todo {want['todo_id']!r} "
                      "exactly as the role's rule makes it")


def _check_stop(record: dict[str, Any], want: dict[str, Any]) -> None:
    from loopx.governance.records import CampaignTransitionV0

    normal = CampaignTransitionV0.model_validate(want).model_dump(mode="json")
    if record["schema_version"] != "campaign_transition_v0" or record["payload"] != normal:
        raise Refused("the stop policy fires with this decision: it must be followed by the "
                      f"campaign's stop ({', '.join(want['stop_reasons'])}) in the same batch")

