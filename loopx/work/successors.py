"""Successor rules: typed conditions on a completion's result that add the next todo.

A rule belongs to the completing agent's role profile and is applied in the same locked step as
the completion. The successor's todo id is derived from the source todo and the rule, so a rule
fires at most once per source todo whatever is retried.
"""

from __future__ import annotations

import hashlib
from typing import Any

_MISSING = object()


def successor_id(source_todo_id: str, rule_id: str) -> str:
    """The todo id a rule gives the successor of ``source_todo_id`` (at most 128 characters)."""
    plain = f"{source_todo_id}.{rule_id}"
    if len(plain) <= 128:
        return plain
    digest = hashlib.sha256(plain.encode()).hexdigest()[:16]
    return f"{source_todo_id[:100]}.{digest}"


def lookup(result: Any, path: str) -> Any:
    """The value at a dotted path in a result (``_MISSING`` when absent)."""
    value = result
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, but true is not 1."""
    if _number(a) and _number(b):
        return bool(a == b)
    return type(a) is type(b) and a == b


def condition_holds(condition: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether one ``{path, op, value}`` condition holds for a completion's result."""
    found = lookup(result, condition["path"])
    op, want = condition["op"], condition.get("value")
    if op == "exists":
        return found is not _MISSING
    if op == "absent":
        return found is _MISSING
    if found is _MISSING:
        return op == "ne" or op == "not_in"
    if op in ("eq", "ne"):
        return _json_equal(found, want) == (op == "eq")
    if op in ("in", "not_in"):
        return any(_json_equal(found, w) for w in want or []) == (op == "in")
    if not (_number(found) and _number(want)):
        return False
    return {"gt": found > want, "ge": found >= want, "lt": found < want, "le": found <= want}[op]


def successor_todos(profile: dict[str, Any], todo_id: str, todo: dict[str, Any], completer: str,
                    result: dict[str, Any], todos: Any) -> list[dict[str, Any]]:
    """The todo payloads the completer's rules add after ``todo_id`` completes with ``result``."""
    out = []
    for rule in profile.get("successor_todos", []):
        if rule["after_action"] != todo["action_kind"]:
            continue
        if not all(condition_holds(c, result) for c in rule.get("when", [])):
            continue
        inherited = todo.get("unblocks")
        if inherited is not None and todos.get(inherited, {}).get("status") != "open":
            inherited = None
        payload: dict[str, Any] = {
            "todo_id": successor_id(todo_id, rule["rule_id"]),
            "title": rule["title"],
            "text": rule.get("text", ""),
            "role": rule["target_role"],
            "action_kind": rule["action_kind"],
            "priority": rule.get("priority", 0),
            "source_todo_id": todo_id,
            "successor_rule_id": rule["rule_id"],
        }
        if rule.get("assign_to_completer"):
            payload["assigned_to"] = completer
        if todo.get("hypothesis_id") is not None:
            payload["hypothesis_id"] = todo["hypothesis_id"]
        if inherited is not None:
            payload["unblocks_todo_id"] = inherited
        out.append(payload)
    return out
