"""The PostgreSQL store beyond the conformance suite: the file store's exact bytes, credentials
kept out of every output, a lost acknowledgement never written twice, dropped connections
retried, a writer SIGKILLed mid-transaction, and waiting on NOTIFY. Needs LOOPX_TEST_PG."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopx.kernel.errors import RecordRejected, StorageError
from loopx.kernel.store import FileStore
from loopx.kernel.store.fs import FAULT_ENV
from loopx.kernel.store.location import parse_postgres, redact, without_password
from loopx.kernel.verify import verify_store
from loopx.testing.store_conformance import unsealed

TIMES = [f"2026-12-04T10:00:{s:02d}.000000Z" for s in range(60)]


@pytest.fixture
def pg(pg_url: str) -> Iterator[Any]:
    from loopx.kernel.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    store.create()
    yield store
    store.drop()
    store.close()


def _password(url: str) -> str:
    userinfo = url.split("://", 1)[1].rpartition("@")[0]
    return userinfo.partition(":")[2]


def test_the_stored_bytes_and_hashes_are_the_file_stores(pg: Any, tmp_path: Path) -> None:
    pg._clock = iter(TIMES).__next__  # one reading per append, the same for both stores
    file = FileStore(tmp_path / ".loopx", clock=iter(TIMES).__next__)
    file.create()
    batches = [[unsealed(n=1)], [unsealed(text="ünïcødé ✓", n=i) for i in range(3)],
               [unsealed(big=2**62, pad=3000)]]
    for batch in batches:
        assert pg.append(batch) == file.append(batch)
    pg_bytes = b"".join(data for _, _, data in pg.raw_segments())
    file_bytes = b"".join(data for _, _, data in file.raw_segments())
    assert pg_bytes == file_bytes
    assert (pg.head().seq, pg.head().hash) == (file.head().seq, file.head().hash)
    assert verify_store(pg, workspace_rules=False).ok


PLAIN_WRITER = """
import sys, uuid
from loopx.kernel.store.postgres import PostgresStore
from loopx.testing.store_conformance import unsealed
store = PostgresStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    batch = [{**unsealed(n=i, k=k), "record_id": f"rec_{uuid.uuid4().hex}"}
             for k in range(1 + i % 3)]
    written = store.append(batch)
    print("ACK", *[r["record_id"] for r in written], flush=True)
"""


def test_plain_batches_from_many_processes_are_sealed_into_one_chain(pg: Any,
                                                                      pg_url: str) -> None:
    """Batches without write checks are sealed by the server on the head it locks: four
    writer processes at once, every acknowledged record there once, batches whole, the chain
    the file store would have written (verify recomputes every hash)."""
    writers = [subprocess.Popen([sys.executable, "-c", PLAIN_WRITER, pg_url, "60"],
                                stdout=subprocess.PIPE, text=True) for _ in range(4)]
    acked: list[list[str]] = []
    for writer in writers:
        out, _ = writer.communicate(timeout=120)
        assert writer.returncode == 0
        acked += [line.split()[1:] for line in out.splitlines()]
    records = [r for r, _ in pg.read()]
    assert len(acked) == 240 and len(records) == sum(len(ids) for ids in acked) == 480
    by_id = {r["record_id"]: r for r in records}
    for ids in acked:  # each batch contiguous, with its batch_end
        seqs = [by_id[i]["seq"] for i in ids]
        assert seqs == list(range(seqs[0], seqs[0] + len(ids)))
        assert {by_id[i]["batch_end"] for i in ids} == {seqs[-1]}
    assert verify_store(pg, workspace_rules=False).ok


def test_a_database_from_before_server_sealing_gets_it_on_first_use(pg: Any,
                                                                   pg_url: str) -> None:
    import psycopg

    pg.append([unsealed(n=0)])
    with psycopg.connect(parse_postgres(pg_url).conninfo, autocommit=True) as admin:
        for (proc,) in admin.execute("SELECT oid::regprocedure::text FROM pg_proc "
                                     "WHERE proname = 'loopx_append_sealed_v2'").fetchall():
            admin.execute(f"DROP PROCEDURE {proc}")
    [record] = pg.append([unsealed(n=1)])  # installed again, then sealed by it
    assert record["seq"] == 2 and verify_store(pg, workspace_rules=False).ok


def test_a_batch_the_server_sealed_differently_is_not_acknowledged(
        pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import loopx.kernel.store.postgres_rows as rows
    from loopx.kernel.errors import IntegrityError

    real = rows.pieces

    def altered(encoded: Any) -> list[bytes]:  # as a server-side procedure out of step would
        cut = real(encoded)
        return [*cut[:-1], cut[-1].replace(b"}", b" }", 1)]

    monkeypatch.setattr(rows, "pieces", altered)
    with pytest.raises(IntegrityError, match="differently"):
        pg.append([unsealed(n=1)])


def test_locations_keep_the_password_out() -> None:
    url = "postgresql://loopx:s3cr%40t@db.internal:5433/loopx?sslmode=require&log=mnist"
    parsed = parse_postgres(url)
    assert parsed.log == "mnist" and "log=" not in parsed.conninfo
    assert without_password(url) == "postgresql://loopx@db.internal:5433/loopx?sslmode=require&log=mnist"
    assert "s3cr" not in parsed.display and "s3cr" not in redact(f"failed: {url}")
    assert without_password("postgresql://u@h/db?password=abcdef&log=x") == "postgresql://u@h/db?log=x"
    assert "abcdef" not in redact("host=h password=abcdef dbname=x")


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopx.cli", *args], cwd=cwd, text=True,
                          capture_output=True, env=env, timeout=120, check=False)


def test_init_records_the_store_without_its_password(pg_url: str, tmp_path: Path) -> None:
    password = _password(pg_url)
    assert password, "LOOPX_TEST_PG must carry a password for this test"
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_STORE", "PGPASSWORD")}
    init = _cli("init", "--store", pg_url, "--json", cwd=tmp_path, env=env)
    assert init.returncode == 0, init.stderr
    shown = json.loads(init.stdout)
    assert shown["store"] == without_password(pg_url)
    recorded = json.loads((tmp_path / ".loopx" / "workspace.json").read_text())["store"]
    assert recorded == without_password(pg_url)
    for path in (tmp_path / ".loopx").rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    # Without a password from anywhere: a storage error that names the store, not the secret.
    denied = _cli("verify", "--json", cwd=tmp_path, env={**env, "PGPASSFILE": "/nonexistent"})
    assert denied.returncode == 11, denied.stdout + denied.stderr
    error = json.loads(denied.stdout)
    assert error["error"] == "storage" and "PGPASSWORD" in error["hint"]
    assert password not in denied.stdout + denied.stderr
    # With it from LOOPX_STORE (or PGPASSWORD): every command opens the recorded log.
    for extra in ({"LOOPX_STORE": pg_url}, {"PGPASSWORD": password}):
        ok = _cli("verify", "--json", cwd=tmp_path, env={**env, **extra})
        assert ok.returncode == 0 and json.loads(ok.stdout)["head"]["seq"] == 6, ok.stderr
        log = _cli("log", "--json", cwd=tmp_path, env={**env, **extra})
        assert password not in log.stdout and len(log.stdout.splitlines()) == 6
    # LOOPX_STORE naming another log is refused rather than silently opening it.
    other = parse_postgres(pg_url)
    wrong = _cli("log", cwd=tmp_path,
                 env={**env, "LOOPX_STORE": f"{other.conninfo}?log=elsewhere"
                      if "?" not in other.conninfo else f"{other.conninfo}&log=elsewhere"})
    assert wrong.returncode == 3 and "elsewhere" in wrong.stderr
    assert password not in wrong.stderr


def test_a_postgresql_loopx_store_on_a_file_workspace_is_refused(tmp_path: Path) -> None:
    # No server needed: the refusal comes before any connection. Ignoring the variable would
    # leave an agent that means to share a PostgreSQL log writing to a log only this host reads.
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_STORE", "PGPASSWORD")}
    made = _cli("init", "--goal-id", "local", "--json", cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    token = tmp_path / "owner.token"
    token.write_text(json.loads(made.stdout)["owner_token"])
    segment = tmp_path / ".loopx" / "log" / "000000000001.jsonl"
    before = segment.read_bytes()
    url = "postgresql://loopx:hunter22@127.0.0.1:1/loopx?log=shared"
    shared = {**env, "LOOPX_STORE": url}
    for args in (["status", "--json"], ["todo", "add", "--agent-id", "owner", "--token-file",
                                        str(token), "--todo-id", "t-1", "--title", "work",
                                        "--role", "research_executor", "--action",
                                        "run_dev_eval", "--json"]):
        refused = _cli(*args, cwd=tmp_path, env=shared)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        error = json.loads(refused.stdout)
        assert error["error"] == "workspace"
        assert "LOOPX_STORE" in error["message"] and "file log" in error["message"]
        assert "hunter22" not in refused.stdout + refused.stderr
        assert "traceback" not in refused.stderr.lower()
    assert segment.read_bytes() == before  # nothing written
    # LOOPX_STORE=file names this log; and a copy to a directory may run with the variable
    # set (it is where `store copy --to URL` takes a password from).
    assert _cli("status", "--json", cwd=tmp_path, env={**env, "LOOPX_STORE": "file"}
                ).returncode == 0
    copied = _cli("store", "copy", "--to", str(tmp_path / "copy"), "--json", cwd=tmp_path,
                  env=shared)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert (tmp_path / "copy" / ".loopx" / "log" / "000000000001.jsonl").read_bytes() == before



def test_a_copy_to_a_mistyped_url_is_refused_and_makes_no_directory(tmp_path: Path) -> None:
    # No server needed. A target with another scheme was taken for a directory path: the
    # whole log went to ./postgresq:/... (or ./file:/...) and the command said it succeeded.
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_STORE", "PGPASSWORD")}
    assert _cli("init", "--goal-id", "local", cwd=tmp_path, env=env).returncode == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    for to in ("postgresq://loopx:hunter22@db/loopx?log=x", "file:///srv/copy"):
        refused = _cli("store", "copy", "--to", to, "--json", cwd=tmp_path, env=env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        error = json.loads(refused.stdout)
        assert error["error"] == "usage" and "not a postgresql:// one" in error["message"]
        assert "hunter22" not in refused.stdout + refused.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_unreachable_server_is_a_storage_error_without_credentials() -> None:
    from loopx.kernel.store.postgres import PostgresStore

    store = PostgresStore("postgresql://loopx:hunter22@127.0.0.1:1/loopx?log=x",
                          retry_seconds=0.3, connect_timeout=1)
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        store.append([unsealed()])
    assert time.monotonic() - started < 30  # bounded: it gave up
    shown = caught.value.message + json.dumps(caught.value.to_json())
    assert "hunter22" not in shown and "127.0.0.1" in shown
    assert "nothing was written" in caught.value.message
    assert "running" in (caught.value.hint or "")


def _connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every connection attempt from here on (the URLs tried)."""
    import psycopg

    attempts: list[str] = []
    real = psycopg.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    return attempts


