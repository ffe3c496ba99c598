"""Where higher domains add rules to the lanes: selection, claims, the claim packet, and the
facts successor rules may require.

The lanes know nothing of campaigns or research; governance and research register hooks under
these names in their :class:`~loopx.kernel.domains.Domain`, and the lanes call them through
:meth:`~loopx.kernel.domains.Domains.extensions`, in domain order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from loopx.kernel.plain import Frozen

# (view, agent_id) -> Block | None: the agent takes no new work now, and why.
CAMPAIGN_BLOCK = "work.campaign_block"
# (view, todo) -> PassOver | None: selection skips this todo, how that is reported, and why.
PASS_OVER = "work.pass_over"
# (view, who, todo_id, todo) -> None: raises to refuse a claim the lanes' own rules allow.
CLAIM_CHECK = "work.claim_check"
# (view, todo, reveal) -> dict | None: the ``data`` of a claim packet (which split, where).
CLAIM_DATA = "work.claim_data"
# () -> Mapping[str, SuccessorCondition]: the named facts of the log a successor rule's
# ``conditions`` may require of the todo that completes (its hypothesis' evidence, say).
SUCCESSOR_CONDITIONS = "work.successor_conditions"


class Block(Frozen):
    """Why an agent is held back from new work: a should-run reason and details."""

    _fields = ("reason", "detail")
    reason: str
    detail: dict[str, Any]

    def __init__(self, reason: str, detail: dict[str, Any]) -> None:
        self.__dict__.update(reason=reason, detail=detail)


class PassOver(Frozen):
    """Why selection skips a todo. When only such todos are left, ``reason`` (if any) is the
    answer, with the skipped ids under ``detail_key``; otherwise they go in the detail of
    ``no_eligible_todo``. ``words`` says why for a reader of a todo list or the board, where
    the todo, still open in the log, would otherwise read as work left to do."""

    _fields = ("reason", "detail_key", "words")
    reason: str | None
    detail_key: str | None
    words: str | None

    def __init__(self, reason: str | None, detail_key: str | None,
                 words: str | None = None) -> None:
        self.__dict__.update(reason=reason, detail_key=detail_key, words=words)


class SuccessorCondition(Frozen):
    """A fact a successor rule may require, read from folded state, never from the completer's
    result: ``holds(view, todo_id, todo)`` sees the state before the completion is folded in
    (the records ahead of it in its batch included), so the write path and ``loopx verify``
    agree. It must read state only: no clock, no files."""

    _fields = ("summary", "holds")
    summary: str
    holds: Callable[[dict[str, Any], str, dict[str, Any]], bool]

    def __init__(self, summary: str,
                 holds: Callable[[dict[str, Any], str, dict[str, Any]], bool]) -> None:
        self.__dict__.update(summary=summary, holds=holds)


ConditionTable = Mapping[str, SuccessorCondition]
