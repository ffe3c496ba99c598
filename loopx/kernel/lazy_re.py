"""Regular expressions compiled on first use: a module that defines many patterns (the secret
and reference readers) costs nothing to import for a command that never matches one."""

from __future__ import annotations

import re
from typing import Any

# What a compiled pattern offers; copied onto the lazy pattern when it compiles, so every later
# use is a plain attribute lookup.
_ATTRIBUTES = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer",
               "pattern", "flags", "groups", "groupindex", "scanner")


class LazyPattern:
    """A ``re.Pattern`` that compiles itself the first time one of its attributes is used."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name not in _ATTRIBUTES:
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._source[0]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile``, deferred to the pattern's first use (typed as the pattern it becomes)."""
    return LazyPattern(pattern, flags)  # type: ignore[return-value]
