"""Shared fixtures: store backends for the conformance suite, workspaces, a bounded hypothesis."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from loopx.kernel.store import FileStore, MemoryStore, Store
from loopx.testing.store_conformance import Backend

settings.register_profile("ci", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=40, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _file_backend(tmp_path: Path) -> Backend:
    def make(**options: object) -> Store:
        store = FileStore(tmp_path / ".loopx", **options)  # type: ignore[arg-type]
        store.create()
        return store

    def reopen(store: Store) -> Store:
        assert isinstance(store, FileStore)
        return FileStore(store.dir)

    return Backend("file", make, reopen)


def _memory_backend() -> Backend:
    return Backend("memory", lambda **options: MemoryStore(**options), lambda store: store)  # type: ignore[arg-type]


@pytest.fixture(params=["file", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Every store backend, for the conformance suite."""
    return _file_backend(tmp_path) if request.param == "file" else _memory_backend()
