"""Capability tokens: 256-bit random, ``lpx_``-prefixed, kept only as sha256 digests."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

from loopx.kernel.errors import FieldProblem
from loopx.kernel.members import members

TOKEN_PREFIX = "lpx_"
# token_urlsafe(32) gives 43 characters; anything close to that after the prefix is refused.
TOKEN_PATTERN = re.compile(r"lpx_[A-Za-z0-9_\-]{16,}")


def new_token() -> str:
    """A fresh token; show it once and store only :func:`token_digest` of it."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: str, digest: str) -> bool:
    """Constant-time comparison of a presented token with a stored digest."""
    presented = _PRESENTED.get(token)
    if presented is None:
        presented = token_digest(token)
        if len(_PRESENTED) >= 64:  # a process presents a few tokens, each on every write
            _PRESENTED.clear()
        _PRESENTED[token] = presented
    return hmac.compare_digest(presented, digest)


# The digests of the tokens this process presented: an agent's every write checks its token
# (before the lock and again under it), against the digest in the folded state.
_PRESENTED: dict[str, str] = {}


def token_problems(value: Any, path: str) -> list[FieldProblem]:
    """Every string (key or value) in a JSON document that contains something token-shaped."""
    if isinstance(value, str):
        if TOKEN_PREFIX in value and TOKEN_PATTERN.search(value):
            return [FieldProblem(path or "record", "contains a loopx token; tokens are never "
                                 "written into records (pass them by environment or file)")]
        return []
    problems: list[FieldProblem] = []
    for where, key, item in members(value, path):
        if key is not None and TOKEN_PREFIX in key and TOKEN_PATTERN.search(key):
            hidden = "<key holding a token>"  # the error must not repeat the secret
            where = f"{path}.{hidden}" if path else hidden
            problems += token_problems(key, where)
        problems += token_problems(item, where)
    return problems
