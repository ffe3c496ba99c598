"""Drafts are accepted whole or refused with every bad field named, and refusals write nothing."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lanes_support import MINIMAL_CONTRACT

from loopx.kernel.checks import Credentials
from loopx.kernel.errors import (
    Forbidden,
    RecordRejected,
    Refused,
    StaleLease,
    Unauthorized,
)
from loopx.kernel.kinds import KINDS, kind_names
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import MemoryStore
from loopx.narrator.first_screen import NEUTRAL, screen_sha256
from loopx.research.evidence import judgement_payload
from loopx.research.projections import row
from loopx.testing.lanes import LONG_LEASE, executor_writer
from loopx.work.agents import register_agent
from loopx.work.claims import should_run
from loopx.work.should_run import claim_fields
from loopx.work.todos import add_todos
from loopx.workspace import bootstrap_log

VALID: dict[str, dict[str, Any]] = {
    "research_contract_v0": {**copy.deepcopy(MINIMAL_CONTRACT), "base_commit": "a" * 40},
    "research_hypothesis_v0": {
        "hypothesis_id": "h1", "title": "t", "statement": "s", "mechanism_family": "m",
        "claimed_by": "a1", "no_grounding_reason": "none needed",
    },
    "auto_research_evidence_packet_v0": {
        "hypothesis_id": "h1", "status": "scored",
        "results": [{"split": "dev", "metric": "acc", "seed": 0, "value": 0.30},
                    {"split": "dev", "metric": "acc", "seed": 1, "value": 0.31}],
        "base_commit": "a" * 40, "evaluated_commit": "b" * 40,
        "artifacts": [{"path": "out/model.pkl", "sha256": "c" * 64, "bytes": 10}],
    },
    "research_evidence_event_v0": {
        "hypothesis_id": "h1", "packet_ids": ["rec_1"], "split": "dev", "metric": "acc",
        "direction": "maximize", "rule": "welch_one_sided", "verdict": "supports",
    },
    "todo_item_v0": {"todo_id": "t1", "title": "t", "role": "research_executor",
                     "action_kind": "run_dev_eval", "hypothesis_id": "h1"},
    "auto_research_lane_claim_v1": {"capability_token": "research_executor",
                                    "lease_ttl_seconds": 60.0},
    "todo_event_v0": {"event": "heartbeat"},
    # The owner added claimer-work, so the owner may change it.
    "todo_change_v0": {"todo_id": "claimer-work", "change": "reprioritise", "priority": 5},
    "rollout_event_v0": {"event": "started"},
    # Governance kinds: a proposal needs the contract (written first), a result its proposal.
    "action_proposal_v0": {"proposal_id": "p1", "name": "inspect", "tool": "lab.inspect",
                           "risk": "read", "reason": "look first", "eligible": True,
                           "requires_approval": False, "contract_version": 1},
    "action_result_v0": {"proposal_id": "p1", "success": True, "result": {"rows": 3}},
    "campaign_transition_v0": {"from_state": "created", "to_state": "planned",
                               "reason": "contract written"},
    "finding_v0": {"finding_id": "f1", "kind": "computed_result", "statement": "acc is 0.7",
                   "evidence": [{"kind": "record", "ref": "rec_1"}]},
    # Judgements and decisions are bound to the state they judge: the test fills in what the
    # contract's rule computes (values, verdict) and the revision and records they rest on.
    "research_decision_v0": {"decision_id": "d1", "hypothesis_id": "h1", "outcome": "retired",
                             "reason": "contradicted", "revision": 3},
    "novelty_audit_v0": {"hypothesis_id": "h1", "verdict": "not_novel", "note": "seen before"},
    # A hypothesis' grounding ref is its proposer's (a1 proposed h1).
    "grounding_ref_v0": {"ref": {"kind": "paper", "ref": "arXiv:2101.00001"},
                         "hypothesis_id": "h1"},
    "research_plan_v0": {"plan_id": "rp1", "summary": "capacity first",
                         "steps": [{"step_id": "s1", "title": "Try width", "hypotheses": ["h1"],
                                    "rationale": "cheapest first"}]},
    "usage_v0": {"cpu_hours": 0.5, "experiments": 1},
    # The narrator's: a preview of a new first screen, and a publication keeping the neutral one.
    "publication_preview_v0": {
        "preview_id": "pv1", "head_seq": 1, "head_hash": "a" * 64,
        "first_screen": {"title": "Q", "headline": "H",
                         "primary_action": {"label": "See", "href": "#promoted"}},
    },
    "publication_v0": {
        "publication_id": "pub1", "surface": "board", "format": "html", "head_seq": 1,
        "head_hash": "a" * 64, "output_sha256": "b" * 64, "output_bytes": 100,
        "first_screen": NEUTRAL, "first_screen_sha256": screen_sha256(NEUTRAL),
        "first_screen_status": "unchanged",
    },
}
VALID["publication_preview_v0"]["first_screen_sha256"] = screen_sha256(
    VALID["publication_preview_v0"]["first_screen"])
# Agent kinds in an order that satisfies their dependencies.
AGENT_ORDER = ["research_contract_v0", "research_hypothesis_v0", "auto_research_evidence_packet_v0",
               "research_evidence_event_v0"]
OWNER_VALID: dict[str, dict[str, Any]] = {
    "lane_profile_v0": {"role": "scribe", "capability_token": "scribe", "actions": ["take_notes"],
                        "write_scope": {"rollout_event_v0": ["record"]}},
    "agent_grant_v0": {"agent_id": "a9", "role": "research_curator", "token_sha256": "0" * 64},
    # grant_id must name a live grant; test_every_owner_kind_has_a_valid_example fills it in
    "agent_revocation_v0": {"agent_id": "a9", "grant_id": "rec_0", "reason": "done"},
    # the subject must exist: the test writes a contract and a proposal first
    "approval_v0": {"subject": {"kind": "proposal", "id": "p2"}, "verdict": "approved",
                    "note": "fine, within budget"},
}
AGENT_KINDS = sorted(k for k, spec in KINDS.items() if spec.written_by == "agents")
OWNER_KINDS = sorted(k for k, spec in KINDS.items() if spec.written_by == "owner")
WRITE_REFUSALS = (Forbidden, Refused, StaleLease, Unauthorized)


@dataclass
class Lanes:
    """A bootstrapped memory ledger with one agent able to write each kind, holding a todo."""

    ledger: Ledger
    writers: dict[str, Credentials]  # kind -> who writes it
    envelopes: dict[str, dict[str, Any]]  # kind -> the todo_id/epoch its drafts are tied to


def agent(ledger: Ledger, owner: Credentials, agent_id: str, role: str) -> Credentials:
    _, token = register_agent(ledger, owner, agent_id, role)
    return Credentials(agent_id, token)


def fresh_ledger() -> Lanes:
    """Genesis and the packaged profiles, then agents of every role the examples need.

    The executor holds a todo (rollout events, evidence packets, heartbeats); proposer ``a1``
    (the examples' ``claimed_by``) holds one for its hypotheses; ``claimer`` has an open todo
    assigned to it that should-run selects, for the claim example (lease 60 s, as the claim).
    """
    ledger = Ledger(MemoryStore())
    owner_token = bootstrap_log(ledger, "g")
    owner = Credentials("owner", owner_token)
    executor = executor_writer(ledger, owner_token, "executor")
    proposer = agent(ledger, owner, "a1", "hypothesis_proposer")
    claimer = agent(ledger, owner, "claimer", "research_executor")
    add_todos(ledger, owner, [
        {"todo_id": "a1-work", "title": "propose", "role": "hypothesis_proposer",
         "action_kind": "propose_hypothesis", "assigned_to": "a1",
         "lease_ttl_seconds": LONG_LEASE},
        {"todo_id": "claimer-work", "title": "run", "role": "research_executor",
         "action_kind": "run_dev_eval", "hypothesis_id": "h1", "assigned_to": "claimer",
         "lease_ttl_seconds": 60.0}])
    assert should_run(ledger, "a1", claim=True, creds=proposer)["claimed"]
    tied = executor.tie({})
    writers: dict[str, Any] = {
        "research_contract_v0": agent(ledger, owner, "curator", "research_curator"),
        "research_hypothesis_v0": proposer,
        "auto_research_evidence_packet_v0": executor.creds,
        "research_evidence_event_v0": agent(ledger, owner, "evaluator", "evaluator_promoter"),
        "todo_item_v0": proposer,
        "grounding_ref_v0": proposer,
        "auto_research_lane_claim_v1": claimer,
        "todo_event_v0": executor.creds,
        "todo_change_v0": owner,
        "rollout_event_v0": executor.creds,
        **dict.fromkeys(("action_proposal_v0", "action_result_v0", "campaign_transition_v0",
                         "finding_v0", "research_plan_v0"), "curator"),
        **dict.fromkeys(("research_decision_v0", "novelty_audit_v0"), "evaluator"),
        "usage_v0": executor.creds,
        **dict.fromkeys(("publication_preview_v0", "publication_v0"),
                        agent(ledger, owner, "narrator", "product_narrator")),
        **dict.fromkeys(OWNER_KINDS, owner),
    }
    by_id = {c.agent_id: c for c in writers.values() if isinstance(c, Credentials)}
    writers = {kind: by_id[w] if isinstance(w, str) else w for kind, w in writers.items()}
    envelopes = {
        "research_hypothesis_v0": {"todo_id": "a1-work", "epoch": 1},
        "auto_research_evidence_packet_v0": tied,
        "auto_research_lane_claim_v1": {"todo_id": "claimer-work", "epoch": 1},
        "todo_event_v0": tied,
        "rollout_event_v0": tied,
    }
    return Lanes(ledger, writers, envelopes)


def kind_of(docs: Any) -> Any:
    first = docs[0] if isinstance(docs, list) and docs else docs
    return first.get("schema_version") if isinstance(first, dict) else None


def append(lanes: Lanes, docs: Any, kind: str | None = None) -> list[dict[str, Any]]:
    """Append as the agent that writes the kind, each draft tied to its todo if the kind is
    todo-bound (a draft that sets todo_id or epoch itself keeps them)."""
    name = kind or kind_of(docs)
    name = name if isinstance(name, str) else None
    creds = lanes.writers.get(name or "", lanes.writers["rollout_event_v0"])
    envelope = lanes.envelopes.get(name or "", {})

    def tie(doc: Any) -> Any:
        return {**envelope, **doc} if isinstance(doc, dict) else doc

    tied = [tie(d) for d in docs] if isinstance(docs, list) else tie(docs)
    return lanes.ledger.append(tied, creds=creds, kind=kind)


def head(lanes: Lanes) -> int:
    return lanes.ledger.store.head().seq


def bound(lanes: Lanes, kind: str) -> dict[str, Any]:
    """VALID[kind], with what a judgement or decision must take from the state filled in."""
    view = lanes.ledger.state()["lanes"]
    if kind == "research_evidence_event_v0":
        return judgement_payload(view, "h1", "dev")
    if kind == "auto_research_lane_claim_v1":
        # The packet describes the claim exactly as loopx computes it (its write check).
        return {**VALID[kind], **claim_fields(view, "claimer", "claimer-work")}
    if kind == "research_decision_v0":
        current = row(view, "h1")
        assert current.retirement is not None, current
        return {**VALID[kind], "revision": current.revision,
                "evidence_ids": current.retirement["rests_on"]}
    return VALID[kind]


def test_every_agent_kind_has_a_valid_example() -> None:
    assert sorted(VALID) == AGENT_KINDS
    lanes = fresh_ledger()
    for kind in AGENT_ORDER + [k for k in AGENT_KINDS if k not in AGENT_ORDER]:
        [record] = append(lanes, {"payload": bound(lanes, kind)}, kind)
        assert record["schema_version"] == kind
        assert record["visibility"] == KINDS[kind].visibility
        assert record["agent_id"] == lanes.writers[kind].agent_id


def test_every_owner_kind_has_a_valid_example() -> None:
    assert sorted(OWNER_VALID) == OWNER_KINDS
    lanes = fresh_ledger()
    records = {}
    for kind in ("lane_profile_v0", "agent_grant_v0", "agent_revocation_v0"):
        payload = copy.deepcopy(OWNER_VALID[kind])
        if kind == "agent_revocation_v0":
            payload["grant_id"] = records["agent_grant_v0"]["record_id"]
        [records[kind]] = append(lanes, {"payload": payload}, kind)
        assert records[kind]["schema_version"] == kind
        assert records[kind]["visibility"] == KINDS[kind].visibility
        assert records[kind]["agent_id"] == "owner"
    append(lanes, {"payload": VALID["research_contract_v0"]}, "research_contract_v0")
    append(lanes, {"payload": {**VALID["action_proposal_v0"], "proposal_id": "p2",
                               "tool": "lab.train", "risk": "compute",
                               "requires_approval": True}},
           "action_proposal_v0")
    [approval] = append(lanes, {"payload": OWNER_VALID["approval_v0"]}, "approval_v0")
    assert (approval["agent_id"], approval["visibility"]) == ("owner", "private")


@pytest.mark.parametrize(("kind", "mutate", "field"), [
    ("research_contract_v0", lambda p: p["metric"].update(direction="up"), "payload.metric.direction"),
    ("research_contract_v0", lambda p: p["metric"].update(seeds=[1, 1]), "payload.metric.seeds"),
    ("research_contract_v0", lambda p: p.update(budget={"max_cpu_hours": -1}),
     "payload.budget.max_cpu_hours"),
    ("research_contract_v0", lambda p: p.update(allowed_tools=["x"], denied_tools=["x"]),
     "payload.denied_tools"),
    ("research_hypothesis_v0", lambda p: p.pop("mechanism_family"), "payload.mechanism_family"),
    ("research_hypothesis_v0", lambda p: p.update(colour="red"), "payload.colour"),
    ("auto_research_evidence_packet_v0", lambda p: p["results"][0].update(value="0.7"),
     "payload.results.0.value"),
    ("auto_research_evidence_packet_v0", lambda p: p.update(base_commit="HEAD"),
     "payload.base_commit"),
    ("todo_item_v0", lambda p: p.update(todo_id="has space"), "payload.todo_id"),
    ("todo_event_v0", lambda p: p.update(event="exploded"), "payload.event"),
])
def test_refusals_name_the_field(kind: str, mutate: Any, field: str) -> None:
    lanes = fresh_ledger()
    before = head(lanes)
    payload = copy.deepcopy(VALID[kind])
    mutate(payload)
    with pytest.raises(RecordRejected) as err:
        append(lanes, {"payload": payload}, kind)
    assert field in err.value.fields
    assert head(lanes) == before


@pytest.mark.parametrize(("doc", "field"), [
    ({"payload": {"event": "note"}, "seq": 5}, "seq"),
    ({"payload": {"event": "note"}, "hash": "0" * 64}, "hash"),
    ({"payload": {"event": "note"}, "visibility": "secret"}, "visibility"),
    ({"payload": {"event": "note"}, "provenance": "rumour"}, "provenance"),
    ({"payload": {"event": "note"}, "goal_id": "another-goal"}, "goal_id"),
    ({"payload": {"event": "note"}, "schema_version": "todo_event_v0"}, "schema_version"),
    ({"payload": {"event": "note"}, "extra": 1}, "extra"),
    ({"payload": {"event": "note", "detail": {"x": float("nan")}}}, "payload.detail.x"),
    ({"payload": {"event": "note", "detail": {"x": 2**70}}}, "payload.detail.x"),
    ({}, "payload"),
])
def test_envelope_refusals_name_the_field(doc: dict[str, Any], field: str) -> None:
    lanes = fresh_ledger()
    with pytest.raises(RecordRejected) as err:
        append(lanes, doc, "rollout_event_v0")
    assert field in err.value.fields


def test_unknown_kind_and_store_kinds_are_refused() -> None:
    lanes = fresh_ledger()
    with pytest.raises(RecordRejected, match="unknown kind 'nonsense_v0'"):
        append(lanes, {"payload": {}}, "nonsense_v0")
    for kind in ("workspace_v0", "store_repair_v0"):
        with pytest.raises(RecordRejected, match="written only by loopx"):
            append(lanes, {"payload": {}}, kind)


def test_one_bad_record_refuses_the_whole_batch() -> None:
    lanes = fresh_ledger()
    before = head(lanes)
    batch = [{"payload": {"event": "note"}}, {"payload": {"event": "bogus"}},
             {"payload": {"event": "note"}, "seq": 1}]
    with pytest.raises(RecordRejected) as err:
        append(lanes, batch, "rollout_event_v0")
    assert err.value.fields == ["[1].payload.event", "[2].seq"]
    assert head(lanes) == before


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
EXAMPLES = {**VALID, **OWNER_VALID}
payload_field_names = st.sampled_from(sorted({f for v in EXAMPLES.values() for f in v} | {"x"}))


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """Arbitrary JSON, and valid drafts with random fields replaced by arbitrary JSON."""
    if draw(st.booleans()):
        return draw(json_values)
    kind = draw(st.sampled_from(AGENT_KINDS + OWNER_KINDS))
    payload = copy.deepcopy(EXAMPLES[kind])
    for _ in range(draw(st.integers(0, 3))):
        payload[draw(payload_field_names)] = draw(json_values)
    doc: dict[str, Any] = {"schema_version": kind, "payload": payload}
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["agent_id", "todo_id", "epoch", "visibility", "seq"]))] = (
            draw(json_values))
    return [doc, doc] if draw(st.booleans()) else doc


@given(documents())
def test_arbitrary_json_is_accepted_whole_or_refused_by_field(doc: Any) -> None:
    lanes = fresh_ledger()
    ledger = lanes.ledger
    before = ledger.store.lines()  # type: ignore[attr-defined]
    try:
        records = append(lanes, doc)
    except RecordRejected as err:
        assert err.problems, "a refusal must say what is wrong"
        assert all(p.field and p.problem for p in err.problems)
        assert ledger.store.lines() == before  # type: ignore[attr-defined]
    except WRITE_REFUSALS:
        # A well-formed draft a write rule refuses (a duplicate todo, a second claim, a todo
        # the writer does not hold...): nothing written, and the drafts themselves were valid.
        assert ledger.store.lines() == before  # type: ignore[attr-defined]
        name = kind_of(doc)
        creds = lanes.writers.get(name if isinstance(name, str) else "",
                                  lanes.writers["rollout_event_v0"])
        ledger.prepare(doc, ledger.identify(creds))
    else:
        expected = len(doc) if isinstance(doc, list) else 1
        assert len(records) == expected
        assert len(ledger.store.lines()) == len(before) + expected  # type: ignore[attr-defined]


def test_kind_names_cover_the_lane_contract() -> None:
    for kind in ("research_contract_v0", "research_hypothesis_v0", "research_evidence_event_v0",
                 "auto_research_evidence_packet_v0", "todo_item_v0",
                 "auto_research_lane_claim_v1"):
        assert kind in kind_names()


@pytest.mark.parametrize("where", ["payload.detail.note", "payload.detail.nested.0"])
def test_tokens_are_never_written_into_records(where: str) -> None:
    from loopx.kernel.tokens import new_token

    lanes = fresh_ledger()
    before = head(lanes)
    token = new_token()
    detail: dict[str, Any] = ({"note": f"my token is {token}"} if where.endswith("note")
                              else {"nested": [token]})
    with pytest.raises(RecordRejected) as err:
        append(lanes, {"payload": {"event": "note", "detail": detail}}, "rollout_event_v0")
    assert err.value.fields == [where]
    assert token not in str(err.value)
    assert head(lanes) == before
    claim = {"capability_token": token, "lease_ttl_seconds": 60.0}
    with pytest.raises(RecordRejected):
        append(lanes, {"payload": claim}, "auto_research_lane_claim_v1")


def test_a_token_used_as_a_key_is_refused_without_echoing_it() -> None:
    from loopx.kernel.tokens import new_token

    lanes = fresh_ledger()
    token = new_token()
    with pytest.raises(RecordRejected) as err:
        append(lanes, {"payload": {"event": "note", "detail": {token: 1}}}, "rollout_event_v0")
    assert err.value.fields == ["payload.detail.<key holding a token>"]
    assert token not in str(err.value)
