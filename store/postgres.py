"""PostgresEventLog: the EventLog on PostgreSQL (asyncpg): a log shared by replicas, fenced leaders.

Why asyncpg: the well-kept asyncio driver for PostgreSQL, speaking the binary protocol (BYTEA and
BIGINT arrays travel without text conversion, which an `unnest` insert of a whole batch relies
on), with connection pools and LISTEN callbacks built in; psycopg 3 would do too, at a higher
per-call cost in its async mode.

How sequence numbers stay gap-free with several appenders (other tasks, other processes): a
SEQUENCE is not transactional (a rolled-back append burns its numbers), so the log keeps its last
seq in the one-row table `log_head`.  The append transaction locks that row (SELECT … FOR UPDATE),
numbers its events last+1…, inserts them and the new head, and commits: appenders are serialised
by the row lock, a rollback gives its numbers back, and commits happen in seq order, so a reader
that sees seq N has every seq below N too (followers can tail without holes).

Idempotency keys are looked up under that lock; checkpoints, decision-index rows and cycle spans
commit in the append's transaction; the head update NOTIFYs channel `fumarole_log` with the new
last seq (delivered at commit), which wakes `tail` on every process listening (with a polling
fallback of `poll_interval` seconds should a notification be missed).

Fencing: a leader takes `leadership` (store/pg_leadership.py) and gets an epoch; a log with an
epoch checks it in every write transaction (fumarole_check_epoch: the leadership row is share-locked
and compared, so a takeover waits for in-flight appends and later ones fail), and every event row
carries its writer's epoch, which a statement trigger compares with the current one.  A stale
leader's append is therefore refused by the database (SQLSTATE FM001 → FencedError).

Riding out the database: a connection the server or the network dropped (a restart, a stop, a
terminated backend, "the database system is shutting down") is replaced and the operation tried
again with a doubling pause (`retry_for` seconds in all, None: until the database answers; the
daemon's setting), one warning when the outage starts and one when it ends.  Reads simply run
again.  A write whose COMMIT was sent but not answered has an unknown outcome: before anything
else the new connection looks the append's first and last rows up (seq, type, key, body and the
epoch they must carry) and answers their seqs if they are there, else runs the transaction again
(renumbered, the keys looked up again, the epoch checked again), so a dropped connection neither
doubles nor loses an event, and a replica that lost its term meanwhile is refused (FM001) as ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Collection
from typing import Any

import anyio
import asyncpg

from fumarole.store.codec import CodecError, decode
from fumarole.store.index import IndexedRow, cycle_spans, decision_query
from fumarole.store.log import (
    READ_PATIENCE,
    CorruptEventError,
    FencedError,
    LogClosedError,
    LogError,
    StoredEvent,
    check_read_args,
)
from fumarole.store.log_front import LogFront
from fumarole.store.pg_errors import connect_error, is_transient
from fumarole.store.pg_schema import check_schema_pg, migrate_pg
from fumarole.store.pg_url import DsnError, check_dsn, is_postgres_url, redact_dsn, to_dollar_params

__all__ = [
    "CHANNEL",
    "CONNECT_TIMEOUT",
    "PostgresEventLog",
    "connect_error",
    "is_postgres_url",
    "is_transient",
    "redact_dsn",
]

log = logging.getLogger("fumarole.store")

CONNECT_TIMEOUT = 10.0  # seconds a connection attempt may take (a server that accepts and never answers)
_DRIVER_ERRORS = (asyncpg.PostgresError, OSError, asyncpg.InterfaceError, TimeoutError)
_FIRST_PAUSE = 0.05  # seconds before the first retry after a lost connection; doubles up to max_pause
CHANNEL = "fumarole_log"
_COLUMNS = "seq, type, v, idem_key, body"
# The log head locked (appenders queue on this row) and the batch's idempotency keys looked up.
_LOCK_HEAD = (
    "SELECT h.last_seq, k.keys, k.seqs FROM log_head h, LATERAL (SELECT array_agg(idem_key) AS keys, "
    "array_agg(seq) AS seqs FROM events WHERE idem_key = ANY($1::text[])) k WHERE h.id = 1 FOR UPDATE OF h"
)
# The rest of an append in one statement: decision-index rows ($1-$9), cycle spans ($10-$12), the
# new head ($13, NOTIFYing the channel at commit); _WRITE_ALL also inserts the events ($14-$20).
_WRITE_REST_CTES = (
    "WITH d AS (INSERT INTO decision_index (seq, cycle, type, job, namespace, pod, queue, node, detail) "
    "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], "
    "$7::text[], $8::text[], $9::text[])), "
    "c AS (INSERT INTO decision_cycles (cycle, first_seq, last_seq) "
    "SELECT * FROM unnest($10::bigint[], $11::bigint[], $12::bigint[]) "
    "ON CONFLICT (cycle) DO UPDATE SET first_seq = least(decision_cycles.first_seq, excluded.first_seq), "
    "last_seq = greatest(decision_cycles.last_seq, excluded.last_seq)), "
    "h AS (UPDATE log_head SET last_seq = $13 WHERE id = 1 RETURNING last_seq)"
)
_NOTIFY = f" SELECT pg_notify('{CHANNEL}', last_seq::text) FROM h"
_WRITE_REST = _WRITE_REST_CTES + _NOTIFY
_WRITE_ALL = (
    _WRITE_REST_CTES + ", e AS (INSERT INTO events (seq, type, v, at_ms, idem_key, body, epoch) "
    "SELECT s, t, v, a, k, b, $20 FROM unnest($14::bigint[], $15::text[], $16::int[], $17::bigint[], "
    "$18::text[], $19::bytea[]) AS u(s, t, v, a, k, b))" + _NOTIFY
)
# For `fumarole migrate --from … --to …` (store/copy.py): rows, index rows and spans as they are.
_INSERT = (
    "INSERT INTO events (seq, type, v, at_ms, idem_key, body, epoch) "
    "SELECT s, t, v, a, k, b, $7 FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bigint[], "
    "$5::text[], $6::bytea[]) AS u(s, t, v, a, k, b)"
)
_INSERT_INDEX = (
    "INSERT INTO decision_index (seq, cycle, type, job, namespace, pod, queue, node, detail) "
    "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], "
    "$7::text[], $8::text[], $9::text[])"
)
_UPSERT_CYCLES = (
    "INSERT INTO decision_cycles (cycle, first_seq, last_seq) "
    "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) "
    "ON CONFLICT (cycle) DO UPDATE SET first_seq = least(decision_cycles.first_seq, excluded.first_seq), "
    "last_seq = greatest(decision_cycles.last_seq, excluded.last_seq)"
)
_UPSERT_CHECKPOINT = (
    "INSERT INTO checkpoints (consumer, seq) VALUES ($1, $2) "
    "ON CONFLICT (consumer) DO UPDATE SET seq = excluded.seq"
)
_UPSERT_SNAPSHOT = (
    "INSERT INTO snapshots (name, seq, data) VALUES ($1, $2, $3) "
    "ON CONFLICT (name, seq) DO UPDATE SET data = excluded.data"
)
FENCED_SQLSTATE = "FM001"
_EVENT_COLUMNS = ["seq", "type", "v", "at_ms", "idem_key", "body", "epoch"]
_INDEX_COLUMNS = ["seq", "cycle", "type", "job", "namespace", "pod", "queue", "node", "detail"]
_COPY_FROM = 64  # rows: from this many a batch goes in with COPY (fewer: one INSERT … unnest)

# type, v, at_ms, idem_key, body, decision-index fields (None for a non-decision)


class _Attempt:
    """An append in progress across retries: once its COMMIT is sent, what to look for should the
    answer never come (the new rows' seqs and, for the first and last, what they must hold)."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: tuple[list[int], list[tuple[int, str, str | None, bytes]]] | None = None


class _Outage:
    """One warning when the database stops answering, one when it answers again (per log)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.since: float | None = None
        self.count = 0
        self.last_seconds = 0.0
        self.ended_at: float | None = None  # monotonic time the last outage ended

    def trouble(self, e: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.count += 1
            log.warning(
                "the database %s cannot be reached (%s); retrying until it answers",
                self.where,
                connect_error(e),
            )

    def fine(self) -> None:
        if self.since is not None:
            self.ended_at = time.monotonic()
            self.last_seconds = self.ended_at - self.since
            self.since = None
            log.warning("the database %s answers again after %.1f s", self.where, self.last_seconds)


class PostgresEventLog(LogFront):
    """The EventLog on a PostgreSQL database (see the module docstring).

    Open with `await PostgresEventLog.open(dsn)`; `readonly=True` applies no migration, refuses
    writes and requires the database at the code's schema version.  Writes from one process go
    through one connection in turn (an asyncio lock); reads use a pool of `readers` connections.
    """

    def __init__(
        self,
        dsn: str,
        pool: Any,
        writer: Any,
        *,
        readonly: bool,
        poll_interval: float,
        writer_settings: dict[str, str] | None = None,
        retry_for: float | None = 30.0,
        max_pause: float = 1.0,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.dsn = dsn
        self.retry_for = retry_for  # seconds an operation retries a lost database (None: for ever)
        self.max_pause = max_pause
        self.connect_timeout = connect_timeout
        self.outage = _Outage(redact_dsn(dsn))
        self._give_up = False
        self._wake = anyio.Event()
        self._writer_settings = writer_settings or {}
        self.path = redact_dsn(dsn)  # what messages name (as SqliteEventLog.path)
        self.readonly = readonly
        self.epoch = 0  # the leadership term this log writes in (0: unfenced, before any leader)
        self._pool = pool
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._poll_interval = poll_interval
        self._listener: Any = None
        self._listen_lock = asyncio.Lock()
        self._changed: anyio.Event | None = None
        self._closed = False
        self.commits = 0

    # -- opening / closing -----------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        readonly: bool = False,
        readers: int = 2,
        poll_interval: float = 1.0,
        connect_timeout: float = CONNECT_TIMEOUT,
        session_timeout: float = 10.0,
        retry_for: float | None = 30.0,
        max_pause: float = 1.0,
    ) -> PostgresEventLog:
        """Connect (and unless readonly, create and migrate the schema).

        `session_timeout` bounds how long the writer's session may wait for a lock and stay idle
        inside a transaction: a process paused in the middle of an append (SIGSTOP, a VM freeze)
        has its session ended by the server after that long, so its locks cannot keep a standby
        from taking over (lock_timeout, idle_in_transaction_session_timeout).  `retry_for` and
        `max_pause`: see the module notes (a lost connection is retried that long, pausing at most
        `max_pause` between tries)."""
        where = redact_dsn(dsn)
        try:
            check_dsn(dsn)
        except DsnError as e:
            raise LogError(str(e)) from None
        if readers < 1:
            raise ValueError("readers: at least 1")
        writer: Any = None
        pool: Any = None
        ms = str(max(1, round(session_timeout * 1000)))
        settings = {"lock_timeout": ms, "idle_in_transaction_session_timeout": ms}
        try:
            if readonly:
                conn = await asyncpg.connect(dsn, timeout=connect_timeout)
                try:
                    await check_schema_pg(conn, where)
                finally:
                    await conn.close()
            else:
                writer = await asyncpg.connect(dsn, timeout=connect_timeout, server_settings=settings)
                await migrate_pg(writer, where)
            # min_size=0: connections are made on demand (a pool keeping a floor reconnects in the
            # background and logs a traceback for each try while the server is down).
            pool = await asyncpg.create_pool(dsn, min_size=0, max_size=readers, timeout=connect_timeout)
        except BaseException as e:
            if writer is not None:
                writer.terminate()
            if pool is not None:
                pool.terminate()
            if isinstance(e, (asyncpg.PostgresError, OSError, asyncpg.InterfaceError, TimeoutError)):
                raise LogError(
                    f"{where}: cannot open the event log: {connect_error(e, connect_timeout)}"
                ) from e
            raise
        return cls(
            dsn,
            pool,
            writer,
            readonly=readonly,
            poll_interval=poll_interval,
            writer_settings=settings,
            retry_for=retry_for,
            max_pause=max_pause,
            connect_timeout=connect_timeout,
        )

    def interrupt(self) -> None:
        """Stop waiting for a lost database: operations retrying now (and later) fail at once."""
        self._give_up = True
        self._wake.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep between two tries (cancellable; `interrupt` or `close` ends it early)."""
        with anyio.move_on_after(seconds):
            await self._wake.wait()

    def _may_retry(self, started: float, patience: float | None) -> bool:
        if self._give_up or self._closed:
            return False
        limit = self.retry_for if patience is None else patience
        return limit is None or time.monotonic() - started < limit

    async def close(self) -> None:
        """Wait for the running write, close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        with anyio.CancelScope(shield=True):
            async with self._write_lock:
                if self._writer is not None and not self._writer.is_closed():
                    try:
                        await self._writer.close(timeout=self.connect_timeout)
                    except (OSError, asyncpg.InterfaceError, asyncpg.PostgresError, TimeoutError):
                        self._writer.terminate()
            if self._listener is not None:
                await self._listener.close()
            await self._pool.close()
        self._notify()

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosedError("the event log is closed")
        if self.readonly or self._writer is None:
            raise LogError(f"{self.path}: the event log was opened read-only")

    async def _write(
        self,
        rows: list[IndexedRow],
        checkpoint: tuple[str, int] | None,
        snapshot: tuple[str, int, bytes] | None,
    ) -> list[int]:
        attempt = _Attempt()

        async def work(conn: Any) -> list[int]:
            if attempt.pending is not None:  # the last try's COMMIT was never answered
                done = await self._committed(conn, attempt)
                if done is not None:
                    return done
            return await self._transaction(conn, rows, checkpoint, snapshot, attempt)

        seqs: list[int] = await self._with_writer(work)
        self.commits += 1
        if rows:
            self._notify()
        return seqs

    async def _committed(self, conn: Any, attempt: _Attempt) -> list[int] | None:
        """The seqs of an append whose COMMIT went unanswered if it did commit (its first and last
        new rows are in the log, as written, with this log's epoch), else None (not written)."""
        assert attempt.pending is not None
        seqs, probes = attempt.pending
        found = await conn.fetch(
            "SELECT seq, type, idem_key, body, epoch FROM events WHERE seq = ANY($1::bigint[])",
            [p[0] for p in probes],
        )
        have = {int(r[0]): (str(r[1]), r[2], bytes(r[3]), int(r[4])) for r in found}
        committed = all(have.get(seq) == (tag, key, body, self.epoch) for seq, tag, key, body in probes)
        attempt.pending = None
        log.info(
            "an append whose commit went unanswered %s",
            "had committed" if committed else "had not committed: writing it again",
            extra={"first_seq": probes[0][0], "last_seq": probes[-1][0]},
        )
        return seqs if committed else None

    async def _connect_writer(self) -> Any:
        return await asyncpg.connect(
            self.dsn, timeout=self.connect_timeout, server_settings=self._writer_settings
        )

    async def _with_writer(self, work: Any, *, retry: bool = True) -> Any:
        """Run `work(connection)` on the writer connection, in turn with every other write, each try
        shielded from cancellation (a started transaction finishes: commit or rollback).  A lost
        connection is replaced and `work` run again (see the module notes) while `retry` and the
        log's patience allow; the pauses between tries are not shielded."""
        self._check_writable()
        started = time.monotonic()
        pause = _FIRST_PAUSE
        while True:
            failure: BaseException | None = None
            with anyio.CancelScope(shield=True):
                async with self._write_lock:
                    self._check_writable()
                    conn = self._writer
                    try:
                        if conn is None or conn.is_closed():
                            conn = self._writer = await self._connect_writer()
                        result = await work(conn)
                    except FencedError:
                        raise
                    except (*_DRIVER_ERRORS, asyncpg.InternalClientError) as e:
                        if isinstance(e, asyncpg.InternalClientError) and conn is not None:
                            conn.terminate()  # a session the server's shutdown left in a bad state
                        if not is_transient(e, conn):
                            if isinstance(e, asyncpg.PostgresError):
                                raise _log_error(e) from e
                            raise LogError(f"{self.path}: write failed: {connect_error(e)}") from e
                        failure = e
                        if conn is not None and not conn.is_closed():
                            conn.terminate()  # a server shutting down: do not reuse this session
                    else:
                        self.outage.fine()
                        return result
            assert failure is not None
            self.outage.trouble(failure)
            if not retry or not self._may_retry(started, None):
                raise LogError(
                    f"{self.path}: write failed (connection): {connect_error(failure, self.connect_timeout)}"
                ) from failure
            await self._pause(pause)
            pause = min(pause * 2, self.max_pause)

    async def _transaction(
        self,
        conn: Any,
        rows: list[IndexedRow],
        checkpoint: tuple[str, int] | None,
        snapshot: tuple[str, int, bytes] | None,
        attempt: _Attempt | None = None,
    ) -> list[int]:
        tr = conn.transaction()
        await tr.start()
        try:
            seqs, probes = await self._statements(conn, rows, checkpoint, snapshot)
        except BaseException:
            if not conn.is_closed():
                with contextlib.suppress(
                    asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError
                ):
                    await tr.rollback()
            raise
        if attempt is not None and probes:
            attempt.pending = (seqs, probes)  # from here the outcome is unknown until COMMIT answers
        await tr.commit()
        if attempt is not None:
            attempt.pending = None
        return seqs

    async def _statements(
        self,
        conn: Any,
        rows: list[IndexedRow],
        checkpoint: tuple[str, int] | None,
        snapshot: tuple[str, int, bytes] | None,
    ) -> tuple[list[int], list[tuple[int, str, str | None, bytes]]]:
        """The statements of one append (inside its transaction); its seqs and the probes of its first
        and last new rows (seq, type, key, body) should its commit go unanswered."""
        probes: list[tuple[int, str, str | None, bytes]] = []
        if self.epoch:
            await conn.fetchval("SELECT fumarole_check_epoch($1)", self.epoch)
        seqs: list[int] = []
        if rows:
            # One round trip: lock the head (appenders queue here) and look the keys up.
            wanted = sorted({r[3] for r in rows if r[3] is not None})
            head = await conn.fetchrow(_LOCK_HEAD, wanted)
            last = int(head[0])
            known = dict(zip(head[1] or (), head[2] or (), strict=True))
            cols: tuple[list[Any], ...] = ([], [], [], [], [], [])
            indexed: list[tuple[Any, ...]] = []
            next_seq = last + 1
            for tag, v, at_ms, key, data, fields in rows:
                if key is not None:
                    old = known.get(key)
                    if old is not None:
                        seqs.append(old)
                        continue
                    known[key] = next_seq
                for col, value in zip(cols, (next_seq, tag, v, at_ms, key, data), strict=True):
                    col.append(value)
                if fields is not None:
                    indexed.append((next_seq, *fields))
                seqs.append(next_seq)
                next_seq += 1
            if cols[0]:
                ends = (0, len(cols[0]) - 1) if len(cols[0]) > 1 else (0,)
                probes = [(cols[0][i], cols[1][i], cols[4][i], bytes(cols[5][i])) for i in ends]
                index_cols = [list(c) for c in zip(*indexed, strict=True)] or [[]] * 9
                spans = cycle_spans(indexed)
                span_cols = [list(c) for c in zip(*spans, strict=True)] or [[]] * 3
                if len(cols[0]) >= _COPY_FROM:
                    records = zip(*cols, [self.epoch] * len(cols[0]), strict=True)
                    await conn.copy_records_to_table("events", records=records, columns=_EVENT_COLUMNS)
                    if len(indexed) >= _COPY_FROM:
                        await conn.copy_records_to_table(
                            "decision_index", records=indexed, columns=_INDEX_COLUMNS
                        )
                        index_cols = [[]] * 9
                    await conn.execute(_WRITE_REST, *index_cols, *span_cols, next_seq - 1)
                else:  # one round trip: events, index rows, cycle spans, head and NOTIFY
                    await conn.execute(_WRITE_ALL, *index_cols, *span_cols, next_seq - 1, *cols, self.epoch)
        if checkpoint is not None:
            await conn.execute(_UPSERT_CHECKPOINT, checkpoint[0], checkpoint[1])
        if snapshot is not None:
            await conn.execute(_UPSERT_SNAPSHOT, *snapshot)
        return seqs, probes

    # -- notifications ---------------------------------------------------------------------------
    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _on_notification(self, *_: Any) -> None:
        self._notify()

    async def _ensure_listening(self) -> None:
        if self._listener is not None:
            return
        async with self._listen_lock:
            if self._listener is None and not self._closed:
                try:
                    conn = await asyncpg.connect(self.dsn, timeout=self.connect_timeout)
                    await conn.add_listener(CHANNEL, self._on_notification)
                except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
                    return  # tail polls (every poll_interval) until a listener connects
                conn.add_termination_listener(self._on_listener_lost)
                self._listener = conn

    def _on_listener_lost(self, *_: Any) -> None:
        """The listening connection ended (server restart, network): listen again on the next tail."""
        self._listener = None
        self._notify()

    # -- reads -----------------------------------------------------------------------------------
    async def _fetch(self, sql: str, *params: Any, retry: bool = True) -> list[Any]:
        """Run a read on the pool; a lost connection is replaced and the read run again while
        `retry` and the patience allow (READ_PATIENCE, else the log's `retry_for`)."""
        started = time.monotonic()
        pause = _FIRST_PAUSE
        patience = READ_PATIENCE.get()
        while True:
            if self._closed:
                raise LogClosedError("the event log is closed")
            conn: Any = None
            try:
                async with self._pool.acquire() as conn:
                    try:
                        rows = list(await conn.fetch(sql, *params))
                    except asyncpg.InternalClientError:
                        conn.terminate()  # a session the server's shutdown left in a bad state
                        raise
            except (*_DRIVER_ERRORS, asyncpg.InternalClientError) as e:
                if self._closed:
                    raise LogClosedError("the event log is closed") from e
                if not is_transient(e, conn) and not _pool_connection_lost(e):
                    if isinstance(e, asyncpg.PostgresError):
                        raise LogError(f"{self.path}: read failed: {e}") from e
                    raise LogError(f"{self.path}: read failed: {connect_error(e)}") from e
                self.outage.trouble(e)
                if not retry or not self._may_retry(started, patience):
                    raise LogError(
                        f"{self.path}: read failed (connection): {connect_error(e, self.connect_timeout)}"
                    ) from e
                await self._pause(pause)
                pause = min(pause * 2, self.max_pause)
                continue
            self.outage.fine()
            return rows

    async def _select_rows(
        self, from_seq: int, to_seq: int | None, limit: int, types: Collection[str] | None
    ) -> list[Any]:
        if types is not None and not types:
            return []
        where = ["seq >= $1"]
        params: list[Any] = [from_seq]
        if to_seq is not None:
            params.append(to_seq)
            where.append(f"seq <= ${len(params)}")
        if types is not None:
            params.append(sorted(set(types)))
            where.append(f"type = ANY(${len(params)}::text[])")
        params.append(limit)
        sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY seq LIMIT ${len(params)}"
        return await self._fetch(sql, *params)

    def _decode(self, row: Any) -> StoredEvent:
        return _stored(row)

    async def read(
        self, from_seq: int = 1, limit: int = 1000, *, types: Collection[str] | None = None
    ) -> list[StoredEvent]:
        check_read_args(from_seq, limit)
        return [_stored(r) for r in await self._select_rows(from_seq, None, limit, types)]

    async def tail(
        self, from_seq: int, *, limit: int = 1000, timeout: float | None = None
    ) -> list[StoredEvent]:
        check_read_args(from_seq, limit)
        with anyio.move_on_after(timeout):
            while True:
                if self._closed:
                    raise LogClosedError("the event log is closed")
                await self._ensure_listening()
                if self._changed is None:
                    self._changed = anyio.Event()
                changed = self._changed
                page = await self.read(from_seq, limit)
                if page:
                    return page
                with anyio.move_on_after(self._poll_interval):
                    await changed.wait()
        return []

    async def read_decisions(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[StoredEvent]:
        """Decision events matching every filter through the decision index (store/index.py)."""
        check_read_args(since, limit)
        sql, params = decision_query(since=since, limit=limit, types=types, **filters)
        return [_stored(r) for r in await self._fetch(to_dollar_params(sql), *params)]

    async def last_seq(self) -> int:
        rows = await self._fetch("SELECT last_seq FROM log_head WHERE id = 1")
        return int(rows[0][0])

    async def checkpoint(self, consumer: str) -> int:
        rows = await self._fetch("SELECT seq FROM checkpoints WHERE consumer = $1", consumer)
        return int(rows[0][0]) if rows else 0

    async def checkpoints(self) -> dict[str, int]:
        """Every consumer's checkpoint (diagnostics, the migration's verification)."""
        rows = await self._fetch("SELECT consumer, seq FROM checkpoints ORDER BY consumer")
        return {str(c): int(s) for c, s in rows}

    async def latest_snapshot(
        self, name: str, *, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        if at_or_before is None:
            rows = await self._fetch(
                "SELECT seq, data FROM snapshots WHERE name = $1 ORDER BY seq DESC LIMIT 1", name
            )
        else:
            rows = await self._fetch(
                "SELECT seq, data FROM snapshots WHERE name = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1",
                name,
                at_or_before,
            )
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    async def fetch(self, sql: str, *params: Any, retry: bool = True) -> list[Any]:
        """Run a read query on the reader pool (the leadership helpers, the migration's digest);
        `retry=False`: a lost connection fails at once (LogError) instead of being waited out."""
        return await self._fetch(sql, *params, retry=retry)

    async def execute_write(self, sql: str, *params: Any, retry: bool = True) -> list[Any]:
        """Run one statement on the writer connection, in turn with the appends (leadership changes);
        a lost connection runs it again unless `retry=False` (a statement that is not idempotent)."""

        async def work(conn: Any) -> list[Any]:
            return list(await conn.fetch(sql, *params))

        rows: list[Any] = await self._with_writer(work, retry=retry)
        return rows


def _stored(row: Any) -> StoredEvent:
    seq, tag, v, key, body = row
    try:
        ev = decode(tag, v, body)
    except CodecError as e:
        raise CorruptEventError(seq, str(e)) from e
    return StoredEvent(seq=seq, type=tag, event=ev, idem_key=key)


def _pool_connection_lost(e: BaseException) -> bool:
    """A pool read whose connection closed under it ("connection is closed", "connection was closed
    in the middle of operation"): the pool replaces that connection on the next acquire."""
    return isinstance(e, asyncpg.InterfaceError) and "closed" in str(e)


def _log_error(e: asyncpg.PostgresError) -> LogError:
    if getattr(e, "sqlstate", None) == FENCED_SQLSTATE:
        return FencedError(str(e))
    return LogError(f"write failed, nothing of it was written: {type(e).__name__}: {e}")
