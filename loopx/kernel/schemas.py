"""JSON Schema (2020-12) for every record kind and for drafts, generated from the models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import create_model

from loopx.kernel.envelope import Draft, Envelope
from loopx.kernel.kinds import KINDS

DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://loopx.dev/schemas/"


def record_schema(kind: str) -> dict[str, Any]:
    """The schema of a stored record of ``kind``: the envelope with its typed payload."""
    spec = KINDS[kind]
    model = create_model(  # type: ignore[call-overload]
        f"{spec.model.__name__}Record",
        __base__=Envelope,
        __doc__=f"A stored {kind} record: {spec.summary}.",
        schema_version=(Literal[kind], ...),  # type: ignore[valid-type,arg-type]
        payload=(spec.model, ...),
    )
    return _finish(model.model_json_schema(), kind)


def draft_schema() -> dict[str, Any]:
    """The schema of a draft as ``loopx append`` reads it (payload checked per kind)."""
    return _finish(Draft.model_json_schema(), "draft")


def all_schemas() -> dict[str, dict[str, Any]]:
    """File name to schema, for every kind plus the draft."""
    out = {f"{kind}.schema.json": record_schema(kind) for kind in sorted(KINDS)}
    out["draft.schema.json"] = draft_schema()
    return out


def render(schema: dict[str, Any]) -> str:
    """The committed text of a schema file."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export(directory: Path) -> list[Path]:
    """Write every schema into ``directory``; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in all_schemas().items():
        path = directory / name
        path.write_text(render(schema))
        written.append(path)
    return written


def drift(directory: Path) -> list[str]:
    """Names of schema files in ``directory`` that are missing or differ from the models."""
    stale = []
    expected = all_schemas()
    for name, schema in expected.items():
        path = directory / name
        if not path.is_file() or path.read_text() != render(schema):
            stale.append(name)
    stale += sorted(p.name for p in directory.glob("*.schema.json") if p.name not in expected)
    return stale


def _finish(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return {"$schema": DIALECT, "$id": f"{ID_BASE}{name}.schema.json", **schema}
