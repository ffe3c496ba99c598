"""A workspace: the ``.loopx/`` directory beside a project, holding one campaign's log.

The modules, each named for what it holds: :mod:`~loopx.workspace.directory` (finding and
opening a workspace, its store and settings; every command loads it),
:mod:`~loopx.workspace.create` (``loopx init``, the genesis, profile batches),
:mod:`~loopx.workspace.agents_file` (the loopx section of ``AGENTS.md``),
:mod:`~loopx.workspace.store_copy` (``loopx store copy``) and :mod:`~loopx.workspace.files`
(the small files written beside the log). Their public names are re-exported here; those of
the modules that write load on first use, so that opening a workspace stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from loopx.workspace.directory import (
    ENV_WORKSPACE,
    FORMAT_VERSION,
    OWNER_AGENT,
    SUPPORTED_FORMATS,
    WORKSPACE_DIR,
    Workspace,
    find_workspace,
    migrate_workspace,
    store_url,
)

if TYPE_CHECKING:
    from loopx.workspace.agents_file import (
        AGENTS_BEGIN,
        AGENTS_END,
        AGENTS_FILE,
        agents_section,
        write_agents_section,
    )
    from loopx.workspace.create import (
        NOTHING_CREATED,
        bootstrap_log,
        init_workspace,
        join_workspace,
        pending_init,
        record_profiles,
    )
    from loopx.workspace.store_copy import copy_store

# Name -> the module that defines it, for the names loaded on first use.
_LAZY = {
    "AGENTS_BEGIN": "agents_file", "AGENTS_END": "agents_file", "AGENTS_FILE": "agents_file",
    "agents_section": "agents_file", "write_agents_section": "agents_file",
    "NOTHING_CREATED": "create", "bootstrap_log": "create", "init_workspace": "create",
    "join_workspace": "create", "pending_init": "create", "record_profiles": "create",
    "copy_store": "store_copy",
}

__all__ = ["AGENTS_BEGIN", "AGENTS_END", "AGENTS_FILE", "ENV_WORKSPACE", "FORMAT_VERSION",
           "NOTHING_CREATED", "OWNER_AGENT", "SUPPORTED_FORMATS", "WORKSPACE_DIR", "Workspace",
           "agents_section", "bootstrap_log", "copy_store", "find_workspace", "init_workspace",
           "join_workspace", "migrate_workspace", "pending_init", "record_profiles", "store_url",
           "write_agents_section"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'loopx.workspace' has no attribute {name!r}")
    return getattr(importlib.import_module(f"loopx.workspace.{module}"), name)
