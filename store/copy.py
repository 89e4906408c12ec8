"""Copying an SQLite event log into an empty PostgreSQL one (`fumarole migrate --from … --to …`).

The stored rows travel as they are (seq, type, version, time, idempotency key, body bytes: no
decode and re-encode, so an event recorded by an older version keeps its bytes), with every
snapshot and checkpoint; the decision index is built on the way.  The source is read in one read
transaction (a consistent view even if something reads beside it) and the destination written in
one transaction, so a failed copy leaves it empty.  Afterwards both sides are counted and digested
(SHA-256 over every event row in seq order, every snapshot and every checkpoint) and must agree.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from fumarole.store.codec import CodecError, decode
from fumarole.store.index import cycle_spans, index_fields
from fumarole.store.log import LogError
from fumarole.store.migrate import check_schema
from fumarole.store.postgres import _INSERT, _INSERT_INDEX, _UPSERT_CYCLES, PostgresEventLog, redact_dsn

__all__ = ["CopyReport", "LogDigest", "copy_sqlite_to_postgres", "sqlite_path"]

_BATCH = 5000


class CopyError(LogError):
    """The copy cannot start (destination not empty, bad source) or its verification failed."""


@dataclass(frozen=True)
class LogDigest:
    events: int
    snapshots: int
    checkpoints: int
    sha256: str


@dataclass(frozen=True)
class CopyReport:
    source: LogDigest
    destination: LogDigest


def sqlite_path(url: str) -> str:
    """The file of `sqlite:///relative/path` or `sqlite:////absolute/path` (a bare path passes as is)."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    if url.startswith("sqlite:"):
        raise CopyError(f"{url}: an SQLite URL is sqlite:///relative/path or sqlite:////absolute/path")
    return url


class _Digest:
    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.events = 0
        self.snapshots = 0
        self.checkpoints = 0

    def event(self, seq: int, tag: str, v: int, at_ms: int | None, key: str | None, body: bytes) -> None:
        self.events += 1
        self.h.update(repr((seq, tag, v, at_ms, key, len(body))).encode())
        self.h.update(body)

    def snapshot(self, name: str, seq: int, data: bytes) -> None:
        self.snapshots += 1
        self.h.update(repr(("snapshot", name, seq, len(data))).encode())
        self.h.update(data)

    def checkpoint(self, consumer: str, seq: int) -> None:
        self.checkpoints += 1
        self.h.update(repr(("checkpoint", consumer, seq)).encode())

    def result(self) -> LogDigest:
        return LogDigest(self.events, self.snapshots, self.checkpoints, self.h.hexdigest())


def _index_row(seq: int, tag: str, v: int, body: bytes) -> tuple[Any, ...] | None:
    try:
        ev = decode(tag, v, body)
    except CodecError as e:
        raise CopyError(f"source row seq={seq} cannot be decoded: {e}") from e
    fields = index_fields(ev)
    return None if fields is None else (seq, *fields)


async def copy_sqlite_to_postgres(source: str, dsn: str) -> CopyReport:
    """Copy the SQLite log at `source` into the (new or empty) PostgreSQL log at `dsn`, then verify."""
    check_schema(source)  # a Fumarole log at this code's schema version
    src = sqlite3.connect(f"{Path(source).resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    dst = await PostgresEventLog.open(dsn)
    try:
        where = redact_dsn(dsn)
        if await dst.last_seq() or await dst.fetch("SELECT 1 FROM snapshots UNION SELECT 1 FROM checkpoints"):
            raise CopyError(f"{where}: the destination log is not empty; copy into a new database")
        src.execute("BEGIN")  # one read transaction: a consistent view of the source
        try:
            want = await _copy(src, dst)
        finally:
            src.execute("COMMIT")
        got = await _digest_postgres(dst)
    finally:
        src.close()
        await dst.close()
    if got != want:
        raise CopyError(f"verification failed: source {want}, destination {got}")
    return CopyReport(want, got)


async def _copy(src: sqlite3.Connection, dst: PostgresEventLog) -> LogDigest:
    digest = _Digest()
    conn = await asyncpg.connect(dst.dsn)
    try:
        async with conn.transaction():
            await conn.fetchval("SELECT last_seq FROM log_head WHERE id = 1 FOR UPDATE")
            last = 0
            while True:
                rows = src.execute(
                    "SELECT seq, type, v, at_ms, idem_key, body FROM events WHERE seq > ? "
                    "ORDER BY seq LIMIT ?",
                    (last, _BATCH),
                ).fetchall()
                if not rows:
                    break
                cols: tuple[list[Any], ...] = ([], [], [], [], [], [])
                indexed: list[tuple[Any, ...]] = []
                for seq, tag, v, at_ms, key, body in rows:
                    if seq != last + 1:
                        raise CopyError(f"source log has a gap: seq {seq} follows {last}")
                    last = seq
                    digest.event(seq, tag, v, at_ms, key, bytes(body))
                    for col, value in zip(cols, (seq, tag, v, at_ms, key, bytes(body)), strict=True):
                        col.append(value)
                    row = _index_row(seq, tag, v, bytes(body))
                    if row is not None:
                        indexed.append(row)
                await conn.execute(_INSERT, *cols, 0)
                if indexed:
                    await conn.execute(_INSERT_INDEX, *(list(c) for c in zip(*indexed, strict=True)))
                    spans = cycle_spans(indexed)
                    await conn.execute(_UPSERT_CYCLES, *(list(c) for c in zip(*spans, strict=True)))
            await conn.execute("UPDATE log_head SET last_seq = $1 WHERE id = 1", last)
            for name, seq, data in src.execute("SELECT name, seq, data FROM snapshots ORDER BY name, seq"):
                digest.snapshot(name, seq, bytes(data))
                await conn.execute(
                    "INSERT INTO snapshots (name, seq, data) VALUES ($1, $2, $3)", name, seq, bytes(data)
                )
            for consumer, seq in src.execute("SELECT consumer, seq FROM checkpoints ORDER BY consumer"):
                digest.checkpoint(consumer, seq)
                await conn.execute("INSERT INTO checkpoints (consumer, seq) VALUES ($1, $2)", consumer, seq)
    finally:
        await conn.close()
    return digest.result()


async def _digest_postgres(log: PostgresEventLog) -> LogDigest:
    digest = _Digest()
    last = 0
    while True:
        rows = await log.fetch(
            "SELECT seq, type, v, at_ms, idem_key, body FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
            last,
            _BATCH,
        )
        if not rows:
            break
        for seq, tag, v, at_ms, key, body in rows:
            digest.event(seq, tag, v, at_ms, key, bytes(body))
        last = int(rows[-1][0])
    if last != await log.last_seq():
        raise CopyError(f"destination head {await log.last_seq()} is not its last row {last}")
    for name, seq, data in await log.fetch(
        'SELECT name, seq, data FROM snapshots ORDER BY name COLLATE "C", seq'
    ):
        digest.snapshot(name, seq, bytes(data))
    for consumer, seq in await log.fetch(
        'SELECT consumer, seq FROM checkpoints ORDER BY consumer COLLATE "C"'
    ):
        digest.checkpoint(consumer, seq)
    return digest.result()
