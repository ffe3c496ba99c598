"""The redaction gate's fast path is no weaker than the slow one it replaced: the needles that let
a scan skip a pattern never skip a match (look-alike letters that a case-insensitive pattern
folds included), masking the allow-listed ids in one pass per length masks what replacing them
one by one did, and a secret the template or a number would add to a page is still found in
every disguise (encoded, spaced, look-alike letters, DSNs with passwords, loopx tokens), also
right beside an allow-listed id. A value the story quotes twice is reported for both records."""

from __future__ import annotations

import random
import re
import string
import sys

import pytest
from narrator_support import fixed_campaign
from test_redaction import CLEAN, LOGS, PATHS, SECRETS

from loopx.kernel import secrets
from loopx.kernel.deobfuscate import read
from loopx.narrator import redaction
from loopx.narrator.mask import mask
from loopx.narrator.publish import render
from loopx.narrator.reader import Quoted, Story

GUARDED = [(what, guarded) for what, guarded in
           secrets.PATTERNS + redaction.PRIVATE_PATHS + redaction.LOG_EXCERPTS]
TOKEN = "lpx_" + "a1B2c3D4" * 3
FOUND_IN_A_PAGE = {**SECRETS, **PATHS, **LOGS, "loopx_token": TOKEN,
                   "assignment_upper": "PASSWORD = correct-horse",
                   "assignment_long_s": "pa\u017f\u017fword=correct-horse",
                   "assignment_kelvin": "api_\u212aey: abcdef123456",
                   "assignment_dotless": "cl\u0131ent_secret=abcdef123456"}


# A match of every alternative of every guarded pattern (each must match its pattern).
ALTERNATIVES = [
    TOKEN, "-----BEGIN OPENSSH PRIVATE KEY-----",
    *(f"{p}IOSFODNN7EXAMPLE" for p in ("AKIA", "ASIA", "AGPA", "AIDA", "AROA")),
    *(f"gh{c}_" + "a1" * 16 for c in "pousr"), "github_pat_" + "a_1" * 11,
    "glpat-" + "a-1" * 8, *(f"xox{c}-1234567890-abc" for c in "abposr"),
    *(f"sk-{m}" + "a1_-" * 6 for m in ("", "ant-", "proj-")),
    *(f"{a}k_{b}_" + "a1" * 9 for a in "rs" for b in ("live", "test")),
    "AIza" + "a1_-B" * 7, "hf_" + "a1" * 16, "eyJabcdefgh.eyJabcdefgh.abcdefgh",
    "https://u:p@host", "postgresql://:hunter2@db/x", "git+ssh://me:pw@h",
    *(f"{k}{sep}'abcdef12" for k in ("password", "passwd", "secret", "api_key", "api-key",
                                     "apikey", "access_key", "access-key", "accesskey",
                                     "auth_token", "auth-token", "authtoken", "access_token",
                                     "access-token", "accesstoken", "client_secret",
                                     "client-secret", "clientsecret") for sep in ("=", " : ")),
    "/home/a", "/Users/b", "/root/c", "/var/folders/d", "/private/var/e", "x /home",
    "C:\\Users\\x\\", "d:\\documents and settings\\x\\", "~/x", "D:\\x", "e:/x",
    "\\\\srv\\share", "/tmp/x", "/var/tmp/x", ".loopx/log", ".loopx\\log",
    "Traceback (most recent call last)", 'File "a.py", line 3', "\n  at f (a.js:1:2)",
    '"prev_hash": 1', '"batch_end" :', '"capability":',
    *(f"2026-12-01T10:00:00Z [{lvl}] x" for lvl in ("TRACE", "DEBUG", "INFO", "NOTICE", "WARN",
                                                      "WARNING", "ERROR", "CRITICAL", "FATAL")),
]
# Letters a case-insensitive pattern also matches: swapped in, one kind at a time.
TWIN_SWAPS = [str.maketrans("sS", "\u017f\u017f"), str.maketrans("kK", "\u212a\u212a"),
              str.maketrans("iI", "\u0131\u0131"), str.maketrans("iI", "\u0130\u0130")]


def _variants(text: str) -> list[str]:
    cases = [text, text.upper(), text.lower(), text.title(), text.swapcase()]
    return [*cases, *(c.translate(swap) for c in cases for swap in TWIN_SWAPS)]


def test_every_alternative_matches_some_guarded_pattern() -> None:
    for text in ALTERNATIVES:
        assert any(g.pattern.search(text) for _, g in GUARDED), text


def test_case_twins_are_every_non_ascii_letter_a_folded_pattern_matches() -> None:
    letter = re.compile("(?i)[a-z]")
    twins = "".join(chr(c) for c in range(128, sys.maxunicode + 1) if letter.fullmatch(chr(c)))
    assert twins == secrets.CASE_TWINS


def _readings(texts: list[str]) -> list[str]:
    return [r.text for text in texts for r in read(text).readings]


@pytest.mark.parametrize("what,guarded", GUARDED, ids=[f"{i}-{w}" for i, (w, _) in
                                                        enumerate(GUARDED)])
def test_a_needle_never_skips_a_match(what: str, guarded: secrets.Guarded) -> None:
    """On every reading of the corpora, and on random texts made of the needles, the look-alike
    letters and the characters around them, the guarded search finds what the pattern finds."""
    texts = _readings([*FOUND_IN_A_PAGE.values(), *CLEAN.values()])
    texts += [v for text in ALTERNATIVES for v in _variants(text)]
    rng = random.Random(18)
    pieces = [*{n for _, g in GUARDED for n in g.needles}, *secrets.CASE_TWINS, "PASSWORD",
              "Secret", "API", "Auth", "token", "Key", "client", "passwd", "://", "@", ":", "=",
              " ", "/", "\\", "~", "-", "_",
              "hunter22", "AB12cd34EF56gh78", "2026-12-01 10:00:00", "(x:1:2)", "\n  "]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
              for _ in range(6000)]
    for text in texts:
        assert bool(guarded.search(text)) == bool(guarded.pattern.search(text)), (what, text)
    # The needles are real: a text holding none of them is skipped.
    if guarded.needles:
        assert not guarded.may_match("nothing to see")


