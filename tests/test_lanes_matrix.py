"""The role x kind x action matrix, generated from the role profiles, and token checks."""

from __future__ import annotations

from typing import Any

import pytest
from lanes_support import MINIMAL_CONTRACT, Campaign, campaign

from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Forbidden, RecordRejected, Unauthorized
from loopx.kernel.verify import verify_store
from loopx.research.evidence import judgement_payload
from loopx.research.projections import row
from loopx.testing.research import ResearchLoop
from loopx.work.claims import should_run
from loopx.work.profiles import packaged_profiles, parse_profile
from loopx.work.scope import KIND_ACTIONS, OWNER_ROLE, role_scope
from loopx.work.should_run import claim_fields

PROFILES = {p["role"]: p for p in (parse_profile(n, d) for n, d in packaged_profiles().items())}
ROLES = sorted(PROFILES) + [OWNER_ROLE]
CASES = [(role, kind, action) for role in ROLES for kind in sorted(KIND_ACTIONS)
         for action in KIND_ACTIONS[kind]]


def expected_scope(role: str) -> dict[str, tuple[str, ...]]:
    return role_scope(None if role == OWNER_ROLE else PROFILES[role]["write_scope"])


GOVERNANCE = ("research_contract_v0", "action_proposal_v0", "approval_v0", "action_result_v0",
              "usage_v0", "finding_v0", "research_decision_v0", "campaign_transition_v0")
CONTRACT = MINIMAL_CONTRACT


def setup_contract(c: Campaign, **changes: Any) -> dict[str, Any]:
    """A contract version 1, written by a curator of its own."""
    curator = c.agent("curator-setup", "research_curator")
    [record] = c.ledger.append({"payload": {**CONTRACT, **changes}}, creds=curator,
                               kind="research_contract_v0")
    return record


def setup_states(c: Campaign, *states: str) -> None:
    """Move the campaign through ``states`` as the owner."""
    current = c.lanes["campaign"]["status"]["state"]
    for state in states:
        c.ledger.append({"payload": {"from_state": current, "to_state": state, "reason": "setup"}},
                        creds=c.owner, kind="campaign_transition_v0")
        current = state


# The states a campaign passes through before each transition is legal.
BEFORE = {"planned": (), "ready": ("planned",), "running": ("planned", "ready"),
          "paused": ("planned", "ready", "running"), "completed": ("planned", "ready", "running"),
          "stopped": ("planned", "ready", "running"), "failed": ("planned", "ready", "running")}


def proposal(proposal_id: str, risk: str, needs: bool) -> dict[str, Any]:
    tool = "lab.inspect" if risk == "read" else "lab.train"  # the contract's tool_risks
    return {"proposal_id": proposal_id, "name": "n", "tool": tool, "risk": risk,
            "reason": "r", "eligible": True, "requires_approval": needs, "contract_version": 1}


def governance_draft(c: Campaign, role: str, agent: str, kind: str, action: str,
                     creds: Credentials) -> dict[str, Any]:
    """Drafts (and the state they need) for the governance kinds."""
    if kind == "research_contract_v0":
        if action == "create":
            return {"payload": dict(CONTRACT)}
        v1 = setup_contract(c)
        metric = {**CONTRACT["metric"], "baseline": 0.6}
        return {"payload": {**CONTRACT, "metric": metric, "version": 2,
                            "supersedes": v1["record_id"],
                            "amendment": {"changed": ["metric.baseline"], "reason": "remeasured"}}}
    if kind == "action_proposal_v0":
        setup_contract(c)
        return {"payload": proposal("p1", "read", False)}
    if kind == "approval_v0":
        setup_contract(c)
        bystander = Credentials("bystander", c.tokens["bystander"])
        c.ledger.append({"payload": proposal("p0", "compute", True)}, creds=bystander,
                        kind="action_proposal_v0")
        verdict = "approved" if action == "approve" else "rejected"
        return {"payload": {"subject": {"kind": "proposal", "id": "p0"}, "verdict": verdict,
                            "note": "ok"}}
    if kind == "action_result_v0":
        setup_contract(c)
        if "propose" in expected_scope(role).get("action_proposal_v0", ()):
            c.ledger.append({"payload": proposal("p0", "read", False)}, creds=creds,
                            kind="action_proposal_v0")
        return {"payload": {"proposal_id": "p0", "success": True}}
    if kind == "usage_v0":
        return {"payload": {"cpu_hours": 1.5}}
    if kind == "finding_v0":
        return {"payload": {"finding_id": "f1", "kind": "hypothesis", "statement": "maybe"}}
    if kind == "research_decision_v0":
        return decision_draft(c, action)
    if kind == "campaign_transition_v0" and action in ("paused", "completed"):
        return policy_move_draft(c, action)
    if kind == "campaign_transition_v0":
        # A stop by an agent must name the reasons that apply: an exhausted experiment budget.
        setup_contract(c, budget={"max_experiments": 1})
        setup_states(c, *BEFORE[action])
        current = c.lanes["campaign"]["status"]["state"]
        reasons: list[str] = []
        if action == "stopped":
            c.ledger.append({"payload": {"experiments": 1}}, creds=c.owner, kind="usage_v0")
            reasons = ["budget_exhausted:experiments"]
        return {"payload": {"from_state": current, "to_state": action, "reason": "test",
                            "stop_reasons": reasons}}
    raise AssertionError(kind)


