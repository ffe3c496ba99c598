"""A log is judged by the write rules it was written under, and keeps verifying after an upgrade.

A log written by an older loopx (rules version 1) may hold records today's rules refuse: a
contract without a protected scope, a live duplicate. `loopx verify` must not turn on it after
the upgrade; the first batch the newer loopx commits is preceded by a `rules_upgrade_v0`, and
from there on the newer rules hold, for writes and for verify alike.
"""

from __future__ import annotations

import pytest
from lanes_support import Clock, campaign, own_packets_checked

from loopx.domains import DOMAINS, RULES_VERSION
from loopx.kernel.checks import Credentials
from loopx.kernel.domains import Domains
from loopx.kernel.errors import ResearchRefused
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import MemoryStore
from loopx.kernel.verify import verify_store
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.workspace import bootstrap_log

NO_SCOPE = {k: v for k, v in CONTRACT.items() if k != "protected_scope"}
VERSION_1 = Domains(DOMAINS.domains, version=DOMAINS.version, rules=1)
TODO = {"payload": {"todo_id": "later", "title": "later work", "role": "research_curator",
                    "action_kind": "define_contract"}}


def kinds(store: MemoryStore) -> list[str]:
    return [r["schema_version"] for r, _ in store.read()]


def test_an_old_log_keeps_verifying_and_the_next_write_upgrades_it() -> None:
    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=VERSION_1)
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract(NO_SCOPE)  # accepted under version 1: no rule asked for a protected scope
    r.propose("h1", parameters={"width": 128})
    r.propose("h1-again", parameters={"width": 128})  # a live duplicate: fine then
    assert old.state()["kernel"]["rules"] == 1
    assert "rules_upgrade_v0" not in kinds(store)
    assert verify_store(store).ok  # today's verify judges it by version 1

    new = Ledger(store)  # today's loopx, on the same log
    head = store.head().seq
    written = new.append(TODO, creds=owner, kind="todo_item_v0")
    # The upgrade goes in front of the batch; the caller gets its own records back.
    assert [w["schema_version"] for w in written] == ["todo_item_v0"]
    assert written[0]["seq"] == head + 2
    upgrade = [r for r, _ in store.read() if r["schema_version"] == "rules_upgrade_v0"]
    assert [u["payload"] for u in upgrade] == [{"from_version": 1, "to_version": RULES_VERSION}]
    assert upgrade[0]["seq"] == head + 1 and upgrade[0]["agent_id"] == "loopx-store"
    assert new.state()["kernel"]["rules"] == RULES_VERSION
    report = verify_store(store)
    assert report.ok, report

    # From the upgrade on, today's rules hold: the same duplicate is refused now.
    r.ledger = new
    with pytest.raises(ResearchRefused, match="duplicates 'h1'"):
        r.propose("h1-third", parameters={"width": 128})
    assert kinds(store).count("rules_upgrade_v0") == 1  # upgraded once
    assert verify_store(store).ok


def test_a_new_log_starts_under_todays_rules() -> None:
    ledger = Ledger(MemoryStore(clock=Clock()))
    owner = Credentials("owner", bootstrap_log(ledger, "new"))
    genesis = next(iter(ledger.store.read()))[0]
    assert genesis["payload"]["rules_version"] == RULES_VERSION
    r = ResearchLoop(ledger, owner)
    with pytest.raises(ResearchRefused, match="protected_scope"):
        r.contract(NO_SCOPE)
    assert "rules_upgrade_v0" not in kinds(ledger.store)


def test_a_record_appended_around_the_library_after_the_upgrade_fails_verify() -> None:
    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=VERSION_1)
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract()
    r.propose("h1", parameters={"width": 128})
    under = r.proposer_todo("h1-again")
    Ledger(store).append(TODO, creds=owner, kind="todo_item_v0")  # upgrades the log
    # A version-1 loopx refuses to write past the upgrade (the next test); one released before
    # that check, or a record appended around the library, writes a duplicate past it: the log
    # says today's rules hold there, so verify reports it.
    from loopx.kernel.ledger import draft

    records = old.prepare([draft({
        "hypothesis_id": "h1-again", "title": "t", "statement": "width change lifts accuracy",
        "mechanism_family": "width", "parameters": {"width": 128}, "claimed_by": "prop",
        "no_grounding_reason": "a test hypothesis"}, kind="research_hypothesis_v0", under=under)],
        old.identify(r.agents["prop"]))
    store.append(records)
    report = verify_store(store)
    assert not report.ok and "duplicates 'h1'" in str(report.problem)


