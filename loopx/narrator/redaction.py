"""The redaction gate: nothing the narrator renders is written if it holds a secret-shaped value,
a private path, a raw log excerpt or a private field. It fails closed and has no override.

Every text is checked in every reading :mod:`loopx.kernel.deobfuscate` gives it (normalised, decoded,
re-joined), with the same secret patterns governance kinds refuse at write.

Two passes. Every free text the story quotes is scanned with the record and field it came from,
so each finding names them. Then the rendered output itself is scanned, with the typed values
the story allow-listed (record ids, sha256 digests, git commit ids: checked against their type
when the story was built, never recognised by pattern) masked out, and searched for the values
of private fields and private records, which the story never reads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx.kernel.deobfuscate import Memo, read
from loopx.kernel.errors import RedactionBlocked
from loopx.kernel.secrets import found_how, named_patterns, plain_kind, secret_kind_in
from loopx.narrator.mask import mask
from loopx.narrator.story import Story

if TYPE_CHECKING:
    from pydantic import BaseModel

View = dict[str, Any]

# Each row names the needles every match holds (``named_patterns``): a text without one of them
# is not searched for that row, which keeps a scan of a large page to a few passes.
PRIVATE_PATHS = named_patterns(
    ("a home directory path",
     r"(?<![\w.\-])(?:/home|/Users|/root|/var/folders|/private/var)(?:/|\b)",
     ("/home", "/Users", "/root", "/var/folders", "/private/var")),
    ("a home directory path", r"(?i)\b[A-Z]:\\(?:Users|Documents and Settings)\\", (":\\",)),
    ("a home directory path", r"(?<![\w/.\-])~/", ("~/",)),
    # Any drive, either slash; not a URL scheme (a letter before the colon).
    ("a Windows drive path", r"(?<![A-Za-z0-9+.\-])[A-Za-z]:(?:\\|/(?!/))", (":\\", ":/")),
    ("a network (UNC) path", r"(?<!\\)\\\\[\w.$\-]+\\[\w.$\-]", ("\\\\",)),
    ("a temporary directory path", r"(?<![\w.\-])/(?:var/)?tmp/", ("/tmp/",)),
    ("a workspace-internal path", r"(?<![\w\-])\.loopx(?:/|\\)", (".loopx/", ".loopx\\")),
)
LOG_EXCERPTS = named_patterns(
    ("a raw log excerpt (a traceback)", r"Traceback \(most recent call last\)",
     ("Traceback (most recent call last)",)),
    ("a raw log excerpt (a stack frame)", r'File "[^"\n]+", line \d+', ('File "',)),
    ("a raw log excerpt (a stack frame)", r"(?m)^\s+at \S+ \(\S+:\d+:\d+\)", ("at ",)),
    ("a raw log excerpt (a log record)", r'"(?:prev_hash|batch_end|capability)"\s*:',
     ('"prev_hash"', '"batch_end"', '"capability"')),
    ("a raw log excerpt (a log line)",
     (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}\S*\]?\s+\[?"
      r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\b"),
     ("TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "ERROR", "CRITICAL", "FATAL")),
)
# The research contract's fields marked private in its schema (``private_fields`` of
# ResearchContractV0, which a test holds equal): listed so rendering loads no record models.
CONTRACT_PRIVATE = ("evaluation.dev.location", "evaluation.heldout.location")
# A private value shorter than this is too likely to occur in ordinary words to search for;
# paths are searched from four characters.
MIN_PRIVATE = 10


# A text this short made only of these characters holds nothing any scan finds, in any reading:
# no decoding applies (hex needs 16 digits, base64 12 characters, a spaced run 15, an escape
# "&", "%" or a backslash), every secret pattern needs 13 characters or an "=", ":" or "@",
# every path and log pattern a character outside the set, and a private root is an absolute
# path. tests/test_redaction_fast_path.py checks the claim on every such text it can make.
PLAIN = re.compile(r"[A-Za-z0-9_ .\-]{0,11}")


class Scans:
    """What the scans found in each reading, kept across the :func:`problems_in` calls of one
    check (the page and its unescaped copy share most of their readings, each half a MB):
    per reading text, the secret it looks like (or None), which of :data:`PATHS_AND_LOGS`
    match, and whether it names one of ``roots`` (fixed for the check)."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        self.transforms: Memo = {}
        self.found: dict[str, tuple[str | None, tuple[bool, ...], bool]] = {}

    def of(self, text: str) -> tuple[str | None, tuple[bool, ...], bool]:
        """The scans of one reading's text (computed once per distinct text)."""
        got = self.found.get(text)
        if got is None:
            got = self.found[text] = (
                plain_kind(text), tuple(bool(p.search(text)) for _, p in PATHS_AND_LOGS),
                any(x in text for x in self.roots))
        return got


PATHS_AND_LOGS = PRIVATE_PATHS + LOG_EXCERPTS


