"""Committed JSON Schemas must equal what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

from loopx.kernel.kinds import kind_names
from loopx.kernel.schemas import DIALECT, all_schemas, drift

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def test_committed_schemas_match_models() -> None:
    stale = drift(SCHEMAS)
    assert stale == [], f"run `loopx schemas export --out schemas`; stale: {stale}"


def test_every_kind_has_a_2020_12_schema() -> None:
    schemas = all_schemas()
    for kind in kind_names():
        schema = schemas[f"{kind}.schema.json"]
        assert schema["$schema"] == DIALECT
        assert schema["properties"]["schema_version"]["const"] == kind
        assert schema["additionalProperties"] is False


def test_drift_detects_an_edited_schema(tmp_path: Path) -> None:
    for name, schema in all_schemas().items():
        (tmp_path / name).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    assert drift(tmp_path) == []
    target = tmp_path / "todo_item_v0.schema.json"
    edited = json.loads(target.read_text())
    edited["title"] = "something else"
    target.write_text(json.dumps(edited, indent=2, sort_keys=True) + "\n")
    (tmp_path / "ghost_v0.schema.json").write_text("{}\n")
    assert drift(tmp_path) == ["todo_item_v0.schema.json", "ghost_v0.schema.json"]