def test_a_version_2_log_that_loosened_its_control_keeps_verifying() -> None:
    """Rules version 3 keeps the campaign's control from loosening once its held-out family
    began, and gives no held-out read back under a later plan. A log written before, which did
    both, still verifies; from its upgrade on, both are refused."""
    from loopx.governance.contract import amend_contract
    from loopx.testing.research import GOOD
    from loopx.work.claims import claim
    from loopx.work.todos import add_todos

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=2))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract({**CONTRACT, "promotion_policy": {
        **CONTRACT["promotion_policy"],
        "campaign_control": {"rule": "alpha_spending", "level": 0.05}}})
    near = [0.904, 0.909, 0.906]
    r.supported("h1", GOOD, near)
    amend_contract(old, r.agents["cur"], "so close", settings=[
        ("promotion_policy.campaign_control", {"rule": "alpha_spending", "level": 0.9}),
        ("evaluation.heldout_read_budget", 2)])
    r.run("h1", "heldout", near)  # a second read under the new plan: accepted then
    assert verify_store(store).ok

    r.ledger = Ledger(store)  # today's loopx upgrades the log at its next write
    with pytest.raises(ResearchRefused, match="raises its level from 0.9 to 0.95"):
        amend_contract(r.ledger, r.agents["cur"], "more", settings=[
            ("promotion_policy.campaign_control", {"rule": "alpha_spending", "level": 0.95})])
    assert kinds(store).count("rules_upgrade_v0") == 1
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "third", "title": "held-out run", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": "h1"}])
    with pytest.raises(ResearchRefused, match="under plan version 1"):
        claim(r.ledger, r.agents["ex"], "third")
    report = verify_store(store)
    assert report.ok, report


def test_a_version_3_log_that_moved_its_comparison_and_guardrails_keeps_verifying() -> None:
    """Rules version 4 fixes the comparison and keeps the guardrails from loosening once
    evidence exists. A log written before, which named a weaker baseline and dropped a gate
    after its first packet, still verifies; from its upgrade on, both are refused."""
    from loopx.governance.contract import amend_contract
    from loopx.testing.research import GOOD

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=3))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    r.propose("base", mechanism="baseline")
    r.propose("weak", mechanism="baseline", parameters={"size": "small"})
    r.run("base", "dev", GOOD)
    amend_contract(old, r.agents["cur"], "a fairer comparison", settings=[
        ("metric.baseline_hypothesis", "weak"),
        ("promotion_policy.required_gates", ["heldout"])])  # accepted then
    assert verify_store(store).ok

    r.ledger = Ledger(store)  # today's loopx upgrades the log at its next write
    with pytest.raises(ResearchRefused, match="metric.baseline_hypothesis from 'weak' to 'base'"):
        amend_contract(r.ledger, r.agents["cur"], "back", settings=[
            ("metric.baseline_hypothesis", "base")])
    assert kinds(store).count("rules_upgrade_v0") == 1
    with pytest.raises(ResearchRefused, match="drops the required gate heldout"):
        amend_contract(r.ledger, r.agents["cur"], "none", settings=[
            ("promotion_policy.required_gates", [])])
    report = verify_store(store)
    assert report.ok, report


def test_a_version_3_log_whose_heldout_data_is_its_dev_data_keeps_verifying() -> None:
    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=3))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    same = {"dev": {"name": "dev", "location": "/data"},
            "heldout": {"name": "heldout", "location": "/data"}}
    r.contract({**CONTRACT, "evaluation": same})  # accepted then
    assert verify_store(store).ok
    r.ledger = Ledger(store)
    from loopx.governance.contract import amend_contract

    with pytest.raises(ResearchRefused, match="one place, or one lies inside the other"):
        amend_contract(r.ledger, r.agents["cur"], "more time", settings=[
            ("budget.max_cpu_hours", 3)])
    report = verify_store(store)
    assert report.ok, report


