"""Capability rule 1: a contract version names its protected scope, and every repository path it
names lies inside the workspace's contract scopes. Both refusals are recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from lanes_support import Clock

from loopx.cli import cli
from loopx.governance.contract import amend_contract, preview_amendment
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import RecordRejected, Refused, ResearchRefused, WorkspaceError
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import MemoryStore
from loopx.kernel.verify import verify_store
from loopx.research.contract_scope import inside, named_paths, parse_contract_scopes
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.workspace import bootstrap_log, find_workspace, init_workspace

NO_SCOPE = {k: v for k, v in CONTRACT.items() if k != "protected_scope"}
PROJECT = {**CONTRACT, "protected_scope": ["examples/digits/eval/"],
           "editable_scope": ["examples/digits/model.py"],
           "evaluation": {"dev": {"name": "dev", "location": "examples/digits/data/dev.csv"},
                          "heldout": {"name": "heldout", "location": "/srv/heldout"}}}


def loop(scopes: list[str] | None = None) -> ResearchLoop:
    """A memory campaign whose ledger carries the workspace setting ``contract_scopes``."""
    settings = None if scopes is None else {"contract_scopes": scopes}
    ledger = Ledger(MemoryStore(clock=Clock()), settings=settings)
    token = bootstrap_log(ledger, "scoped")
    return ResearchLoop(ledger, Credentials("owner", token))


def head(r: ResearchLoop) -> int:
    return r.ledger.store.head().seq


def refusals(r: ResearchLoop) -> list[dict[str, Any]]:
    return [rec for rec, _ in r.ledger.store.read()
            if rec["schema_version"] == "research_refusal_v0"]


def recorded(r: ResearchLoop, fn: Any, rule: str, match: str) -> dict[str, Any]:
    """``fn`` is refused by ``rule``; exactly its refusal record was written, by the curator."""
    before = head(r)
    with pytest.raises(ResearchRefused, match=match) as caught:
        fn()
    assert caught.value.rule == rule and caught.value.recorded_seq == before + 1
    assert head(r) == before + 1
    record = refusals(r)[-1]
    assert record["payload"]["rule"] == rule and record["agent_id"] == "cur"
    assert record["lane_role"] == "research_curator"
    assert record["payload"]["requested_kind"] == "research_contract_v0"
    return record


# -- the protected scope must be named -----------------------------------------------------------

def test_a_contract_without_a_protected_scope_is_refused_and_recorded() -> None:
    r = loop()
    record = recorded(r, lambda: r.contract(NO_SCOPE), "protected_scope_missing",
                      r"payload\.protected_scope: a contract version names its protected scope")
    assert record["payload"]["requested_action"] == "create"
    assert record["payload"]["detail"] == {"field": "payload.protected_scope"}
    view = r.ledger.state()["lanes"]
    assert view["campaign"]["versions"] == []
    assert view["campaign"]["status"]["state"] == "created"  # the batch's transition went too
    for blank in ([" "], ["  ", "\t"]):
        recorded(r, lambda b=blank: r.contract({**CONTRACT, "protected_scope": b}),
                 "protected_scope_missing", "payload.protected_scope")
    assert verify_store(r.ledger.store).ok


def test_a_curator_cannot_empty_the_protected_scope_once_evidence_exists() -> None:
    r = loop()
    r.contract()
    r.propose("h1")
    r.run("h1", "dev", [0.95, 0.96, 0.97])
    r.judge("h1", "dev")
    cur = r.agents["cur"]
    record = recorded(r, lambda: amend_contract(r.ledger, cur, "the evaluator is fine",
                                                settings=[("protected_scope", [])]),
                      "protected_scope_missing", "payload.protected_scope")
    assert record["payload"]["requested_action"] == "amend"
    # Around the amend helper: a hand-built next version, appended as a raw draft.
    view = r.ledger.state()["lanes"]
    v1 = view["campaign"]["versions"][-1]
    draft = {**CONTRACT, "protected_scope": [], "version": 2, "supersedes": v1["record_id"],
             "amendment": {"changed": ["protected_scope"], "reason": "quietly"}}
    recorded(r, lambda: r.ledger.append({"payload": draft}, creds=cur,
                                        kind="research_contract_v0"),
             "protected_scope_missing", "payload.protected_scope")
    # Nothing changed: version 1 with its protected scope is still in force.
    view = r.ledger.state()["lanes"]
    assert [v["version"] for v in view["campaign"]["versions"]] == [1]
    assert view["campaign"]["versions"][-1]["protected_scope"] == ["eval/"]
    # A real amendment still goes through.
    amend_contract(r.ledger, cur, "protect the data too",
                   settings=[("protected_scope", ["eval/", "data/heldout/"])])
    assert r.ledger.state()["lanes"]["campaign"]["versions"][-1]["version"] == 2
    assert verify_store(r.ledger.store).ok


# -- the contract stays inside the workspace's contract scopes -----------------------------------

def test_paths_inside_the_contract_scopes_are_accepted() -> None:
    r = loop(["examples/digits", "docs"])
    r.contract({**PROJECT, "evaluation": {
        "dev": {"name": "dev", "location": "sklearn:digits?seed=1#dev"},
        "heldout": {"name": "heldout", "location": "../private/heldout.csv"}}})
    assert r.ledger.state()["lanes"]["campaign"]["versions"][-1]["version"] == 1
    amend_contract(r.ledger, r.agents["cur"], "a doc too",
                   settings=[("editable_scope", ["examples/digits/model.py", "docs/notes.md"]),
                             ("evaluation.dev.location", "examples/digits/data/dev.csv")])


@pytest.mark.parametrize(("change", "field"), [
    ({"editable_scope": ["loopx/"]}, "payload.editable_scope[0]"),
    ({"editable_scope": ["examples/digits/model.py", "examples/*.py"]},
     "payload.editable_scope[1]"),
    ({"protected_scope": ["eval/"]}, "payload.protected_scope[0]"),
    ({"protected_scope": ["examples/digits/../../eval"]}, "payload.protected_scope[0]"),
    ({"evaluation": {"dev": {"name": "dev", "location": "data/dev.csv"},
                     "heldout": {"name": "heldout"}}}, "payload.evaluation.dev.location"),
])
def test_a_contract_naming_a_path_outside_the_scopes_is_refused_and_recorded(
        change: dict[str, Any], field: str) -> None:
    r = loop(["examples/digits"])
    record = recorded(r, lambda: r.contract({**PROJECT, **change}), "contract_outside_scope",
                      "outside the workspace's contract scopes")
    assert field in record["payload"]["reason"]
    assert record["payload"]["detail"]["fields"] == [field]
    assert record["payload"]["detail"]["contract_scopes"] == ["examples/digits"]
    assert r.ledger.state()["lanes"]["campaign"]["versions"] == []


def test_a_curator_cannot_widen_the_editable_scope_past_the_workspace() -> None:
    r = loop(["examples/digits"])
    r.contract(PROJECT)
    cur = r.agents["cur"]
    with pytest.raises(ResearchRefused, match=r"payload\.editable_scope\[1\] 'loopx/kernel'"):
        amend_contract(r.ledger, cur, "let executors tune the framework",
                       settings=[("editable_scope", ["examples/digits/model.py",
                                                     "loopx/kernel"])])
    assert refusals(r)[-1]["payload"]["requested_action"] == "amend"
    # The dry run gives the same refusal and records nothing.
    before = head(r)
    with pytest.raises(ResearchRefused, match="outside the workspace's contract scopes") as dry:
        preview_amendment(r.ledger, "again", settings=[("editable_scope", ["loopx/kernel"])])
    assert dry.value.recorded_seq is None and head(r) == before
    assert preview_amendment(r.ledger, "more time", settings=[("budget.max_cpu_hours", 3)])[
        "amendment"] == {"changed": ["budget.max_cpu_hours"], "reason": "more time"}
    with pytest.raises(Refused, match="changes nothing"):
        preview_amendment(r.ledger, "same", settings=[("editable_scope",
                                                       ["examples/digits/model.py"])])
    assert head(r) == before


def test_without_workspace_settings_the_whole_repository_is_the_scope() -> None:
    r = loop()
    r.contract({**CONTRACT, "editable_scope": ["anything/at/all"]})
    with pytest.raises(ResearchRefused, match="outside the workspace's contract scopes"):
        amend_contract(r.ledger, r.agents["cur"], "reach out",
                       settings=[("editable_scope", ["../elsewhere"])])
    # verify judges with the whole repository too: every accepted version passes it.
    narrow = loop(["examples/digits"])
    narrow.contract(PROJECT)
    assert verify_store(narrow.ledger.store).ok


def test_contract_scope_semantics() -> None:
    assert inside("examples/digits/eval/", ["examples/digits"])
    assert inside("./examples/digits", ["examples/digits/"])
    assert inside("examples/digits/**", ["examples/digits"])
    assert inside("examples/digits*", ["examples"])
    assert not inside("examples/digits*", ["examples/digits"])  # also examples/digits2
    assert not inside("*.lock", ["examples"]) and inside("*.lock", ["."])
    assert not inside("examples", ["examples/digits"])
    assert not inside("examplesx/a", ["examples"])
    assert not inside("../x", ["."]) and not inside(".", ["examples"])
    assert named_paths({"editable_scope": ["a"], "protected_scope": ["b"], "evaluation": {
        "dev": {"location": "data/dev.csv"}, "heldout": {"location": "s3://bucket/h"}}}) == [
        ("payload.editable_scope[0]", "a"), ("payload.protected_scope[0]", "b"),
        ("payload.evaluation.dev.location", "data/dev.csv")]
    for location in ("/srv/h", "~/h", "C:\\data", "sklearn:digits", "../h", "https://x/h"):
        assert named_paths({"evaluation": {"dev": {"location": location}}}) == []
    assert parse_contract_scopes(["docs", "examples/"]) == ["docs", "examples/"]
    for bad in ([], "docs", [""], ["docs/*"], ["../up"], ["/abs"], [3]):
        with pytest.raises(ValueError):
            parse_contract_scopes(bad)


# -- the workspace setting -----------------------------------------------------------------------

def test_init_writes_the_setting_and_an_old_workspace_keeps_working(tmp_path: Path) -> None:
    workspace, token = init_workspace(tmp_path / "new", "new")
    config = json.loads((workspace.dir / "workspace.json").read_text())
    assert config["contract_scopes"] == ["."]
    narrow, _ = init_workspace(tmp_path / "narrow", "narrow", contract_scopes=["docs", "ex"])
    assert narrow.settings() == {"contract_scopes": ["docs", "ex"]}
    with pytest.raises(RecordRejected, match="contract_scopes"):
        init_workspace(tmp_path / "bad", "bad", contract_scopes=["../up"])
    assert not (tmp_path / "bad" / ".loopx").exists()
    # A workspace made before the setting existed: its file has no contract_scopes.
    (workspace.dir / "workspace.json").write_text(
        json.dumps({"format_version": 1, "store": "file"}))
    old = find_workspace(workspace.root)
    assert old.settings() == {"contract_scopes": ["."]}
    r = ResearchLoop(old.ledger(), Credentials("owner", token))
    r.contract({**CONTRACT, "editable_scope": ["src/"]})
    (workspace.dir / "workspace.json").write_text(
        json.dumps({"format_version": 1, "store": "file", "contract_scopes": "docs"}))
    with pytest.raises(WorkspaceError, match="contract_scopes must be a non-empty list"):
        amend_contract(find_workspace(workspace.root).ledger(), r.agents["cur"], "r",
                       settings=[("budget.max_cpu_hours", 2)])


# -- through the command line --------------------------------------------------------------------

def run(ws: Path, *args: str, token: str = "") -> Result:
    result = CliRunner().invoke(cli, ["-C", str(ws), *args],
                                env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": ""})
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def log_head(ws: Path) -> int:
    with find_workspace(ws).store() as store:
        return store.head().seq


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Any]:
    made = run(tmp_path, "init", "--goal-id", "scoped", "--contract-scope", "examples/digits",
               "--contract-scope", "docs", "--owner-token-file", str(tmp_path / "owner.token"),
               "--json")
    assert made.exit_code == 0, made.stdout + made.stderr
    assert json.loads(made.stdout)["contract_scopes"] == ["examples/digits", "docs"]
    owner = (tmp_path / "owner.token").read_text().strip()
    out = run(tmp_path, "agent", "register", "--agent-id", "cur", "--role", "research_curator",
              "--json", token=owner)
    return {"root": tmp_path, "cur": json.loads(out.stdout)["token"]}


INIT = ("contract", "init", "--prompt", "Beat the baseline.", "--metric", "acc", "--direction",
        "maximize", "--baseline", "0.9", "--seeds", "0,1")


def test_cli_init_rejects_a_scope_outside_the_repository(tmp_path: Path) -> None:
    result = run(tmp_path, "init", "--contract-scope", "../up", "--json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["error"] == "invalid_record" and error["problems"][0]["field"] == "contract_scopes"
    assert not (tmp_path / ".loopx").exists()


def test_cli_contract_init_without_a_protected_scope(ws: dict[str, Any]) -> None:
    root, before = ws["root"], log_head(ws["root"])
    dry = run(root, *INIT, "--dry-run", "--json")
    assert dry.exit_code == 8
    error = json.loads(dry.stdout)
    assert (error["error"], error["rule"], error["recorded_seq"]) == (
        "research_refused", "protected_scope_missing", None)
    assert error["message"].startswith("payload.protected_scope: ")
    assert log_head(root) == before
    text = run(root, *INIT, "--agent-id", "cur", token=ws["cur"])
    assert text.exit_code == 8
    # The contract and the campaign's move to planned are one batch: its record 0 was refused.
    assert text.stderr.startswith("loopx: record 0 of the batch: payload.protected_scope: a "
                                  "contract version names its protected scope explicitly")
    assert f"(refusal recorded at seq {before + 1})" in text.stderr
    lines = run(root, "log", "--kind", "research_refusal_v0", "--json").stdout.splitlines()
    assert [json.loads(line)["payload"]["rule"] for line in lines] == ["protected_scope_missing"]
    missing = run(root, "contract", "show", "--json")
    assert missing.exit_code == 6


def test_cli_contract_paths_outside_the_scopes(ws: dict[str, Any]) -> None:
    root = ws["root"]
    args = (*INIT, "--protected", "examples/digits/eval/", "--editable", "loopx/")
    dry = run(root, *args, "--dry-run", "--json")
    assert dry.exit_code == 8 and json.loads(dry.stdout)["rule"] == "contract_outside_scope"
    assert "payload.editable_scope[0] 'loopx/'" in json.loads(dry.stdout)["message"]
    refused = run(root, *args, "--agent-id", "cur", "--json", token=ws["cur"])
    assert refused.exit_code == 8
    error = json.loads(refused.stdout)
    assert error["rule"] == "contract_outside_scope" and error["recorded_seq"] == log_head(root)
    made = run(root, *INIT, "--protected", "examples/digits/eval/", "--editable",
               "examples/digits/model.py", "--heldout-location", "/srv/heldout", "--agent-id",
               "cur", "--json", token=ws["cur"])
    assert made.exit_code == 0, made.stdout


def test_cli_contract_amend_and_its_dry_run(ws: dict[str, Any]) -> None:
    root = ws["root"]
    assert run(root, *INIT, "--protected", "examples/digits/eval/", "--agent-id", "cur",
               token=ws["cur"]).exit_code == 0
    before = log_head(root)
    empty = ("contract", "amend", "--reason", "drop it", "--set", "protected_scope=[]")
    dry = run(root, *empty, "--dry-run", "--json")
    assert dry.exit_code == 8, dry.stdout
    assert json.loads(dry.stdout)["rule"] == "protected_scope_missing"
    assert log_head(root) == before
    wide = run(root, "contract", "amend", "--reason", "tune the kernel", "--set",
               'editable_scope=["loopx/kernel"]', "--dry-run")
    assert wide.exit_code == 8 and "payload.editable_scope[0] 'loopx/kernel'" in wide.stderr
    ok = run(root, "contract", "amend", "--reason", "more time", "--set",
             "budget.max_cpu_hours=3", "--dry-run", "--json")
    assert ok.exit_code == 0, ok.stdout
    preview = json.loads(ok.stdout)
    assert preview["written"] is False and preview["changed"] == ["budget.max_cpu_hours"]
    assert preview["contract"]["version"] == 2 and log_head(root) == before
    nobody = run(root, "contract", "amend", "--reason", "r", "--set", "budget.max_cpu_hours=3")
    assert nobody.exit_code == 2 and "missing --agent-id" in nobody.stderr
    real = run(root, *empty, "--agent-id", "cur", "--json", token=ws["cur"])
    assert real.exit_code == 8 and json.loads(real.stdout)["recorded_seq"] == before + 1
    shown = json.loads(run(root, "contract", "show", "--json").stdout)
    assert shown["in_force"] == 1
    assert shown["contract"]["protected_scope"] == ["examples/digits/eval/"]


# -- the held-out data apart from the dev data ---------------------------------------------------

def test_heldout_data_inside_the_dev_data_is_refused_and_recorded_without_its_location() -> None:
    """A held-out location that is the dev location, or inside it (or around it), hands the
    held-out data to every executor that reads dev data: what a hypothesis was screened on
    would confirm it.
    Refused and recorded, on the first version and on an amendment; the record names the
    fields, never the private locations."""
    def split(dev: str, heldout: str) -> dict[str, Any]:
        return {**CONTRACT, "evaluation": {"dev": {"name": "dev", "location": dev},
                                           "heldout": {"name": "heldout", "location": heldout}}}

    r = loop()
    for dev, heldout in (("/data/digits", "/data/digits/heldout"),
                         ("/data/digits/", "/data/./digits"), ("s3://lab/dev", "s3://lab/dev/h"),
                         ("/data/heldout/dev", "/data/heldout")):
        record = recorded(r, lambda d=dev, h=heldout: r.contract(split(d, h)),
                          "heldout_within_dev", "one place, or one lies inside the other")
        assert record["payload"]["detail"] == {
            "fields": ["evaluation.heldout.location", "evaluation.dev.location"]}
        assert "/data" not in json.dumps(record) and "s3://" not in json.dumps(record)
    assert r.ledger.state()["lanes"]["campaign"]["versions"] == []
    r.contract(split("/data/digits/dev", "/data/digits/heldout"))  # siblings: apart
    record = recorded(r, lambda: amend_contract(r.ledger, r.agents["cur"], "one place", settings=[
        ("evaluation.heldout.location", "/data/digits/dev/held")]), "heldout_within_dev",
        "lies inside the other")
    assert record["payload"]["requested_action"] == "amend"
    assert verify_store(r.ledger.store).ok
