"""What a grounding ref names, normalised, and when two refs name the same material.

The novelty gate compares an audit's checked material with the proposer's ideation material
(:mod:`loopx.research.novelty`). An auditor who wants a novelty claim passed would re-spell the
proposer's source until it no longer matched, so refs are compared by a normalised name that
drops what does not change the source: the ref's declared ``kind``; case, Unicode compatibility
forms and invisible characters; surrounding quotes, brackets, whitespace and trailing
punctuation; percent-encoding (decoded until stable); a URL's scheme, ``www.``/``m.``, user,
default port, fragment, tracking parameters (``utm_*``, ``fbclid``...), dot segments, doubled
and trailing slashes and ``index.html``; a path's ``./`` and backslashes; an arXiv id's version
and ``.pdf`` and how it is written (``arXiv:2101.00001v2``, ``https://arxiv.org/pdf/2101.00001``
and a mirror page ending in the id are one paper); a DOI's resolver (``doi:``, ``doi.org/``, or
a publisher URL carrying it); and in any other text, everything but letters and digits.

Two refs name the same material when both carry the same ``sha256``, or when their names are
equal and one's remaining query parameters are a subset of the other's (a bogus ``?x=1`` is no
disguise, while two ``forum?id=`` pages stay two). A DOI also names the same material as the
DOI extended by ``/...`` (a publisher's ``/abstract`` page), and a path as any path it ends
(``docs/p.pdf`` and ``/home/u/docs/p.pdf``).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from loopx.kernel.lazy_re import lazy_compile
from loopx.kernel.plain import Frozen

_ARXIV_ID = r"(\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[a-z]{2})?/\d{7})"
_ARXIV_END = r"(?:v\d+)?(?:\.pdf)?/?(?:[?#]|$)"
_ARXIV = lazy_compile(r"(?:^|[^a-z0-9])arxiv(?:\.org/(?:abs|pdf|html|format)/|\s*[:/]\s*|\s+)"
                      + _ARXIV_ID + _ARXIV_END)
# A mirror or reader page whose last path segment is a new-style id (alphaxiv, ar5iv,
# huggingface papers): as strong a sign of an arXiv paper as the arxiv.org URL itself.
_ARXIV_TAIL = lazy_compile(r"/(\d{4}\.\d{4,5})" + _ARXIV_END)
_BARE_ARXIV = lazy_compile(r"^" + _ARXIV_ID + r"(?:v\d+)?$")
_DOI = lazy_compile(r"(?:^|[/=]|doi\s*:\s*)(10\.\d{4,9}/[^\s?#&]+)")
_SCHEME = lazy_compile(r"^([a-z][a-z0-9+.\-]*):(//)?")
_HOST_FIRST = lazy_compile(r"^[a-z0-9\-]+(?:\.[a-z0-9\-]+)+(?::\d+)?(?:[/?#]|$)")
_TRACKING = lazy_compile(r"^(utm_.*|fbclid|gclid|dclid|msclkid|mc_cid|mc_eid|igshid|_hsenc|_hsmi|"
                         r"ref_src|ref_url|spm|share|si)$")
_INDEX = lazy_compile(r"/(?:index|default)\.(?:html?|php|aspx?)$")
_EMPTY = ("text:", "path:", "web:")


class RefKey(Frozen):
    """A ref's normalised identity: the source it names, the query parameters that may still
    tell two pages of it apart, and the content digest it carries, if any."""

    _fields = ("name", "params", "sha256")
    name: str
    params: frozenset[tuple[str, str]]
    sha256: str | None

    def __init__(self, name: str, params: frozenset[tuple[str, str]] = frozenset(),
                 sha256: str | None = None) -> None:
        self.__dict__.update(name=name, params=params, sha256=sha256)

    def same_material(self, other: RefKey) -> bool:
        """Whether the two refs name the same material (see the module's docstring)."""
        if self.sha256 is not None and self.sha256 == other.sha256:
            return True
        if self.name in _EMPTY or other.name in _EMPTY:
            return False  # a ref that names nothing recognisable matches nothing by name
        if self.name == other.name:
            return self.params <= other.params or other.params <= self.params
        a, b = sorted((self.name, other.name), key=len)
        if a.startswith("doi:") and b.startswith(a + "/"):
            return True
        return a.startswith("path:") and b.startswith("path:") and b.endswith("/" + a[5:])


def _clean(text: str) -> str:
    # NFKC folds full-width and compatibility forms; format characters (zero-width spaces and
    # joiners, BOM, soft hyphen) are invisible, so they are dropped.
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _decoded(text: str) -> str:
    # Decoded until stable, so double encoding (%2541 -> %41 -> a) is no disguise either.
    for _ in range(4):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return _clean(text)


def _path(path: str) -> str:
    path = re.sub(r"/+", "/", path.replace("\\", "/"))
    path = _INDEX.sub("", posixpath.normpath(path) if path else "")
    return "" if path in (".", "/") else path.rstrip("/")


def _web(text: str) -> tuple[str, frozenset[tuple[str, str]]]:
    parts = urlsplit(text if _SCHEME.match(text) else "//" + text)
    host = (parts.hostname or "").rstrip(".")
    for prefix in ("www.", "m."):
        host = host.removeprefix(prefix)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port not in (None, 80, 443):
        host += f":{port}"
    params = frozenset((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not _TRACKING.match(k))
    return f"web:{host}{_path(parts.path)}", params


def ref_key(ref: Mapping[str, Any]) -> RefKey:
    """The normalised identity of one grounding ref (``kind`` is ignored: it is the writer's
    word, and changing it must not make another source of the same one)."""
    text = " ".join(_decoded(str(ref.get("ref", ""))).split())
    text = re.sub(r"^(?:\./)+", "", text.lstrip("\"'`<([{ ").rstrip("\"'`>)]} .,;:"))
    digest = ref.get("sha256") or None
    arxiv = _ARXIV.search(text) or _ARXIV_TAIL.search(text) or _BARE_ARXIV.match(text)
    if arxiv:
        return RefKey(f"arxiv:{arxiv.group(1)}", sha256=digest)
    doi = _DOI.search(text)
    if doi:
        return RefKey(f"doi:{doi.group(1).rstrip('.,;/')}", sha256=digest)
    scheme = _SCHEME.match(text)
    if scheme and scheme.group(1) == "file":
        return RefKey(f"path:{_path(text[scheme.end():])}", sha256=digest)
    if (scheme and scheme.group(2)) or _HOST_FIRST.match(text):
        name, params = _web(text)
        return RefKey(name, params, digest)
    if "/" in text or "\\" in text:
        return RefKey(f"path:{_path(text)}", sha256=digest)
    # Anything else (a title, a record id, a note): its letters and digits only, so
    # punctuation, hyphens and spacing are no disguise.
    return RefKey("text:" + "".join(c for c in text if c.isalnum()), sha256=digest)


def covered(refs: Iterable[Mapping[str, Any]], ref: Mapping[str, Any]) -> bool:
    """Whether any of ``refs`` names the same material as ``ref``."""
    key = ref_key(ref)
    return any(ref_key(r).same_material(key) for r in refs)