def test_a_version_3_log_that_measured_its_baseline_again_keeps_verifying() -> None:
    """Under rules version 3 the measured baseline was measured on held-out data once per plan
    version, and judgements compared with the plan's own measurement. Such a log still
    verifies (its judgements are recomputed the old way); from its upgrade on, the first
    measurement stands and a further one is refused."""
    from loopx.governance.contract import amend_contract
    from loopx.testing.research import GOOD
    from loopx.work.claims import claim
    from loopx.work.todos import add_todos

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=3))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"}})
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", [0.9, 0.9, 0.9])
    r.run("base", "heldout", [0.92, 0.92, 0.92])
    amend_contract(old, r.agents["cur"], "again", settings=[("promotion_policy.max_attempts", 4)])
    r.run("base", "dev", [0.9, 0.9, 0.9])
    second = r.run("base", "heldout", [0.88, 0.88, 0.89])  # the lower draw, kept under v3
    r.supported("h1", GOOD, GOOD)
    assert old.state()["lanes"]["hypotheses"]["h1"]["judgements"]["heldout"][
        "baseline_packet_ids"] == [second]
    assert verify_store(store).ok

    r.ledger = Ledger(store)  # today's loopx upgrades the log at its next write
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": "base-third", "title": "t", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": "base"}])
    assert kinds(store).count("rules_upgrade_v0") == 1
    amend_contract(r.ledger, r.agents["cur"], "and again", settings=[
        ("promotion_policy.max_attempts", 5)])
    with pytest.raises(ResearchRefused, match="under plan version 1, with the seeds in force"):
        claim(r.ledger, r.agents["ex"], "base-third")
    report = verify_store(store)
    assert report.ok, report


def test_a_loopx_older_than_the_log_writes_nothing_and_verify_says_what_it_could_not_check(
        ) -> None:
    """On a team whose hosts run different loopx versions, a host with older write rules
    checking a batch under them could pass what the log's (newer) rules refuse, such as a
    weaker baseline named after the results. It writes nothing instead, and says why; its
    reads still work, and its verify says which rules it could not apply."""
    from loopx.kernel.errors import WorkspaceError

    store = MemoryStore(clock=Clock())
    newer = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version,
                                          rules=RULES_VERSION + 1))
    owner = Credentials("owner", bootstrap_log(newer, "newer"))
    r = ResearchLoop(newer, owner)
    r.contract(CONTRACT)
    head = store.head().seq

    today = Ledger(store)  # this host's loopx, one rules version behind the log
    with pytest.raises(WorkspaceError, match=f"write rules version {RULES_VERSION + 1}, newer"):
        today.append(TODO, creds=owner, kind="todo_item_v0")
    assert store.head().seq == head
    assert today.state()["lanes"]["campaign"]["versions"][0]["contract_id"] == "digits"
    report = verify_store(store)
    assert report.ok and any(f"write rules version {RULES_VERSION + 1}" in note
                             for note in report.notes), report


def test_a_version_4_log_with_a_seed_reported_twice_keeps_verifying() -> None:
    """Under rules version 4 a packet could report one seed several times, and its judgement
    pooled every value. Such a log still verifies; from its upgrade on, a packet that repeats a
    seed is refused and recorded, and a judgement counts each seed once."""
    from loopx.research.operations import append_packet
    from loopx.work.claims import should_run
    from loopx.work.todos import add_todos

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=4))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract(CONTRACT)
    r.propose("h1")

    def repeated_packet(todo_id: str) -> None:
        add_todos(r.ledger, r.agents["ev"], [{
            "todo_id": todo_id, "title": "t", "role": "research_executor",
            "action_kind": "run_dev_eval", "assigned_to": "ex", "hypothesis_id": "h1"}])
        got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])["todo"]
        under = (got["todo_id"], got["epoch"])
        append_packet(r.ledger, r.agents["ex"], {"hypothesis_id": "h1", "status": "scored",
                      "results": [{"split": "dev", "metric": "acc", "seed": s, "value": 0.95}
                                  for s in (0, 0, 1, 2)]}, under=under)

    repeated_packet("dev-1")  # accepted then
    assert r.judge("h1", "dev")["seeds"] == [0, 0, 1, 2]
    assert verify_store(store).ok
    r.ledger = Ledger(store)
    with pytest.raises(ResearchRefused, match="for seed 0 2 times"):
        repeated_packet("dev-2")
    assert kinds(store).count("rules_upgrade_v0") == 1
    assert kinds(store)[-1] == "research_refusal_v0"
    again = r.judge("h1", "dev")  # the latest dev judgement counts
    assert again["seeds"] == [0, 1, 2] and again["values"] == [0.95, 0.95, 0.95]
    report = verify_store(store)
    assert report.ok, report


