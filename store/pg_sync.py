"""A synchronous, read-only PostgreSQL connection for the API's synchronous readers (decision index,
decision pages, job histories), shaped like the sqlite3 connection they use with SQLite.

The readers run their (small, bounded) queries on the caller's thread; with SQLite that is a
sqlite3 call.  Here one asyncpg connection lives in a thread of its own with its own event loop,
and `execute(sql, params)` hands the query over and waits for its rows: SQLite's `?` placeholders
become PostgreSQL's `$1, $2, …`, and the rows come back as tuples.  The session is read-only
(default_transaction_read_only).  Errors are LogError naming the database (password removed).

A connection the server or the network closed (a restart, pg_terminate_backend) is replaced: a
query that fails on a lost connection connects again and runs once more; if the server cannot be
reached the query fails (LogError: the API answers 503) and the next one tries again.  Connecting
waits at most `connect_timeout` seconds (the caller's thread waits meanwhile).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg

from fumarole.store.log import LogError
from fumarole.store.pg_errors import connect_error, is_transient
from fumarole.store.pg_url import redact_dsn, to_dollar_params

__all__ = ["PgSyncConnection"]


class _Rows:
    """What `execute` answers: the rows, as a sqlite3 cursor would give them."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


class PgSyncConnection:
    """A read-only connection to `dsn` usable from synchronous code (one query at a time)."""

    def __init__(self, dsn: str, *, timeout: float = 30.0, connect_timeout: float = 3.0) -> None:
        self.where = redact_dsn(dsn)
        self._dsn = dsn
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._conn: Any = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fumarole-pg-sync", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        try:
            self._conn = self._call(self._connect(timeout))
        except BaseException:
            self._stop()
            raise

    def _connect(self, timeout: float) -> Any:
        return asyncpg.connect(
            self._dsn, timeout=timeout, server_settings={"default_transaction_read_only": "on"}
        )

    def _call(self, coro: Any) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(self._timeout)
        except (
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
            OSError,
            TimeoutError,
        ) as e:
            raise LogError(f"{self.where}: {connect_error(e, self._timeout)}") from e

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        query = to_dollar_params(sql)
        with self._lock:
            for last_try in (False, True):
                conn = self._conn
                try:
                    if conn is None or conn.is_closed():
                        conn = self._conn = self._call(self._connect(self._connect_timeout))
                    rows = self._call(conn.fetch(query, *params))
                    break
                except LogError as e:
                    if last_try or not (is_transient(e.__cause__ or e, conn) or self._lost(conn)):
                        raise
                    if conn is not None and not conn.is_closed():
                        conn.terminate()
                    self._conn = None
        return _Rows([tuple(r) for r in rows])

    @staticmethod
    def _lost(conn: Any) -> bool:
        return conn is None or bool(conn.is_closed())

    def close(self) -> None:
        with self._lock:
            if self._thread.is_alive():
                try:
                    if self._conn is not None and not self._conn.is_closed():
                        self._call(self._conn.close())
                except LogError:
                    pass  # the server went away: nothing to close
                finally:
                    self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