@pytest.mark.parametrize(("query", "problem"), [
    ("sslmode=bogus", 'invalid sslmode value: "bogus"'),
    ("target_session_attrs=sometimes", "invalid target_session_attrs value"),
    ("nosuch=1", 'invalid URI query parameter: "nosuch"'),
    ("port=1,2", "could not match 2 port numbers to 1 hosts"),
])
def test_a_url_libpq_refuses_fails_at_once_naming_the_problem(
        query: str, problem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from loopx.kernel.store.postgres import PostgresStore

    attempts = _connects(monkeypatch)
    # No server is needed: libpq refuses these before trying any host. Before, a refused value
    # was taken for an unreachable server and retried for retry_seconds.
    store = PostgresStore(f"postgresql://loopx:hunter22@127.0.0.1:1/loopx?{query}&log=x",
                          retry_seconds=600, connect_timeout=1)
    with pytest.raises(StorageError) as caught:
        store.append([unsealed()])
    assert len(attempts) <= 1  # no retry (a URL that does not parse is not even tried)
    error = caught.value
    assert problem in error.message and "nothing was written" in error.message
    assert error.errno_name == "22023" and "fix the store URL" in (error.hint or "")
    assert "hunter22" not in error.message + json.dumps(error.to_json())


def test_a_password_libpq_quotes_is_not_shown() -> None:
    from loopx.kernel.store.postgres import PostgresStore

    # A stray '%' in the password: libpq's parse error quotes the token, password and all.
    store = PostgresStore("postgresql://loopx:Hunter%zz22@127.0.0.1:1/loopx?log=x",
                          retry_seconds=600)
    with pytest.raises(StorageError) as caught:
        store.append([unsealed()])
    shown = caught.value.message + json.dumps(caught.value.to_json())
    assert "invalid percent-encoded token" in shown and caught.value.errno_name == "22023"
    assert "Hunter" not in shown and "zz22" not in shown


@pytest.mark.parametrize("url", [
    "postgresql://loopx:Hunt@er22@127.0.0.1/loopx",  # libpq would connect to host er22@...
    "postgresql://loopx:Hunt/er22@127.0.0.1/loopx",  # ... to host loopx, port Hunt
    "postgresql://loopx:Hunt?er22@127.0.0.1/loopx",
])
def test_an_unescaped_character_in_the_password_is_refused_unseen(url: str) -> None:
    from loopx.kernel.errors import WorkspaceError

    with pytest.raises(WorkspaceError) as caught:
        parse_postgres(url)
    shown = caught.value.message + (caught.value.hint or "")
    assert "unescaped" in shown and "%40" in shown
    assert "Hunt" not in shown and "er22" not in shown
    assert parse_postgres("postgresql://loopx:Hunt%40er22@127.0.0.1/loopx?log=x").log == "x"
    assert "Hunt" not in redact("postgresql://loopx:Hunt@er22@127.0.0.1/loopx")


def test_init_with_a_url_libpq_refuses_creates_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOOPX_STORE"}
    url = "postgresql://loopx:hunter22@127.0.0.1:1/loopx?sslmode=bogus"
    init = _cli("init", "--store", url, "--json", cwd=tmp_path, env=env)
    assert init.returncode == 11, init.stdout + init.stderr
    error = json.loads(init.stdout)
    assert error["errno"] == "22023" and "sslmode" in error["message"]
    assert "no workspace was created" in error["message"] and "hunter22" not in init.stdout
    assert not (tmp_path / ".loopx").exists()
    bad = _cli("init", "--store", "postgresql://loopx:hun@ter22@127.0.0.1:1/loopx",
               cwd=tmp_path, env=env)
    assert bad.returncode == 3 and "unescaped" in bad.stderr and "ter22" not in bad.stderr
    assert "Traceback" not in bad.stderr + init.stderr
    assert not (tmp_path / ".loopx").exists()


def test_a_refused_login_is_told_by_what_the_server_said(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import urlsplit, urlunsplit

    from loopx.kernel.store.postgres import PostgresStore

    parts = urlsplit(pg_url)
    no_db = urlunsplit(parts._replace(path="/loopx_no_such_database"))
    no_role = urlunsplit(parts._replace(netloc=parts.netloc.replace(
        f"{parts.username}:", "loopx_no_such_role:", 1)))
    # A client refused at login gets words, not a SQLSTATE: a missing database used to be
    # reported as a wrong password.
    for url, state, hint in ((no_db, "3D000", "createdb"), (no_role, "28000", "PGPASSWORD")):
        attempts = _connects(monkeypatch)
        with pytest.raises(StorageError) as caught:
            PostgresStore(url, retry_seconds=600).head()
        assert (caught.value.errno_name, len(attempts)) == (state, 1)  # no retry
        assert hint in (caught.value.hint or "")


def test_a_server_out_of_connection_slots_is_waited_for_then_named(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from loopx.kernel.store.postgres import PostgresStore

    held: list[Any] = []
    try:
        while True:  # take every slot this user may have
            try:
                held.append(psycopg.connect(parse_postgres(pg_url).conninfo))
            except psycopg.OperationalError:
                break
            assert len(held) < 10_000
        attempts = _connects(monkeypatch)
        with pytest.raises(StorageError) as caught:
            PostgresStore(pg_url, retry_seconds=0.5).head()
    finally:
        for conn in held:
            conn.close()
    assert caught.value.errno_name == "53300" and len(attempts) > 1  # retried: slots free up
    assert "max_connections" in (caught.value.hint or "")


def test_a_silent_server_host_is_given_up_on_within_seconds(pg_url: str) -> None:
    from loopx.kernel.store.postgres import PostgresStore

    def options(store: Any) -> dict[str, str | None]:
        info = store._connection().pgconn.info
        return {o.keyword.decode(): o.val.decode() if o.val is not None else None for o in info}

    # A host that vanishes without closing its connections (power lost, a network split) must
    # not leave an append waiting on its socket for the kernel's 2 h keepalive: a peer silent
    # for about 25 s, or data unacknowledged for 30 s, ends the connection and the bounded
    # retry takes over. (Measured with a network namespace whose link was cut mid-run: the
    # append failed after about 30 s, where without these it still waited after 45 s.)
    store = PostgresStore(pg_url)
    try:
        used = options(store)
    finally:
        store.close()
    assert used["keepalives"] == "1" and used["keepalives_idle"] == "10"
    assert used["keepalives_interval"] == "5" and used["keepalives_count"] == "3"
    assert used["tcp_user_timeout"] == "30000" and used["application_name"] == "loopx"
    # What the URL sets is the user's to keep, connect_timeout included.
    sep = "&" if "?" in pg_url else "?"
    own = PostgresStore(f"{pg_url}{sep}keepalives_idle=42&tcp_user_timeout=5000"
                        "&connect_timeout=7&application_name=lane-7", connect_timeout=1)
    try:
        kept = options(own)
    finally:
        own.close()
    assert (kept["keepalives_idle"], kept["tcp_user_timeout"]) == ("42", "5000")
    assert (kept["connect_timeout"], kept["application_name"]) == ("7", "lane-7")
    assert kept["keepalives_count"] == "3"


def test_a_lost_acknowledgement_is_not_written_twice(pg: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pg.append([unsealed()])
    monkeypatch.setenv(FAULT_ENV, "lostack:pg-commit")
    batch = [unsealed(n=1), unsealed(n=2)]
    written = pg.append(batch)  # COMMIT went through, its answer was lost, the retry found it
    monkeypatch.delenv(FAULT_ENV)
    records = [r for r, _ in pg.read()]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[1:] == written
    assert [r["record_id"] for r in written] == [r["record_id"] for r in batch]


def test_a_connection_lost_before_commit_is_retried_once(pg: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def build(head: Any, now: str) -> list[dict[str, Any]]:
        calls.append(head.seq)
        if len(calls) == 2:
            monkeypatch.delenv(FAULT_ENV)  # the retry commits normally
        return [unsealed(attempt=len(calls))]

    monkeypatch.setenv(FAULT_ENV, "reset:pg-commit")
    [record] = pg.append(build)
    assert calls == [0, 0]  # the builder ran again on the same head: the first never committed
    assert [r["payload"]["detail"] for r, _ in pg.read()] == [{"attempt": 2}]
    assert record["seq"] == 1


def test_a_retried_batch_returns_the_stored_one_and_a_reused_id_is_refused(pg: Any) -> None:
    batch = [unsealed(n=1), unsealed(n=2)]
    first = pg.append(batch)
    again = pg.append(batch)  # a caller that never saw the acknowledgement sends it again
    assert again == first and pg.head().seq == 2
    with pytest.raises(RecordRejected, match="already in the log"):
        pg.append([unsealed(n=3), {**batch[0], "payload": {**batch[0]["payload"], "x": 1}}])
    assert pg.head().seq == 2


def test_an_overtaken_append_is_rebuilt_on_the_head_that_overtook_it(pg: Any,
                                                                     pg_url: str) -> None:
    from loopx.kernel.store.postgres import PostgresStore

    pg.append([unsealed(n=0)])  # pg now knows head 1
    with PostgresStore(pg_url) as other:
        other.append([unsealed(n=1)])  # the head moves to 2 behind pg's back
    heads: list[int] = []
    seen: list[list[int]] = []

    def build(head: Any, now: str) -> list[dict[str, Any]]:
        heads.append(head.seq)
        seen.append([r["payload"]["detail"]["n"] for r, _ in pg.read()])
        return [unsealed(n=2)]

    [record] = pg.append(build)
    # Built first on the head pg knew; refused with nothing written; rebuilt on the new head,
    # whose record the builder read from the lines the refusal brought back.
    assert heads == [1, 2] and seen == [[0], [0, 1]]
    assert record["seq"] == 3 and [r["seq"] for r, _ in pg.read()] == [1, 2, 3]
    assert verify_store(pg, workspace_rules=False).ok


def test_a_client_clock_estimate_that_is_off_is_corrected_not_stamped(pg: Any) -> None:
    from loopx.kernel.canonical import parse_ts

    pg.append([unsealed(n=0)])
    pg._offset += 3600.0  # this host's idea of the server clock is an hour fast
    # A plain batch is sealed by the server, with its own clock.
    [plain] = pg.append([unsealed(n=1)])
    # A built batch is sealed here: the server refuses the estimate, which is then corrected.
    [built] = pg.append(lambda head, now: [unsealed(n=2)])
    for record in (plain, built):
        drift = parse_ts(record["ts"]).timestamp() - parse_ts(pg.now()).timestamp()
        assert -5 < drift < 1  # stamped with the server's clock, not the estimate
    assert abs(pg._offset) < 60


def test_a_dropped_connection_is_reopened(pg: Any, pg_url: str) -> None:
    import psycopg

    pg.append([unsealed()])
    pid = pg._connection().info.backend_pid
    with psycopg.connect(parse_postgres(pg_url).conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))  # as a server restart does
    [record] = pg.append([unsealed()])
    assert record["seq"] == 2 and pg._connection().info.backend_pid != pid


WRITER = """
import sys, uuid
from loopx.kernel.store.postgres import PostgresStore
from loopx.testing.store_conformance import unsealed
store = PostgresStore(sys.argv[1])
store.append([{**unsealed(n=i, pad=2000), "record_id": f"rec_{uuid.uuid4().hex}"}
              for i in range(50)])
print("ACKED", flush=True)
"""


def test_a_writer_killed_mid_transaction_leaves_nothing(pg: Any, pg_url: str) -> None:
    acked = pg.append([unsealed(n=0)])
    proc = subprocess.Popen([sys.executable, "-c", WRITER, pg_url], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, FAULT_ENV: "pause:pg-commit"})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "FAULT pause:pg-commit"  # rows inserted, no COMMIT
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # The server rolls the dead client's transaction back and frees the log at once.
    [after] = pg.append([unsealed(n=1)])
    records = [r for r, _ in pg.read()]
    assert records == [*acked, after] and after["seq"] == 2
    assert verify_store(pg, workspace_rules=False).ok
    # A writer that runs to the end gets its whole 50-record batch in, after the survivor's.
    done = subprocess.run([sys.executable, "-c", WRITER, pg_url], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.strip() == "ACKED"
    assert pg.head().seq == 52 and verify_store(pg, workspace_rules=False).ok


def test_wait_wakes_on_notify_and_times_out(pg: Any, pg_url: str) -> None:
    from loopx.kernel.store.postgres import PostgresStore

    started = time.monotonic()
    assert pg.wait(0, timeout=0.3) is False
    assert time.monotonic() - started >= 0.25
    writer = PostgresStore(pg_url)
    timer = threading.Timer(0.3, lambda: writer.append([unsealed()]))
    timer.start()
    try:
        assert pg.wait(0, timeout=30) is True
    finally:
        timer.join()
        writer.close()
    assert pg.head().seq == 1
    assert pg.wait(0, timeout=0) is True  # already past: no waiting


PG_WAITER = """
import sys
from loopx.kernel.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1])
print("waiting", flush=True)
print(store.wait(store.head().seq, 120.0), store.moved().to if store.moved() else None)
"""


def test_a_waiter_on_a_log_that_moves_wakes_on_the_mark(pg: Any, pg_url: str) -> None:
    # The mark notifies the log's channel: a waiter that sends nothing while idle (a served
    # board's long poll, an idle lane runner) wakes, finds the log moved, and returns.
    pg.append([unsealed()])
    waiter = subprocess.Popen([sys.executable, "-c", PG_WAITER, pg_url],
                              stdout=subprocess.PIPE, text=True)
    assert waiter.stdout is not None and waiter.stdout.readline() == "waiting\n"
    time.sleep(0.5)  # listening: the wake must come from the mark's notification
    with pg.locked():
        pg.mark_moved("postgresql://loopx@db/loopx?log=elsewhere", pg.head())
    out, _ = waiter.communicate(timeout=60)  # well inside the waiter's own 120 s
    assert out.split() == ["False", "postgresql://loopx@db/loopx?log=elsewhere"]


def test_two_urls_reaching_one_log_are_told_apart_from_two_logs(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``identity()`` (what refuses a copy of a log onto itself) names the log whatever host
    name reached it; where the server hides ``pg_control_system()``, by the address and port
    it answers on."""
    import psycopg
    import psycopg.errors as pe

    from loopx.kernel.store.postgres import PostgresStore

    aliased = pg_url.replace("@127.0.0.1", "@localhost", 1)
    assert aliased != pg_url, "LOOPX_TEST_PG is expected on 127.0.0.1"
    other = pg_url.replace("log=", "log=o", 1)
    stores = [PostgresStore(url) for url in (pg_url, aliased, other)]
    try:
        plain = [store.identity() for store in stores]
        execute = psycopg.Connection.execute

        def hidden(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if "pg_control_system" in str(query):
                raise pe.InsufficientPrivilege("permission denied for function")
            return execute(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "execute", hidden)
        # (the address a name resolves to may differ, e.g. ::1: compare one URL twice here)
        again = PostgresStore(pg_url)
        stores.append(again)
        fallback = [store.identity() for store in (stores[0], again, stores[2])]
    finally:
        for store in stores:
            store.close()
    for ids in (plain, fallback):
        assert ids[0] == ids[1] != ids[2]
    assert plain != fallback


def test_store_copy_to_postgresql_and_back_keeps_every_byte(pg_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOOPX_STORE"}
    here, back = tmp_path / "here", tmp_path / "back"
    here.mkdir()
    assert _cli("init", "--goal-id", "moving", cwd=here, env=env).returncode == 0
    segment = (here / ".loopx" / "log" / "000000000001.jsonl").read_bytes()
    there = _cli("store", "copy", "--to", pg_url, "--use", "--json", cwd=here, env=env)
    assert there.returncode == 0, there.stdout + there.stderr
    moved = json.loads(there.stdout)
    password = _password(pg_url)
    assert password not in there.stdout and moved["to"] == without_password(pg_url)
    assert moved["records"] == 6 and moved["used"] is True
    anchor = f"{moved['head']['seq']}:{moved['head']['hash']}"
    # The workspace now reads PostgreSQL (the password from LOOPX_STORE) and verifies there.
    on_pg = {**env, "LOOPX_STORE": pg_url}
    checked = _cli("verify", "--expect", anchor, "--json", cwd=here, env=on_pg)
    assert checked.returncode == 0 and json.loads(checked.stdout)["anchor"]["ok"], checked.stdout
    assert json.loads((here / ".loopx" / "workspace.json").read_text())["store"] == \
        without_password(pg_url)
    # The workspace's log is now that log: copying (or moving) it onto itself is refused,
    # nothing written (moved onto itself, it would refuse every append).
    for use in ([], ["--use"]):
        again = _cli("store", "copy", "--to", pg_url, *use, "--json", cwd=here, env=on_pg)
        assert again.returncode == 3, again.stdout + again.stderr
        assert "is this workspace's own log" in json.loads(again.stdout)["message"]
    # And back to a file log: the same bytes as the original segment.
    home = _cli("store", "copy", "--to", str(back), "--json", cwd=here, env=on_pg)
    assert home.returncode == 0, home.stdout + home.stderr
    assert json.loads(home.stdout)["head"] == moved["head"]
    assert (back / ".loopx" / "log" / "000000000001.jsonl").read_bytes() == segment
    final = _cli("verify", "--expect", anchor, cwd=back, env=env)
    assert final.returncode == 0 and "anchor seq 6 matches" in final.stdout
    from loopx.kernel.store.postgres import PostgresStore

    PostgresStore(pg_url).drop()


FILE_WRITER = """
import sys
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import WorkspaceError
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace
# Opened once, before the move, as a long-running lane does; every todo goes through the
# checked path.
ledger = find_workspace(sys.argv[1]).ledger()
owner = Credentials(agent_id="owner", token=sys.argv[2])
for i in range(100_000):
    try:
        [todo] = add_todos(ledger, owner, [{"todo_id": f"t-{i}", "title": "live",
                                            "role": "research_executor",
                                            "action_kind": "run_dev_eval",
                                            "hypothesis_id": f"h-{i}"}])
    except WorkspaceError as exc:
        print("MOVED", exc.message, flush=True)
        break
    print("ACK", todo["record_id"], flush=True)
"""


def test_moving_a_live_file_log_orphans_no_acknowledged_record(pg_url: str,
                                                               tmp_path: Path) -> None:
    from loopx.kernel.store.postgres import PostgresStore
    from loopx.workspace import copy_store, find_workspace

    made = _cli("init", "--goal-id", "live", "--json", cwd=tmp_path,
                env={k: v for k, v in os.environ.items() if k != "LOOPX_STORE"})
    assert made.returncode == 0, made.stderr
    writer = subprocess.Popen([sys.executable, "-c", FILE_WRITER, str(tmp_path),
                               json.loads(made.stdout)["owner_token"]],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acked = [writer.stdout.readline().split()[1] for _ in range(50)]  # it is writing
    try:
        moved = copy_store(find_workspace(tmp_path), pg_url, use=True)
        # What it printed before the switch may still be in the pipe; after the switch its
        # next append must be refused (a few thousand more would mean it never is).
        lines = [writer.stdout.readline().strip() for _ in range(5_000)]
    finally:
        writer.kill()
        writer.wait(timeout=60)
    refused = next((i for i, line in enumerate(lines) if not line.startswith("ACK ")), None)
    assert refused is not None, "the writer went on writing to the file log after the switch"
    acked += [line.split()[1] for line in lines[:refused]]
    # The writer went on until the switch, then was refused: none of its acknowledged records
    # stayed behind in the file log, where nobody reads any more.
    assert lines[refused].startswith("MOVED ") and "moved to postgresql://" in lines[refused]
    assert _password(pg_url) not in "".join(lines)
    target = PostgresStore(pg_url)
    try:
        stored = {r["record_id"] for r, _ in target.read()}
        assert set(acked) <= stored and target.head().seq == moved["head"]["seq"]
    finally:
        target.drop()
        target.close()
    file_log = [r for r, _ in FileStore(tmp_path / ".loopx").read()]
    assert file_log[-1]["seq"] == moved["head"]["seq"]  # nothing after the copied head


def _moved_workspace(tmp_path: Path, goal: str) -> tuple[dict[str, str], str]:
    """A new file-log workspace (its environment without LOOPX_STORE, the owner's token)."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPX_STORE"}
    made = _cli("init", "--goal-id", goal, "--json", cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    return env, json.loads(made.stdout)["owner_token"]


def _killed_at(point: str, *args: str, cwd: Path, env: dict[str, str]) -> None:
    """Run ``loopx ARGS`` until it reaches the fault ``point``, then SIGKILL it there."""
    proc = subprocess.Popen([sys.executable, "-m", "loopx.cli", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**env, FAULT_ENV: f"pause:{point}"})
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == f"FAULT pause:{point}", proc.stderr
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_move_killed_between_mark_and_switch_loses_nothing_and_finishes_when_run_again(
        pg_url: str, tmp_path: Path) -> None:
    """kill -9 at the worst moment of ``store copy --use``: the old log is marked moved, the
    workspace not yet switched. A lane still writing to the file log must be refused from
    then on (were the switch first, it would go on being acknowledged where nobody reads), and
    the same command run again must finish the move."""
    from loopx.kernel.store.postgres import PostgresStore

    env, token = _moved_workspace(tmp_path, "halfway")
    writer = subprocess.Popen([sys.executable, "-c", FILE_WRITER, str(tmp_path), token],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acked = [writer.stdout.readline().split()[1] for _ in range(50)]
    target = PostgresStore(pg_url)
    try:
        _killed_at("move-marked", "store", "copy", "--to", pg_url, "--use", cwd=tmp_path,
                   env=env)
        lines = [writer.stdout.readline().strip() for _ in range(5_000)]
        writer.kill()
        writer.wait(timeout=60)
        refused = next((i for i, line in enumerate(lines) if not line.startswith("ACK ")), None)
        assert refused is not None, "the writer went on writing to the file log after the kill"
        assert lines[refused].startswith("MOVED ")
        acked += [line.split()[1] for line in lines[:refused]]
        assert set(acked) <= {r["record_id"] for r, _ in target.read()}
        # Not switched: every command still opens the file log, and every append is refused
        # with the way out, nothing written.
        settings = json.loads((tmp_path / ".loopx" / "workspace.json").read_text())
        assert settings["store"] == "file"
        head = FileStore(tmp_path / ".loopx").head()
        add = _cli("todo", "add", "--role", "research_executor", "--action", "run_dev_eval",
                   "--title", "after", "--todo-id", "after", "--hypothesis", "h-after",
                   "--agent-id", "owner", "--json", cwd=tmp_path,
                   env={**env, "LOOPX_TOKEN": token})
        assert add.returncode == 3, add.stdout + add.stderr
        assert "run `loopx store copy --to 'postgresql://" in json.loads(add.stdout)["hint"]
        assert FileStore(tmp_path / ".loopx").head() == head
        # The same command again: nothing left to copy, the switch made.
        done = _cli("store", "copy", "--to", pg_url, "--use", "--json", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        assert (result["records"], result["resumed_from"]) == (0, head.seq)
        assert result["head"] == {"seq": head.seq, "hash": head.hash} and result["used"]
        assert json.loads((tmp_path / ".loopx" / "workspace.json").read_text())["store"] == \
            without_password(pg_url)
        checked = _cli("verify", "--expect", f"{head.seq}:{head.hash}", "--json", cwd=tmp_path,
                       env={**env, "LOOPX_STORE": pg_url})
        assert checked.returncode == 0 and json.loads(checked.stdout)["anchor"]["ok"]
    finally:
        writer.kill()
        target.drop()
        target.close()


def test_a_shared_log_moved_on_one_host_refuses_the_others_until_they_follow(
        pg_url: str, tmp_path: Path) -> None:
    """Two hosts share one PostgreSQL log; host A moves it to another log with ``--use``. A
    lane on host B that opened the old log must be refused from then on (it cannot see A's
    workspace.json), with every record it was told is stored in the new log; host B then
    follows with the same command, and its writes land where A's do."""
    from loopx.kernel.store.postgres import PostgresStore

    new_url = pg_url.rsplit("log=", 1)[0] + f"log=n{pg_url.rsplit('log=', 1)[1]}"
    env = {k: v for k, v in os.environ.items() if k != "LOOPX_STORE"}
    env["PGPASSWORD"] = _password(pg_url)
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    host_a.mkdir()
    made = _cli("init", "--goal-id", "shared", "--store", pg_url, "--json", cwd=host_a,
                env=env)
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["owner_token"]
    shutil.copytree(host_a / ".loopx", host_b / ".loopx")  # as docs/store.md says
    writer = subprocess.Popen([sys.executable, "-c", FILE_WRITER, str(host_b), token],
                              stdout=subprocess.PIPE, text=True, env=env)
    assert writer.stdout is not None
    acked = [writer.stdout.readline().split()[1] for _ in range(30)]  # B is writing
    old, new = PostgresStore(pg_url), PostgresStore(new_url)
    try:
        there = _cli("store", "copy", "--to", new_url, "--use", "--json", cwd=host_a, env=env)
        assert there.returncode == 0, there.stdout + there.stderr
        moved = json.loads(there.stdout)
        lines = [writer.stdout.readline().strip() for _ in range(5_000)]
        writer.kill()
        writer.wait(timeout=60)
        refused = next((i for i, line in enumerate(lines) if not line.startswith("ACK ")), None)
        assert refused is not None, "host B went on writing to the old log after the move"
        assert lines[refused].startswith(f"MOVED this log moved to {without_password(new_url)}")
        acked += [line.split()[1] for line in lines[:refused]]
        assert set(acked) <= {r["record_id"] for r, _ in new.read()}
        assert old.head().seq == moved["head"]["seq"]  # nothing after the mark
        # Host A goes on in the new log; host B is refused, nothing written, told what to run.
        add = ["todo", "add", "--role", "research_executor", "--action", "run_dev_eval",
               "--title", "after", "--hypothesis", "h-after", "--agent-id", "owner", "--json"]
        on_a = _cli(*add, "--todo-id", "from-a", cwd=host_a, env={**env, "LOOPX_TOKEN": token})
        assert on_a.returncode == 0, on_a.stdout + on_a.stderr
        on_b = _cli(*add, "--todo-id", "from-b", cwd=host_b, env={**env, "LOOPX_TOKEN": token})
        assert on_b.returncode == 3, on_b.stdout + on_b.stderr
        assert f"--to '{without_password(new_url)}' --use" in json.loads(on_b.stdout)["hint"]
        assert old.head().seq == moved["head"]["seq"]
        # Following it anywhere else is refused, nothing written.
        astray = _cli("store", "copy", "--to", pg_url.replace("log=", "log=x"), "--use",
                      "--json", cwd=host_b, env=env)
        assert astray.returncode == 3, astray.stdout + astray.stderr
        assert json.loads(astray.stdout)["message"].startswith(
            f"this log moved to {without_password(new_url)}, not to")
        # Host B follows: nothing to copy (the new log is ahead of the mark), the switch made.
        follow = _cli("store", "copy", "--to", new_url, "--use", "--json", cwd=host_b, env=env)
        assert follow.returncode == 0, follow.stdout + follow.stderr
        followed = json.loads(follow.stdout)
        assert (followed["records"], followed["resumed_from"]) == (0, moved["head"]["seq"])
        assert followed["head"]["seq"] == moved["head"]["seq"] + 1  # A's todo
        on_b = _cli(*add, "--todo-id", "from-b", cwd=host_b, env={**env, "LOOPX_TOKEN": token})
        assert on_b.returncode == 0, on_b.stdout + on_b.stderr
        assert [r["payload"].get("todo_id") for r, _ in new.read()][-2:] == ["from-a", "from-b"]
        # Moving back into the log it left is refused up front, naming that log, not this one.
        back = _cli("store", "copy", "--to", pg_url, "--use", "--json", cwd=host_a, env=env)
        assert back.returncode == 3, back.stdout + back.stderr
        assert json.loads(back.stdout)["message"].startswith(
            f"{without_password(pg_url)} was itself moved away (to {without_password(new_url)}")
        assert old.head().seq == moved["head"]["seq"]
    finally:
        writer.kill()
        for store in (old, new):
            store.drop()
            store.close()


def test_a_second_host_joins_the_campaign_with_one_command(pg_url: str,
                                                           tmp_path: Path) -> None:
    """``init --store URL --join`` on a second host: settings only (no genesis, no owner
    token), the goal read from the log; its writes land in the shared log. Joining a log
    that does not exist, or as another goal, creates nothing."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPX_STORE"}
    env["PGPASSWORD"] = _password(pg_url)
    first, second, stray = tmp_path / "first", tmp_path / "second", tmp_path / "stray"
    for d in (first, second, stray):
        d.mkdir()
    made = _cli("init", "--goal-id", "joint", "--store", pg_url, "--contract-scope", "src",
                "--json", cwd=first, env=env)
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["owner_token"]
    missing = pg_url.replace("log=", "log=none")
    for args, why in (((missing,), "holds no loopx log"),
                      ((pg_url, "--goal-id", "other"), "is the log of goal 'joint', not 'other'")):
        refused = _cli("init", "--store", *args, "--join", "--json", cwd=stray, env=env)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert why in json.loads(refused.stdout)["message"]
        assert not (stray / ".loopx").exists()  # nothing created
    # --join makes no owner token, so it takes no file for one (and creates neither).
    token_file = _cli("init", "--store", pg_url, "--join", "--owner-token-file",
                      str(tmp_path / "owner.token"), "--json", cwd=stray, env=env)
    assert token_file.returncode == 2, token_file.stdout + token_file.stderr
    assert "--join makes no owner token" in json.loads(token_file.stdout)["message"]
    assert not (stray / ".loopx").exists() and not (tmp_path / "owner.token").exists()
    no_file = _cli("init", "--store", "file", "--join", "--json", cwd=stray, env=env)
    assert no_file.returncode == 2 and json.loads(no_file.stdout)["problems"][0]["field"] \
        == "store"
    assert not (stray / ".loopx").exists()
    joined = _cli("init", "--store", pg_url, "--join", "--json", cwd=second, env=env)
    assert joined.returncode == 0, joined.stdout + joined.stderr
    result = json.loads(joined.stdout)
    assert result == {"workspace": str(second), "goal_id": "joint", "owner_token": None,
                      "owner_token_file": None, "contract_scopes": ["."],
                      "store": json.loads(made.stdout)["store"], "joined": True, "resumed": False}
    assert _password(pg_url) not in joined.stdout + (second / ".loopx" / "workspace.json"
                                                     ).read_text()
    # The profiles in force, as files to edit, each noted as based on its record.
    in_force = {p["role"]: p for p in json.loads(
        _cli("lanes", "show", "--json", cwd=second, env=env).stdout)["profiles"]}
    lanes = second / ".loopx" / "lanes"
    assert sorted(f.stem for f in lanes.iterdir()) == sorted(in_force)
    assert json.loads((second / ".loopx" / "lanes-synced.json").read_text()) == {
        role: p["seq"] for role, p in in_force.items()}
    again = _cli("init", "--store", pg_url, "--join", "--json", cwd=second, env=env)
    assert again.returncode == 3  # already a workspace here
    add = ["todo", "add", "--role", "research_executor", "--action", "run_dev_eval", "--title",
           "t", "--hypothesis", "h", "--agent-id", "owner", "--json"]
    for where, todo in ((first, "from-first"), (second, "from-second")):
        done = _cli(*add, "--todo-id", todo, cwd=where, env={**env, "LOOPX_TOKEN": token})
        assert done.returncode == 0, done.stdout + done.stderr
    for where in (first, second):
        status = _cli("todo", "list", "--json", cwd=where, env=env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert {"from-first", "from-second"} <= {t["todo_id"] for t in
                                                 json.loads(status.stdout)["todos"]}
    # The first host's init now points a second init at --join.
    clash = _cli("init", "--goal-id", "joint", "--store", pg_url, "--json", cwd=stray, env=env)
    assert clash.returncode == 3 and "--join" in json.loads(clash.stdout)["hint"]

    # Profiles edited on both hosts. The first changes the executor's; the second, whose
    # executor file is now behind, edits the curator's: its apply would undo the first's change,
    # so it is refused; `lanes pull` brings the unedited file up and keeps the edit.
    owner = {**env, "LOOPX_TOKEN": token}

    def edit(where: Path, role: str, old: str, new: str) -> None:
        path = where / ".loopx" / "lanes" / f"{role}.toml"
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))

    edit(first, "research_executor", "max_attempts = 3", "max_attempts = 5")
    assert _cli("lanes", "apply", cwd=first, env=owner).returncode == 0
    edit(second, "research_curator", "lease_ttl_seconds = 600.0", "lease_ttl_seconds = 1200.0")
    refused = _cli("lanes", "apply", "--json", cwd=second, env=owner)
    assert refused.returncode == 4 and "research_executor" in json.loads(refused.stdout)["message"]
    assert "loopx lanes pull" in json.loads(refused.stdout)["hint"]
    pulled = _cli("lanes", "pull", "--json", cwd=second, env=env)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert json.loads(pulled.stdout) == {
        "written": ["research_executor"], "pending": ["research_curator"], "unwritable": [],
        "current": ["evaluator_promoter", "hypothesis_proposer", "product_narrator"]}
    applied = _cli("lanes", "apply", "--json", cwd=second, env=owner)
    assert [r["role"] for r in json.loads(applied.stdout)["recorded"]] == ["research_curator"]
    shown = {p["role"]: p for p in json.loads(
        _cli("lanes", "show", "--json", cwd=first, env=env).stdout)["profiles"]}
    assert shown["research_executor"]["max_attempts"] == 5
    assert shown["research_curator"]["lease_ttl_seconds"] == 1200.0


def test_two_moves_at_once_switch_to_one_log_only(pg_url: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A second ``store copy --use`` that finds the log moved by the first while it copied
    (it takes the lock after) must not mark it again and switch elsewhere: that would fork it."""
    from loopx.kernel.errors import WorkspaceError
    from loopx.kernel.store.postgres import PostgresStore
    from loopx.workspace import copy_store, find_workspace
    from loopx.workspace import store_copy as module

    _moved_workspace(tmp_path, "raced")
    elsewhere = "postgresql://loopx@db/loopx?log=first-mover"
    real = module.copy_log

    def copy_then_lose_the_race(source: Any, target: Any) -> Any:
        copied = real(source, target)
        with source.locked():  # the other mover's last steps, between our copy and our lock
            source.mark_moved(elsewhere, copied.source_cursor)
        return copied

    monkeypatch.setattr(module, "copy_log", copy_then_lose_the_race)
    target = PostgresStore(pg_url)
    try:
        with pytest.raises(WorkspaceError, match="was moved to postgresql://loopx@db/loopx"
                                                 r"\?log=first-mover while it was being copied"):
            copy_store(find_workspace(tmp_path), pg_url, use=True)
        assert json.loads((tmp_path / ".loopx" / "workspace.json").read_text())["store"] == \
            "file"
        assert FileStore(tmp_path / ".loopx").moved().to == elsewhere  # the first mark stays
    finally:
        target.drop()
        target.close()


def test_a_copy_killed_part_way_goes_on_from_where_it_stopped(pg_url: str,
                                                               tmp_path: Path) -> None:
    """A copy killed after its first committed chunk leaves the start of the log in the
    target; the same command again copies only the rest, and the result is the whole log byte
    for byte. A target holding another log is still refused."""
    from loopx.kernel.checks import Credentials
    from loopx.kernel.store.postgres import PostgresStore
    from loopx.work.todos import add_todos
    from loopx.workspace import find_workspace

    here, other = tmp_path / "here", tmp_path / "other"
    here.mkdir()
    other.mkdir()
    env, token = _moved_workspace(here, "long")
    ledger = find_workspace(here).ledger()
    for batch in range(12):  # past the copy's first 5,000-record chunk
        add_todos(ledger, Credentials(agent_id="owner", token=token), [
            {"todo_id": f"t-{batch}-{i}", "title": "x", "role": "research_executor",
             "action_kind": "run_dev_eval", "hypothesis_id": f"h-{batch}-{i}"}
            for i in range(500)])
    head = ledger.store.head()
    target = PostgresStore(pg_url)
    try:
        _killed_at("copy-chunk", "store", "copy", "--to", pg_url, cwd=here, env=env)
        partial = target.head().seq
        assert 5_000 <= partial < head.seq
        done = _cli("store", "copy", "--to", pg_url, "--json", cwd=here, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        assert result["resumed_from"] == partial and result["records"] == head.seq - partial
        assert result["head"] == {"seq": head.seq, "hash": head.hash}
        source = b"".join(data for _, _, data in FileStore(here / ".loopx").raw_segments())
        assert b"".join(data for _, _, data in target.raw_segments()) == source
        # Another workspace's log into it: refused, nothing written.
        _moved_workspace(other, "long")
        refused = _cli("store", "copy", "--to", pg_url, "--json", cwd=other, env=env)
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert json.loads(refused.stdout)["message"].startswith(
            f"the target log already holds {head.seq} records that are not this log's first")
        assert (target.head().seq, target.head().hash) == (head.seq, head.hash)
    finally:
        target.drop()
        target.close()


CRASH_WRITER = """
import sys, uuid
from loopx.kernel.store.postgres import PostgresStore
from loopx.testing.store_conformance import unsealed
store = PostgresStore(sys.argv[1], retry_seconds=60)
for i in range(int(sys.argv[2])):
    [record] = store.append([{**unsealed(n=i), "record_id": f"rec_{uuid.uuid4().hex}"}])
    print("ACK", record["record_id"], flush=True)
"""


@pytest.mark.slow
def test_acknowledged_batches_survive_server_crashes(pg: Any, pg_url: str) -> None:
    """Crash the server (immediate stop: no shutdown checkpoint, WAL replay on start) twice
    under a writer: it gets a bounded retry, and every batch it was told is stored is there,
    once. Needs LOOPX_TEST_PG_CLUSTER (``15/main``, set by .ci/run) and pg_ctlcluster rights."""
    cluster = os.environ.get("LOOPX_TEST_PG_CLUSTER")
    if not cluster:
        pytest.skip("set LOOPX_TEST_PG_CLUSTER=VERSION/NAME (Debian's pg_ctlcluster; .ci/run "
                    "does) to crash the test server")
    version, name = cluster.split("/")
    writer = subprocess.Popen([sys.executable, "-c", CRASH_WRITER, pg_url, "3000"],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acked: list[str] = []
    for crash in range(2):
        while len(acked) < 300 * (crash + 1):
            acked.append(writer.stdout.readline().split()[1])
        subprocess.run(["pg_ctlcluster", version, name, "stop", "-m", "immediate"], check=True)
        subprocess.run(["pg_ctlcluster", version, name, "start"], check=True)
    out = writer.stdout.read()  # (communicate() would skip what readline() buffered)
    assert writer.wait(timeout=300) == 0
    odd = [line for line in out.splitlines() if not line.startswith("ACK ")]
    acked += [line.split()[1] for line in out.splitlines() if line.startswith("ACK ")]
    assert len(acked) == 3000, odd[:5]
    stored = [r["record_id"] for r, _ in pg.read()]
    assert len(stored) == len(set(stored)) == 3000 and set(stored) == set(acked)
    assert verify_store(pg, workspace_rules=False).ok


def _get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_served_board_follows_the_log_it_shows_when_it_moves(pg_url: str,
                                                               tmp_path: Path) -> None:
    # A board served from a file log that is then moved to PostgreSQL: it must not go on
    # showing the frozen old log as if nothing had happened.
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_STORE", "LOOPX_TOKEN")}
    made = _cli("init", "--goal-id", "served", "--json", cwd=tmp_path, env=env)
    owner = {**env, "LOOPX_TOKEN": json.loads(made.stdout)["owner_token"]}
    add = ["todo", "add", "--role", "research_executor", "--action", "run_dev_eval", "--title",
           "t", "--hypothesis", "h", "--agent-id", "owner", "--json"]
    server = subprocess.Popen([sys.executable, "-m", "loopx.cli", "board", "--serve", "--port",
                               "0", "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**env, "PGPASSWORD": _password(pg_url)})  # as ~/.pgpass
    from loopx.kernel.store.postgres import PostgresStore

    try:
        assert server.stdout is not None
        url = json.loads(server.stdout.readline())["url"]
        assert _get(url)[0] == 200
        # Marked moved but not switched here (a move killed before its switch): said so.
        mark = FileStore(tmp_path / ".loopx")
        at = mark.head()
        with mark.locked():
            mark.mark_moved(without_password(pg_url), at)
        status, page = _get(url)
        assert status == 503 and f"this log moved to {without_password(pg_url)}" in page
        assert "loopx store copy --to" in page and _password(pg_url) not in page
        # A page shown before the move polls the head: not the frozen old head (it would go
        # on showing that log as current), but the move, so the page reloads into the notice.
        for poll in ("head", f"head?after={at.seq}"):
            status, answer = _get(url + poll)
            assert status == 503 and json.loads(answer)["error"] == "workspace", answer
            assert "this log moved to" in json.loads(answer)["message"]
        # The page's head poll gets JSON even when the workspace cannot be read.
        settings = tmp_path / ".loopx" / "workspace.json"
        kept = settings.read_bytes()
        settings.write_text("{")
        status, answer = _get(url + "head")
        assert status == 503 and json.loads(answer)["error"] == "workspace"
        settings.write_bytes(kept)
        (tmp_path / ".loopx" / "log" / "moved.json").unlink()
        # Moved and switched on this host: the board shows the new log, records added there.
        moved = _cli("store", "copy", "--to", pg_url, "--use", "--json", cwd=tmp_path, env=env)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        on_pg = {**owner, "LOOPX_STORE": pg_url}
        assert _cli(*add, "--todo-id", "after-the-move", cwd=tmp_path, env=on_pg).returncode == 0
        seq = json.loads(moved.stdout)["head"]["seq"] + 1
        assert json.loads(_get(url + "head")[1])["head_seq"] == seq
        status, page = _get(url)
        assert status == 200 and "after-the-move" in page
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        PostgresStore(pg_url).drop()
