"""Kernel tools: append drafts through the checked path, read records, verify the log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx.tools.registry import ToolContext, tool


@dataclass(frozen=True)
class Append:
    drafts: Any
    kind: str | None = None
    expect_seq: int | None = None


@tool("record.append", params=Append, writes=True)
def record_append(ctx: ToolContext, p: Append) -> dict[str, Any]:
    """Append a draft, or a list of drafts as one atomic batch, through the checked path."""
    records = ctx.ledger.append(p.drafts, creds=ctx.credentials(), kind=p.kind,
                                expect_seq=p.expect_seq)
    summary = [{"seq": r["seq"], "record_id": r["record_id"], "schema_version": r["schema_version"],
                "hash": r["hash"], "ts": r["ts"]} for r in records]
    return {"records": summary, "head": {"seq": records[-1]["seq"], "hash": records[-1]["hash"]}}


@dataclass(frozen=True)
class RecordRef:
    ref: str


@tool("record.show", params=RecordRef, writes=False)
def record_show(ctx: ToolContext, p: RecordRef) -> dict[str, Any]:
    """One stored record, by record id or by seq number."""
    store = ctx.ledger.store
    return store.get(int(p.ref)) if p.ref.isdigit() else store.find(p.ref)


@dataclass(frozen=True)
class Verify:
    expect: str | None = None


@tool("verify", params=Verify, writes=False)
def verify(ctx: ToolContext, p: Verify) -> dict[str, Any]:
    """Check the whole log: chain, sequence, batches, schemas, and the write checks."""
    from loopx.kernel.errors import UsageProblem
    from loopx.kernel.verify import Anchor, verify_store

    try:
        anchor = Anchor.parse(p.expect) if p.expect else None
    except ValueError as exc:
        raise UsageProblem(f"--expect: {exc}") from None
    return verify_store(ctx.ledger.store, anchor).to_json()
