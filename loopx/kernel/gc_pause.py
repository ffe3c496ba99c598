"""Pausing Python's cyclic garbage collector around a read that builds many objects.

Loading a state and projecting it builds millions of dicts and lists, none of them in a
cycle; each full collection on the way walks every one of them again, which costs a read
command more than the projection itself (issue 18). Reference counting still frees
everything as usual while the collector is paused.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the body with the cyclic collector off; restore it as it was, even on error."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
