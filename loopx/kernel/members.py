"""The members of a JSON array or object, each with the dotted path a scan reports it under."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def members(value: Any, path: str) -> Iterator[tuple[str, str | None, Any]]:
    """(path, key, item) for each member of ``value``: an array's items (key None) or an
    object's entries (key as text); nothing for any other value. ``path`` is ``value``'s own
    path, ``""`` for the document itself."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield (f"{path}.{i}" if path else str(i)), None, item
    elif isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            yield (f"{path}.{name}" if path else name), name, item
