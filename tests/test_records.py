"""Drafts are accepted whole or refused with every bad field named, and refusals write nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopx.errors import RecordRejected
from loopx.ledger import Ledger
from loopx.records import KINDS, kind_names
from loopx.store import MemoryStore

VALID: dict[str, dict[str, Any]] = {
    "research_contract_v0": {
        "contract_id": "c1",
        "objective": {"name": "n", "prompt": "p", "domain": "d"},
        "metric": {"name": "acc", "direction": "maximize", "baseline": 0.5, "seeds": [0, 1]},
        "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout"}},
    },
    "research_hypothesis_v0": {
        "hypothesis_id": "h1", "title": "t", "statement": "s", "mechanism_family": "m",
        "claimed_by": "a1", "no_grounding_reason": "none needed",
    },
    "auto_research_evidence_packet_v0": {
        "hypothesis_id": "h1", "status": "scored",
        "results": [{"split": "dev", "metric": "acc", "seed": 0, "value": 0.7}],
        "base_commit": "a" * 40, "evaluated_commit": "b" * 40,
        "artifacts": [{"path": "out/model.pkl", "sha256": "c" * 64, "bytes": 10}],
    },
    "research_evidence_event_v0": {
        "hypothesis_id": "h1", "packet_ids": ["rec_1"], "split": "dev", "metric": "acc",
        "direction": "maximize", "rule": "welch_one_sided", "verdict": "supports",
    },
    "todo_item_v0": {"todo_id": "t1", "title": "t", "role": "research_executor",
                     "action_kind": "run_dev_eval"},
    "auto_research_lane_claim_v1": {"capability_token": "research_executor",
                                    "lease_ttl_seconds": 60.0},
    "todo_event_v0": {"event": "heartbeat"},
    "rollout_event_v0": {"event": "started"},
}
AGENT_KINDS = sorted(k for k, spec in KINDS.items() if spec.written_by == "agents")


def fresh_ledger() -> Ledger:
    ledger = Ledger(MemoryStore())
    ledger.append_genesis({"format_version": 1, "goal_id": "g", "owner_token_sha256": "0" * 64,
                           "loopx_version": "test"}, agent_id="owner")
    return ledger


def append(ledger: Ledger, docs: Any, kind: str | None = None) -> list[dict[str, Any]]:
    return ledger.append(docs, agent_id="a1", lane_role="owner", kind=kind)


def test_every_agent_kind_has_a_valid_example() -> None:
    assert sorted(VALID) == AGENT_KINDS
    ledger = fresh_ledger()
    for kind in AGENT_KINDS:
        [record] = append(ledger, {"payload": VALID[kind]}, kind)
        assert record["schema_version"] == kind
        assert record["visibility"] == KINDS[kind].visibility


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
    ledger = fresh_ledger()
    payload = copy.deepcopy(VALID[kind])
    mutate(payload)
    with pytest.raises(RecordRejected) as err:
        append(ledger, {"payload": payload}, kind)
    assert field in err.value.fields
    assert ledger.store.head().seq == 1


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
    ledger = fresh_ledger()
    with pytest.raises(RecordRejected) as err:
        append(ledger, doc, "rollout_event_v0")
    assert field in err.value.fields


def test_unknown_kind_and_store_kinds_are_refused() -> None:
    ledger = fresh_ledger()
    with pytest.raises(RecordRejected, match="unknown kind 'nonsense_v0'"):
        append(ledger, {"payload": {}}, "nonsense_v0")
    for kind in ("workspace_v0", "store_repair_v0"):
        with pytest.raises(RecordRejected, match="written only by loopx"):
            append(ledger, {"payload": {}}, kind)


def test_one_bad_record_refuses_the_whole_batch() -> None:
    ledger = fresh_ledger()
    batch = [{"payload": {"event": "note"}}, {"payload": {"event": "bogus"}},
             {"payload": {"event": "note"}, "seq": 1}]
    with pytest.raises(RecordRejected) as err:
        append(ledger, batch, "rollout_event_v0")
    assert err.value.fields == ["[1].payload.event", "[2].seq"]
    assert ledger.store.head().seq == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
payload_field_names = st.sampled_from(sorted({f for v in VALID.values() for f in v} | {"x"}))


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """Arbitrary JSON, and valid drafts with random fields replaced by arbitrary JSON."""
    if draw(st.booleans()):
        return draw(json_values)
    kind = draw(st.sampled_from(AGENT_KINDS))
    payload = copy.deepcopy(VALID[kind])
    for _ in range(draw(st.integers(0, 3))):
        payload[draw(payload_field_names)] = draw(json_values)
    doc: dict[str, Any] = {"schema_version": kind, "payload": payload}
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["agent_id", "todo_id", "epoch", "visibility", "seq"]))] = (
            draw(json_values))
    return [doc, doc] if draw(st.booleans()) else doc


@given(documents())
def test_arbitrary_json_is_accepted_whole_or_refused_by_field(doc: Any) -> None:
    ledger = fresh_ledger()
    before = ledger.store.lines()  # type: ignore[attr-defined]
    try:
        records = append(ledger, doc)
    except RecordRejected as err:
        assert err.problems, "a refusal must say what is wrong"
        assert all(p.field and p.problem for p in err.problems)
        assert ledger.store.lines() == before  # type: ignore[attr-defined]
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
    from loopx.tokens import new_token

    ledger = fresh_ledger()
    token = new_token()
    detail: dict[str, Any] = ({"note": f"my token is {token}"} if where.endswith("note")
                              else {"nested": [token]})
    with pytest.raises(RecordRejected) as err:
        append(ledger, {"payload": {"event": "note", "detail": detail}}, "rollout_event_v0")
    assert err.value.fields == [where]
    assert token not in str(err.value)
    assert ledger.store.head().seq == 1
    claim = {"capability_token": token, "lease_ttl_seconds": 60.0}
    with pytest.raises(RecordRejected):
        append(ledger, {"payload": claim}, "auto_research_lane_claim_v1")


def test_a_token_used_as_a_key_is_refused_without_echoing_it() -> None:
    from loopx.tokens import new_token

    ledger = fresh_ledger()
    token = new_token()
    with pytest.raises(RecordRejected) as err:
        append(ledger, {"payload": {"event": "note", "detail": {token: 1}}}, "rollout_event_v0")
    assert err.value.fields == ["payload.detail.<key holding a token>"]
    assert token not in str(err.value)
