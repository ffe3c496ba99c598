"""Shared fixtures: store backends for the conformance suite, workspaces, a bounded hypothesis."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
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


PG_ENV = "LOOPX_TEST_PG"
REQUIRE_PG_ENV = "LOOPX_REQUIRE_PG"
PG_HOW = (f"PostgreSQL tests need a server: set {PG_ENV}=postgresql://user:password@host/db "
          "(an empty database the tests may create tables in), or run .ci/run")


def _pg_unavailable(why: str) -> None:
    """Skip (a developer machine without a server) or, under CI, fail."""
    if os.environ.get(REQUIRE_PG_ENV) == "1":
        pytest.fail(f"{why}, and {REQUIRE_PG_ENV}=1 requires them to run", pytrace=False)
    pytest.skip(f"{why}: {PG_HOW}")


_pg_checked: list[str] = []


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The ``LOOPX_TEST_PG`` server's URL with a fresh log name, deleted afterwards (skips, or
    fails under CI, when there is none or it does not answer)."""
    dsn = os.environ.get(PG_ENV)
    if not dsn:
        _pg_unavailable(f"{PG_ENV} is not set")
    if not _pg_checked:
        try:
            import psycopg

            psycopg.connect(dsn, connect_timeout=5).close()
        except ImportError:
            _pg_unavailable("psycopg is not installed (pip install 'loopx[postgres]')")
        except Exception as exc:  # noqa: BLE001  (any failure to connect means no server)
            from loopx.kernel.store.location import redact

            _pg_unavailable(f"the server in {PG_ENV} does not answer ({redact(str(exc))})")
        _pg_checked.append(dsn)
    sep = "&" if "?" in dsn else "?"
    url = f"{dsn}{sep}log=t{uuid.uuid4().hex[:16]}"
    yield url
    from loopx.kernel.store.postgres import PostgresStore

    with PostgresStore(url) as store:
        store.drop()


def _pg_backend(url: str, made: list[Store]) -> Backend:
    from loopx.kernel.store.postgres import PostgresStore

    def make(**options: object) -> Store:
        store = PostgresStore(url, **options)  # type: ignore[arg-type]
        store.create()
        made.append(store)
        return store

    def reopen(store: Store) -> Store:
        other = PostgresStore(url)
        made.append(other)
        return other

    return Backend("postgres", make, reopen)


@pytest.fixture(params=["file", "memory", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Every store backend, for the conformance suite."""
    if request.param == "file":
        yield _file_backend(tmp_path)
    elif request.param == "memory":
        yield _memory_backend()
    else:
        made: list[Store] = []
        yield _pg_backend(request.getfixturevalue("pg_url"), made)
        for store in made:
            store.close()
        if made:
            from loopx.kernel.store.postgres import PostgresStore

            assert isinstance(made[0], PostgresStore)
            made[0].drop()
            made[0].close()
