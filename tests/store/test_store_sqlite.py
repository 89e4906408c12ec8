"""SQLite backend specifics: durability, pragmas, group commit, read-only opening, failures, cancellation."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import bind, clock, node

from fumarole.store.log import LogError
from fumarole.store.migrate import MigrationError, SchemaTooNewError
from fumarole.store.sqlite import SqliteEventLog, _Request


@pytest.fixture
async def db(tmp_path):
    lg = await SqliteEventLog.open(tmp_path / "events.db")
    yield lg
    await lg.close()


def _raw(path: str, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_everything_survives_a_reopen(tmp_path):
    path = tmp_path / "events.db"
    lg = await SqliteEventLog.open(path)
    await lg.append([node(1), bind(1)], idem_keys=["a", None], checkpoint=("dispatcher", 2))
    await lg.save_snapshot("cache", 2, b"state")
    await lg.close()
    lg = await SqliteEventLog.open(path)
    try:
        assert await lg.last_seq() == 2
        assert [r.event for r in await lg.read()] == [node(1), bind(1)]
        assert await lg.checkpoint("dispatcher") == 2
        assert await lg.latest_snapshot("cache") == (2, b"state")
        assert await lg.append([node(5)], idem_keys=["a"]) == [1]  # keys survive too
        assert await lg.append([clock(3)]) == [3]
    finally:
        await lg.close()


async def test_an_acknowledged_append_is_committed(db):
    await db.append([clock(1), clock(2)], checkpoint=("c", 2))
    # a fresh, independent connection sees it at once: the writer answered after COMMIT
    assert _raw(db.path, "SELECT seq, type FROM events") == [(1, "clock.advanced"), (2, "clock.advanced")]
    assert _raw(db.path, "SELECT consumer, seq FROM checkpoints") == [("c", 2)]


async def test_pragmas_and_strict_tables(db):
    assert _raw(db.path, "PRAGMA journal_mode") == [("wal",)]
    assert db._writer is not None
    assert db._writer.conn.execute("PRAGMA synchronous").fetchall() == [(2,)]  # FULL
    assert db._writer.conn.execute("PRAGMA busy_timeout").fetchall() == [(5000,)]
    for r in db._readers:
        assert list(await r.execute_fetchall("PRAGMA query_only")) == [(1,)]
    strict = {
        name: s for _, name, _, _, _, s in _raw(db.path, "PRAGMA table_list") if not name.startswith("sqlite")
    }
    assert {"events", "checkpoints", "snapshots", "schema_migrations"} <= set(strict)
    assert all(strict.values()), strict  # every table is STRICT
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        await db._readers[0].execute("INSERT INTO checkpoints VALUES ('x', 1)")


async def test_concurrent_appends_are_group_committed(db):
    before = db.commits

    async def one(i: int) -> list[int]:
        return await db.append([clock(i)])

    results: list[list[int]] = []
    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(lambda i=i: _collect(results, one(i)))
    assert sorted(s for r in results for s in r) == list(range(1, 101))
    assert db.commits - before < 100  # fewer transactions than requests


async def _collect(out: list, coro) -> None:
    out.append(await coro)


async def test_group_size_is_bounded_by_max_group_events(tmp_path):
    lg = await SqliteEventLog.open(tmp_path / "e.db", max_group_events=10)
    try:
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(lg.append, [clock(i * 10 + j) for j in range(5)])
        assert await lg.last_seq() == 100
        assert lg.commits >= 10  # at most two 5-event requests per transaction
    finally:
        await lg.close()


async def test_max_group_wait_collects_later_requests_into_one_commit(tmp_path):
    lg = await SqliteEventLog.open(tmp_path / "e.db", max_group_wait=0.2)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lg.append, [clock(1)])
            await anyio.sleep(0.02)
            tg.start_soon(lg.append, [clock(2)])
        assert lg.commits == 1
        assert await lg.last_seq() == 2
    finally:
        await lg.close()


async def test_a_failing_request_fails_alone_and_leaves_no_trace(db):
    """A request the database rejects (here a STRICT type violation) fails; the others of its group commit."""
    bad_fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
    good: list[list[int]] = []

    async def good_append(i: int) -> None:
        good.append(await db.append([clock(i), clock(i + 1)]))

    async with anyio.create_task_group() as tg:
        # queue the bad request first so that it is grouped with the good ones
        db._queue.put_nowait(
            _Request([("clock.advanced", "not-an-int", None, None, b"\x80", None)], None, None, bad_fut)
        )  # type: ignore[list-item]
        for i in range(0, 10, 2):
            tg.start_soon(good_append, i)
    with pytest.raises(LogError, match="nothing of it was written"):
        await bad_fut
    assert sorted(s for r in good for s in r) == list(range(1, 11))
    assert _raw(db.path, "SELECT count(*), min(seq), max(seq) FROM events") == [(10, 1, 10)]
    assert all(r.type == "clock.advanced" for r in await db.read())


async def test_stale_last_seq_after_another_writer_is_recovered(db):
    await db.append([clock(1)])
    conn = sqlite3.connect(db.path)
    conn.execute("INSERT INTO events (seq, type, v, body) VALUES (2, 'clock.advanced', 1, ?)", (b"",))
    conn.commit()
    conn.close()
    assert await db.append([clock(3), clock(4)]) == [3, 4]
    assert [r[0] for r in _raw(db.path, "SELECT seq FROM events")] == [1, 2, 3, 4]


async def test_a_cancelled_caller_does_not_stop_its_write(db):
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(db.append, [clock(1), clock(2)])
            await anyio.sleep(0)  # let the append queue its request
            scope.cancel()
    assert scope.cancelled_caught or scope.cancel_called
    # the shielded append finished before the cancellation took effect
    assert _raw(db.path, "SELECT count(*) FROM events") == [(2,)]


async def test_close_commits_what_is_queued(tmp_path):
    lg = await SqliteEventLog.open(tmp_path / "e.db")
    results: list[list[int]] = []
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(lambda i=i: _collect(results, lg.append([clock(i)])))
        await anyio.sleep(0)
        await lg.close()
    assert sorted(s for r in results for s in r) == [1, 2, 3, 4, 5]
    assert _raw(str(tmp_path / "e.db"), "SELECT count(*) FROM events") == [(5,)]


async def test_readonly_open_reads_and_refuses_writes(tmp_path):
    path = tmp_path / "events.db"
    w = await SqliteEventLog.open(path)
    await w.append([clock(1), clock(2)], checkpoint=("c", 1))
    ro = await SqliteEventLog.open(path, readonly=True, poll_interval=0.02)
    try:
        assert await ro.last_seq() == 2
        assert [r.seq for r in await ro.read()] == [1, 2]
        assert await ro.checkpoint("c") == 1
        with pytest.raises(LogError, match="read-only"):
            await ro.append([clock(3)])
        with pytest.raises(LogError, match="read-only"):
            await ro.set_checkpoint("c", 2)
        got: list = []

        async def follow() -> None:
            got.extend(await ro.tail(3, timeout=5))

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            await anyio.sleep(0.05)
            await w.append([clock(3)])  # another "process" writes; the read-only log polls
        assert [r.seq for r in got] == [3]
    finally:
        await ro.close()
        await w.close()


async def test_readonly_open_of_a_missing_file_fails_and_creates_nothing(tmp_path):
    path = tmp_path / "missing.db"
    with pytest.raises(MigrationError, match="no such database file"):
        await SqliteEventLog.open(path, readonly=True)
    assert not path.exists()


async def test_a_database_from_a_newer_fumarole_is_refused(tmp_path):
    path = tmp_path / "events.db"
    lg = await SqliteEventLog.open(path)
    await lg.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (99, 'future', '', '')")
    conn.commit()
    conn.close()
    for ro in (False, True):
        with pytest.raises(SchemaTooNewError, match="schema version 99 is newer than this Fumarole supports"):
            await SqliteEventLog.open(path, readonly=ro)


async def test_files_that_are_not_event_logs_are_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(MigrationError, match="not an SQLite database"):
        await SqliteEventLog.open(junk)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(MigrationError, match="not a Fumarole event log"):
        await SqliteEventLog.open(other)
    with pytest.raises(MigrationError, match="not a Fumarole event log"):
        await SqliteEventLog.open(other, readonly=True)


async def test_each_group_is_one_begin_immediate_commit_transaction(db):
    statements: list[str] = []
    assert db._writer is not None
    db._writer.conn.set_trace_callback(statements.append)
    await db.append([clock(1), clock(2)], checkpoint=("c", 2))
    await db.append([clock(3)], idem_keys=["k"])
    await db.append(
        [clock(4)], idem_keys=["k"]
    )  # duplicate: optimistic insert rolled back, redone with lookup
    db._writer.conn.set_trace_callback(None)
    kinds = [s.split()[0].upper() for s in statements]  # executemany traces one INSERT per row
    assert kinds == [
        *("BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"),  # 2 events + the checkpoint
        *("BEGIN", "INSERT", "COMMIT"),
        *("BEGIN", "INSERT", "ROLLBACK", "BEGIN", "SELECT", "COMMIT"),
    ], statements
    assert all(s.upper() == "BEGIN IMMEDIATE" for s in statements if s.upper().startswith("BEGIN"))
    assert [r.seq for r in await db.read()] == [1, 2, 3]


@pytest.mark.parametrize(
    "types", [None, ["decision.bind"], ["decision.bind", "decision.evict", "cycle.opened"]]
)
def test_page_queries_use_an_index_in_seq_order(tmp_path, types):
    from fumarole.store.migrate import migrate
    from fumarole.store.sqlite import _select_sql

    path = tmp_path / "e.db"
    migrate(str(path))
    sql, params = _select_sql(5, 1000, 10, types)
    plan = " | ".join(r[3] for r in _raw(str(path), "EXPLAIN QUERY PLAN " + sql, tuple(params)))
    assert "SCAN events" not in plan, plan  # never a full scan
    if types is not None:
        assert plan.count("USING INDEX events_type_seq") == len(types), plan
