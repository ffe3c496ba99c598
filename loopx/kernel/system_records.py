"""Kinds the store itself writes: the workspace genesis record, torn-tail repairs, wall clocks
it overruled, and the point where a log's write rules were upgraded."""

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
    rules_version: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="the write rules the log starts under (absent: version 1)")


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


class RulesUpgradeV0(Model):
    """From here on the log is checked under newer write rules: loopx writes it in front of the
    first batch a newer version commits, so `loopx verify` judges each record by the rules it
    was written under (an older log keeps verifying after an upgrade)."""

    from_version: Annotated[int, Field(ge=1)]
    to_version: Annotated[int, Field(ge=2)]
