"""SqliteEventLog: the EventLog on SQLite (aiosqlite): one group-committing writer, read-only readers."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from fumarole.store.codec import CodecError, decode
from fumarole.store.disk import readonly_uri, write_failure
from fumarole.store.index import (
    INSERT_INDEX,
    UPSERT_CYCLE,
    IndexedRow,
    cycle_spans,
    decision_query,
)
from fumarole.store.log import (
    CorruptEventError,
    LogClosedError,
    LogError,
    StoredEvent,
    check_read_args,
)
from fumarole.store.log_front import LogFront
from fumarole.store.migrate import check_schema, migrate

_INSERT = (
    "INSERT INTO events (seq, type, v, at_ms, idem_key, body) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (idem_key) DO NOTHING"
)
_UPSERT_CHECKPOINT = (
    "INSERT INTO checkpoints (consumer, seq) VALUES (?, ?) "
    "ON CONFLICT (consumer) DO UPDATE SET seq = excluded.seq"
)
_UPSERT_SNAPSHOT = (
    "INSERT INTO snapshots (name, seq, data) VALUES (?, ?, ?) "
    "ON CONFLICT (name, seq) DO UPDATE SET data = excluded.data"
)
_COLUMNS = "seq, type, v, idem_key, body"
_KEY_CHUNK = 500  # idempotency keys looked up per SELECT (well under SQLite's variable limit)

Row = tuple[str, int, int | None, str | None, bytes]  # type, v, at_ms, idem_key, body
# Row plus the decision-index fields of its event (store/index.py), None for a non-decision.


class _KeysExist(Exception):
    """Internal: the optimistic insert met idempotency keys already in the log."""


class _Request:
    """One caller's write: rows to append, an optional checkpoint and/or snapshot, and its future."""

    __slots__ = ("checkpoint", "future", "keys", "rows", "snapshot")

    def __init__(
        self,
        rows: list[IndexedRow],
        checkpoint: tuple[str, int] | None,
        snapshot: tuple[str, int, bytes] | None,
        future: asyncio.Future[list[int]],
    ) -> None:
        self.rows = rows
        self.checkpoint = checkpoint
        self.snapshot = snapshot
        self.future = future


