"""Kinds the store itself writes: the workspace genesis record, torn-tail repairs and wall
clocks it overruled."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from loopx.kernel.types import Identifier, Model, Sha256, ShortText


class WorkspaceV0(Model):
    """The first record of every log: the campaign's goal, format and owner token digest."""

    format_version: Annotated[int, Field(ge=1)]
    goal_id: Identifier
    owner_token_sha256: Sha256
    loopx_version: ShortText


class StoreRepairV0(Model):
    """A torn tail moved to quarantine by the next lock holder after a writer died mid-append."""

    segment: ShortText
    offset: Annotated[int, Field(ge=0)]
    length: Annotated[int, Field(ge=1)]
    sha256: Sha256
    complete_lines: Annotated[int, Field(ge=0)]
    quarantine_file: ShortText
    reason: ShortText


class StoreClockV0(Model):
    """A wall clock the store overruled: it stood outside the envelope the host's monotonic
    clock allows (``loopx.kernel.store.clock``), so the batch got the envelope's edge instead."""

    wall: ShortText
    assigned: ShortText
    expected: ShortText
    offset_seconds: float
    bound_seconds: Annotated[float, Field(gt=0)]
    reason: ShortText
