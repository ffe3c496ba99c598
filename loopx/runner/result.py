"""``loopx_lane_result_v0``: what a lane runner's command prints on stdout when it is done.

The command never holds the agent's token: it says what to record, and the runner appends it
through the checked path under the todo it holds. ``records`` are committed in one batch with
the completion (or failure), so an attempt is recorded whole or not at all; ``calls`` are tools
of the registry (``evidence.judge``, ``decision.decide``, ...) run first, in order, for the
records loopx computes itself.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, ValidationError

from loopx.kernel.canonical import JSONInputError, loads_strict
from loopx.kernel.errors import FieldProblem, RecordRejected
from loopx.kernel.types import Model

SCHEMA = "loopx_lane_result_v0"


class Call(Model):
    """One tool of the registry, run with the lane's credentials before the completion."""

    tool: Annotated[str, Field(min_length=1, max_length=128)]
    args: dict[str, JsonValue] = {}


class LaneResult(Model):
    """The command's verdict on its attempt and what to record."""

    schema_version: Literal["loopx_lane_result_v0"] = SCHEMA
    outcome: Literal["completed", "failed", "released"] = "completed"
    result: dict[str, JsonValue] = Field(
        default={}, description="the todo's result, kept in its completion (only a "
                                "successor rule's `when` tests read it)")
    records: Annotated[list[dict[str, JsonValue]], Field(max_length=256)] = Field(
        default=[], description="drafts appended with the completion, tied to the held todo")
    calls: Annotated[list[Call], Field(max_length=64)] = []
    reason: Annotated[str, Field(max_length=2048)] | None = Field(
        default=None, description="why the attempt failed or was released")


def parse_result(stdout: bytes) -> LaneResult:
    """The result a command printed: all of stdout, or else its last non-empty line.

    Raises:
        RecordRejected: not JSON, or not a ``loopx_lane_result_v0``, naming the field.
    """
    from loopx.kernel.kinds import pydantic_problems

    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        raise RecordRejected([FieldProblem("stdout", "the command printed no result")],
                             context="lane result")
    doc: Any = None
    for candidate in (text, text.splitlines()[-1]):
        try:
            doc = loads_strict(candidate)
            break
        except JSONInputError as exc:
            problem = str(exc)
    else:
        raise RecordRejected([FieldProblem("stdout", f"not JSON: {problem}")],
                             context="lane result")
    if not isinstance(doc, dict):
        raise RecordRejected([FieldProblem("stdout", "expected a JSON object")],
                             context="lane result")
    try:
        return LaneResult.model_validate(doc)
    except ValidationError as exc:
        raise RecordRejected(pydantic_problems(exc), context="lane result") from None