def policy_move_draft(c: Campaign, action: str) -> dict[str, Any]:
    """A pause or completion by the policy, which an agent may write only when it is due: h1 is
    promoted, then an amendment sets a target it reaches (its promotion awaits the owner's
    approval for the pause)."""
    from loopx.governance.contract import amend_contract
    from loopx.research.decisions import decide

    loop = ResearchLoop(c.ledger, c.owner, agents={})
    policy = {"required_gates": ["heldout"], "require_owner_approval": action == "paused"}
    loop.contract({**CONTRACT, "promotion_policy": policy,
                   "metric": {**CONTRACT["metric"], "seeds": [0, 1, 2]}})
    setup_states(c, "ready", "running")
    loop.supported("h1", [0.7, 0.8, 0.9], [0.7, 0.8, 0.9])
    decide(c.ledger, loop.agents["ev"], "h1", "promoted")
    amend_contract(c.ledger, loop.agents["cur"], "a target", settings=[("metric.target", 0.75)])
    why = ({"pause_reasons": ["target_awaits_owner_approval"]} if action == "paused"
           else {"completion": "objective_target_reached"})
    return {"payload": {"from_state": "running", "to_state": action, "reason": "test",
                        "iteration": 1, **why}}


RESEARCH = ("research_hypothesis_v0", "auto_research_evidence_packet_v0",
            "research_evidence_event_v0", "novelty_audit_v0", "gate_result_v0",
            "research_refusal_v0")
# Kinds only loopx's own tools (or the write path) build: `loopx append` refuses them, so the
# matrix writes them the way loopx does, through the same checked path.
BY_LOOPX = ("gate_result_v0", "research_refusal_v0")


def research_loop(c: Campaign) -> ResearchLoop:
    """Setup agents of every research role (ids unlike the role under test's) and a contract."""
    loop = ResearchLoop(c.ledger, c.owner, agents={})
    loop.contract({**CONTRACT, "promotion_policy": {"required_gates": ["heldout"]},
                   "metric": {**CONTRACT["metric"], "seeds": [0, 1, 2]}})
    return loop


def research_draft(c: Campaign, agent: str, kind: str, action: str,
                   held: dict[str, Any]) -> dict[str, Any]:
    """Drafts (and the state they need) for the research kinds."""
    hypothesis = {"hypothesis_id": "h1", "title": "t", "statement": "s", "mechanism_family": "m",
                  "claimed_by": agent, "no_grounding_reason": "test"}
    if kind == "research_hypothesis_v0":
        if action == "refine":
            research_loop(c).propose("h0")
            hypothesis["parent_id"] = "h0"
        return {**held, "payload": hypothesis}
    loop = research_loop(c)
    loop.propose("h1")
    if kind == "auto_research_evidence_packet_v0":
        return {**held, "payload": {"hypothesis_id": "h1", "status": "failed", "error": "x"}}
    if kind == "research_evidence_event_v0":
        loop.run("h1", "dev", [0.6, 0.7, 0.8])
        return {"payload": judgement_payload(c.lanes, "h1", "dev")}
    if kind == "novelty_audit_v0":
        return {"payload": {"hypothesis_id": "h1", "verdict": "novel"}}
    if kind == "gate_result_v0":
        return {"payload": {"hypothesis_id": "h1", "gate": "protected_boundary",
                            "passed": False, "revision": c.lanes["hypotheses"]["h1"]["revision"],
                            "reasons": ["no evidence to check"]}}
    return {"payload": {"rule": "duplicate", "requested_kind": "research_hypothesis_v0",
                        "requested_action": "propose", "hypothesis_id": "h1",
                        "reason": "a test refusal"}}


