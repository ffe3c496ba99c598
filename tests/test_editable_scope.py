"""The protected-boundary gate with an editable scope: a commit that touches a path outside the
contract's ``editable_scope`` fails it, verified from git like the protected scope (renames,
copies, deletions, symlinks, merges), and the gate result says which path broke which rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from lanes_support import campaign
from test_protected import PROTECTED, Repo

from loopx.cli import cli
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import ResearchRefused
from loopx.kernel.verify import verify_store
from loopx.research.decisions import decide
from loopx.research.operations import NO_PROTECTED_SCOPE, check_gate
from loopx.research.projections import row
from loopx.research.protected import BoundaryResult, check_boundary
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.workspace import init_workspace

EDITABLE = ["src/", "experiments/*.json"]
DEV, HELDOUT = [0.95, 0.96, 0.97], [0.95, 0.96, 0.95]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    return Repo(tmp_path / "repo", tmp_path)


def boundary(repo: Repo, head: str, editable: list[str] | None = EDITABLE) -> BoundaryResult:
    return check_boundary(repo.root, [repo.packet(head)], PROTECTED, editable=editable)


def rules(result: BoundaryResult) -> list[tuple[str, str, str]]:
    return [(v.path, v.change, v.rule) for v in result.violations]


# -- the history walk, with the test turned round ------------------------------------------------

def test_changes_inside_the_editable_scope_pass(repo: Repo) -> None:
    repo.write("src/model.py", "def model(): return 42\n")
    repo.write("experiments/run.json", "{}\n")
    repo.git("mv", "src/model.py", "src/net.py")
    repo.symlink("src/alias.py", "net.py")
    head = repo.commit("work inside")
    result = boundary(repo, head)
    assert result.passed, result.reasons


def test_an_edit_outside_the_editable_scope_fails(repo: Repo) -> None:
    repo.write("data/train.csv", "x,y\n3,5\n")
    head = repo.commit("relabel the training data")
    result = boundary(repo, head)
    assert rules(result) == [("data/train.csv", "modified", "outside_editable")]
    assert "outside the editable scope" in result.violations[0].detail
    assert result.reasons == [(f"packet p1 ({repo.base}..{head}) changes files outside the "
                               f"editable scope: data/train.csv modified in {head[:12]}")]
    # Without an editable scope the same commit passes: only the protected scope is held.
    assert boundary(repo, head, None).passed and boundary(repo, head, []).passed


def test_a_protected_edit_breaks_both_rules_and_says_so(repo: Repo) -> None:
    repo.write("eval/score.py", "def score(): return 100\n")
    head = repo.commit("improve the score")
    result = boundary(repo, head)
    assert rules(result) == [("eval/score.py", "modified", "protected"),
                             ("eval/score.py", "modified", "outside_editable")]
    assert [r.split(": ")[0] for r in result.reasons] == [
        f"packet p1 ({repo.base}..{head}) changes the protected scope",
        f"packet p1 ({repo.base}..{head}) changes files outside the editable scope"]
    assert [v["rule"] for v in result.to_json()["violations"]] == ["protected",
                                                                  "outside_editable"]


def test_a_file_renamed_into_the_editable_scope_fails_on_its_old_path(repo: Repo) -> None:
    repo.git("mv", "data/train.csv", "src/train.csv")
    repo.write("src/train.csv", "x,y\n3,4\n9,9\n")
    head = repo.commit("take the training data along")
    assert rules(boundary(repo, head)) == [
        ("data/train.csv", "renamed to src/train.csv", "outside_editable")]


def test_a_file_renamed_out_of_the_editable_scope_fails_on_its_new_path(repo: Repo) -> None:
    (repo.root / "lib").mkdir()
    repo.git("mv", "src/model.py", "lib/model.py")
    head = repo.commit("move the model")
    assert rules(boundary(repo, head)) == [
        ("lib/model.py", "renamed from src/model.py", "outside_editable")]


@pytest.mark.parametrize(("path", "why"), [("poetry.lock", "deleted"), ("README", "added")])
def test_deletions_and_additions_outside_fail(repo: Repo, path: str, why: str) -> None:
    if why == "deleted":
        (repo.root / path).unlink()
    else:
        repo.write(path, "notes\n")
    head = repo.commit(why)
    found = rules(boundary(repo, head))
    assert (path, why, "outside_editable") in found


def test_a_symlink_in_the_editable_scope_to_a_file_outside_fails(repo: Repo) -> None:
    repo.symlink("src/settings.csv", "../data/train.csv")
    head = repo.commit("write the training data through a link")
    result = boundary(repo, head)
    assert rules(result) == [("src/settings.csv", "symlink -> ../data/train.csv",
                              "outside_editable")]
    assert "resolves to data/train.csv, which is outside the editable scope" in \
        result.violations[0].detail


def test_a_symlink_to_the_evaluator_breaks_both_rules(repo: Repo) -> None:
    repo.symlink("src/score.py", "../eval/score.py")
    head = repo.commit("link to the evaluator")
    assert rules(boundary(repo, head)) == [
        ("src/score.py", "symlink -> ../eval/score.py", "protected"),
        ("src/score.py", "symlink -> ../eval/score.py", "outside_editable")]


def test_a_symlink_leaving_the_repository_fails_without_a_protected_scope(repo: Repo) -> None:
    repo.symlink("src/out", "../../outside.txt")
    head = repo.commit("link out")
    result = check_boundary(repo.root, [repo.packet(head)], [], editable=EDITABLE)
    assert rules(result) == [("src/out", "symlink -> ../../outside.txt", "outside_editable")]
    assert "leaves the repository" in result.violations[0].detail


def test_a_merge_that_brings_in_an_outside_change_fails(repo: Repo) -> None:
    repo.git("checkout", "-q", "-b", "side")
    repo.write("data/train.csv", "x,y\n0,0\n")
    side = repo.commit("relabel on a side branch")
    repo.git("checkout", "-q", "main")
    repo.write("src/model.py", "def model(): return 7\n")
    repo.commit("work")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = repo.git("rev-parse", "HEAD")
    result = boundary(repo, merge)
    assert [(v.commit, v.path, v.rule) for v in result.violations] == [
        (side, "data/train.csv", "outside_editable"),
        (merge, "data/train.csv", "outside_editable")]


def test_the_pin_holds_the_protected_scope_only(repo: Repo) -> None:
    repo.write("data/train.csv", "x,y\n0,0\n")
    moved = repo.commit("the main line moves on")
    repo.write("src/model.py", "def model(): return 7\n")
    head = repo.commit("work")
    result = check_boundary(repo.root, [repo.packet(head, base=moved)], PROTECTED,
                            pinned=repo.base, editable=EDITABLE)
    assert result.passed, result.reasons


def test_an_unusable_editable_entry_fails_closed(repo: Repo) -> None:
    result = boundary(repo, repo.base, ["src/", "../elsewhere"])
    assert result.reasons == ["editable scope entry '../elsewhere' is outside the repository"]
    assert not result.passed


# -- the gate, its record and the promotion ------------------------------------------------------

def project(repo: Repo) -> None:
    repo.write("model.py", "width = 64\n")
    repo.write("config.json", "".join(f'"setting_{i}": {i}\n' for i in range(20)))
    repo.base = repo.commit("the project")


def gated(base: str) -> ResearchLoop:
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "base_commit": base,
                "editable_scope": ["model.py", "experiments/"],
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    return r


def supported(r: ResearchLoop, commits: tuple[str, str]) -> None:
    r.propose("h1")
    r.run("h1", "dev", DEV, commits=commits)
    r.judge("h1", "dev")
    r.run("h1", "heldout", HELDOUT, commits=commits)
    r.judge("h1", "heldout")


def test_an_executor_that_renames_a_file_into_the_editable_scope_is_caught(repo: Repo) -> None:
    project(repo)
    # The config is outside the editable scope; moving it into experiments/ and editing it
    # there is still an edit of config.json.
    (repo.root / "experiments").mkdir()
    repo.git("mv", "config.json", "experiments/config.json")
    repo.write("experiments/config.json", (repo.root / "experiments/config.json").read_text()
               + '"train_on_heldout": true\n')
    repo.write("model.py", "width = 128\n")
    evaluated = repo.commit("wider, and a better config")
    r = gated(repo.base)
    supported(r, (repo.base, evaluated))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo.root)
    assert not out["passed"]
    assert [(v["path"], v["change"], v["rule"]) for v in out["violations"]] == [
        ("config.json", "renamed to experiments/config.json", "outside_editable")]
    [gate] = [rec for rec, _ in r.ledger.store.read() if rec["schema_version"] == "gate_result_v0"]
    assert gate["payload"]["editable_scope"] == ["model.py", "experiments/"]
    assert gate["payload"]["violations"][0]["rule"] == "outside_editable"
    current = row(r.ledger.state()["lanes"], "h1")
    assert current.gates["protected_boundary"].status == "failed"
    assert current.gates["protected_boundary"].reasons == [
        "config.json (renamed to experiments/config.json; outside the editable scope)"]
    assert current.promotion is None and current.retirement is not None
    assert current.retirement["reasons"] == ["guardrail_failed"]
    with pytest.raises(ResearchRefused, match="gate protected_boundary failed") as refused:
        decide(r.ledger, r.agents["ev"], "h1", "promoted")
    assert refused.value.rule == "no_candidate"
    decide(r.ledger, r.agents["ev"], "h1", "retired", reason="guardrail_failed")


def test_an_executor_that_links_out_of_the_editable_scope_is_caught(repo: Repo) -> None:
    project(repo)
    repo.symlink("experiments/config.json", "../config.json")
    evaluated = repo.commit("reuse the config")
    r = gated(repo.base)
    supported(r, (repo.base, evaluated))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo.root)
    assert [(v["path"], v["rule"]) for v in out["violations"]] == [
        ("experiments/config.json", "outside_editable")]
    assert "resolves to config.json" in out["violations"][0]["detail"]
    assert row(r.ledger.state()["lanes"], "h1").gates["protected_boundary"].status == "failed"


def test_an_honest_executor_inside_the_editable_scope_is_promoted(repo: Repo) -> None:
    project(repo)
    repo.write("model.py", "width = 128\n")
    repo.write("experiments/run.json", "{}\n")
    evaluated = repo.commit("wider")
    r = gated(repo.base)
    supported(r, (repo.base, evaluated))
    assert check_gate(r.ledger, r.agents["ev"], "h1", repo=repo.root)["passed"]
    decide(r.ledger, r.agents["ev"], "h1", "promoted")


def test_an_old_contract_without_a_protected_scope_cannot_pass_the_gate(repo: Repo) -> None:
    project(repo)
    evaluated = repo.commit("nothing")
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    # Written before the rule that names a protected scope (forged past the write path).
    who = c.ledger.identify(r.agents["cur"])
    records = c.ledger.prepare({"schema_version": "research_contract_v0", "payload": {
        **CONTRACT, "protected_scope": [], "version": 1, "supersedes": None, "amendment": None,
        "base_commit": repo.base,
        "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}}}, who)
    c.ledger.store.append(records)
    supported(r, (repo.base, evaluated))
    out = check_gate(r.ledger, r.agents["ev"], "h1", repo=repo.root)
    assert not out["passed"] and out["reasons"] == [NO_PROTECTED_SCOPE]
    gate = row(c.ledger.state()["lanes"], "h1").gates["protected_boundary"]
    assert gate.status == "pending" and NO_PROTECTED_SCOPE in gate.reasons[0]
    # verify re-runs the write checks, this rule among them: it names that contract version.
    report = verify_store(c.ledger.store)
    [forged] = [rec["seq"] for rec, _ in c.ledger.store.read()
                if rec["schema_version"] == "research_contract_v0"]
    assert not report.ok and report.first_bad_seq == forged
    assert "payload.protected_scope" in (report.problem or "")


def test_gate_check_on_the_command_line_names_the_rule(repo: Repo) -> None:
    project(repo)
    repo.write("config.json", '"lr": 10\n')
    evaluated = repo.commit("tune the config")
    workspace, owner = init_workspace(repo.root, "editable")
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner))
    r.contract({**CONTRACT, "protected_scope": ["eval/"], "editable_scope": ["model.py"],
                "base_commit": repo.base,
                "promotion_policy": {"required_gates": ["protected_boundary", "heldout"]}})
    supported(r, (repo.base, evaluated))
    ev = r.agents["ev"]
    env = {"LOOPX_TOKEN": ev.token or "", "LOOPX_AGENT_ID": "ev"}
    text = CliRunner().invoke(cli, ["-C", str(repo.root), "gate", "check", "h1"], env=env)
    assert text.exit_code == 0, text.stdout + text.stderr
    assert "protected boundary of h1: FAILED (2 packet(s)" in text.stdout
    assert f"  config.json: modified in {evaluated[:12]} (outside the editable scope)" in \
        text.stdout
    out = CliRunner().invoke(cli, ["-C", str(repo.root), "gate", "check", "h1", "--json"],
                             env=env)
    result = json.loads(out.stdout)
    assert [(v["path"], v["rule"]) for v in result["violations"]] == [
        ("config.json", "outside_editable")]
    assert result["reasons"] == [
        f"packet {p} ({repo.base}..{evaluated}) changes files outside the editable scope: "
        f"config.json modified in {evaluated[:12]}" for p in result["packets"]]
