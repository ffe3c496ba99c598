"""The novelty gate means something: a novel verdict rests on material other than the
proposer's ideation material (however it is re-spelled), covers the contract's novelty boundary,
is never by the ideation side, and an audit that does not hold never counts toward promotion.
Grounding refs are records of their own, the proposer's for its hypothesis and the curator's for
the campaign, listed in the evidence graph."""

from __future__ import annotations

from typing import Any

import pytest
from lanes_support import campaign

from loopx.governance.contract import amend_contract
from loopx.kernel.errors import Forbidden, RecordRejected, Refused, ResearchRefused
from loopx.kernel.verify import verify_store
from loopx.research.decisions import decide
from loopx.research.graph import graph_json
from loopx.research.grounding import add_grounding_ref, ideation_material
from loopx.research.operations import audit_novelty, propose_hypothesis
from loopx.research.projections import row
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.claims import should_run

GOOD, HELDOUT = [0.95, 0.96, 0.97], [0.93, 0.94, 0.95]
SOURCE = {"kind": "url", "ref": "https://example.org/papers/wide-nets"}
ARXIV = {"kind": "paper", "ref": "arXiv:2101.00001"}
OTHER = {"kind": "paper", "ref": "arXiv:1608.03983"}
PRIOR = {"kind": "paper", "ref": "doi:10.1000/survey.2020"}


def loop(**contract: Any) -> ResearchLoop:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "promotion_policy": {"required_gates": ["heldout"]}, **contract})
    return r


def view(r: ResearchLoop) -> dict[str, Any]:
    return r.ledger.state()["lanes"]


def head(r: ResearchLoop) -> int:
    return r.ledger.store.head().seq


def gate(r: ResearchLoop, hid: str = "h1") -> Any:
    return row(view(r), hid).gates["novelty"]


def refused(r: ResearchLoop, rule: str, match: str, refs: list[dict[str, Any]],
            hid: str = "h1") -> dict[str, Any]:
    """A novel verdict on ``refs`` is refused under ``rule``; only the refusal is written."""
    before = head(r)
    with pytest.raises(ResearchRefused, match=match) as caught:
        audit_novelty(r.ledger, r.agents["ev"], hid, "novel", refs=refs)
    assert caught.value.rule == rule and head(r) == before + 1
    [record] = [rec for rec, _ in r.ledger.store.read() if rec["seq"] > before]
    assert record["schema_version"] == "research_refusal_v0"
    assert record["payload"]["requested_kind"] == "novelty_audit_v0"
    assert view(r)["hypotheses"][hid]["audits"] == [] or all(
        a["seq"] <= before for a in view(r)["hypotheses"][hid]["audits"])
    return record


def claimed(r: ResearchLoop, **propose: Any) -> None:
    """h1, supported on dev and held-out, claiming novelty, grounded on SOURCE and ARXIV."""
    r.supported("h1", GOOD, HELDOUT, claims_novelty=True, grounding_refs=[SOURCE, ARXIV],
                **propose)


# -- the same material, re-spelled -----------------------------------------------------------

@pytest.mark.parametrize("spelled", [
    {"kind": "url", "ref": "HTTPS://Example.ORG/papers/Wide-Nets"},
    {"kind": "url", "ref": "https://example.org/papers/wide-nets#results"},
    {"kind": "url", "ref": "https://example.org/papers/wide-nets/"},
    {"kind": "url", "ref": "http://www.example.org:80/papers/./wide-nets?utm_source=feed"},
    {"kind": "url", "ref": "example.org//papers/wide%2Dnets/index.html"},
    {"kind": "note", "ref": " <https://example.org/papers/wide-nets>. "},
    {"kind": "url", "ref": "https://example.org/papers/wide-nets?v=2"},
    {"kind": "url", "ref": "https://exa\u200bmple.org/papers/wide-nets"},
    {"kind": "url", "ref": "ｈｔｔｐｓ://example.org/papers/wide-nets"},
    {"kind": "paper", "ref": "https://arxiv.org/pdf/2101.00001v3.pdf"},
    {"kind": "url", "ref": "https://www.alphaxiv.org/abs/2101.00001"},
    {"kind": "note", "ref": "ARXIV 2101.00001v2"},
    {"kind": "paper", "ref": "https://example.org/papers/wide-nets", "sha256": "a" * 64},
])
def test_a_novel_verdict_on_the_proposers_own_source_is_refused_however_spelled(
        spelled: dict[str, Any]) -> None:
    r = loop()
    claimed(r)
    record = refused(r, "novelty_material", "ideation material", [OTHER, spelled])
    assert record["payload"]["cites"] == [view(r)["hypotheses"]["h1"]["record_id"]]
    assert gate(r).status == "pending" and row(view(r), "h1").promotion is None
    assert verify_store(r.ledger.store).ok