def grounding_draft(c: Campaign, role: str, agent: str, action: str, held: dict[str, Any],
                    creds: Credentials) -> dict[str, Any]:
    """A campaign-wide grounding ref, or one for h1, which a role that may ground a hypothesis
    proposes itself (a hypothesis' grounding refs are its proposer's)."""
    loop = research_loop(c)
    ref = {"kind": "paper", "ref": "arXiv:2101.00001"}
    if action == "ground_campaign":
        return {"payload": {"ref": ref}}
    if "ground" in expected_scope(role).get("grounding_ref_v0", ()):
        c.ledger.append({**held, "payload": {
            "hypothesis_id": "h1", "title": "t", "statement": "s", "mechanism_family": "m",
            "claimed_by": agent, "no_grounding_reason": "test"}}, creds=creds,
            kind="research_hypothesis_v0")
    else:
        loop.propose("h1")
    return {"payload": {"ref": ref, "hypothesis_id": "h1"}}


PLAN_STEPS = [{"step_id": "s1", "title": "Try width", "hypotheses": ["h1"]}]


def research_plan_draft(c: Campaign, action: str) -> dict[str, Any]:
    """A research plan's version 1, or a revision of one a setup curator recorded."""
    if action == "create":
        return {"payload": {"plan_id": "rp", "steps": PLAN_STEPS}}
    curator = c.agent("curator-plan", "research_curator")
    [v1] = c.ledger.append({"payload": {"plan_id": "rp", "steps": PLAN_STEPS}}, creds=curator,
                           kind="research_plan_v0")
    return {"payload": {"plan_id": "rp", "version": 2, "supersedes": v1["record_id"],
                        "reason": "depth first", "steps": [
                            {"step_id": "s0", "title": "Try depth"}, *PLAN_STEPS]}}


def decision_draft(c: Campaign, action: str) -> dict[str, Any]:
    """A decision on a candidate: h1 promoted on dev and held-out evidence, or retired as
    superseded by h2 (a duplicate of h1 is refused when proposed, so it is never a candidate)."""
    loop = research_loop(c)
    loop.supported("h1", [0.7, 0.8, 0.9], [0.7, 0.8, 0.9])
    hid, outcome, reason = "h1", "promoted", "gates_passed"
    if action == "retire":
        loop.propose("h2", supersedes="h1")
        outcome, reason = "retired", "superseded"
    current = row(c.lanes, hid)
    candidate = current.promotion if outcome == "promoted" else current.retirement
    assert candidate is not None, current
    return {"payload": {"decision_id": "d1", "hypothesis_id": hid, "outcome": outcome,
                        "reason": reason, "revision": current.revision,
                        "evidence_ids": candidate["rests_on"]}}


def narrator_draft(c: Campaign, kind: str) -> dict[str, Any]:
    """A preview of a new first screen, or a publication that keeps the neutral one, pinned to
    the current head."""
    from loopx.narrator.first_screen import NEUTRAL, screen_sha256

    preview = kind == "publication_preview_v0"
    screen = {**NEUTRAL, "headline": "A new headline"} if preview else NEUTRAL
    pin = {"first_screen": screen, "first_screen_sha256": screen_sha256(screen),
           "head_seq": c.head(), "head_hash": c.ledger.store.head().hash}
    if preview:
        return {"payload": {"preview_id": "pv1", **pin}}
    return {"payload": {"publication_id": "pub1", "surface": "story", "format": "md",
                        "output_sha256": "b" * 64, "output_bytes": 10,
                        "first_screen_status": "unchanged", **pin}}


