"""Records kept as numbered versions, each superseding the one in force: contract amendments
(:mod:`loopx.governance.contract`) and research plan revisions
(:mod:`loopx.research.research_plan`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loopx.kernel.errors import NotFound, Refused


def check_next_version(current: dict[str, Any], new: dict[str, Any], *, what: str, id_key: str,
                       change: str, how: str, hint: str) -> None:
    """Refuse ``new`` unless it is the version after ``current``, keeps its id and supersedes
    its record.

    ``what`` names the record ("contract"), ``id_key`` its id field, ``change`` the new version
    ("an amendment"); ``how`` and ``hint`` say how to change it, to whoever sent a version 1.
    """
    if new["version"] == 1:
        raise Refused(f"a {what} exists ({current[id_key]} version {current['version']}); {how}",
                      hint=hint)
    if new[id_key] != current[id_key]:
        raise Refused(f"{change} keeps {id_key} {current[id_key]!r}, not {new[id_key]!r}")
    if new["version"] != current["version"] + 1 or new["supersedes"] != current["record_id"]:
        raise Refused(f"{change} of version {current['version']} is version "
                      f"{current['version'] + 1} and supersedes {current['record_id']}")


def pick_version(stored: Sequence[dict[str, Any]], number: int | None, what: str,
                 hint: str) -> dict[str, Any]:
    """Version ``number`` of ``stored`` (oldest first), or the one in force (the last) by default.

    Raises:
        NotFound: nothing stored yet (with ``hint``), or no such version; ``what`` names the
            record ("contract", "research plan").
    """
    if not stored:
        raise NotFound(f"there is no {what} yet", hint=hint)
    if number is None:
        return dict(stored[-1])
    for entry in stored:
        if entry["version"] == number:
            return dict(entry)
    raise NotFound(f"there is no {what} version {number} (versions 1-{len(stored)})")