def test_a_shared_digest_is_the_same_material_under_any_name() -> None:
    r = loop()
    claimed(r, parameters={"k": 1})
    add_grounding_ref(r.ledger, r.agents["prop"],
                      {"kind": "file", "ref": "notes/idea.pdf", "sha256": "b" * 64},
                      hypothesis_id="h1")
    refused(r, "novelty_material", "ideation material",
            [{"kind": "url", "ref": "https://mirror.example.net/x.pdf", "sha256": "b" * 64}])


def test_distinct_sources_stay_distinct() -> None:
    r = loop()
    r.supported("h1", GOOD, HELDOUT, claims_novelty=True, grounding_refs=[
        {"kind": "url", "ref": "https://openreview.net/forum?id=AAA"},
        {"kind": "paper", "ref": "doi:10.1000/one"}])
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[
        {"kind": "url", "ref": "https://openreview.net/forum?id=BBB"},
        {"kind": "paper", "ref": "doi:10.1000/two"},
        {"kind": "paper", "ref": "arXiv:2101.00002"}])
    assert gate(r).status == "passed" and row(view(r), "h1").promotion is not None


@pytest.mark.parametrize(("a", "b", "same"), [
    ("doi:10.1000/xyz", "https://onlinelibrary.wiley.com/doi/10.1000/XYZ/abstract", True),
    ("docs/paper.pdf", "file:///home/u/docs/paper.pdf", True),
    ("./docs/paper.pdf", "docs\\paper.pdf", True),
    ("Attention Is All You Need.", "attention-is-all-you-need", True),
    ("https://example.org/p?id=1&utm_medium=x", "example.org/p?id=1", True),
    ("https://example.org/p%252Dq", "https://example.org/p-q", True),
    ("hep-th/9901001v2", "arXiv:hep-th/9901001", True),
    ("https://example.org/p?id=1", "https://example.org/p?id=2", False),
    ("https://example.org/a", "https://example.org/a/b", False),
    ("https://example.org:8080/a", "https://example.org/a", False),
    ("arXiv:2101.00001", "arXiv:2101.00002", False),
    ("doi:10.1000/xy", "doi:10.1000/xyz", False),
    ("!!!", "...", False),  # names nothing recognisable: matches nothing by name
])
def test_how_refs_are_compared(a: str, b: str, same: bool) -> None:
    from loopx.research.ref_identity import ref_key

    assert ref_key({"ref": a}).same_material(ref_key({"ref": b})) is same
    assert ref_key({"ref": b}).same_material(ref_key({"ref": a})) is same


# -- where ideation material comes from --------------------------------------------------------

def test_grounding_records_lineage_and_the_curators_refs_are_ideation_material() -> None:
    r = loop()
    add_grounding_ref(r.ledger, r.agents["cur"], PRIOR)  # campaign-wide: the curator's
    r.propose("h0", grounding_refs=[SOURCE])
    r.supported("h1", GOOD, HELDOUT, claims_novelty=True, parent_id="h0", mechanism="depth")
    add_grounding_ref(r.ledger, r.agents["prop"], ARXIV, hypothesis_id="h1")
    material = {g["ref"]["ref"] for g in ideation_material(view(r), "h1")}
    assert material == {PRIOR["ref"], SOURCE["ref"], ARXIV["ref"]}
    for ref, cited in ((PRIOR, "campaign grounding"), (SOURCE, "grounding_refs of h0"),
                       (ARXIV, "grounding ref")):
        refused(r, "novelty_material", cited, [OTHER, ref])
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[OTHER])
    assert gate(r).status == "passed"


def test_a_superseding_hypothesis_inherits_the_material_it_replaces() -> None:
    r = loop()
    r.propose("h0", grounding_refs=[SOURCE])
    r.supported("h1", GOOD, HELDOUT, claims_novelty=True, supersedes="h0", mechanism="depth")
    refused(r, "novelty_material", "grounding_refs of h0", [SOURCE])


# -- negative verdicts and late grounding ------------------------------------------------------

def test_a_not_novel_verdict_may_cite_the_source_the_idea_came_from() -> None:
    # Otherwise a proposer could ground on the damning paper to keep any auditor from citing it.
    r = loop()
    claimed(r)
    audit_novelty(r.ledger, r.agents["ev"], "h1", "not_novel", refs=[SOURCE],
                  note="the source already reports it")
    assert gate(r).status == "failed"