def draft(c: Campaign, role: str, agent: str, kind: str, action: str,
          held: dict[str, Any], creds: Credentials) -> dict[str, Any]:
    """A well-formed draft performing ``action`` on ``kind``, valid but for the scope check."""
    if kind in GOVERNANCE:
        return governance_draft(c, role, agent, kind, action, creds)
    if kind == "grounding_ref_v0":
        return grounding_draft(c, role, agent, action, held, creds)
    if kind in RESEARCH:
        return research_draft(c, agent, kind, action, held)
    if kind == "rollout_event_v0":
        return {**held, "payload": {"event": "note"}}
    if kind == "research_plan_v0":
        return research_plan_draft(c, action)
    if kind in ("publication_preview_v0", "publication_v0"):
        return narrator_draft(c, kind)
    if kind == "todo_item_v0":
        targets = PROFILES.get(role, {}).get("adds_todos_for") or ["research_executor"]
        target = PROFILES[targets[0]]
        return {"payload": {"todo_id": "new", "title": "t", "role": targets[0],
                            "action_kind": target["actions"][0], "hypothesis_id": "h1"}}
    if kind == "todo_change_v0":
        return todo_change_draft(c, role, action, creds)
    if kind == "auto_research_lane_claim_v1":
        if agent in c.lanes["agents"]:  # the packet as loopx computes it (its write check)
            return {"todo_id": "free", "epoch": 1, "payload": claim_fields(c.lanes, agent, "free")}
        return {"todo_id": "free", "epoch": 1,
                "payload": {"capability_token": role,
                            "lease_ttl_seconds": PROFILES.get(role, PROFILES["research_executor"])[
                                "lease_ttl_seconds"]}}
    if kind == "todo_event_v0":
        if action == "expired":
            c.clock.advance(8 * 24 * 3600)  # past the held lease
            return {**held, "payload": {"event": "expired", "expired_agent_id": agent}}
        payload = {"event": action}
        if action == "failed":
            payload["reason"] = "x"
        return {**held, "payload": payload}
    if kind == "lane_profile_v0":
        return {"payload": PROFILES["product_narrator"]}
    if kind == "agent_grant_v0":
        return {"payload": {"agent_id": "newcomer", "role": "product_narrator",
                            "token_sha256": "a" * 64}}
    if kind == "agent_revocation_v0":
        grant = c.lanes["agents"]["bystander"]["grant_id"]
        return {"payload": {"agent_id": "bystander", "grant_id": grant}}
    raise AssertionError(kind)


def todo_change_draft(c: Campaign, role: str, action: str, creds: Credentials) -> dict[str, Any]:
    """A change of todo ``mine``, which the role itself added when it may add todos (a todo
    change is the adding role's or the owner's), else the owner; ``other`` may block it."""
    targets = PROFILES.get(role, {}).get("adds_todos_for") or ["research_executor"]
    target_role = targets[0]
    mine = {"todo_id": "mine", "title": "t", "role": target_role, "hypothesis_id": "h1",
            "action_kind": PROFILES[target_role]["actions"][0]}
    if action == "unblock":
        c.todo("other")
        mine["blocked_by"] = ["other"]
    adds = "add" in expected_scope(role).get("todo_item_v0", ())
    c.ledger.append({"payload": mine}, creds=creds if adds else c.owner, kind="todo_item_v0")
    change: dict[str, Any] = {"todo_id": "mine", "change": action}
    if action == "reprioritise":
        change["priority"] = 7
    elif action in ("block", "unblock"):
        if action == "block":
            c.todo("other")
        change["blocker"] = "other"
    elif action == "cancel":
        change["reason"] = "no longer needed"
    else:
        c.agent("assignee", target_role)
        change["assigned_to"] = "assignee"
    return {"payload": change}


@pytest.mark.parametrize(("role", "kind", "action"), CASES,
                         ids=[f"{r}-{k}-{a}" for r, k, a in CASES])
def test_role_kind_action_matrix(role: str, kind: str, action: str) -> None:
    c = campaign()
    c.agent("bystander", "product_narrator")
    held: dict[str, Any] = {}
    if role == OWNER_ROLE:
        creds, agent = c.owner, "owner"
    else:
        agent = f"{role}-1"
        creds = c.agent(agent, role)
        if kind != "auto_research_lane_claim_v1":
            c.todo("held", role=role, action_kind=PROFILES[role]["actions"][0],
                   assigned_to=agent, lease_ttl_seconds=7 * 24 * 3600.0)
            got = should_run(c.ledger, agent, claim=True, creds=creds)
            held = {"todo_id": "held", "epoch": got["todo"]["epoch"]}
    if kind == "auto_research_lane_claim_v1":
        free_role = role if role != OWNER_ROLE else "research_executor"
        c.todo("free", role=free_role, action_kind=PROFILES[free_role]["actions"][0])
    doc = draft(c, role, agent, kind, action, held, creds)
    head = c.head()
    if kind in BY_LOOPX:
        with pytest.raises(RecordRejected, match="written only by loopx"):
            c.ledger.append(doc, creds=creds, kind=kind)

        def append(doc: dict[str, Any], *, creds: Credentials, kind: str) -> list[Any]:
            return c.ledger.write(creds, lambda view, who, now: c.ledger.prepare(
                doc, who, kind=kind, by_loopx=True))
    else:
        append = c.ledger.append
    if action in expected_scope(role).get(kind, ()):
        [record] = [r for r in append(doc, creds=creds, kind=kind)
                    if r["schema_version"] == kind]
        assert (record["agent_id"], record["lane_role"]) == (agent, role)
        assert verify_store(c.ledger.store).ok
    else:
        with pytest.raises(Forbidden) as refused:
            append(doc, creds=creds, kind=kind)
        assert (refused.value.role, refused.value.kind, refused.value.action) == (role, kind, action)
        assert f"role {role!r} may not write {kind} with action {action!r}" in str(refused.value)
        assert c.head() == head


