"""Who is writing, and the per-record loop that checks a batch before it is committed.

:func:`check_batch` runs under the store lock against an overlay of the state caught up to the
head, with the ``ts`` the batch will carry; ``loopx verify`` re-runs it over the whole log, so a
record appended around the library is reported. The rules themselves belong to the domains
(:mod:`loopx.kernel.domains`). Token checks are separate (:func:`authenticate`) because tokens
never reach the log.
"""

from __future__ import annotations

from typing import Any

from loopx.kernel.domains import Domains, Expected, installed
from loopx.kernel.errors import LoopxError, Refused, ResearchRefused, Unauthorized
from loopx.kernel.identity import (
    OWNER,
    OWNER_CAPABILITY,
    OWNER_ROLE,
    Credentials,
    Identity,
)

__all__ = ["OWNER", "OWNER_CAPABILITY", "OWNER_ROLE", "Credentials", "Identity", "authenticate",
           "check_batch"]

def authenticate(kernel: dict[str, Any], view: dict[str, Any], creds: Credentials,
                 domains: Domains | None = None) -> Identity:
    """Check a presented token against the owner digest, or an agent's through its domain.

    Raises:
        Unauthorized: no token, a wrong one, a revoked grant, or another agent's token.
    """
    if not creds.token:
        raise Unauthorized(f"agent {creds.agent_id!r} presented no token",
                           hint="set LOOPX_TOKEN or pass --token-file")
    if creds.agent_id == "owner":
        digest = kernel.get("owner_token_sha256")
        from loopx.kernel.tokens import (
            token_matches,  # hashlib and secrets: writes only
        )

        if digest is None or not token_matches(creds.token, digest):
            raise Unauthorized("the owner token is wrong")
        return OWNER
    identify = (domains or installed()).identify
    if identify is None:
        raise Unauthorized(f"agent {creds.agent_id!r} is not registered")
    return identify(view, creds.agent_id, creds.token)


def check_batch(view: dict[str, Any], records: list[dict[str, Any]], now: str, first_seq: int,
                domains: Domains | None = None) -> None:
    """Check a batch record by record against ``view`` (an overlay), folding each in as it
    passes; a record may make the batch owe the records that follow it.

    Raises:
        Unauthorized, Forbidden, StaleLease, Refused: naming the record and the rule.
    """
    domains = domains or installed()
    expected: list[Expected] = []
    for index, record in enumerate(records):
        provisional = {**record, "seq": first_seq + index, "ts": now}
        try:
            who = domains.writer(view, provisional)
            if expected:
                expected.pop(0).check(record)
            else:
                if domains.gate is not None:
                    domains.gate(view, who, provisional)
                for check in domains.checks_for(provisional["schema_version"]):
                    check(view, who, provisional)
            owed = domains.before_fold(view, provisional)
            domains.fold(view, provisional)
            expected += owed + domains.after_fold(view, provisional)
        except LoopxError as exc:
            if isinstance(exc, ResearchRefused):
                exc.request = provisional  # what the write path records the refusal of
            if len(records) > 1:
                exc.message = f"record {index} of the batch: {exc.message}"
                exc.args = (exc.message,)
            raise
    if expected:
        raise Refused("records that must follow in the same batch are missing: "
                      + ", ".join(e.label for e in expected))