def test_grounding_recorded_after_an_audit_never_reopens_it() -> None:
    r = loop()
    claimed(r)
    audit_novelty(r.ledger, r.agents["ev"], "h1", "not_novel", refs=[OTHER])
    assert gate(r).status == "failed"
    # The proposer disowns the damning source by calling it ideation material: recorded, but
    # the failed gate stays failed.
    add_grounding_ref(r.ledger, r.agents["prop"], OTHER, hypothesis_id="h1")
    assert gate(r).status == "failed"
    r2 = loop()
    claimed(r2)
    passed = audit_novelty(r2.ledger, r2.agents["ev"], "h1", "novel", refs=[OTHER])
    assert gate(r2).status == "passed"
    # Grounding the audited source afterwards does not retract a passed gate either...
    add_grounding_ref(r2.ledger, r2.agents["prop"], OTHER, hypothesis_id="h1")
    assert gate(r2).status == "passed" and gate(r2).rests_on == [passed["audit_id"]]
    # ... but a later novel verdict on that source is one on ideation material.
    refused(r2, "novelty_material", "grounding ref", [OTHER])
    assert verify_store(r2.ledger.store).ok


# -- the novelty boundary ----------------------------------------------------------------------

def test_a_novel_verdict_covers_the_boundary_prior_art() -> None:
    r = loop(novelty_boundary={"statement": "new relative to the 2020 survey",
                               "prior_art": [PRIOR]})
    claimed(r)
    record = refused(r, "novelty_boundary", "names none of paper:doi:10.1000/survey.2020",
                     [OTHER])
    assert record["payload"]["detail"] == {"missing": ["paper:doi:10.1000/survey.2020"]}
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel",
                  refs=[OTHER, {"kind": "url", "ref": "https://doi.org/10.1000/SURVEY.2020"}])
    assert gate(r).status == "passed"


def test_boundary_prior_art_the_idea_came_from_is_checked_but_is_not_enough() -> None:
    r = loop(novelty_boundary={"prior_art": [PRIOR]})
    r.supported("h1", GOOD, HELDOUT, claims_novelty=True, grounding_refs=[PRIOR])
    refused(r, "novelty_material", "every source it names is ideation material", [PRIOR])
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[PRIOR, OTHER])
    assert gate(r).status == "passed"


def test_an_amended_boundary_reopens_the_gate_until_a_new_audit_covers_it() -> None:
    r = loop()
    claimed(r)
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[OTHER])
    assert gate(r).status == "passed"
    amend_contract(r.ledger, r.agents["cur"], "the survey is prior art",
                   settings=[("novelty_boundary.prior_art", [PRIOR])])
    reopened = gate(r)
    assert reopened.status == "pending" and row(view(r), "h1").next_action == "audit_novelty"
    assert any("names none of paper:doi:10.1000/survey.2020" in x for x in reopened.reasons)
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[OTHER, PRIOR])
    assert gate(r).status == "passed"


def test_a_boundary_in_words_checks_nothing() -> None:
    r = loop(novelty_boundary="anything not in the 2020 survey")
    claimed(r)
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[OTHER])
    assert gate(r).status == "passed"


# -- audits that never count -------------------------------------------------------------------

def test_a_refused_audit_never_counts_toward_promotion() -> None:
    r = loop()
    claimed(r)
    refused(r, "novelty_material", "ideation material", [SOURCE])
    assert gate(r).status == "pending" and row(view(r), "h1").promotion is None
    before = head(r)
    with pytest.raises(ResearchRefused, match="gate novelty pending") as caught:
        decide(r.ledger, r.agents["ev"], "h1", "promoted")
    assert caught.value.rule == "no_candidate" and head(r) == before + 1


def test_a_novel_verdict_must_name_what_it_checked() -> None:
    r = loop()
    claimed(r)
    before = head(r)
    with pytest.raises(RecordRejected, match="payload.refs") as caught:
        audit_novelty(r.ledger, r.agents["ev"], "h1", "novel")
    assert caught.value.fields == ["payload.refs"] and head(r) == before
    # Appended around the operation (as a log from before the rule holds it), it is kept but
    # never counts.
    r.ledger.append({"payload": {"hypothesis_id": "h1", "verdict": "novel"}},
                    creds=r.agents["ev"], kind="novelty_audit_v0")
    assert gate(r).status == "pending"
    assert "names no material it checked" in " ".join(gate(r).reasons)
    assert verify_store(r.ledger.store).ok


def scholar(r: ResearchLoop) -> Any:
    """An agent whose (custom) role may both propose and audit: it proposes h0."""
    r.ledger.append({"payload": {
        "role": "scholar", "capability_token": "scholar", "actions": ["propose_hypothesis"],
        "write_scope": {"research_hypothesis_v0": ["propose", "refine"],
                        "novelty_audit_v0": ["audit"], "grounding_ref_v0": ["ground"]}}},
        creds=r.owner, kind="lane_profile_v0")
    from loopx.work.agents import register_agent
    from loopx.work.todos import add_todos

    _, token = register_agent(r.ledger, r.owner, "dual", "scholar")
    creds = type(r.owner)("dual", token)
    add_todos(r.ledger, r.owner, [{"todo_id": "dual-1", "title": "propose", "role": "scholar",
                                   "action_kind": "propose_hypothesis", "assigned_to": "dual"}])
    got = should_run(r.ledger, "dual", claim=True, creds=creds)
    propose_hypothesis(r.ledger, creds, {
        "hypothesis_id": "h0", "title": "h0", "statement": "width lifts it",
        "mechanism_family": "width", "grounding_refs": [SOURCE], "claims_novelty": True},
        under=(got["todo"]["todo_id"], got["todo"]["epoch"]))
    return creds


