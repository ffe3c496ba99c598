"""Successor rules: named facts of the log (and, for what is not evidence, tests of the
completion's result) that add the next todo.

A rule belongs to the completing agent's role profile and is applied in the same locked step as
the completion. Its ``conditions`` are facts higher domains register at
:data:`~loopx.work.extensions.SUCCESSOR_CONDITIONS` (research: the hypothesis' judgements,
packets, candidates), read from the state folded before the completion, so a completer cannot
make or suppress a successor by what it types as its result. The successor's todo id is derived
from the source todo and the rule, so a rule fires at most once per source todo whatever is
retried.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.canonical import sha256_hex
from loopx.kernel.domains import installed
from loopx.work.extensions import (
    SUCCESSOR_CONDITIONS,
    ConditionTable,
    SuccessorCondition,
)

_MISSING = object()


def successor_id(source_todo_id: str, rule_id: str) -> str:
    """The todo id a rule gives the successor of ``source_todo_id`` (at most 128 characters)."""
    plain = f"{source_todo_id}.{rule_id}"
    if len(plain) <= 128:
        return plain
    digest = sha256_hex(plain.encode())[:16]
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


def condition_table() -> dict[str, SuccessorCondition]:
    """Every named fact a successor rule may require, from the installed domains.

    Raises:
        ValueError: two domains register the same name.
    """
    domains = installed()
    if _TABLE and _TABLE[0] is domains:
        return _TABLE[1]  # built once per installed set: every completion reads it twice
    table: dict[str, SuccessorCondition] = {}
    for hook in domains.extensions(SUCCESSOR_CONDITIONS):
        found: ConditionTable = hook()
        for name, condition in found.items():
            if name in table:
                raise ValueError(f"successor condition {name!r} is registered twice")
            table[name] = condition
    _TABLE[:] = [domains, table]
    return table


_TABLE: list[Any] = []  # [the Domains the table below was built from, the table]


def unknown_conditions(rule: dict[str, Any], table: ConditionTable) -> list[str]:
    """The names a rule's ``conditions`` use that no domain registered."""
    return [ref for ref in rule.get("conditions", [])
            if ref.removeprefix("not ") not in table]


class _Facts:
    """The named facts of one completion, each read from the state at most once."""

    def __init__(self, view: dict[str, Any], todo_id: str, todo: dict[str, Any]) -> None:
        self.view, self.todo_id, self.todo = view, todo_id, todo
        self.table: dict[str, SuccessorCondition] | None = None
        self.known: dict[str, bool | None] = {}

    def holds(self, ref: str) -> bool:
        name = ref.removeprefix("not ")
        if name not in self.known:
            if self.table is None:
                self.table = condition_table()
            condition = self.table.get(name)
            self.known[name] = (None if condition is None
                                else bool(condition.holds(self.view, self.todo_id, self.todo)))
        known = self.known[name]
        # An unknown name never holds, negated or not: a rule that cannot be read fires
        # nothing (the profile checks refuse such names before they are recorded).
        return known is not None and known != ref.startswith("not ")


def _assignee(rule: dict[str, Any], completer: str, view: dict[str, Any]) -> str | None:
    if rule.get("assign_to_completer"):
        return completer
    named = rule.get("claimed_by")
    if named is None:
        return None
    agent = view["agents"].get(named)
    # A rule cannot know the agents registered later: one it names that is gone (or of
    # another role) leaves the todo to any agent of the role rather than refuse the completion.
    if agent is None or agent["revoked"] or agent["role"] != rule["target_role"]:
        return None
    return str(named)


def successor_todos(profile: dict[str, Any], todo_id: str, todo: dict[str, Any], completer: str,
                    result: dict[str, Any], view: dict[str, Any]) -> list[dict[str, Any]]:
    """The todo payloads the completer's rules add after ``todo_id`` completes with ``result``.

    ``view`` is the state before the completion is folded in (the records ahead of it in its
    batch included): every named condition is read from it.
    """
    out = []
    todos = view["todos"]
    facts = _Facts(view, todo_id, todo)
    for rule in profile.get("successor_todos", []):
        if rule["after_action"] != todo["action_kind"]:
            continue
        if not all(condition_holds(c, result) for c in rule.get("when", [])):
            continue
        if not all(facts.holds(ref) for ref in rule.get("conditions", [])):
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
        assignee = _assignee(rule, completer, view)
        if assignee is not None:
            payload["assigned_to"] = assignee
        if todo.get("hypothesis_id") is not None:
            payload["hypothesis_id"] = todo["hypothesis_id"]
        if inherited is not None:
            payload["unblocks_todo_id"] = inherited
        out.append(payload)
    return out
