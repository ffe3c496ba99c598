"""Capability rule 1 of the lane contract: every contract version names its protected scope
explicitly, and every repository path it names lies inside the workspace's contract scopes.

The paths a contract names are its ``editable_scope`` and ``protected_scope`` entries and those
split locations (``evaluation.dev.location``, ``evaluation.heldout.location``) that are
repository paths: relative, inside the repository, without a scheme. An absolute path, a path
that climbs out of the repository (``../data``) or a name with a scheme (``s3://...``,
``sklearn:digits``) points outside the repository, where held-out data belongs, and is not
judged. The workspace declares its contract scopes in ``.loopx/workspace.json``
(``contract_scopes``; the whole repository, ``["."]``, by default and for a workspace made
before the setting existed).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from loopx.kernel.domains import SETTINGS
from loopx.kernel.errors import ResearchRefused
from loopx.research.protected_scope import leaves_repository, normalise

CONTRACT_SCOPES = "contract_scopes"
WHOLE_REPOSITORY = (".",)
_GLOB_CHARS = frozenset("*?[")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_LOCATIONS = ("dev", "heldout")


def parse_contract_scopes(value: object) -> list[str]:
    """The ``contract_scopes`` setting as given, checked: a non-empty list of repository paths.

    Raises:
        ValueError: naming what is wrong with it.
    """
    if not isinstance(value, list) or not value:
        raise ValueError("must be a non-empty list of repository-relative paths, e.g. "
                         f'["docs", "examples"] (["."] for the whole repository), got {value!r}')
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"entry {item!r} is not a path")
        if _GLOB_CHARS & set(item):
            raise ValueError(f"entry {item!r} is a pattern; name a directory or a file")
        if leaves_repository(normalise(item)) or _outside_repository(item):
            raise ValueError(f"entry {item!r} is outside the repository")
    return list(value)


def contract_scopes(view: Mapping[str, Any]) -> Sequence[str]:
    """The contract scopes a write is judged under: the workspace's setting, or the whole
    repository where there is none (a bare store; ``loopx verify``)."""
    settings = view.get(SETTINGS)
    if settings is None:
        return WHOLE_REPOSITORY
    return settings.get(CONTRACT_SCOPES) or WHOLE_REPOSITORY


def named_paths(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, path) for every repository path a contract version names (see module docs)."""
    out = [(f"payload.{field}[{i}]", entry) for field in ("editable_scope", "protected_scope")
           for i, entry in enumerate(payload.get(field) or [])]
    evaluation = payload.get("evaluation") or {}
    for split in _LOCATIONS:
        location = (evaluation.get(split) or {}).get("location")
        if (isinstance(location, str) and not _outside_repository(location)
                and not leaves_repository(normalise(location))):
            out.append((f"payload.evaluation.{split}.location", location))
    return out


def inside(path: str, scopes: Sequence[str]) -> bool:
    """Whether every path ``path`` (a literal path or a glob pattern) can match lies inside one
    of ``scopes``: for a pattern, its leading directories before the first glob character."""
    norm = normalise(path)
    if leaves_repository(norm):
        return False
    glob_at = next((i for i, ch in enumerate(norm) if ch in _GLOB_CHARS), None)
    fixed = norm if glob_at is None else norm[:glob_at].rpartition("/")[0]
    for scope in scopes:
        root = normalise(scope)
        if root == "." or (fixed not in ("", ".") and (fixed == root
                                                       or fixed.startswith(root + "/"))):
            return True
    return False


def check_contract_paths(payload: Mapping[str, Any], scopes: Sequence[str]) -> None:
    """Refuse a contract version without a protected scope, or naming a path outside
    ``scopes``.

    Raises:
        ResearchRefused: ``protected_scope_missing`` or ``contract_outside_scope``.
    """
    protected = payload.get("protected_scope") or []
    if not any(isinstance(entry, str) and entry.strip() for entry in protected):
        raise ResearchRefused(
            "protected_scope_missing", "payload.protected_scope: a contract version names its "
            "protected scope explicitly (at least one path or pattern no experiment may "
            "change, such as the evaluator and the held-out data); an empty one would let every "
            "evaluated commit pass the protected-boundary gate",
            detail={"field": "payload.protected_scope"},
            hint="`loopx contract init --protected PATH`, or `--set 'protected_scope=[\"eval/\"]'`")
    outside = [(field, path) for field, path in named_paths(payload) if not inside(path, scopes)]
    if outside:
        listed = "; ".join(f"{field} {path!r}" for field, path in outside[:16])
        more = f"; and {len(outside) - 16} more" if len(outside) > 16 else ""
        raise ResearchRefused(
            "contract_outside_scope", f"{listed}{more}: outside the workspace's contract scopes "
            f"({', '.join(scopes)}); a contract version names only paths inside them",
            detail={"fields": [field for field, _ in outside][:64],
                    "contract_scopes": list(scopes)},
            hint="keep the contract's scopes and split locations inside them; the owner "
                 "widens contract_scopes in .loopx/workspace.json")


def _outside_repository(location: str) -> bool:
    """An absolute path (POSIX, Windows, home) or a name with a scheme (``s3://``, ``sklearn:``)."""
    return location.startswith(("/", "\\", "~")) or _SCHEME.match(location) is not None


def check_split_locations(payload: Mapping[str, Any]) -> None:
    """Refuse a contract version whose held-out and dev locations are one place, or one lies
    inside the other (rules version 4): every executor handed the dev location could then read
    the held-out data (its own, or the directory around it), and a hypothesis screened on data
    would be confirmed on the same data.

    Raises:
        ResearchRefused: ``heldout_within_dev`` (naming the fields, never their private values).
    """
    evaluation = payload.get("evaluation") or {}
    dev = (evaluation.get("dev") or {}).get("location")
    heldout = (evaluation.get("heldout") or {}).get("location")
    if not (isinstance(dev, str) and isinstance(heldout, str) and dev.strip()
            and heldout.strip()):
        return
    if _within(_spot(heldout), _spot(dev)) or _within(_spot(dev), _spot(heldout)):
        raise ResearchRefused(
            "heldout_within_dev", "evaluation.heldout.location and evaluation.dev.location are "
            "one place, or one lies inside the other: every executor handed the dev data could "
            "read the held-out data, and a hypothesis screened on data would be confirmed on the "
            "same data",
            detail={"fields": ["evaluation.heldout.location", "evaluation.dev.location"]},
            hint="keep the held-out data apart from the dev data (sibling directories, another "
                 "bucket or dataset name)")


def _within(inner: str, outer: str) -> bool:
    """Whether the place ``inner`` names is ``outer`` or lies inside it (both :func:`_spot`)."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/") or (
        outer == "." and not _outside_repository(inner) and not inner.startswith(".."))


def _spot(location: str) -> str:
    """A location in a form two spellings of one place share: a path normalised (``./``,
    ``//``, ``..``, a trailing ``/``, backslashes), a name with a scheme as given."""
    where = location.strip()
    if _SCHEME.match(where) and not re.match(r"^[A-Za-z]:[\\/]", where):  # not a drive
        return where.rstrip("/")
    return posixpath.normpath(where.replace("\\", "/"))
