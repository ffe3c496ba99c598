"""Typed records: the envelope, every payload kind, and the registry that checks drafts."""

from loopx.records.envelope import Draft, Envelope
from loopx.records.registry import (
    KINDS,
    Author,
    KindSpec,
    get_kind,
    kind_names,
    prepare,
    prepare_batch,
    stored_problems,
)

__all__ = [
    "KINDS",
    "Author",
    "Draft",
    "Envelope",
    "KindSpec",
    "get_kind",
    "kind_names",
    "prepare",
    "prepare_batch",
    "stored_problems",
]
