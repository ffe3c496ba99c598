"""The path one record travels: `loopx todo complete`, traced call by call in-process.

The path is the module that plans the completion plus every module whose functions receive
it (or a batch holding it) as an argument. It must stay short, and it may enter a higher
layer only where the kernel calls a hook a domain registered with it (loopx/kernel/domains.py):
never by an import pointing up, which tests/test_layers.py forbids.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from click.testing import CliRunner

import loopx
from loopx.cli import cli
from loopx.kernel.checks import Credentials
from loopx.kernel.domains import Hook, installed
from loopx.layers import group_of, rank
from loopx.research.operations import append_packet
from loopx.testing.research import ResearchLoop
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace

PACKAGE = str(Path(loopx.__file__).resolve().parent)
MAX_MODULES = 8


def _module(frame: FrameType | None) -> str | None:
    if frame is None or not frame.f_code.co_filename.startswith(PACKAGE):
        return None
    rel = frame.f_code.co_filename[len(PACKAGE) - len("loopx"):].removesuffix(".py")
    return rel.replace("/", ".").removesuffix(".__init__")


def _is_completion(value: Any, nested: bool = False) -> bool:
    if isinstance(value, dict):
        payload = value.get("payload")
        return (value.get("schema_version") == "todo_event_v0" and isinstance(payload, dict)
                and payload.get("event") == "completed")
    if isinstance(value, (list, tuple)) and not nested:
        return any(_is_completion(v, True) for v in value[:64])
    return False


def _registered_hooks() -> set[Any]:
    """Every function the domains registered with the kernel (the one way to call upward)."""
    hooks: set[Any] = set()
    for domain in installed().domains:
        for table in (domain.folds, domain.check_table(), domain.before_fold,
                      domain.after_fold, domain.extensions):
            hooks.update(table.values())
        hooks.update(h for h in (domain.writer, domain.gate, domain.identify, domain.refusal)
                     if h is not None)
    # A hook named by module (imported on first call) is the function it names.
    return {getattr(h.resolve() if isinstance(h, Hook) else h, "__code__", None) for h in hooks}


def _run(ws: Path, *args: str, token: str = "", agent: str = "") -> str:
    result = CliRunner().invoke(cli, ["-C", str(ws), *args],
                                env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": agent})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_todo_complete_travels_through_few_modules_and_never_turns_up(tmp_path: Path) -> None:
    _run(tmp_path, "init", "--goal-id", "path", "--owner-token-file", str(tmp_path / "owner"))
    owner = (tmp_path / "owner").read_text().strip()
    # A hypothesis with a scored packet under the held todo: the completion owes a judging todo.
    ledger = find_workspace(tmp_path).ledger()
    r = ResearchLoop(ledger, Credentials("owner", owner))
    r.contract()
    r.propose("h1")
    add_todos(ledger, r.agents["ev"], [{"todo_id": "t1", "title": "dev eval", "hypothesis_id":
                                        "h1", "role": "research_executor",
                                        "action_kind": "run_dev_eval"}])
    token = str(r.agents["ex"].token)
    todo = json.loads(_run(tmp_path, "quota", "should-run", "--claim", "--json", token=token,
                           agent="ex"))["todo"]
    append_packet(ledger, r.agents["ex"], {
        "hypothesis_id": "h1", "status": "scored",
        "results": [{"split": "dev", "metric": "acc", "seed": s, "value": 0.95}
                    for s in (0, 1, 2)]}, under=("t1", todo["epoch"]))
    ledger.store.close()
    hooks = _registered_hooks()
    path: list[str] = []
    upward: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (callee := _module(frame)) is None:
            return
        code = frame.f_code
        if code.co_name == "write" and callee == "loopx.kernel.ledger":
            planner = _module(frame.f_back)  # the operation that plans the record
            if planner is not None and planner not in path:
                path.append(planner)
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if not any(_is_completion(frame.f_locals.get(n)) for n in names):
            return
        if callee not in path:
            path.append(callee)
        caller = _module(frame.f_back)
        if (caller is not None and caller != callee and code not in hooks
                and rank(str(group_of(callee))) > rank(str(group_of(caller)))):
            upward.append(f"{caller} -> {callee}.{code.co_name}")

    sys.setprofile(profile)
    try:
        out = _run(tmp_path, "todo", "complete", todo["todo_id"], "--epoch", str(todo["epoch"]),
                   "--result", '{"status": "scored", "dev": {"verdict": "supports"}}',
                   "--json", token=token, agent="ex")
    finally:
        sys.setprofile(None)
    assert json.loads(out)["successors"], out  # the completion owed its successor todos
    assert "loopx.work.claims" in path and "loopx.kernel.checks" in path, path
    assert len(path) <= MAX_MODULES, f"{len(path)} modules: {' -> '.join(path)}"
    assert upward == [], upward