def _replace_loop(text: str, safe: set[str]) -> str:
    """The gate's masking before: one ``str.replace`` per value, longest first."""
    for value in sorted(safe, key=len, reverse=True):
        text = text.replace(value, "#")
    return text


def test_masking_in_one_pass_masks_what_replacing_each_id_did() -> None:
    rec = "rec_" + "0123456789abcdef" * 2
    digest = "ab" * 32
    commit = "c0ffee" * 6 + "beef"
    safe = {rec, digest, commit, "odd shape"}
    cases = [
        f"<a id=\"{rec}\">{rec}</a> {digest} {commit}.",
        f"{digest}{digest}", f"f{digest}0", f"{commit}{digest}", f"x{rec}ff{rec}",
        f"rec_{digest}", f"{rec[:-1]}", f"{digest[:40]}{commit}", "odd shape, odd shapes",
        f"{commit[:20]}{commit}{commit[20:]}", f"rec_{commit}", f"\u2192{digest}\u2192",
    ]
    for text in cases:
        assert mask(text, safe) == _replace_loop(text, safe), text
    rng = random.Random(18)
    for _ in range(3000):
        # One value per length (values of one length that overlap are masked leftmost first,
        # where the loop's order was the set's, i.e. arbitrary).
        values = {"".join(rng.choice("ab") for _ in range(n)) for n in (2, 3, 5)}
        values.add("rec_" + "".join(rng.choice("ab") for _ in range(32)))
        alphabet = ["a", "b", "c", "_", "#", " ", "rec_", *values]
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        assert mask(text, values) == _replace_loop(text, values), (text, values)


@pytest.fixture(scope="module")
def board_page() -> tuple[Story, str, dict[str, object]]:
    f = fixed_campaign()
    rendered = render(f.c.ledger, "board", "html")
    return rendered.story, rendered.text, f.view()


@pytest.mark.parametrize("name", sorted(FOUND_IN_A_PAGE))
def test_a_secret_added_to_the_page_is_found_in_every_disguise(
        name: str, board_page: tuple[Story, str, dict[str, object]]) -> None:
    """Not quoted by the story (as if the template or a number put it there): found by the
    scan of the whole page, at its end, inside a paragraph, and right beside an allow-listed
    id (which is masked before the scan)."""
    story, text, view = board_page
    planted = FOUND_IN_A_PAGE[name]
    some_id = next(v for v in sorted(story.safe) if v.startswith("rec_") and v in text)
    at = text.index(some_id) + len(some_id)
    for page in (text.replace("</main>", f"<p>{planted}</p></main>"),
                 text[:at] + planted + text[at:], text[:at] + " " + planted + " " + text[at:]):
        found = redaction.findings(story, page, view)  # type: ignore[arg-type]
        assert found and all(f["record_id"] is None and f["field"] == "output"
                             for f in found), (name, found)
        assert planted not in str(found)


def test_the_clean_page_passes(board_page: tuple[Story, str, dict[str, object]]) -> None:
    story, text, view = board_page
    assert redaction.findings(story, text, view) == []  # type: ignore[arg-type]


def test_a_value_quoted_twice_is_read_once_and_reported_for_each_record() -> None:
    story = Story({}, quoted=[Quoted("rec_a", "title", SECRETS["dsn_password"]),
                              Quoted("rec_b", "reason", SECRETS["dsn_password"]),
                              Quoted("rec_c", "title", "an ordinary title")])
    view = {"campaign": {"versions": []}, "hypotheses": {}, "packets": {}, "decisions": {},
            "findings": {}, "proposals": {}}
    found = redaction.findings(story, "<p>page</p>", view)
    assert [(f["record_id"], f["field"]) for f in found] == [("rec_a", "title"),
                                                             ("rec_b", "reason")]


def test_the_listed_private_contract_fields_are_the_schemas() -> None:
    from loopx.governance.records import ResearchContractV0

    assert list(redaction.CONTRACT_PRIVATE) == redaction.private_fields(ResearchContractV0)


def test_a_short_plain_text_holds_nothing_any_reading_finds(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """What ``PLAIN`` lets pass unread: every such text, read the full way, has no finding
    (with the roots of a workspace and a home); one character longer, it might."""
    roots = ("/home/alice", "/tmp/ws", "C:\\Users\\bob")
    rng = random.Random(18)
    chars = "AKIAghpskxoxbLhvbWUvYWJj0123456789_ .-" + string.ascii_letters
    texts = ["", "hyp00123", "t000123", "ex-12", "todo 12", "L2hvbWUvYWJ", "a b c d e f",
             "0123456789a", "deadbeefcaf", "AKIA0123456", "-----BEGIN", "xoxb-123456",
             *("".join(rng.choice(chars) for _ in range(rng.randint(1, 11)))
               for _ in range(4000))]
    monkeypatch.setattr(redaction, "PLAIN", re.compile(r"(?!)"))  # read every text in full
    for text in texts:
        assert len(text) <= 11 and redaction.problems_in(text, roots) == [], text
    # The bound is tight enough to matter: twelve plain characters can hide a path.
    assert redaction.problems_in("L2hvbWUvYWJj") != []