def test_a_version_5_log_whose_improvement_pooled_its_baseline_keeps_verifying() -> None:
    """Under rules version 5 the campaign's improvement pooled every held-out value of the
    measured baseline, seeds outside the contract too: a padded baseline made a promotion
    improve, so no stop was owed with it. Such a log still verifies (its iterations are
    recounted the old way); from its upgrade on, a promotion improves on the values its
    judgement compared with."""
    from loopx.governance.contract import amend_contract
    from loopx.research.decisions import decide
    from loopx.research.operations import append_packet
    from loopx.testing.research import GOOD
    from loopx.work.claims import complete, should_run
    from loopx.work.todos import add_todos

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=5))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"}})
    amend_contract(old, r.agents["cur"], "patience", settings=[
        ("stop_policy.min_improvement_percent", 5.0), ("stop_policy.patience_iterations", 1)])
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", [0.9, 0.9, 0.9])
    add_todos(old, r.agents["ev"], [{
        "todo_id": "base-ho", "title": "t", "role": "research_executor",
        "action_kind": "run_holdout_eval", "assigned_to": "ex", "hypothesis_id": "base"}])
    got = should_run(old, "ex", claim=True, creds=r.agents["ex"])["todo"]
    under = (got["todo_id"], got["epoch"])
    padded = {0: 0.91, 1: 0.92, 2: 0.93, 7: 0.1, 8: 0.1, 9: 0.1}
    append_packet(old, r.agents["ex"], {"hypothesis_id": "base", "status": "scored", "results": [
        {"split": "heldout", "metric": "acc", "seed": s, "value": v}
        for s, v in padded.items()]}, under=under)
    complete(old, r.agents["ex"], *under, {"status": "scored"})
    r.supported("h1", GOOD, GOOD)
    r.supported("h2", GOOD, [0.97, 0.97, 0.97])
    decide(old, r.agents["ev"], "h1", "promoted")
    pooled = (0.91 + 0.92 + 0.93 + 3 * 0.1) / 6
    for ledger in (old, Ledger(store)):  # today's loopx folds the log as its writer did
        campaign = ledger.state()["lanes"]["campaign"]
        assert campaign["iterations"]["last"]["improvement"] == pytest.approx(0.96 - pooled)
        assert campaign["status"]["state"] == "planned"  # not stopped
    assert verify_store(store).ok

    today = Ledger(store)  # and upgrades it at its next write
    decide(today, r.agents["ev"], "h2", "promoted")
    assert kinds(store).count("rules_upgrade_v0") == 1
    lanes = today.state()["lanes"]
    assert lanes["campaign"]["iterations"]["last"]["improvement"] == pytest.approx(0.01)
    assert lanes["campaign"]["status"]["stop_reasons"] == ["insufficient_improvement"]
    report = verify_store(store)
    assert report.ok, report


