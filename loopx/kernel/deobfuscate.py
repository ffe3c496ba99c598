"""The readings of a text that a scan for secrets and private paths must check, so a value
disguised by look-alike characters, encoding or spacing is found as surely as a plain one.

A text is read as written; normalised (NFKC with invisible format characters, bidi controls and
combining marks removed, Cyrillic, Greek and Armenian look-alikes of Latin letters and every
script's decimal digits mapped to ASCII); and, under a right-to-left override, in the order a
reader sees. Each normalised reading is then decoded a layer at a time: escapes (HTML entities,
percent-encoding, backslash escapes), hex runs, base64 and base64url runs, and runs of single
characters split by spaces or punctuation, re-joined. Each decoded run replaces its encoding in
place, so what surrounds it still counts (``password=`` before a base64 value).

Decoding is bounded (``MAX_DEPTH`` layers, a handful of readings per layer, runs no longer than
a record), so it stays fast and cannot loop; a text that still decodes to something new at the
bound is reported as not settled, and the scans refuse it rather than guess.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from loopx.kernel.lazy_re import lazy_compile

# Layers of decoding: three a writer may use, and one more for the HTML escaping of the
# rendered output the gate scans as a whole.
MAX_DEPTH = 4
# Nothing longer can come from one record (the store's limit), so nothing longer is decoded.
MAX_RUN = 64 * 1024

# Look-alikes NFKC leaves alone, by Unicode name ("_" for a space in the name). Mapped one way,
# for scanning only: a Greek or Cyrillic word comes out as gibberish, which matches no pattern.
LOOK_ALIKES = {
    "CYRILLIC CAPITAL LETTER": "A=A VE=B IE=E ZE=3 EN=H BYELORUSSIAN-UKRAINIAN_I=I JE=J KA=K "
                               "EM=M O=O ER=P ES=C DZE=S TE=T U=Y HA=X STRAIGHT_U=Y QA=Q WE=W",
    "CYRILLIC SMALL LETTER": "A=a ES=c KOMI_DE=d IE=e SHHA=h BYELORUSSIAN-UKRAINIAN_I=i JE=j "
                             "KA=k PALOCHKA=l O=o ER=p QA=q DZE=s U=y WE=w HA=x",
    "CYRILLIC LETTER": "PALOCHKA=I",
    "GREEK CAPITAL LETTER": "ALPHA=A BETA=B EPSILON=E ZETA=Z ETA=H IOTA=I KAPPA=K MU=M NU=N "
                            "OMICRON=O RHO=P TAU=T UPSILON=Y CHI=X",
    "GREEK SMALL LETTER": "ALPHA=a IOTA=i KAPPA=k NU=v OMICRON=o RHO=p UPSILON=u CHI=x",
    "GREEK": "CAPITAL_LUNATE_SIGMA_SYMBOL=C LUNATE_SIGMA_SYMBOL=c LETTER_YOT=j",
    "ARMENIAN SMALL LETTER": "HO=h VO=n SEH=u OH=o",
    "LATIN SMALL LETTER": "DOTLESS_I=i DOTLESS_J=j ALPHA=a SCRIPT_G=g",
}
CONFUSABLES = str.maketrans({
    unicodedata.lookup(f"{script} {name.replace('_', ' ')}"): latin
    for script, pairs in LOOK_ALIKES.items()
    for name, latin in (pair.split("=") for pair in pairs.split())
})
# Blank letters (category Lo) that render as nothing.
FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
# Anything but tab, newline, carriage return and printable ASCII.
UNUSUAL = lazy_compile(r"[^\t\n\r\x20-\x7e]")
RIGHT_TO_LEFT_OVERRIDE = "\u202e"
# An override runs to a pop (PDF), an isolate's end (PDI), or the end of the line.
OVERRIDDEN = lazy_compile("\u202e([^\u202c\u2069\n]*)")

ESCAPE = lazy_compile(r"\\(?:u\{([0-9A-Fa-f]{1,6})\}|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|"
                      r"x([0-9A-Fa-f]{2}))")
PERCENT = lazy_compile(r"%[0-9A-Fa-f]{2}")
# Eight or more hex byte pairs, optionally as \x41 or 0x41, optionally separated.
HEX_RUN = lazy_compile(r"(?<![0-9A-Za-z])(?:(?:\\x|0x)?[0-9A-Fa-f]{2}[ :,.\-]?){8,}"
                       r"(?![0-9A-Za-z])")
HEX_NOISE = lazy_compile(r"\\x|0x|[^0-9A-Fa-f]")
# Twelve or more base64 or base64url characters (short enough for ``password=...``).
B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{12,}={0,2}(?![A-Za-z0-9+/_\-=])")
B64_URL = str.maketrans("-_", "+/")
# Runs of eight or more single characters: split by spaces or by punctuation outside the
# characters of a key (any mix), or by one separator repeated (which may be a key's own
# character: g-h-p-_-a...).
_ONE = r"[A-Za-z0-9_+/=\-]"
SPACED = lazy_compile(rf"(?<!{_ONE}){_ONE}(?:[\s.,;:|*~'\"`\u00b7\u2022]{{1,3}}{_ONE}(?!{_ONE}))"
                      r"{7,}")
SPACING = lazy_compile(r"[\s.,;:|*~'\"`\u00b7\u2022]")
SEPARATED = lazy_compile(rf"(?<![A-Za-z0-9]){_ONE}( ?[^\sA-Za-z0-9] ?|\s+)(?:{_ONE}\1){{6,}}"
                         rf"{_ONE}(?![A-Za-z0-9])")


@dataclass(frozen=True)
class Reading:
    """One way to read a text, and how it was reached ("" for as written)."""

    text: str
    how: str


@dataclass(frozen=True)
class Readings:
    """Every reading of a text; ``settled`` is False when decoding was cut off at the bound."""

    readings: list[Reading]
    settled: bool


def _fold(match: re.Match[str]) -> str:
    char = match.group()
    mapped = char.translate(CONFUSABLES)
    if mapped != char:
        return mapped
    if unicodedata.category(char) in ("Cc", "Cf", "Mn", "Me") or char in FILLERS:
        return ""
    digit = unicodedata.decimal(char, None)
    return char if digit is None else str(digit)


def normalise(text: str) -> str:
    """``text`` in NFKC, without invisible or combining characters, look-alikes made ASCII."""
    if text.isascii() and not UNUSUAL.search(text):
        return text
    # NFKD, fold, then NFC: NFKC, with the marks NFKD split off removable.
    folded = UNUSUAL.sub(_fold, unicodedata.normalize("NFKD", text))
    return folded if folded.isascii() else unicodedata.normalize("NFC", folded)


def _reversed_overrides(text: str) -> str:
    return OVERRIDDEN.sub(lambda m: m.group(1)[::-1], text)


def _printable(data: bytes) -> str | None:
    """``data`` as text if it is UTF-8 a person could read, else None (random bytes)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text and all(c.isprintable() or c in "\t\n\r" for c in text):
        return text
    return None


