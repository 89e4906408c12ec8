"""Migration 0003: a cycle's decisions by seq span (decision_cycles), kept by the writer, migrated forward."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fumarole.store.codec import event_row
from fumarole.store.events import BindDecided, CycleClosed, CycleOpened, Event, JobExplained, NodeUpserted
from fumarole.store.index import INSERT_INDEX, cycle_spans, decision_query, index_fields
from fumarole.store.migrate import load_migrations, migrate
from fumarole.store.sqlite import SqliteEventLog


def _bind(cycle: int, i: int) -> BindDecided:
    return BindDecided(
        cycle=cycle, namespace="ns", name=f"p{i}", uid=f"u{i}", node=f"n{i % 3}", job="ns/j", queue="q"
    )


def _cycle(c: int, binds: int) -> list[Event]:
    out: list[Event] = [CycleOpened(cycle=c, watermark=0, now_ms=c, conf_hash="h")]
    out += [_bind(c, 10 * c + i) for i in range(binds)]
    out.append(CycleClosed(cycle=c, binds=binds))
    return out


def _spans(db: Path) -> list[tuple[int, int, int]]:
    conn = sqlite3.connect(db)
    try:
        return [
            tuple(r)
            for r in conn.execute("SELECT cycle, first_seq, last_seq FROM decision_cycles ORDER BY cycle")
        ]
    finally:
        conn.close()


def test_cycle_spans_of_a_transaction() -> None:
    rows = [(7, 2, "x"), (5, 2, "x"), (9, 3, "x"), (6, 2, "x")]
    assert sorted(cycle_spans(rows)) == [(2, 5, 7), (3, 9, 9)]
    assert cycle_spans([]) == []


async def test_writer_keeps_the_span_of_each_cycle(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    async with await SqliteEventLog.open(db) as log:
        await log.append([NodeUpserted(name="n0", manifest={}), *_cycle(1, 2)])  # seqs 1..5
        await log.append(
            [*_cycle(2, 1), NodeUpserted(name="n1", manifest={}), *_cycle(3, 0)]
        )  # 6..8, 9, 10..11
        # a cycle continued by a later append (not what the daemon does): its span widens
        await log.append([JobExplained(cycle=1, namespace="ns", name="j", queue="q", message="m")])  # 12
        assert _spans(db) == [(1, 2, 12), (2, 6, 8), (3, 10, 11)]
        by_cycle = {c: [r.seq for r in await log.read_decisions(cycle=c)] for c in (1, 2, 3, 4)}
        # exact: cycle 1's span holds cycles 2 and 3 and an observed event, none of them answered
        assert by_cycle == {1: [2, 3, 4, 5, 12], 2: [6, 7, 8], 3: [10, 11], 4: []}
        assert [r.seq for r in await log.read_decisions(cycle=1, since=4, limit=2)] == [4, 5]
        assert [r.seq for r in await log.read_decisions(cycle=1, types=("cycle.closed",))] == [5]
        assert [r.seq for r in await log.read_decisions(cycle=2, job="ns/j")] == [7]


def test_decision_query_binds_the_cycle_as_a_parameter() -> None:
    sql, params = decision_query(cycle=4, since=2, limit=5)
    assert "decision_cycles" in sql and "4" not in sql
    assert params == [2, 4, 4, 4, 5]


_INSERT_INDEX_V2 = (
    "INSERT INTO decision_index (seq, cycle, type, job, namespace, pod, queue, node) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _old_log(db: Path, versions: int, events: list[Event]) -> None:
    """A log at schema `versions` with `events`, written as the writer of that version did."""
    migrate(str(db), migrations=load_migrations()[:versions])
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for seq, ev in enumerate(events, start=1):
            tag, v, data = event_row(ev)
            conn.execute(
                "INSERT INTO events (seq, type, v, at_ms, idem_key, body) VALUES (?, ?, ?, NULL, NULL, ?)",
                (seq, tag, v, data),
            )
            fields = index_fields(ev)
            if versions >= 4 and fields is not None:
                conn.execute(INSERT_INDEX, (seq, *fields))
            elif versions >= 2 and fields is not None:  # before 0004: no detail column
                conn.execute(_INSERT_INDEX_V2, (seq, *fields[:7]))
        conn.execute("COMMIT")
    finally:
        conn.close()


async def test_a_version_2_log_migrates_forward(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _old_log(db, 2, [*_cycle(1, 2), NodeUpserted(name="n", manifest={}), *_cycle(2, 1)])
    async with await SqliteEventLog.open(db) as log:
        assert _spans(db) == [(1, 1, 4), (2, 6, 8)]
        assert [r.seq for r in await log.read_decisions(cycle=2)] == [6, 7, 8]
        await log.append(_cycle(3, 1))
        assert [r.seq for r in await log.read_decisions(cycle=3)] == [9, 10, 11]
    conn = sqlite3.connect(db)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    finally:
        conn.close()
    assert "decision_index_cycle" not in names and "decision_index_job" in names


async def test_a_version_1_log_is_backfilled_with_its_spans(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _old_log(db, 1, _cycle(1, 1) + _cycle(2, 2))
    async with await SqliteEventLog.open(db) as log:
        assert _spans(db) == [(1, 1, 3), (2, 4, 7)]
        assert [r.seq for r in await log.read_decisions(cycle=1)] == [1, 2, 3]
        assert [r.seq for r in await log.read_decisions(cycle=2, types=("decision.bind",))] == [5, 6]
