"""The record envelope: what a writer submits (a draft) and what the store adds when it seals it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, JsonValue

from loopx.kernel.types import (
    Identifier,
    Model,
    Provenance,
    Sha256,
    Timestamp,
    Visibility,
)

# Fields loopx assigns (record_id when the record is prepared, the rest under the store lock);
# a writer that sets one is refused.
STORE_FIELDS = ("record_id", "seq", "ts", "batch_end", "prev_hash", "hash")


class Draft(Model):
    """A record as a writer submits it; ``record_id``, ``seq``, ``ts`` and the hashes are
    loopx's to assign."""

    schema_version: Identifier | None = Field(
        default=None, description="the record kind; may instead come from --kind"
    )
    goal_id: Identifier | None = Field(default=None, description="defaults to the workspace goal")
    agent_id: Identifier | None = None
    lane_role: Identifier | None = None
    capability: Identifier | None = Field(default=None, description="grant id used for the write")
    todo_id: Identifier | None = None
    epoch: Annotated[int, Field(ge=0)] | None = None
    visibility: Visibility | None = Field(default=None, description="defaults per kind")
    provenance: Provenance | None = Field(default=None, description="defaults per kind")
    payload: dict[str, JsonValue]


class Envelope(Model):
    """A sealed, stored record. ``payload`` is checked separately against its kind's model."""

    schema_version: Identifier
    record_id: Identifier
    seq: Annotated[int, Field(ge=1)]
    ts: Timestamp
    batch_end: Annotated[int, Field(ge=1)] = Field(
        description="seq of the last record of the batch this record was committed in"
    )
    goal_id: Identifier
    agent_id: Identifier
    lane_role: Identifier
    capability: Identifier | None
    todo_id: Identifier | None
    epoch: Annotated[int, Field(ge=0)] | None
    visibility: Visibility
    provenance: Provenance
    prev_hash: Sha256
    hash: Sha256
    payload: dict[str, JsonValue]
