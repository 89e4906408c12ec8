"""The PostgreSQL log riding out lost connections, on the real server: an append whose COMMIT went
unanswered (committed, or not) is resolved against the log, never doubled nor lost; readers, the
listener and the API's synchronous reader reconnect; one warning per outage; an up-to-date schema
needs no CREATE; bad URLs, foreign schema tables and missing privileges are one line, exit 2."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import clock, new_pg_dsn, run_pg

from fumarole.daemon.cli import main
from fumarole.store.log import LogError
from fumarole.store.pg_sync import PgSyncConnection
from fumarole.store.pg_url import redact_dsn
from fumarole.store.postgres import PostgresEventLog


@pytest.fixture
def dsn() -> str:
    return new_pg_dsn()


def _drop_at_commit(monkeypatch: pytest.MonkeyPatch, *, after_commit: bool) -> list[int]:
    """The next COMMIT's answer is lost: the connection drops just after (or just before) it."""
    orig = asyncpg.transaction.Transaction.commit
    fired: list[int] = []

    async def commit(self: Any) -> None:
        if fired:
            return await orig(self)
        fired.append(1)
        if after_commit:
            await orig(self)
        self._connection.terminate()
        raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    monkeypatch.setattr(asyncpg.transaction.Transaction, "commit", commit)
    return fired


@pytest.mark.parametrize("after_commit", [True, False])
async def test_an_append_whose_commit_went_unanswered_is_written_exactly_once(dsn, monkeypatch, after_commit):
    async with await PostgresEventLog.open(dsn) as log:
        await log.append([clock(1)])
        fired = _drop_at_commit(monkeypatch, after_commit=after_commit)
        seqs = await log.append([clock(i) for i in range(2, 80)], idem_keys=[f"k{i}" for i in range(2, 80)])
        assert fired and seqs == list(range(2, 80))
        assert await log.append([clock(99)], idem_keys=["k5"]) == [5]  # the keys are there once
        rows = await log.read(1, 1000)
    assert [r.seq for r in rows] == list(range(1, 80))
    assert [r.event for r in rows] == [clock(i) for i in range(1, 80)]


async def test_an_unanswered_commit_of_a_fenced_leader_is_refused_when_not_written(dsn, monkeypatch):
    from fumarole.store.log import FencedError
    from fumarole.store.pg_leadership import Leadership

    async with await PostgresEventLog.open(dsn) as a, await PostgresEventLog.open(dsn) as b:
        assert await Leadership(a, "a", 1).acquire() == 1
        await a.append([clock(1)])
        run_pg(dsn, "UPDATE leadership SET expires_at = clock_timestamp() WHERE id = 1")
        assert await Leadership(b, "b", 60).acquire() == 2
        _drop_at_commit(monkeypatch, after_commit=False)
        with pytest.raises(FencedError):
            await a.append([clock(2)])  # the retry checks the epoch again: B leads now
        assert [r.seq for r in await b.read()] == [1]


async def test_readers_and_the_writer_reconnect_with_one_warning_per_outage(dsn, caplog):
    caplog.set_level(logging.WARNING, "fumarole.store")
    async with await PostgresEventLog.open(dsn) as log:
        await log.append([clock(1)])
        assert await log.last_seq() == 1
        for _ in range(3):
            run_pg(
                dsn,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            assert await log.last_seq() >= 1  # a pool connection the server ended is replaced
            await log.append([clock(2)])
        assert [r.seq for r in await log.read()] == [1, 2, 3, 4]
    lost = [r for r in caplog.records if "cannot be reached" in r.getMessage()]
    back = [r for r in caplog.records if "answers again" in r.getMessage()]
    assert 1 <= len(lost) == len(back) <= 6  # at most a pair per termination (reader, then writer)


def test_the_apis_synchronous_reader_reconnects(dsn):
    anyio.run(_append_one, dsn)
    conn = PgSyncConnection(dsn)
    try:
        assert conn.execute("SELECT last_seq FROM log_head WHERE id = ?", (1,)).fetchone() == (1,)
        run_pg(dsn, "SELECT pg_terminate_backend($1)", _sync_pid(conn))
        assert conn.execute("SELECT last_seq FROM log_head WHERE id = ?", (1,)).fetchone() == (1,)
    finally:
        conn.close()


async def _append_one(dsn: str) -> None:
    async with await PostgresEventLog.open(dsn) as log:
        await log.append([clock(1)])


def _sync_pid(conn: PgSyncConnection) -> int:
    return int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]


def _role(dsn: str, name: str, *, create: bool) -> str:
    """A login role with the table privileges a replica needs (and CREATE on the schema or not)."""
    run_pg(dsn, f"DROP ROLE IF EXISTS {name}")
    run_pg(dsn, f"CREATE ROLE {name} LOGIN")
    db = dsn.rsplit("/", 1)[1]
    run_pg(dsn, f"GRANT CONNECT ON DATABASE {db} TO {name}")
    run_pg(dsn, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    run_pg(dsn, f"GRANT USAGE ON SCHEMA public TO {name}")
    if create:
        run_pg(dsn, f"GRANT CREATE ON SCHEMA public TO {name}")
    run_pg(dsn, f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {name}")
    return dsn.replace("//fumarole@", f"//{name}@")


def test_an_up_to_date_schema_needs_no_create_and_a_new_one_says_so(dsn, capsys):
    assert main(["migrate", "--db", dsn]) == 0
    as_role = _role(dsn, f"r_{dsn.rsplit('/', 1)[1]}", create=False)
    for _ in range(2):  # every start of a replica
        anyio.run(_append_one, as_role)
    fresh = new_pg_dsn()
    as_role2 = _role(fresh, f"r_{fresh.rsplit('/', 1)[1]}", create=False)
    capsys.readouterr()
    assert main(["migrate", "--db", as_role2]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "CREATE" in err and "InsufficientPrivilege" in err, err


def test_a_foreign_schema_migrations_table_is_one_line(dsn, capsys):
    run_pg(dsn, "CREATE TABLE schema_migrations (version TEXT)")
    run_pg(dsn, "INSERT INTO schema_migrations VALUES ('junk')")
    assert main(["migrate", "--db", dsn]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a Fumarole event log" in err, err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://user:pw-secret@h/db", "is not a postgresql:// URL"),
        ("postgresql://u:pw-secret@h:abc/db", "port 'abc'"),
        ("postgresql://u:pw-secret@h:70000/db", "port '70000'"),
        ("postgresql://u:pw-secret@[::1/db", "no closing ']'"),
        ("postgresql://u@h/db?password=pw-secret&port=x", "port 'x'"),
    ],
)
@pytest.mark.parametrize("command", [["run", "--no-api"], ["events"], ["replay"], ["migrate"]])
def test_a_bad_database_url_is_one_line_without_its_password(url, said, command, capsys):
    assert main([*command, "--db", url]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and said in err and "pw-secret" not in err, err


def test_a_password_in_the_query_is_redacted_in_connection_errors(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://u@127.0.0.1:{port}/db?password=pw-secret"
    assert redact_dsn(url).endswith("?password=***")
    assert main(["migrate", "--db", url]) == 2
    err = capsys.readouterr().err
    assert "pw-secret" not in err and "password=***" in err and "cannot connect" in err, err


async def test_a_server_that_never_answers_is_named_a_timeout():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts (the kernel does) and never says a word
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        with pytest.raises(LogError, match=r"no answer from the server within 0.5 s \(timed out\)"):
            await PostgresEventLog.open(f"postgresql://u@127.0.0.1:{port}/db", connect_timeout=0.5)
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        listener.close()
