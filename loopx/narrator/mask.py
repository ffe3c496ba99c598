"""Masking the typed values the story allow-listed (record ids, digests, commit ids) out of a
rendered page before the redaction gate scans it: one pass over the page per length of value,
each occurrence found by a set lookup, instead of one ``str.replace`` over the page per value.

The result is what replacing the values one at a time, longest first, gives (values of one
length that overlap in the page are masked leftmost first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

HEX = re.compile(r"[0-9a-f]+")
# A record id: occurrences of two of them never overlap ("r" is no hex digit).
RECORD_ID = re.compile(r"rec_[0-9a-f]{32}")


def mask(text: str, safe: Iterable[str], mark: str = "#") -> str:
    """``text`` with every occurrence of every value of ``safe`` replaced by ``mark``, longest
    values first."""
    by_length: dict[int, set[str]] = {}
    for value in safe:
        if value:
            by_length.setdefault(len(value), set()).add(value)
    for length in sorted(by_length, reverse=True):
        values = by_length[length]
        digits = {v for v in values if HEX.fullmatch(v)}
        ids = {v for v in values - digits if RECORD_ID.fullmatch(v)}
        if digits:
            text = _mask_hex(text, digits, length, mark)
        if ids:
            text = RECORD_ID.sub(lambda m, ids=ids: mark if m.group() in ids else m.group(),
                                 text)
        for value in sorted(values - digits - ids):  # any other shape: one replace each
            text = text.replace(value, mark)
    return text


def _mask_hex(text: str, values: set[str], length: int, mark: str) -> str:
    """Mask hex values of one ``length``: each lies inside a run of hex digits, so only runs
    at least that long are read, leftmost occurrence first, as ``str.replace`` finds them."""

    def run(match: re.Match[str]) -> str:
        digits = match.group()
        if len(digits) == length:
            return mark if digits in values else digits
        parts, start, i = [], 0, 0
        while i + length <= len(digits):
            if digits[i:i + length] in values:
                parts += [digits[start:i], mark]
                i = start = i + length
            else:
                i += 1
        parts.append(digits[start:])
        return "".join(parts)

    return re.sub(rf"[0-9a-f]{{{length},}}", run, text)
