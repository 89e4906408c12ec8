"""Shared helpers for the store tests: sample events, backend factories and raw-row injection."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import msgspec

from fumarole.store.events import (
    EVENT_TYPES,
    BindDecided,
    ClockAdvanced,
    EventBase,
    NodeUpserted,
    PodUpserted,
)
from fumarole.store.memory import MemoryEventLog, _Row
from fumarole.store.postgres import PostgresEventLog
from fumarole.store.sqlite import SqliteEventLog

BACKENDS = ["memory", "sqlite", "postgres"]


def node(i: int, **kw: Any) -> NodeUpserted:
    return NodeUpserted(name=f"n{i}", manifest={"metadata": {"name": f"n{i}"}, "i": i}, at_ms=i, **kw)


def pod(i: int) -> PodUpserted:
    return PodUpserted(namespace="ns", name=f"p{i}", manifest={"spec": {"n": i}}, at_ms=1000 + i)


def bind(i: int) -> BindDecided:
    return BindDecided(
        cycle=1, namespace="ns", name=f"p{i}", uid=f"u{i}", node=f"n{i}", job="ns/j", queue="q"
    )


def clock(i: int) -> ClockAdvanced:
    return ClockAdvanced(at_ms=i)


def _sample_value(tp: Any) -> Any:
    ti = msgspec.inspect.type_info(tp) if not isinstance(tp, msgspec.inspect.Type) else tp
    if isinstance(ti, msgspec.inspect.StrType):
        return "x"
    if isinstance(ti, msgspec.inspect.BoolType):
        return True
    if isinstance(ti, msgspec.inspect.IntType):
        return 7
    if isinstance(ti, msgspec.inspect.FloatType):
        return 0.25
    if isinstance(ti, msgspec.inspect.DictType):
        return {"k": _sample_value(ti.value_type)}
    if isinstance(ti, (msgspec.inspect.VarTupleType, msgspec.inspect.ListType)):
        return (_sample_value(ti.item_type),)
    if isinstance(ti, msgspec.inspect.StructType):
        return ti.cls(**{f.name: _sample_value(f.type) for f in ti.fields if f.required})
    if isinstance(ti, msgspec.inspect.AnyType):
        return {"any": [1, "two"]}
    raise AssertionError(f"no sample for {ti!r}")


def sample_event(cls: type[EventBase]) -> EventBase:
    """An instance of an event class with every field set to a non-default sample value."""
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    kwargs = {f.name: _sample_value(f.type) for f in info.fields if f.name != "v"}
    return cls(**kwargs)


ALL_SAMPLES = [sample_event(c) for _, c in sorted(EVENT_TYPES.items())]


def new_pg_dsn() -> str:
    """An empty database on the test session's PostgreSQL server (skips/fails as require_pg says)."""
    from fumarole_pg_server import fresh_dsn, require_pg

    return fresh_dsn(require_pg())


async def open_backend(kind: str, tmp_path: Any) -> MemoryEventLog | SqliteEventLog | PostgresEventLog:
    if kind == "memory":
        return MemoryEventLog()
    if kind == "postgres":
        return await PostgresEventLog.open(new_pg_dsn())
    return await SqliteEventLog.open(tmp_path / "events.db")


def run_pg(dsn: str, sql: str, *args: Any) -> Any:
    """Run one statement on its own connection, from synchronous code (a thread with its own loop)."""
    import asyncpg

    out: list[Any] = []

    async def go() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            out.append(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(go())
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return out[0]


def inject_raw(log: Any, type_: str, v: int, body: bytes) -> int:
    """Write a row behind the log's back (as a bug or disk damage would); returns its seq."""
    if isinstance(log, MemoryEventLog):
        log._rows.append(_Row(type_, v, None, body))
        return len(log._rows)
    if isinstance(log, PostgresEventLog):
        rows = run_pg(
            log.dsn,
            "WITH h AS (UPDATE log_head SET last_seq = last_seq + 1 WHERE id = 1 RETURNING last_seq) "
            "INSERT INTO events (seq, type, v, body) SELECT last_seq, $1, $2, $3 FROM h RETURNING seq",
            type_,
            v,
            body,
        )
        return int(rows[0][0])
    conn = sqlite3.connect(log.path)
    try:
        seq = int(conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM events").fetchone()[0])
        conn.execute("INSERT INTO events (seq, type, v, body) VALUES (?, ?, ?, ?)", (seq, type_, v, body))
        conn.commit()
    finally:
        conn.close()
    log._last_seq = seq  # as if this process had written it
    return seq
