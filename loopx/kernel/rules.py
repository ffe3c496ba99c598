"""Which write rules a record is judged by: the rules in force when it was written.

Write rules grow stricter over versions. A log records the version it starts under (the
genesis record's ``rules_version``) and each upgrade (a ``rules_upgrade_v0`` loopx writes in
front of the first batch a newer version commits), so `loopx verify` re-checks every record
under the rules it was written under and a log keeps verifying after loopx is upgraded. A rule
added in version N asks :func:`level` and applies only from N on; so does a fold handler, which
the fold hands the log's version at each record (``LOG_RULES``), so an old log folds today as
it did when it was written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopx.kernel.domains import LOG_RULES, RULES
from loopx.kernel.store.quarantine import STORE_AGENT


def level(view: Mapping[str, Any]) -> int | None:
    """The rules version a check or a fold judges under: a checked batch's, else the log's at
    that point of the fold (None: the newest, e.g. a preview outside the write path)."""
    value = view.get(RULES)
    if value is None:
        value = view.get(LOG_RULES)
    return None if value is None else int(value)


def applies(view: Mapping[str, Any], since: int) -> bool:
    """Whether a rule added in version ``since`` applies to the batch ``view`` checks."""
    current = level(view)
    return current is None or current >= since


def upgrade_record(goal_id: str, from_version: int, to_version: int) -> dict[str, Any]:
    """The ``rules_upgrade_v0`` loopx writes in front of a batch (unsealed, like the store's)."""
    from loopx.kernel.kinds import new_record_id

    return {"schema_version": "rules_upgrade_v0", "record_id": new_record_id(),
            "goal_id": goal_id, "agent_id": STORE_AGENT, "lane_role": "store",
            "capability": None, "todo_id": None, "epoch": None, "visibility": "private",
            "provenance": "computed",
            "payload": {"from_version": from_version, "to_version": to_version}}
