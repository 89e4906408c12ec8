"""What only the PostgreSQL backend has: its migrations, appenders in several connections, leadership
terms and the database's fencing of a stale leader, notifications across processes."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import asyncpg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import bind, clock, new_pg_dsn, node, run_pg

from fumarole.store.log import FencedError
from fumarole.store.migrate import MigrationError, SchemaTooNewError, load_migrations
from fumarole.store.pg_leadership import Leadership, leader_terms, lease_state
from fumarole.store.pg_schema import pg_migrations
from fumarole.store.postgres import PostgresEventLog, is_postgres_url, redact_dsn
from fumarole.store.sqlite import SqliteEventLog


@pytest.fixture
def dsn() -> str:
    return new_pg_dsn()


def test_the_dialect_has_the_same_migrations_as_sqlite():
    sqlite = [(m.version, m.name) for m in load_migrations()]
    assert [(m.version, m.name) for m in pg_migrations()] == sqlite


async def test_open_migrates_once_and_records_the_versions(dsn):
    async with await PostgresEventLog.open(dsn):
        pass
    async with await PostgresEventLog.open(dsn) as log:
        rows = await log.fetch("SELECT version, name FROM schema_migrations ORDER BY version")
        assert [(r[0], r[1]) for r in rows] == [(m.version, m.name) for m in pg_migrations()]
    async with await PostgresEventLog.open(dsn, readonly=True) as ro:
        assert await ro.last_seq() == 0


async def test_a_newer_schema_is_refused(dsn):
    async with await PostgresEventLog.open(dsn):
        pass
    run_pg(dsn, "INSERT INTO schema_migrations VALUES (99, 'future', '', now())")
    with pytest.raises(SchemaTooNewError, match="version 99 is newer"):
        await PostgresEventLog.open(dsn)
    with pytest.raises(SchemaTooNewError):
        await PostgresEventLog.open(dsn, readonly=True)


async def test_a_database_of_something_else_is_refused_and_left_alone(dsn):
    run_pg(dsn, "CREATE TABLE invoices (id int)")
    with pytest.raises(MigrationError, match="not a Fumarole event log"):
        await PostgresEventLog.open(dsn)
    tables = run_pg(dsn, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    assert [r[0] for r in tables] == ["invoices"]


async def test_readonly_open_of_an_empty_database_is_refused(dsn):
    with pytest.raises(MigrationError, match="no schema_migrations"):
        await PostgresEventLog.open(dsn, readonly=True)


async def test_appenders_on_separate_connections_get_gap_free_contiguous_seqs(dsn):
    logs = [await PostgresEventLog.open(dsn) for _ in range(4)]
    results: list[list[int]] = []

    async def writer(log: PostgresEventLog, w: int) -> None:
        for b in range(10):
            results.append(await log.append([clock(w * 1000 + b * 10 + i) for i in range(7)]))

    async with anyio.create_task_group() as tg:
        for w, log in enumerate(logs):
            tg.start_soon(writer, log, w)
    assert sorted(s for r in results for s in r) == list(range(1, 281))
    for r in results:
        assert r == list(range(r[0], r[0] + 7))
    for log in logs:
        await log.close()


async def test_a_refused_append_leaves_no_gap(dsn):
    async with await PostgresEventLog.open(dsn) as log:
        await log.append([clock(1)])
        run_pg(dsn, "ALTER TABLE events ADD CONSTRAINT no_big CHECK (at_ms IS NULL OR at_ms < 100)")
        with pytest.raises(Exception, match="no_big"):
            await log.append([clock(2), clock(500)])
        assert await log.append([clock(3)]) == [2]
        assert [r.event for r in await log.read()] == [clock(1), clock(3)]


async def test_the_decision_index_answers_as_on_sqlite(dsn, tmp_path):
    evs = [node(1), bind(1), bind(2), clock(5), bind(3)]
    async with await PostgresEventLog.open(dsn) as pg, await SqliteEventLog.open(tmp_path / "e.db") as lite:
        await pg.append(evs)
        await lite.append(evs)
        for filters in ({"node": "n2"}, {"job": "ns/j"}, {"cycle": 1}, {"queue": "nope"}):
            want = await lite.read_decisions(**filters)
            assert await pg.read_decisions(**filters) == want
            assert want or filters == {"queue": "nope"}


async def test_a_follower_is_woken_by_the_leaders_commit(dsn):
    async with await PostgresEventLog.open(dsn) as leader:
        follower = await PostgresEventLog.open(dsn, readonly=True, poll_interval=3600)
        got: list[int] = []

        async def wait() -> None:
            got.extend(r.seq for r in await follower.tail(1, timeout=60))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.2)
            assert got == []
            await leader.append([clock(1), clock(2)])
        assert got == [1, 2]  # woken by NOTIFY: the poll interval is an hour
        await follower.close()


async def test_a_taken_over_leader_is_refused_by_the_database(dsn):
    a_log = await PostgresEventLog.open(dsn)
    b_log = await PostgresEventLog.open(dsn)
    a = Leadership(a_log, "replica-a", lease_seconds=0.3)
    b = Leadership(b_log, "replica-b", lease_seconds=30)
    assert await a.acquire() == 1
    assert await b.acquire() is None  # the lease is held
    assert await a_log.append([clock(1)]) == [1]
    while (await lease_state(b_log)).expires_in > 0:  # a stops renewing
        await anyio.sleep(0.05)
    assert await b.acquire() == 2
    assert await b_log.append([clock(2)]) == [2]
    with pytest.raises(FencedError, match="epoch 1 refused, the current epoch is 2"):
        await a_log.append([clock(3)], checkpoint=("dispatcher", 1))
    assert not await a.renew()
    # Not the client's manners: a row of the old epoch written by hand is refused too, as is an
    # unfenced one (epoch 0) now that a leader exists.
    for epoch in (1, 0):
        with pytest.raises(asyncpg.PostgresError, match="stale leader") as ei:
            run_pg(
                dsn,
                "INSERT INTO events (seq, type, v, body, epoch) VALUES (3, 'clock.advanced', 1, '', $1)",
                epoch,
            )
        assert ei.value.sqlstate == "FM001"
    assert [(r.seq, r.event) for r in await b_log.read()] == [(1, clock(1)), (2, clock(2))]
    assert await b_log.checkpoint("dispatcher") == 0
    epochs = run_pg(dsn, "SELECT seq, epoch FROM events ORDER BY seq")
    assert [(r[0], r[1]) for r in epochs] == [(1, 1), (2, 2)]
    assert [(t.epoch, t.holder, t.first_seq) for t in await leader_terms(b_log)] == [
        (1, "replica-a", 1),
        (2, "replica-b", 2),
    ]
    await b.release()
    assert (await lease_state(b_log)).expires_in < 0
    await a_log.close()
    await b_log.close()


def test_urls_and_redaction():
    assert is_postgres_url("postgresql://u@h/db") and is_postgres_url("postgres://h/db")
    assert not is_postgres_url("fumarole-data/fumarole.db")
    assert redact_dsn("postgresql://u:secret@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact_dsn("postgresql://u@h/db") == "postgresql://u@h/db"


async def test_a_writer_connection_the_server_ended_is_replaced(dsn):
    async with await PostgresEventLog.open(dsn) as log:
        await log.append([clock(1)])
        pid = log._writer.get_server_pid()
        run_pg(dsn, "SELECT pg_terminate_backend($1)", pid)
        assert await log.append([clock(2)]) == [2]  # the next one reconnects and writes once
        assert await log.append([clock(3)]) == [3]
        assert [r.event for r in await log.read()] == [clock(1), clock(2), clock(3)]


async def test_a_follower_listens_again_after_its_listener_was_ended(dsn):
    async with await PostgresEventLog.open(dsn) as leader:
        follower = await PostgresEventLog.open(dsn, readonly=True, poll_interval=3600)
        await follower._ensure_listening()
        run_pg(dsn, "SELECT pg_terminate_backend($1)", follower._listener.get_server_pid())
        with anyio.fail_after(60):
            while follower._listener is not None:  # the termination is noticed
                await anyio.sleep(0.01)
        got: list[int] = []

        async def wait() -> None:
            got.extend(r.seq for r in await follower.tail(1, timeout=60))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.2)
            await leader.append([clock(1)])
        assert got == [1]  # woken by NOTIFY on the new listener: the poll interval is an hour
        await follower.close()
