"""The import direction of loopx: one linear order of groups, lowest first.

A module may import modules of its own group or of a lower group, never of a higher
one, and no modules may import each other, directly or through others (no import
circles). Deferred imports (inside functions, under ``if TYPE_CHECKING:``) count: they
still couple the modules. ``tests/test_layers.py`` reads every import and holds this.

Each group lists module names; a name covers that module and every module below it
(``loopx.kernel`` covers ``loopx.kernel.store.file``). Every loopx module must fall in
exactly one group, so a new top-level module forces a decision here.

The ``base`` group is the exception: its names cover only themselves (``loopx`` would
otherwise cover everything). Its modules are the top package, which holds only
``__version__``, and this table. Everyone may import them and they import nothing from
loopx, so they can never close a circle.
"""

from __future__ import annotations

BASE = "base"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (BASE, ("loopx", "loopx.layers")),
    # The log itself: canonical JSON, records, kinds, stores, append, fold, verify.
    ("kernel", ("loopx.kernel",)),
    # The domains, each over the kernel and the domains before it.
    ("work", ("loopx.work",)),
    ("governance", ("loopx.governance",)),
    ("research", ("loopx.research",)),
    ("narrator", ("loopx.narrator",)),
    # The composition root: installs the domains into the kernel.
    ("assembly", ("loopx.workspace", "loopx.domains")),
    # Adapters, outermost last.
    ("tools", ("loopx.tools",)),
    ("runner", ("loopx.runner",)),
    ("mcp", ("loopx.mcp",)),
    ("demo", ("loopx.demo",)),
    ("cli", ("loopx.cli",)),
    ("testing", ("loopx.testing",)),
    ("main", ("loopx.__main__",)),
)

GROUPS: tuple[str, ...] = tuple(name for name, _ in LAYERS)


def _covers(name: str, module: str, group: str) -> bool:
    if group == BASE:
        return module == name
    return module == name or module.startswith(name + ".")


def groups_of(module: str) -> list[str]:
    """Every group whose names cover ``module``; exactly one for a placed module."""
    return [group for group, names in LAYERS
            if any(_covers(name, module, group) for name in names)]


def group_of(module: str) -> str | None:
    """The group of ``module``, or None when no group or more than one covers it."""
    groups = groups_of(module)
    return groups[0] if len(groups) == 1 else None


def rank(group: str) -> int:
    """The position of ``group`` in the order, lowest first."""
    return GROUPS.index(group)
