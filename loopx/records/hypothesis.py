"""``research_hypothesis_v0``: a grounded, todo-backed idea and its place in the refinement tree."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, JsonValue

from loopx.records.types import GroundingRef, Identifier, LongText, Model, ShortText


class ResearchHypothesisV0(Model):
    """A hypothesis. The backing todo is the envelope's ``todo_id``; refinements name a parent."""

    hypothesis_id: Identifier
    parent_id: Identifier | None = None
    title: ShortText
    statement: LongText
    mechanism_family: Identifier
    parameters: dict[str, JsonValue] = {}
    claimed_by: Identifier
    grounding_refs: Annotated[list[GroundingRef], Field(max_length=64)] = []
    no_grounding_reason: ShortText | None = None
    claims_novelty: bool = False
    expected_effect: ShortText | None = None
    supersedes: Identifier | None = None