def _escape(match: re.Match[str]) -> str:
    code = int(next(g for g in match.groups() if g is not None), 16)
    return chr(code) if code <= 0x10FFFF else match.group()


def _unescaped(text: str) -> str:
    if "&" in text:
        text = html.unescape(text)
    if "%" in text and PERCENT.search(text):
        text = unquote(text)
    if "\\" in text:
        text = ESCAPE.sub(_escape, text)
    return text


def _hex_run(match: re.Match[str]) -> str:
    run = match.group()
    digits = HEX_NOISE.sub("", run)
    if len(run) > MAX_RUN or len(digits) % 2:
        return run
    return _printable(bytes.fromhex(digits)) or run


def _b64_run(match: re.Match[str]) -> str:
    run = match.group()
    body = run.rstrip("=").translate(B64_URL)
    if len(run) > MAX_RUN or len(body) % 4 == 1:
        return run
    try:
        data = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return run
    return _printable(data) or run


def _joined(chars: str) -> str:
    """A run's characters re-joined, also without up to two at either end: a one-letter word
    or a digit beside a key would otherwise hide the word boundary its pattern looks for."""
    n = len(chars)
    return " " + " ".join(dict.fromkeys(chars[a:n - b] for a in range(3) for b in range(3))) + " "


def _rejoined(text: str) -> str:
    text = SEPARATED.sub(lambda m: _joined(m.group()[::1 + len(m.group(1))]), text)
    return SPACED.sub(lambda m: _joined(SPACING.sub("", m.group())), text)


TRANSFORMS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("unescaped", _unescaped),
    ("hex-decoded", lambda text: HEX_RUN.sub(_hex_run, text)),
    ("base64-decoded", lambda text: B64_RUN.sub(_b64_run, text)),
    ("re-joined", _rejoined),
)


def _then(how: str, step: str) -> str:
    return f"{how}, {step}" if how else step


# Each transform's output for an input (by the transform's index in TRANSFORMS): a layer's
# transforms of a text are often the next layer's transforms of the same text, and the gate reads
# a page and its unescaped copy, which share their readings. Pure, so a hit is what a call gives.
Memo = dict[tuple[int, str], str]


def _apply(index: int, text: str, memo: Memo) -> str:
    key = (index, text)
    out = memo.get(key)
    if out is None:
        out = memo[key] = TRANSFORMS[index][1](text)
    return out


def _layer(text: str, alone: list[str], memo: Memo) -> tuple[str, str]:
    """One layer of every decoding in turn (hex before base64, so hex of base64 is one layer),
    normalised; and the names of those that changed anything. ``alone`` holds each transform
    of ``text`` itself, already computed: used while nothing has changed ``text`` yet."""
    steps: list[str] = []
    for index, ((step, _), known) in enumerate(zip(TRANSFORMS, alone, strict=True)):
        decoded = _apply(index, text, memo) if steps else known
        if decoded != text:
            steps.append(step)
            text = decoded
    return normalise(text), ", ".join(steps)


def read(text: str, memo: Memo | None = None) -> Readings:
    """Every reading of ``text`` a scan must check: as written, normalised, then a layer of
    decoding at a time. Each transform alone is also tried on every layer, in case one
    decoding spoils another's input (a dashed key that also looks like base64). ``memo`` may
    be shared by calls that read overlapping texts (what each transform gave: :data:`Memo`)."""
    memo = {} if memo is None else memo
    out = [Reading(text, "")]
    seen = {text}

    def add(reading: str, how: str) -> None:
        if reading not in seen:
            seen.add(reading)
            out.append(Reading(reading, how))

    settled = True
    starts = [("normalised", text)]
    if RIGHT_TO_LEFT_OVERRIDE in text:
        starts.append(("reversed back", _reversed_overrides(text)))
    for label, start in starts:
        current = normalise(start)
        how = "" if current == text else label
        add(current, how)
        for depth in range(MAX_DEPTH + 1):
            alone = [_apply(index, current, memo) for index in range(len(TRANSFORMS))]
            for (step, _), decoded in zip(TRANSFORMS, alone, strict=True):
                if decoded != current:
                    add(normalise(decoded), _then(how, step))
            following, steps = _layer(current, alone, memo)
            if following == current:
                break
            if depth == MAX_DEPTH:
                # Still decoding at the bound: say so rather than pass it half read.
                settled = False
                break
            current, how = following, _then(how, steps)
            add(current, how)
    return Readings(out, settled)
