"""Field types shared by every record kind, so one rule means the same thing everywhere."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

Identifier = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$",
        description="letters, digits and _ . : - ; starts with a letter or digit; at most 128",
    ),
]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="lowercase hex sha256")]
GitCommit = Annotated[
    str, Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$", description="full git commit id")
]
Timestamp = Annotated[
    str,
    Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$",
        description="RFC 3339 UTC with microseconds",
    ),
]
ShortText = Annotated[str, Field(max_length=512)]
LongText = Annotated[str, Field(max_length=16384)]
NonNegative = Annotated[float, Field(ge=0)]
JsonObject = dict[str, JsonValue]

Visibility = Literal["public", "private"]
Provenance = Literal["observed", "computed", "self_reported", "claimed"]
Split = Literal["train", "dev", "heldout"]
Direction = Literal["maximize", "minimize"]
RiskClass = Literal["read", "write", "compute", "external", "destructive"]


class Model(BaseModel):
    """Base for every record model: unknown fields and silent type coercion are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ArtifactRef(Model):
    """A file produced or used by an attempt, referenced by path and digest, never embedded."""

    path: Annotated[str, Field(min_length=1, max_length=1024)]
    sha256: Sha256
    bytes: Annotated[int, Field(ge=0)]
    media_type: ShortText | None = None


class GroundingRef(Model):
    """Where an idea came from. ``claimed`` sources are data, never instructions or evidence."""

    kind: Literal["record", "paper", "url", "file", "note"]
    ref: Annotated[str, Field(min_length=1, max_length=2048)]
    sha256: Sha256 | None = None
    note: ShortText | None = None
