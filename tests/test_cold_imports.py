"""A cold read command imports only what it uses, and answers what the click command answers.

``loopx quota should-run --json`` and ``loopx status --json`` run in a fresh interpreter through
the console entry point; the modules it loaded are then listed. Neither may load click, record
models (pydantic), networkx, any domain's write checks or another command's modules. Behaviour,
not timing: bench/cold_should_run.py measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopx.cli import cli
from loopx.kernel.checks import Credentials
from loopx.kernel.ledger import Ledger
from loopx.work.agents import register_agent
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

# Loaded, for a cold read, only by what it does not do.
NEVER = ("click", "pydantic", "networkx", "loopx.kernel.kinds",
         "loopx.kernel.envelope", "loopx.kernel.tokens", "loopx.research.checks",
         "loopx.governance.checks", "loopx.governance.moves", "loopx.work.checks",
         "loopx.work.change_checks", "loopx.narrator.first_screen", "loopx.research.projections",
         "loopx.research.graph", "loopx.cli.app", "loopx.cli.lanes",
         # The tool registry (its tools' params are dataclasses) and dataclasses itself: loading
         # it (with inspect) and compiling each class's methods cost more than the read's work.
         "loopx.tools.registry", "dataclasses", "inspect",
         # OpenSSL's hashlib: a read takes no hash (a status keys its profile cache by content).
         "hashlib")
# should-run's and status's tools have their bodies in loopx.tools.reads: no tool module loads.
NOT_FOR_SHOULD_RUN = ("loopx.tools.lanes", "loopx.tools.status", "loopx.tools.quota")
NOT_FOR_STATUS = NOT_FOR_SHOULD_RUN
RECORD_MODELS = ".records"  # loopx.work.records, loopx.research.records, ...

PROBE = """
import io, json, sys
from contextlib import redirect_stdout
sys.argv = ["loopx", *json.loads(sys.argv[1])]
out = io.StringIO()
code = 0
with redirect_stdout(out):
    from loopx.cli import main
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A workspace with agents and todos, and a checkpoint as a ledger leaves one."""
    root = tmp_path_factory.mktemp("cold")
    ws, owner_token = init_workspace(root, "cold")
    ledger = ws.ledger()
    owner = Credentials("owner", owner_token)
    _, token = register_agent(ledger, owner, "ex-0", "research_executor")
    add_todos(ledger, owner, [{"todo_id": f"t{n}", "title": f"todo {n}",
                               "role": "research_executor", "action_kind": "run_dev_eval",
                               "hypothesis_id": f"h{n}"} for n in range(30)])
    Ledger(ws.store(), checkpoint_path=ledger.checkpoint_path, checkpoint_every=1).state()
    ledger.store.close()
    assert ledger.checkpoint_path is not None and ledger.checkpoint_path.exists()
    return root, token


def cold(root: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["-C", str(root), *args])],
                          capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin"})
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def loaded_needlessly(modules: list[str], never: tuple[str, ...] = NEVER) -> list[str]:
    return [m for m in modules
            if any(m == n or m.startswith(f"{n}.") for n in never) or m.endswith(RECORD_MODELS)]


@pytest.mark.parametrize("args", [("quota", "should-run", "--agent-id", "ex-0", "--json"),
                                  ("status", "--json")])
def test_a_cold_read_loads_only_what_it_uses(workspace: tuple[Path, str],
                                             args: tuple[str, ...]) -> None:
    root, _ = workspace
    cold(root, *args)  # status compares the profile files once, then keeps the answer
    result = cold(root, *args)
    assert result["code"] == 0, result["out"]
    never = NEVER + (NOT_FOR_SHOULD_RUN if args[0] == "quota" else NOT_FOR_STATUS)
    assert loaded_needlessly(result["modules"], never) == []
    assert "loopx.kernel.checkpoint" in result["modules"]  # it did read the checkpoint


@pytest.mark.parametrize("args", [
    ("quota", "should-run", "--agent-id", "ex-0", "--json"),
    ("quota", "should-run", "--json", "--agent-id=ex-0"),
    ("quota", "should-run", "--agent-id", "nobody", "--json"),  # an error object, its exit code
    ("status", "--json"),
])
def test_the_direct_path_answers_what_click_answers(workspace: tuple[Path, str],
                                                    args: tuple[str, ...]) -> None:
    root, _ = workspace
    direct = cold(root, *args)
    clicked = CliRunner().invoke(cli, ["-C", str(root), *args], env={"LOOPX_AGENT_ID": ""})
    assert direct["code"] == clicked.exit_code
    ours, theirs = json.loads(direct["out"]), json.loads(clicked.stdout)
    ours.pop("now", None)
    theirs.pop("now", None)
    assert ours == theirs


def test_the_direct_path_leaves_the_rest_to_click(workspace: tuple[Path, str]) -> None:
    from loopx.cli.direct import parse

    root, _ = workspace
    base = ["-C", str(root), "quota", "should-run"]
    assert parse([*base, "--agent-id", "ex-0", "--json"]) is not None
    for other in ([*base, "--agent-id", "ex-0"],  # text output
                  [*base, "--agent-id", "ex-0", "--json", "--help"],
                  [*base, "--agent-id", "ex-0", "--json", "--bogus"],
                  [*base, "--json", "--agent-id"],  # a value missing
                  ["--version"], ["-C", str(root), "quota", "--json", "should-run"],
                  ["-C", str(root), "status", "--json", "extra"]):
        assert parse(other) is None, other
    # A claim with a token file that is a directory: click refuses it, naming the option.
    direct = cold(root, "quota", "should-run", "--agent-id", "ex-0", "--json", "--claim",
                  "--token-file", str(root))
    assert direct["code"] == 2 and json.loads(direct["out"])["error"] == "usage"


def test_a_claim_through_the_direct_path_is_a_claim(workspace: tuple[Path, str],
                                                    tmp_path: Path) -> None:
    root, token = workspace
    token_file = tmp_path / "token"
    token_file.write_text(token)
    result = cold(root, "quota", "should-run", "--agent-id", "ex-0", "--claim", "--json",
                  "--token-file", str(token_file))
    assert result["code"] == 0 and json.loads(result["out"])["claimed"] is True
    state = find_workspace(root).ledger().state()
    assert state["lanes"]["agents"]["ex-0"]["holding"]


@pytest.mark.parametrize("command", ["frontier", "candidates"])
def test_projections_after_one_record_load_no_dataclasses(tmp_path: Path, command: str) -> None:
    """After one new record, `frontier --json` and `candidates --json` recompute the rows it
    touched (loading the projections) without click, pydantic, networkx or dataclasses."""
    from lanes_support import workspace_loop

    from loopx.research.operations import judge

    ws, r = workspace_loop(tmp_path, "cold-projections")
    r.supported("h1", [0.95, 0.96, 0.97], None)
    r.propose("h2")
    r.run("h2", "dev", [0.91, 0.92, 0.93])
    Ledger(ws.store(), checkpoint_path=r.ledger.checkpoint_path, checkpoint_every=1).state()
    new = judge(r.ledger, r.agents["ev"], "h2", "dev")["seq"]
    r.ledger.store.close()
    result = cold(tmp_path, command, "--json")
    assert result["code"] == 0, result["out"]
    assert json.loads(result["out"])["head_seq"] == new
    assert "loopx.research.projections" in result["modules"]  # the touched row was recomputed
    assert [m for m in ("click", "pydantic", "networkx", "dataclasses", "inspect")
            if m in result["modules"]] == []
