"""Role profiles as data: TOML files in ``lanes/`` (packaged) and ``.loopx/lanes/`` (editable).

A profile takes effect when the owner records it in the log as ``lane_profile_v0`` (``loopx
init`` records the packaged ones; ``loopx lanes apply`` records edits), so every check is a
function of the log and an agent cannot widen its scope by editing a file.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from loopx.kernel.errors import FieldProblem, RecordRejected


def packaged_profiles() -> dict[str, bytes]:
    """File name to bytes of the role profiles shipped with loopx."""
    return {entry.name: entry.read_bytes()
            for entry in resources.files("loopx.lanes").iterdir() if entry.name.endswith(".toml")}


def parse_profile(name: str, data: bytes) -> dict[str, Any]:
    """Parse and validate one profile file; the payload of its ``lane_profile_v0`` record.

    Raises:
        RecordRejected: naming the file and every bad field.
    """
    from pydantic import ValidationError

    from loopx.kernel.kinds import pydantic_problems
    from loopx.work.records import LaneProfileV0

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RecordRejected([FieldProblem(name, f"not valid TOML: {exc}")],
                             context="profile") from None
    try:
        profile = LaneProfileV0.model_validate(doc)
    except ValidationError as exc:
        raise RecordRejected(pydantic_problems(exc, name), context="profile") from None
    stem = Path(name).stem
    if profile.role != stem:
        raise RecordRejected([FieldProblem(f"{name}.role",
                                           f"is {profile.role!r}; the file must be {profile.role}.toml")],
                             context="profile")
    return profile.model_dump(mode="json")


def profile_toml(recorded: dict[str, Any], seq: int) -> str:
    """The profile file for the profile recorded at ``seq``: TOML that :func:`parse_profile`
    reads back to exactly that profile.

    Raises:
        RecordRejected: the profile holds a value TOML cannot write (a null inside a rule's
            ``when`` value); nothing is returned.
    """
    profile = normal_profile(recorded)
    name = f"{profile['role']}.toml"
    try:
        text = _profile_text(profile, seq)
        same = parse_profile(name, text.encode("utf-8")) == profile
    except (_Unwritable, UnicodeEncodeError, RecordRejected):
        same = False
    if not same:
        raise RecordRejected([FieldProblem(name, f"the profile recorded at seq {seq} cannot be "
                                                 "written as TOML that reads back the same")],
                             context="profile")
    return text


def _profile_text(profile: dict[str, Any], seq: int) -> str:
    # Keys left out where null: a missing key reads back as its default (null), and a null a
    # value meant is caught by the read-back in profile_toml.
    tables = {"write_scope", "successor_todos"}
    lines = [f"# Role profile {profile['role']}, as recorded in the log at seq {seq} (written by",
             "# `loopx lanes pull`). Edit it and run `loopx lanes apply` (owner token).",
             *_pairs({k: v for k, v in profile.items() if k not in tables}),
             "", "[write_scope]", *_pairs(profile["write_scope"])]
    for rule in profile["successor_todos"]:
        lines += ["", "[[successor_todos]]", *_pairs(rule)]
    return "\n".join(lines) + "\n"


def _pairs(table: dict[str, Any]) -> list[str]:
    return [f"{_key(k)} = {_value(v)}" for k, v in table.items() if v is not None]


class _Unwritable(ValueError):
    """A value with no TOML form (null)."""


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if value is None:
        raise _Unwritable("null")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)  # inf, -inf, nan
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return "{ " + ", ".join(_pairs(value)) + " }"


def load_profiles(directory: Path) -> dict[str, dict[str, Any]]:
    """Every ``*.toml`` profile in ``directory``, validated, by role.

    Raises:
        RecordRejected: any file is malformed (all problems of all files are listed).
    """
    out: dict[str, dict[str, Any]] = {}
    problems: list[FieldProblem] = []
    for path in sorted(directory.glob("*.toml")):
        try:
            profile = parse_profile(path.name, path.read_bytes())
        except RecordRejected as exc:
            problems += [FieldProblem(f"{directory.name}/{p.field}", p.problem)
                         for p in exc.problems]
            continue
        out[profile["role"]] = profile
    if problems:
        raise RecordRejected(problems, context="profiles")
    return out


def normal_profile(recorded: dict[str, Any]) -> dict[str, Any]:
    """A profile as recorded in the log, in the form :func:`parse_profile` gives today (fields
    added since it was recorded at their defaults), to compare with a file."""
    from loopx.work.records import LaneProfileV0

    plain = {k: v for k, v in recorded.items() if k != "seq"}
    return LaneProfileV0.model_validate(plain).model_dump(mode="json")


def check_references(profiles: dict[str, dict[str, Any]], known_roles: set[str]) -> None:
    """Refuse successor rules and todo targets that name a role that will not exist, and
    successor conditions no domain registered.

    Raises:
        RecordRejected: naming the file and field.
    """
    from loopx.work.successors import condition_table

    roles = known_roles | set(profiles)
    table = condition_table()
    problems = []
    for role, profile in sorted(profiles.items()):
        for i, rule in enumerate(profile["successor_todos"]):
            target = profiles.get(rule["target_role"])
            where = f"{role}.toml.successor_todos.{i}"
            for j, ref in enumerate(rule.get("conditions", [])):
                if ref.removeprefix("not ") not in table:
                    problems.append(FieldProblem(
                        f"{where}.conditions.{j}",
                        f"unknown condition {ref.removeprefix('not ')!r} (known: "
                        f"{', '.join(sorted(table)) or 'none'})"))
            if rule.get("assign_to_completer") and rule["target_role"] != role:
                problems.append(FieldProblem(f"{where}.assign_to_completer",
                                             f"the completer is a {role}, not a "
                                             f"{rule['target_role']}: it cannot be assigned"))
            if rule["target_role"] not in roles:
                problems.append(FieldProblem(f"{where}.target_role",
                                             f"no role {rule['target_role']!r}"))
            elif target is not None and rule["action_kind"] not in target["actions"]:
                problems.append(FieldProblem(f"{where}.action_kind",
                                             f"role {rule['target_role']!r} does not take "
                                             f"{rule['action_kind']!r}"))
        for target_role in profile["adds_todos_for"]:
            if target_role not in roles:
                problems.append(FieldProblem(f"{role}.toml.adds_todos_for",
                                             f"no role {target_role!r}"))
    if problems:
        raise RecordRejected(problems, context="profiles")
