"""Secret-shaped values: credentials that must never enter the log.

Governance records (contracts, proposals and their arguments, approvals, results, usage notes,
findings) are scanned before they are written; any finding refuses the whole write and names the
field, never the value. The patterns are deliberately conservative: a false alarm costs a
rewording, a missed key costs a rotation. Every reading of a text is checked (normalised,
decoded, re-joined: :mod:`loopx.kernel.deobfuscate`), the same readings the narrator's redaction gate
checks, so the write check and the gate cannot disagree.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from loopx.kernel.deobfuscate import Reading, Readings, normalise, read
from loopx.kernel.errors import FieldProblem
from loopx.kernel.members import members
from loopx.kernel.tokens import TOKEN_PATTERN

# Characters that are not ASCII but that a case-insensitive pattern matches to an ASCII letter
# (dotted and dotless i, long s, Kelvin sign): computed over every code point by
# tests/test_redaction_speed.py, so a Python that adds one fails there.
CASE_TWINS = "\u0130\u0131\u017f\u212a"


class Guarded:
    """A compiled pattern behind a cheap test that fails closed: every match holds one of
    ``needles``, so a text holding none of them is not searched. ``fold``: the pattern ignores
    case and the needles are lower case; a text with a :data:`CASE_TWINS` character is always
    searched."""

    def __init__(self, source: str, needles: tuple[str, ...] = (), fold: bool = False) -> None:
        self.pattern = re.compile(source)
        self.needles = needles
        self.fold = fold

    def may_match(self, text: str) -> bool:
        """False only if the pattern cannot match ``text`` (no needle in it)."""
        if not self.needles:
            return True
        if self.fold:
            if any(c in text for c in CASE_TWINS):
                return True
            text = text.lower()
        return any(needle in text for needle in self.needles)

    def search(self, text: str) -> re.Match[str] | None:
        """``pattern.search(text)``, skipped (None) when the pattern cannot match."""
        return self.pattern.search(text) if self.may_match(text) else None


# (what a text looks like, the pattern that finds it): the first row that matches names it.
NamedPatterns = tuple[tuple[str, Guarded], ...]


def named_patterns(*rows: tuple[str, str] | tuple[str, str, tuple[str, ...]]
                   | tuple[str, str, tuple[str, ...], bool]) -> NamedPatterns:
    """(what it looks like, regex source[, needles every match holds[, case folded]]) rows,
    compiled, in the order given. Without needles a pattern is searched in every text."""
    return tuple((row[0], Guarded(*row[1:])) for row in rows)  # type: ignore[arg-type]


# Checked in every string value and key.
PATTERNS = named_patterns(
    ("a loopx token", TOKEN_PATTERN.pattern, ("lpx_",)),
    ("a private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----", ("-----BEGIN ",)),
    ("an AWS access key id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",
     ("AKIA", "ASIA", "AGPA", "AIDA", "AROA")),
    ("a GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}", ("glpat-",)),
    ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", ("xox",)),
    ("an API secret key", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}", ("sk-",)),
    ("a Stripe key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", ("k_live_", "k_test_")),
    ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}", ("AIza",)),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}", ("hf_",)),
    ("a JSON web token",
     r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", ("eyJ",)),
    # A scheme is short; an unbounded one made this search quadratic on long hyphenated runs.
    # ...including a database DSN's (postgresql://user:pass@host/db, even with no user).
    ("a password in a URL", r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^/\s:@]*:[^/\s@]+@",
     ("://",)),
    ("a credential assignment",
     (r"(?i)\b(?:password|passwd|secret|api[_\-]?key|access[_\-]?key|auth[_\-]?token|"
      r"access[_\-]?token|client[_\-]?secret)\s*[=:]\s*['\"]?[^\s'\"$]{6,}"),
     ("passw", "secret", "api", "access", "auth"), True),
)
# A key with one of these names holding a literal string is a credential (an environment
# reference such as "$HF_TOKEN" or "env:HF_TOKEN" is fine).
SECRET_KEY = re.compile(
    r"(?i)(?:^|[_\-.])(?:password|passwd|secret|api[_\-]?key|apikey|access[_\-]?key|"
    r"private[_\-]?key|auth[_\-]?token|access[_\-]?token|token|credentials?|client[_\-]?secret)"
    r"(?:$|[_\-.])")
CANDIDATE = re.compile(r"[A-Za-z0-9+/_\-=]{32,}")
ENTROPY_BITS = 4.0


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _high_entropy(text: str) -> bool:
    """A long run mixing upper case, lower case and digits with near-random spread.

    Hex digests and commit ids (no upper case) and UUIDs are not flagged.
    """
    for match in CANDIDATE.finditer(text):
        word = match.group()
        if (any(c.isupper() for c in word) and any(c.islower() for c in word)
                and any(c.isdigit() for c in word) and _entropy(word) >= ENTROPY_BITS):
            return True
    return False


def plain_kind(text: str) -> str | None:
    """What secret ``text`` as it stands (one reading, not decoded) seems to contain, or None."""
    for what, pattern in PATTERNS:
        if pattern.search(text):
            return what
    if _high_entropy(text):
        return "a high-entropy token"
    return None


def found_how(what: str, reading: Reading) -> str:
    """``what`` was found, saying how the reading was reached (never what it says)."""
    return f"{what}, once {reading.how}" if reading.how else what


def secret_kind_in(readings: Readings,
                   kind: Callable[[str], str | None] | None = None) -> str | None:
    """What secret any of ``readings`` seems to contain, or None; ``kind`` (by default
    :func:`plain_kind`) says what one reading's text looks like, so a caller may keep its
    answers."""
    kind = plain_kind if kind is None else kind
    for reading in readings.readings:
        what = kind(reading.text)
        if what:
            return found_how(what, reading)
    if not readings.settled:
        return "a value encoded too many times to check"
    return None


def secret_kind(text: str) -> str | None:
    """What secret ``text`` seems to contain, read every way :func:`read` reads it, or None."""
    return secret_kind_in(read(text))


def _problem(path: str, what: str) -> FieldProblem:
    return FieldProblem(path or "record", f"looks like {what}; secret-shaped values are refused "
                        "(keep credentials in the environment of whatever runs the action)")


def secret_problems(value: Any, path: str = "") -> list[FieldProblem]:
    """Every field of a JSON document holding something secret-shaped (the value is not echoed)."""
    if isinstance(value, str):
        what = secret_kind(value)
        return [_problem(path, what)] if what else []
    problems: list[FieldProblem] = []
    for where, key, item in members(value, path):
        if key is not None:
            what = secret_kind(key)
            if what:
                problems.append(_problem(f"{path}.<key>" if path else "<key>", what))
                continue
            if (isinstance(item, str) and SECRET_KEY.search(normalise(key)) and len(item) >= 6
                    and not item.startswith(("$", "env:"))):
                problems.append(_problem(where, f"a credential (field {key!r})"))
                continue
        problems += secret_problems(item, where)
    return problems