def test_the_matrix_covers_every_profile_and_kind() -> None:
    assert set(PROFILES) == {"research_curator", "hypothesis_proposer", "research_executor",
                             "evaluator_promoter", "product_narrator"}
    allowed = sum(a in expected_scope(r).get(k, ()) for r, k, a in CASES)
    assert 0 < allowed < len(CASES)


@pytest.fixture
def held() -> tuple[Campaign, Credentials, Credentials]:
    c = campaign()
    ex = c.agent("ex-1", "research_executor")
    other = c.agent("ex-2", "research_executor")
    c.todo("t1", assigned_to="ex-1")
    should_run(c.ledger, "ex-1", claim=True, creds=ex)
    return c, ex, other


NOTE = {"todo_id": "t1", "epoch": 1, "payload": {"event": "note"}}


@pytest.mark.parametrize("case", ["none", "empty", "wrong", "other-agent", "owner-token",
                                  "revoked", "unregistered"])
def test_bad_tokens_are_refused_and_write_nothing(held: tuple[Campaign, Credentials, Credentials],
                                                  case: str) -> None:
    from loopx.work.agents import revoke_agent

    c, ex, other = held
    creds = {
        "none": Credentials("ex-1", None),
        "empty": Credentials("ex-1", ""),
        "wrong": Credentials("ex-1", "lpx_" + "x" * 43),
        "other-agent": Credentials("ex-1", other.token),
        "owner-token": Credentials("ex-1", c.owner.token),
        "revoked": ex,
        "unregistered": Credentials("ghost", ex.token),
    }[case]
    if case == "revoked":
        revoke_agent(c.ledger, c.owner, "ex-1")
    head = c.head()
    with pytest.raises(Unauthorized):
        c.ledger.append(NOTE, creds=creds, kind="rollout_event_v0")
    assert c.head() == head
    c.ledger.append(NOTE, creds=ex, kind="rollout_event_v0") if case != "revoked" else None


def test_a_writer_cannot_speak_for_another_agent(held: tuple[Campaign, Credentials, Credentials]) -> None:
    from loopx.kernel.errors import RecordRejected

    c, ex, _ = held
    with pytest.raises(RecordRejected, match="agent_id: is 'ex-2' but the writer is 'ex-1'"):
        c.ledger.append({**NOTE, "agent_id": "ex-2"}, creds=ex, kind="rollout_event_v0")
    with pytest.raises(RecordRejected, match="lane_role"):
        c.ledger.append({**NOTE, "lane_role": "research_curator"}, creds=ex,
                        kind="rollout_event_v0")
    with pytest.raises(RecordRejected, match="provenance: 'observed' is stronger"):
        c.ledger.append({"provenance": "observed", "payload": {
            "todo_id": "t2", "title": "t", "role": "research_executor",
            "action_kind": "run_dev_eval"}}, creds=c.owner, kind="todo_item_v0")
    [lowered] = c.ledger.append({**NOTE, "provenance": "claimed"}, creds=ex,
                                kind="rollout_event_v0")
    assert lowered["provenance"] == "claimed"


def test_only_the_owner_registers_and_revokes(held: tuple[Campaign, Credentials, Credentials]) -> None:
    from loopx.work.agents import register_agent, revoke_agent

    c, ex, _ = held
    with pytest.raises(Forbidden, match="agent_grant_v0 with action 'grant'"):
        register_agent(c.ledger, ex, "sneaky", "research_curator")
    with pytest.raises(Forbidden, match="agent_revocation_v0"):
        revoke_agent(c.ledger, ex, "ex-2")
    with pytest.raises(Unauthorized, match="owner token is wrong"):
        register_agent(c.ledger, Credentials("owner", ex.token), "sneaky", "research_curator")