def test_a_version_6_log_whose_gate_left_out_the_baseline_keeps_verifying() -> None:
    """Under rules version 6 the protected boundary gate covered the hypothesis' own packets;
    a promotion on such a check still verifies. From the upgrade on, the gate also waits for
    the measured baseline's compared packets."""
    from loopx.research.decisions import decide
    from loopx.research.projections import row
    from loopx.testing.research import GOOD

    store = MemoryStore(clock=Clock())
    old = Ledger(store, domains=Domains(DOMAINS.domains, version=DOMAINS.version, rules=6))
    owner = Credentials("owner", bootstrap_log(old, "old"))
    r = ResearchLoop(old, owner)
    r.contract({**CONTRACT, "protected_scope": ["eval/"],
                "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"},
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    r.propose("base", mechanism="baseline")
    r.run("base", "dev", [0.85, 0.86, 0.84])
    r.run("base", "heldout", [0.85, 0.86, 0.84])

    r.supported("h1", GOOD, GOOD)
    own_packets_checked(r.ledger, r.agents["ev"], "h1")
    decide(old, r.agents["ev"], "h1", "promoted")  # accepted then
    assert verify_store(store).ok

    r.ledger = Ledger(store)  # today's loopx upgrades the log at its next write
    r.supported("h2", GOOD, [0.97, 0.97, 0.97], mechanism="other")
    own_packets_checked(r.ledger, r.agents["ev"], "h2")
    assert kinds(store).count("rules_upgrade_v0") == 1
    gate = row(r.ledger.state()["lanes"], "h2").gates["protected_boundary"]
    assert gate.status == "pending" and gate.reasons[0].startswith(
        "packets not covered by the last check: ")
    assert row(r.ledger.state()["lanes"], "h1").state == "promoted"
    report = verify_store(store)
    assert report.ok, report


def test_a_version_7_log_with_packets_of_several_bases_keeps_verifying() -> None:
    """Under rules version 7 a scored packet could start from any commit, and the measured
    baseline could evaluate commits of its own; such a log still verifies. From the upgrade on,
    the base its first scored packet fixed holds for every scored packet."""
    from loopx.research.state import campaign_base
    from loopx.testing.research import GOOD

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    old = campaign(rules=7)
    store = old.ledger.store
    r = ResearchLoop(old.ledger, old.owner)
    r.contract({**CONTRACT, "metric": {**CONTRACT["metric"], "baseline_hypothesis": "base"}})
    r.propose("base", mechanism="baseline")
    fixing = r.run("base", "dev", [0.85, 0.86, 0.84], commits=(a, b))  # accepted then
    r.propose("h1")
    r.run("h1", "dev", GOOD, commits=(c, c))  # accepted then
    assert verify_store(store).ok

    r.ledger = Ledger(store)  # today's loopx upgrades the log at its next write
    r.propose("h2", mechanism="other")
    with pytest.raises(ResearchRefused, match="the campaign's experiments start from") as caught:
        r.run("h2", "dev", GOOD, commits=(c, c))
    assert caught.value.rule == "other_base" and caught.value.cites == [fixing]
    assert campaign_base(r.ledger.state()["lanes"])["base_commit"] == a
    assert kinds(store).count("rules_upgrade_v0") == 1
    report = verify_store(store)
    assert report.ok, report


def test_a_version_8_log_whose_packet_fixed_the_base_keeps_verifying() -> None:
    """Under rules version 8 an unpinned campaign's first scored packet fixed the base; such a
    log still verifies, and after the upgrade that base holds (no pin needed for it). A
    campaign with no base fixed yet is refused a packet citing commits until the curator
    pins one."""
    from loopx.governance.contract import amend_contract
    from loopx.research.state import campaign_base
    from loopx.testing.research import GOOD
    from loopx.work.claims import fail

    a, b = "a" * 40, "b" * 40
    for fixed in (True, False):
        old = campaign(rules=8)
        store = old.ledger.store
        r = ResearchLoop(old.ledger, old.owner)
        r.contract()
        r.propose("h1")
        if fixed:
            fixing = r.run("h1", "dev", GOOD, commits=(a, b))  # accepted then
        assert verify_store(store).ok
        r.ledger = Ledger(store)  # today's loopx upgrades the log at its next write
        r.propose("h2", mechanism="other")
        if fixed:
            r.run("h2", "dev", GOOD, commits=(a, b))
            assert campaign_base(r.ledger.state()["lanes"])["packet_id"] == fixing
        else:
            with pytest.raises(ResearchRefused, match="the contract pins no base commit") as no:
                r.run("h2", "dev", GOOD, commits=(a, b))
            assert no.value.rule == "base_unpinned"
            [(todo_id, held)] = [(t, v) for t, v in r.ledger.state()["lanes"]["todos"].items()
                                 if v["holder"] == "ex"]
            fail(r.ledger, r.agents["ex"], todo_id, held["epoch"], "its packet was refused")
            amend_contract(r.ledger, r.agents["cur"], "pin the base",
                           settings=[("base_commit", a)])
            r.run("h2", "dev", GOOD, commits=(a, b))
        assert kinds(store).count("rules_upgrade_v0") == 1
        report = verify_store(store)
        assert report.ok, report