def problems_in(text: str, roots: tuple[str, ...] = (), scans: Scans | None = None) -> list[str]:
    """Every reason ``text`` may not be published (empty: it may). ``scans`` (built with the
    same ``roots``) keeps each reading's scans for the next call: the same answers, once."""
    if PLAIN.fullmatch(text):
        return []  # an id, a short word or a number: see PLAIN
    if scans is None:
        scans = Scans(roots)
    found: list[str] = []
    readings = read(text, scans.transforms)
    results = [(r, scans.of(r.text)) for r in readings.readings]
    # The first reading that finds each thing names how it was found.
    what = secret_kind_in(readings, lambda text: scans.of(text)[0])
    if what:
        found.append(f"looks like {what}")
    for i, (what, _) in enumerate(PATHS_AND_LOGS):
        reading = next((r for r, (_, hits, _) in results if hits[i]), None)
        if reading is not None and found_how(what, reading) not in found:
            found.append(found_how(what, reading))
    root = next((r for r, (_, _, named) in results if named), None)
    if root is not None:
        found.append(found_how("a path inside this workspace or home", root))
    return found


def private_roots(workspace_root: Path | None) -> tuple[str, ...]:
    """Absolute paths whose mention is private: the workspace (as given and resolved) and the
    home directory."""
    roots = {str(Path.home())}
    if workspace_root is not None:
        roots |= {str(workspace_root), str(workspace_root.resolve())}
    return tuple(sorted(r for r in roots if len(r) > 4))


def private_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The dotted paths of a record model's fields marked ``private`` in their schema."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get("private"):
            out.append(path)
        for arg in _model_types(info.annotation):
            out += private_fields(arg, f"{path}.")
    return out


def _model_types(annotation: Any) -> Iterator[type[BaseModel]]:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _model_types(arg)


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def private_values(view: View) -> list[tuple[str, str, str]]:
    """(record id, field, value) for every private value the folded state holds: private fields
    of the contract, the text of records marked private (research plans too), and private
    kinds' free text."""
    out: list[tuple[str, str, str]] = []

    def add(record_id: str, name: str, value: Any) -> None:
        if isinstance(value, str):
            out.append((record_id, name, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                add(record_id, f"{name}.{key}", item)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                add(record_id, f"{name}.{i}", item)

    for version in view["campaign"]["versions"]:
        for path in CONTRACT_PRIVATE:
            add(version["record_id"], path, _get(version, path))
        if version.get("visibility") == "private":
            add(version["record_id"], "objective", version["objective"])
    for hid, h in view["hypotheses"].items():
        if h.get("visibility") == "private":
            for name in ("title", "mechanism_family"):
                add(h["record_id"], name, h[name])
            add(h["record_id"], "hypothesis_id", hid)
        for j in h["judgements"].values():
            if j.get("visibility") == "private":
                add(j["event_id"], "metric", j["metric"])
    for p in view["packets"].values():
        if p.get("visibility") == "private":
            add(p["packet_id"], "branch", p["branch"])
    for d in view["decisions"].values():
        if d.get("visibility") == "private":
            add(d["record_id"], "decision_id", d["decision_id"])
            add(d["record_id"], "note", d.get("note"))
        if d["approval"] is not None:
            add(d["approval"]["record_id"], "note", d["approval"]["note"])
    for f in view["findings"].values():
        if f.get("visibility") == "private":
            add(f["record_id"], "statement", f["statement"])
    for version in view.get("research_plans", {}).get("versions", ()):
        if version.get("visibility") == "private":
            for name in ("summary", "reason", "steps"):
                add(version["record_id"], name, version.get(name))
    for p in view["proposals"].values():
        for name in ("name", "reason", "arguments"):
            add(p["record_id"], name, p[name])
        if p["approval"] is not None:
            add(p["approval"]["record_id"], "note", p["approval"]["note"])
    return out


def _long_enough(value: str) -> bool:
    value = value.strip()
    return len(value) >= MIN_PRIVATE or (("/" in value or "\\" in value) and len(value) >= 4)


def findings(story: Story, output: str, view: View,
             roots: tuple[str, ...] = ()) -> list[dict[str, str | None]]:
    """Every redaction finding for ``output`` rendered from ``story`` (empty: publishable)."""
    found: list[dict[str, str | None]] = []
    seen: set[tuple[str | None, str, str]] = set()

    def report(record_id: str | None, name: str, problem: str) -> None:
        if (record_id, name, problem) not in seen:
            seen.add((record_id, name, problem))
            found.append({"record_id": record_id, "field": name, "problem": problem})

    # Each distinct value is read (decoded every way) once, however often the story quotes it,
    # and each distinct reading scanned once for the whole check.
    scans = Scans(roots)
    problems: dict[str, list[str]] = {}
    for quoted in story.quoted:
        if quoted.value not in problems:
            problems[quoted.value] = problems_in(quoted.value, roots, scans)
        for problem in problems[quoted.value]:
            report(quoted.record_id, quoted.field, problem)
    texts = {output, html.unescape(output)}
    shown: dict[str, bool] = {}
    for record_id, name, value in private_values(view):
        value = value.strip()
        if value not in shown:
            shown[value] = _long_enough(value) and any(value in text for text in texts)
        if shown[value]:
            report(record_id, name, "the value of a private field")
    if not found:
        # Whatever the template or the numbers added: scanned with typed ids masked (in one
        # pass per length of id, as replacing them one by one, longest first, would).
        for text in texts:
            for problem in problems_in(mask(text, story.safe), roots, scans):
                report(None, "output", problem)
    return found


def check(story: Story, output: str, view: View, roots: tuple[str, ...] = ()) -> None:
    """Raise :class:`RedactionBlocked` listing every finding, if there is any."""
    found = findings(story, output, view, roots)
    if found:
        raise RedactionBlocked(found)