class _Writer:
    """The only read-write connection.  Its methods run in a worker thread, one call per
    transaction (a thread hop costs far more than the SQL of a batch on a busy machine)."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        # Used from one worker thread at a time (the writer's CapacityLimiter(1)), never concurrently.
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            for pragma in (
                "journal_mode = WAL",
                "synchronous = FULL",
                f"busy_timeout = {int(busy_timeout_ms)}",
            ):
                self.conn.execute(f"PRAGMA {pragma}")
        except BaseException:
            self.conn.close()
            raise

    def max_seq(self) -> int:
        return int(self.conn.execute("SELECT max(seq) FROM events").fetchone()[0] or 0)

    def transaction(self, group: list[_Request], last_seq: int) -> tuple[list[list[int]], int]:
        """Commit the group; returns each request's seqs and the new last seq.

        Optimistic first: insert without looking keys up (ON CONFLICT DO NOTHING skips a key that
        exists, which the row count reveals); on a skip, roll back and redo with the keys looked up.
        A primary-key conflict means another process appended since `last_seq`: reload, redo once.
        """
        try:
            return self._once(group, last_seq, lookup=False)
        except _KeysExist:
            return self._once(group, last_seq, lookup=True)
        except sqlite3.IntegrityError:
            return self._once(group, self.max_seq(), lookup=True)

    def _once(self, group: list[_Request], last_seq: int, *, lookup: bool) -> tuple[list[list[int]], int]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            known = self._known_keys(group) if lookup else {}
            next_seq = last_seq + 1
            params: list[tuple[Any, ...]] = []
            indexed: list[tuple[Any, ...]] = []  # decision-index rows, same transaction
            results: list[list[int]] = []
            checkpoints: dict[str, int] = {}
            snapshots: list[tuple[str, int, bytes]] = []
            for req in group:
                seqs: list[int] = []
                for tag, v, at_ms, key, data, fields in req.rows:
                    if key is not None:
                        old = known.get(key)
                        if old is not None:
                            seqs.append(old)
                            continue
                        known[key] = next_seq
                    params.append((next_seq, tag, v, at_ms, key, data))
                    if fields is not None:
                        indexed.append((next_seq, *fields))
                    seqs.append(next_seq)
                    next_seq += 1
                results.append(seqs)
                if req.checkpoint is not None:
                    checkpoints[req.checkpoint[0]] = req.checkpoint[1]
                if req.snapshot is not None:
                    snapshots.append(req.snapshot)
            if params:
                cur = conn.executemany(_INSERT, params)
                if cur.rowcount != len(params):
                    if not lookup:
                        raise _KeysExist
                    raise LogError(
                        f"append: {len(params) - cur.rowcount} row(s) hit an idempotency conflict the writer "
                        "did not expect (another writer?); nothing was written"
                    )
                if indexed:
                    conn.executemany(INSERT_INDEX, indexed)
                    conn.executemany(UPSERT_CYCLE, cycle_spans(indexed))
            if checkpoints:
                conn.executemany(_UPSERT_CHECKPOINT, list(checkpoints.items()))
            if snapshots:
                conn.executemany(_UPSERT_SNAPSHOT, snapshots)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results, next_seq - 1

    def _known_keys(self, group: list[_Request]) -> dict[str, int]:
        keys = sorted({r[3] for req in group for r in req.rows if r[3] is not None})
        known: dict[str, int] = {}
        for i in range(0, len(keys), _KEY_CHUNK):
            chunk = keys[i : i + _KEY_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(f"SELECT idem_key, seq FROM events WHERE idem_key IN ({marks})", chunk)
            known.update((str(k), int(s)) for k, s in rows)
        return known

    def close(self) -> None:
        # The last connection: fold the WAL into the database file and truncate it (best effort;
        # a WAL left behind is valid and replayed on open).
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


class SqliteEventLog(LogFront):
    """The EventLog on an SQLite file.

    Writes go through one writer task that owns the only read-write connection: it takes the
    queued requests (up to `max_group_events` events, waiting at most `max_group_wait` seconds for
    more after the first; 0 takes only what queued during the previous commit) and commits them in
    one transaction (BEGIN IMMEDIATE … COMMIT, synchronous=FULL, WAL), run as a single call in a
    worker thread.  Each caller's append resolves after COMMIT, so an acknowledged append is
    durable.  A commit runs in its own task, shielded from cancellation; a caller cancelled while
    waiting does not stop its write.  If a group fails, its requests are retried one by one so one
    bad request fails alone.

    Reads use separate read-only aiosqlite connections (`readers` of them, used in turn), keyset
    paging on seq.  Open with `await SqliteEventLog.open(path)`; `readonly=True` opens no writer, applies no
    migration and requires the database to be at the code's schema version.
    """

    def __init__(
        self,
        path: str,
        *,
        readonly: bool,
        writer: _Writer | None,
        readers: list[aiosqlite.Connection],
        last_seq: int,
        max_group_events: int,
        max_group_wait: float,
        poll_interval: float,
    ) -> None:
        self.path = path
        self.readonly = readonly
        self._writer = writer
        self._writer_limiter = anyio.CapacityLimiter(1)
        self._readers = readers
        self._reader_turn = itertools.cycle(range(len(readers)))
        self._last_seq = last_seq
        self._max_group_events = max_group_events
        self._max_group_wait = max_group_wait
        self._poll_interval = poll_interval
        self._queue: asyncio.Queue[_Request | None] = asyncio.Queue()
        self._changed: anyio.Event | None = None
        self._closed = False
        self._writer_error: BaseException | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed by the writer (observability, tests)

    # -- opening / closing -----------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        readonly: bool = False,
        readers: int = 2,
        max_group_events: int = 20000,
        max_group_wait: float = 0.0,
        busy_timeout_ms: int = 5000,
        poll_interval: float = 0.1,
    ) -> SqliteEventLog:
        """Open (and unless readonly, create and migrate) the log at `path`."""
        p = str(path)
        if readers < 1:
            raise ValueError("readers: at least 1")
        if readonly:
            await anyio.to_thread.run_sync(check_schema, p)
        else:
            await anyio.to_thread.run_sync(lambda: migrate(p, busy_timeout_ms=busy_timeout_ms))
        writer: _Writer | None = None
        conns: list[aiosqlite.Connection] = []
        try:
            if not readonly:
                writer = await anyio.to_thread.run_sync(_Writer, p, busy_timeout_ms)
            uri = readonly_uri(p) if readonly else f"{Path(p).resolve().as_uri()}?mode=ro"
            for _ in range(readers):
                c = await aiosqlite.connect(uri, uri=True, isolation_level=None)
                conns.append(c)
                await c.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                await c.execute("PRAGMA query_only = 1")
            rows = list(await conns[0].execute_fetchall("SELECT max(seq) FROM events"))
            last = int(rows[0][0] or 0)
        except BaseException as e:
            for c in conns:
                await c.close()
            if writer is not None:
                writer.conn.close()
            if isinstance(e, sqlite3.Error | OSError):
                raise LogError(f"{p}: cannot open the event log: {write_failure(p, e)}") from e
            raise
        log = cls(
            p,
            readonly=readonly,
            writer=writer,
            readers=conns,
            last_seq=last,
            max_group_events=max_group_events,
            max_group_wait=max_group_wait,
            poll_interval=poll_interval,
        )
        if writer is not None:
            log._writer_task = asyncio.get_running_loop().create_task(
                log._writer_loop(), name="fumarole-log-writer"
            )
        return log

    async def close(self) -> None:
        """Commit what is queued, stop the writer, close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._writer_task is not None:
            self._queue.put_nowait(None)
            with anyio.CancelScope(shield=True):
                await asyncio.wait([self._writer_task])
        with anyio.CancelScope(shield=True):
            # Readers first, so that the writer is the last connection: checkpoint the WAL into
            # the database file and truncate it (a clean shutdown leaves no WAL to recover).
            for c in self._readers:
                await c.close()
            if self._writer is not None:
                await anyio.to_thread.run_sync(self._writer.close, limiter=self._writer_limiter)
        self._notify()

    def _check_writable(self) -> None:
        if self.readonly:
            raise LogError(f"{self.path}: the event log was opened read-only")
        if self._closed:
            raise LogClosedError("the event log is closed")
        if self._writer_error is not None:
            raise LogClosedError(f"the event log's writer stopped: {self._writer_error!r}")

    async def _write(
        self,
        rows: list[IndexedRow],
        checkpoint: tuple[str, int] | None,
        snapshot: tuple[str, int, bytes] | None,
    ) -> list[int]:
        self._check_writable()
        fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Request(rows, checkpoint, snapshot, fut))
        # Once queued, the write happens whatever becomes of the caller: wait for it shielded.
        with anyio.CancelScope(shield=True):
            seqs = await asyncio.shield(fut)
        return seqs

    async def _writer_loop(self) -> None:
        stop = False
        try:
            while not stop:
                first = await self._queue.get()
                if first is None:
                    break
                group, stop = await self._gather(first)
                await asyncio.shield(asyncio.ensure_future(self._commit_group(group)))
        except BaseException as e:
            self._writer_error = e
            raise
        finally:
            self._fail_queued(LogClosedError("the event log closed before this write was committed"))

    async def _gather(self, first: _Request) -> tuple[list[_Request], bool]:
        """`first` plus what else is queued, up to max_group_events (whole requests only)."""
        group = [first]
        n = len(first.rows)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_group_wait
        while n < self._max_group_events:
            try:
                nxt = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    nxt = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            if nxt is None:
                return group, True
            group.append(nxt)
            n += len(nxt.rows)
        return group, False

    async def _commit_group(self, group: list[_Request]) -> None:
        try:
            await self._commit_group_inner(group)
        finally:  # interrupted (the event loop shutting down): nobody may wait forever
            for req in group:
                _set_exception(
                    req.future, LogClosedError("the write was interrupted; it may not be committed")
                )

    async def _commit_group_inner(self, group: list[_Request]) -> None:
        try:
            results = await self._transaction(group)
        except Exception as e:
            if len(group) == 1:
                _set_exception(group[0].future, _log_error(e, self.path))
                return
            for req in group:  # isolate the failing request
                try:
                    (res,) = await self._transaction([req])
                except Exception as e1:
                    _set_exception(req.future, _log_error(e1, self.path))
                else:
                    _set_result(req.future, res)
            return
        for req, res in zip(group, results, strict=True):
            _set_result(req.future, res)

    async def _transaction(self, group: list[_Request]) -> list[list[int]]:
        assert self._writer is not None
        results, last = await anyio.to_thread.run_sync(
            self._writer.transaction, group, self._last_seq, limiter=self._writer_limiter
        )
        self.commits += 1
        if last != self._last_seq:
            self._last_seq = last
            self._notify()
        return results

    def _fail_queued(self, err: BaseException) -> None:
        while True:
            try:
                req = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if req is not None:
                _set_exception(req.future, err)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # -- reads -----------------------------------------------------------------------------------
    def _reader(self) -> aiosqlite.Connection:
        if self._closed:
            raise LogClosedError("the event log is closed")
        return self._readers[next(self._reader_turn)]

    def _decode(self, row: Any) -> StoredEvent:
        return _stored(row, self.path)

    async def _select(
        self, from_seq: int, to_seq: int | None, limit: int, types: Collection[str] | None
    ) -> list[StoredEvent]:
        return await self._select_rows(from_seq, to_seq, limit, types, decode_rows=True)

    async def _select_rows(
        self,
        from_seq: int,
        to_seq: int | None,
        limit: int,
        types: Collection[str] | None,
        *,
        decode_rows: bool = False,
    ) -> list[Any]:
        sql, params = _select_sql(from_seq, to_seq, limit, None if types is None else sorted(set(types)))
        if not sql:
            return []
        try:
            rows = await self._reader().execute_fetchall(sql, params)
        except (sqlite3.Error, UnicodeDecodeError) as e:
            raise await self._read_error(e, from_seq) from e
        except ValueError as e:  # aiosqlite: the connection was closed under us
            raise LogClosedError("the event log is closed") from e
        return [_stored(r, self.path) for r in rows] if decode_rows else list(rows)

    async def read(
        self, from_seq: int = 1, limit: int = 1000, *, types: Collection[str] | None = None
    ) -> list[StoredEvent]:
        check_read_args(from_seq, limit)
        return await self._select(from_seq, None, limit, types)

    async def tail(
        self, from_seq: int, *, limit: int = 1000, timeout: float | None = None
    ) -> list[StoredEvent]:
        check_read_args(from_seq, limit)
        with anyio.move_on_after(timeout):
            while True:
                if self._changed is None:
                    self._changed = anyio.Event()
                changed = self._changed
                if self.readonly or from_seq <= self._last_seq:
                    page = await self._select(from_seq, None, limit, None)
                    if page:
                        return page
                if self._closed:
                    raise LogClosedError("the event log is closed")
                if self.readonly:  # another process writes: poll
                    with anyio.move_on_after(self._poll_interval):
                        await changed.wait()
                else:
                    await changed.wait()
        return []

    async def read_decisions(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[StoredEvent]:
        """Decision events matching every filter (job, namespace, pod, queue, node, cycle) through the
        decision index (store/index.py), seq >= since, ascending, at most `limit` (keyset paging)."""
        check_read_args(since, limit)
        sql, params = decision_query(since=since, limit=limit, types=types, **filters)
        try:
            rows = await self._reader().execute_fetchall(sql, params)
        except (sqlite3.Error, UnicodeDecodeError) as e:
            raise await self._read_error(e, since) from e
        except ValueError as e:  # aiosqlite: the connection was closed under us
            raise LogClosedError("the event log is closed") from e
        return [_stored(r, self.path) for r in rows]

    async def last_seq(self) -> int:
        if not self.readonly:
            if self._closed:
                raise LogClosedError("the event log is closed")
            return self._last_seq
        rows = await self._fetch("SELECT max(seq) FROM events", ())
        return int(rows[0][0] or 0)

    async def checkpoint(self, consumer: str) -> int:
        rows = await self._fetch("SELECT seq FROM checkpoints WHERE consumer = ?", (consumer,))
        return int(rows[0][0]) if rows else 0

    async def checkpoints(self) -> dict[str, int]:
        """Every consumer's checkpoint (diagnostics)."""
        rows = await self._fetch("SELECT consumer, seq FROM checkpoints ORDER BY consumer", ())
        return {str(c): int(s) for c, s in rows}

    async def latest_snapshot(
        self, name: str, *, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        sql = "SELECT seq, data FROM snapshots WHERE name = ?"
        params: list[Any] = [name]
        if at_or_before is not None:
            sql += " AND seq <= ?"
            params.append(at_or_before)
        rows = await self._fetch(sql + " ORDER BY seq DESC LIMIT 1", params)
        if not rows:
            return None
        return int(rows[0][0]), bytes(rows[0][1])

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """A small read (max seq, checkpoints, a snapshot); an SQLite error names the file."""
        try:
            return list(await self._reader().execute_fetchall(sql, params))
        except (sqlite3.Error, UnicodeDecodeError) as e:
            raise LogError(f"{self.path}: read failed: {_one_line(e)}") from e
        except ValueError as e:  # aiosqlite: the connection was closed under us
            raise LogClosedError("the event log is closed") from e

    async def _read_error(self, e: sqlite3.Error | UnicodeDecodeError, from_seq: int) -> LogError:
        """The error of a failed page read, naming the file, and the seq when one row is at fault:
        SQLite refuses a TEXT column (type, idem_key) that is not UTF-8, so find that row with the
        columns read as bytes."""
        if isinstance(e, UnicodeDecodeError) or (
            isinstance(e, sqlite3.OperationalError) and "decode" in str(e)
        ):
            with contextlib.suppress(sqlite3.Error, ValueError):
                seq = await self._first_bad_text(from_seq)
                if seq is not None:
                    return CorruptEventError(seq, "its type or idempotency key is not UTF-8 text", self.path)
        if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
            return LogError(f"{self.path}: the event log file is damaged (SQLite: {_one_line(e)})")
        return LogError(f"{self.path}: read failed: {_one_line(e)}")

    async def _first_bad_text(self, from_seq: int) -> int | None:
        seq = from_seq
        while True:
            rows = list(
                await self._reader().execute_fetchall(
                    "SELECT seq, CAST(type AS BLOB), CAST(idem_key AS BLOB) FROM events "
                    "WHERE seq >= ? ORDER BY seq LIMIT 5000",
                    (seq,),
                )
            )
            if not rows:
                return None
            for s, tag, key in rows:
                try:
                    for text in (tag, key):
                        if text is not None:
                            bytes(text).decode("utf-8")
                except UnicodeDecodeError:
                    return int(s)
            seq = int(rows[-1][0]) + 1


def _select_sql(
    from_seq: int, to_seq: int | None, limit: int, types: list[str] | None
) -> tuple[str, list[Any]]:
    """A keyset page query.  One type (or none) walks an index in seq order; several types are
    merged from one ordered, limited subquery per type (an IN list would collect every match and
    sort it, whatever the limit)."""
    if types is not None and not types:
        return "", []
    where = "seq >= ?" + ("" if to_seq is None else " AND seq <= ?")
    bounds: list[Any] = [from_seq] + ([] if to_seq is None else [to_seq])
    if types is None:
        return f"SELECT {_COLUMNS} FROM events WHERE {where} ORDER BY seq LIMIT ?", [*bounds, limit]
    if len(types) == 1:
        return f"SELECT {_COLUMNS} FROM events WHERE type = ? AND {where} ORDER BY seq LIMIT ?", [
            types[0],
            *bounds,
            limit,
        ]
    sub = f"SELECT * FROM (SELECT {_COLUMNS} FROM events WHERE type = ? AND {where} ORDER BY seq LIMIT ?)"
    params: list[Any] = []
    for t in types:
        params += [t, *bounds, limit]
    return " UNION ALL ".join([sub] * len(types)) + " ORDER BY seq LIMIT ?", [*params, limit]


def _stored(row: Any, path: str) -> StoredEvent:
    seq, tag, v, key, body = row
    if (
        not isinstance(tag, str)
        or isinstance(v, bool)
        or not isinstance(v, int)
        or not isinstance(body, bytes)
    ):
        # SQLite's columns are dynamically typed: a damaged record header gives another kind of value
        kinds = f"type {type(tag).__name__}, v {type(v).__name__}, body {type(body).__name__}"
        raise CorruptEventError(seq, f"the row's columns are of the wrong kind ({kinds})", path)
    try:
        ev = decode(tag, v, body)
    except CodecError as e:
        raise CorruptEventError(seq, str(e), path) from e
    return StoredEvent(seq=seq, type=tag, event=ev, idem_key=key)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _log_error(e: Exception, path: str) -> Exception:
    """A failed write as the caller sees it: an SQLite or OS error becomes a LogError naming the
    file and the cause (a full disk, the file-size limit: store/disk.py)."""
    if isinstance(e, sqlite3.Error | OSError):
        err = LogError(write_failure(path, e))
        err.__cause__ = e
        return err
    return e


def _set_result(fut: asyncio.Future[list[int]], res: list[int]) -> None:
    if not fut.done():
        fut.set_result(res)


def _set_exception(fut: asyncio.Future[list[int]], e: BaseException) -> None:
    if not fut.done():
        fut.set_exception(e)
