"""Kinds the store itself writes: the workspace genesis record and torn-tail repairs."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from loopx.records.types import Identifier, Model, Sha256, ShortText


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
