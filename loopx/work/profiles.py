"""Role profiles as data: TOML files in ``lanes/`` (packaged) and ``.loopx/lanes/`` (editable).

A profile takes effect when the owner records it in the log as ``lane_profile_v0`` (``loopx
init`` records the packaged ones; ``loopx lanes apply`` records edits), so every check is a
function of the log and an agent cannot widen its scope by editing a file.
"""

from __future__ import annotations

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
