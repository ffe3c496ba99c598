"""Tool registration and dispatch: a tool is a name, a risk class, typed params and a function."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopx.governance.tool_risks import TOOL_RISKS, RiskClass
from loopx.kernel.errors import FieldProblem, RecordRejected, UsageProblem
from loopx.kernel.plain import Frozen
from loopx.tools.context import ToolContext


class Tool(Frozen):
    """A registered operation. ``params`` is a dataclass; ``run`` returns JSON-ready data."""

    _fields = ("name", "risk", "summary", "params", "run", "writes")
    name: str
    risk: RiskClass
    summary: str
    params: type[Any]
    run: Callable[[ToolContext, Any], dict[str, Any]]
    writes: bool

    def __init__(self, name: str, risk: RiskClass, summary: str, params: type[Any],
                 run: Callable[[ToolContext, Any], dict[str, Any]], writes: bool) -> None:
        self.__dict__.update(name=name, risk=risk, summary=summary, params=params, run=run,
                             writes=writes)

    @property
    def read_only(self) -> bool:
        """Whether the tool never appends (MCP's read-only hint)."""
        return not self.writes


@dataclass(frozen=True)
class NoParams:
    """The params of a tool that takes none."""


TOOLS: dict[str, Tool] = {}
# A tool name's first part -> the module under loopx.tools that registers it. Modules load on
# first use, so a hot call such as `quota.should_run` does not pay for defining every tool.
TOOL_MODULES: dict[str, str] = {
    **dict.fromkeys(("record", "verify"), "kernel"),
    **dict.fromkeys(("agent", "todo", "lanes"), "lanes"),
    "status": "status",
    "quota": "quota",
    **dict.fromkeys(("contract", "action", "approvals", "usage", "finding", "campaign"),
                    "governance"),
    **dict.fromkeys(("hypothesis", "evidence", "novelty", "gate", "decision", "graph",
                     "frontier", "candidates", "grounding", "research_plan"), "research"),
    "story": "narrator",
    # A full tool name maps to its own module when its prefix's module is another one.
    **dict.fromkeys(("todo.reprioritise", "todo.block", "todo.unblock", "todo.cancel",
                     "todo.reassign"), "todo_changes"),
}


def module_of(name: str) -> str | None:
    """The module under loopx.tools that registers the tool ``name`` (its full name's entry,
    else its first part's)."""
    return TOOL_MODULES.get(name) or TOOL_MODULES.get(name.split(".")[0])


def _load(module: str) -> None:
    import importlib

    importlib.import_module(f"loopx.tools.{module}")


def all_tools() -> dict[str, Tool]:
    """Every registered tool, by name (loads every tool module)."""
    for module in sorted(set(TOOL_MODULES.values())):
        _load(module)
    return TOOLS


def tool(name: str, *, params: type[Any], writes: bool
         ) -> Callable[[Callable[[ToolContext, Any], dict[str, Any]]],
                       Callable[[ToolContext, Any], dict[str, Any]]]:
    """Register a function as the tool ``name``; its docstring's first line is the summary and
    its risk class is the one :data:`loopx.governance.tool_risks.TOOL_RISKS` gives it."""
    risk = TOOL_RISKS.get(name)
    if risk is None:
        raise ValueError(f"tool {name!r}: add its risk class to loopx/governance/tool_risks.py")

    def register(fn: Callable[[ToolContext, Any], dict[str, Any]]
                 ) -> Callable[[ToolContext, Any], dict[str, Any]]:
        if name in TOOLS:
            raise ValueError(f"tool {name!r} is registered twice")
        if module_of(name) != fn.__module__.rpartition(".")[2]:
            raise ValueError(f"tool {name!r}: add its prefix (or name) to TOOL_MODULES")
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else name
        TOOLS[name] = Tool(name, risk, summary, params, fn, writes)
        return fn

    return register


def get_tool(name: str) -> Tool:
    """The tool called ``name``.

    Raises:
        UsageProblem: no such tool.
    """
    module = module_of(name)
    if name not in TOOLS and module is not None:
        _load(module)
    if name not in TOOLS:
        raise UsageProblem(f"no tool {name!r}; tools: {', '.join(sorted(all_tools()))}")
    return TOOLS[name]


def call(name: str, ctx: ToolContext, args: Any) -> dict[str, Any]:
    """Run a tool with ``args``: an instance of its params, or a dict checked against them.

    Raises:
        RecordRejected: a dict argument does not fit the params (naming the field).
        LoopxError: whatever the operation refuses.
    """
    found = get_tool(name)
    if not isinstance(args, found.params):
        args = _validated(found, args)
    return found.run(ctx, args)


def _validated(found: Tool, args: Any) -> Any:
    from pydantic import TypeAdapter, ValidationError

    from loopx.kernel.kinds import pydantic_problems

    if not isinstance(args, dict):
        raise RecordRejected([FieldProblem("arguments", "expected an object")], context=found.name)
    try:
        # JSON mode: strict types (no "1" for 1) while an object may fill a dataclass.
        return TypeAdapter(found.params).validate_json(json.dumps(args), strict=True)
    except (TypeError, ValueError) as exc:
        if not isinstance(exc, ValidationError):
            raise RecordRejected([FieldProblem("arguments", f"not JSON: {exc}")],
                                 context=found.name) from None
        raise RecordRejected(pydantic_problems(exc), context=f"{found.name} arguments") from None


def params_of(found: Tool) -> list[str]:
    """The names of a tool's params, in order."""
    return [f.name for f in dataclasses.fields(found.params)]
