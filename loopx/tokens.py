"""Capability tokens: 256-bit random, ``lpx_``-prefixed, kept only as sha256 digests."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "lpx_"


def new_token() -> str:
    """A fresh token; show it once and store only :func:`token_digest` of it."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: str, digest: str) -> bool:
    """Constant-time comparison of a presented token with a stored digest."""
    return hmac.compare_digest(token_digest(token), digest)