def test_the_ideation_side_never_audits_even_with_a_role_that_may() -> None:
    r = loop()
    dual = scholar(r)
    before = head(r)
    with pytest.raises(Refused, match="never by the hypothesis' own proposer"):
        audit_novelty(r.ledger, dual, "h0", "not_novel", refs=[OTHER])
    assert head(r) == before
    # A refinement of its hypothesis, by another proposer: still the ideation side.
    r.propose("h1", parent_id="h0", mechanism="depth", claims_novelty=True)
    before = head(r)
    with pytest.raises(Refused, match="ideation side of 'h1'"):
        audit_novelty(r.ledger, dual, "h1", "novel", refs=[OTHER])
    assert head(r) == before
    assert [a for h in view(r)["hypotheses"].values() for a in h["audits"]] == []
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[OTHER])
    assert gate(r).status == "passed"


# -- grounding refs: who writes them -----------------------------------------------------------

def test_who_may_record_grounding_refs() -> None:
    r = loop()
    r.propose("h1")
    before = head(r)
    with pytest.raises(Forbidden, match="may not write grounding_ref_v0 with action "
                                        "'ground_campaign'"):
        add_grounding_ref(r.ledger, r.agents["prop"], SOURCE)  # campaign-wide is the curator's
    with pytest.raises(Forbidden, match="action 'ground'"):
        add_grounding_ref(r.ledger, r.agents["cur"], SOURCE, hypothesis_id="h1")
    with pytest.raises(Forbidden, match="evaluator_promoter"):
        add_grounding_ref(r.ledger, r.agents["ev"], SOURCE, hypothesis_id="h1")
    with pytest.raises(Refused, match="which does not exist"):
        add_grounding_ref(r.ledger, r.agents["prop"], SOURCE, hypothesis_id="h9")
    with pytest.raises(RecordRejected, match="payload.ref.kind"):
        add_grounding_ref(r.ledger, r.agents["prop"], {"kind": "rumour", "ref": "x"},
                          hypothesis_id="h1")
    assert head(r) == before
    out = add_grounding_ref(r.ledger, r.agents["prop"], SOURCE, hypothesis_id="h1")
    assert out["normalised"] == "web:example.org/papers/wide-nets"
    with pytest.raises(Refused, match="already a grounding ref of hypothesis 'h1'"):
        add_grounding_ref(r.ledger, r.agents["prop"],
                          {"kind": "url", "ref": "http://EXAMPLE.org/papers/wide-nets/"},
                          hypothesis_id="h1")


def test_a_rival_proposer_cannot_ground_another_hypothesis_to_block_its_audit() -> None:
    r = loop()
    claimed(r)
    c_rival = r.ledger  # same log
    from loopx.work.agents import register_agent

    _, token = register_agent(c_rival, r.owner, "rival", "hypothesis_proposer")
    rival = type(r.owner)("rival", token)
    with pytest.raises(Refused, match="rival did not propose 'h1'"):
        add_grounding_ref(r.ledger, rival, OTHER, hypothesis_id="h1")
    audit_novelty(r.ledger, r.agents["ev"], "h1", "novel", refs=[OTHER])
    assert gate(r).status == "passed"


# -- the graph ---------------------------------------------------------------------------------

def test_grounding_refs_are_in_the_evidence_graph() -> None:
    r = loop()
    campaign_ref = add_grounding_ref(r.ledger, r.agents["cur"], PRIOR)
    r.propose("h1")
    own = add_grounding_ref(r.ledger, r.agents["prop"], ARXIV, hypothesis_id="h1")
    graph = graph_json(view(r), head(r))
    nodes = {n["id"]: n for n in graph["nodes"]}
    node = nodes[f"grounding:{own['grounding_id']}"]
    assert (node["kind"], node["scope"], node["ref_kind"], node["normalised"]) == (
        "grounding_ref", "hypothesis", "paper", "arxiv:2101.00001")
    assert nodes[f"grounding:{campaign_ref['grounding_id']}"]["scope"] == "campaign"
    edges = {(e["source"], e["target"], e["type"]) for e in graph["edges"]}
    assert (f"grounding:{own['grounding_id']}", "hypothesis:h1", "grounds") in edges
    assert (f"grounding:{campaign_ref['grounding_id']}", "contract:v1", "grounds") in edges
    assert graph["counts"]["by_kind"]["grounding_ref"] == 2
