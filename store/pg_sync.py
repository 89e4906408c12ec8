"""A synchronous, read-only PostgreSQL connection for the API's synchronous readers (decision index,
decision pages, job histories), shaped like the sqlite3 connection they use with SQLite.

The readers run their (small, bounded) queries on the caller's thread; with SQLite that is a
sqlite3 call.  Here one asyncpg connection lives in a thread of its own with its own event loop,
and `execute(sql, params)` hands the query over and waits for its rows: SQLite's `?` placeholders
become PostgreSQL's `$1, $2, …`, and the rows come back as tuples.  The session is read-only
(default_transaction_read_only).  Errors are LogError naming the database (password removed).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg

from store.log import LogError
from store.pg_url import redact_dsn, to_dollar_params

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

    def __init__(self, dsn: str, *, timeout: float = 30.0) -> None:
        self.where = redact_dsn(dsn)
        self._timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fumarole-pg-sync", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        try:
            self._conn: Any = self._call(
                asyncpg.connect(dsn, timeout=timeout, server_settings={"default_transaction_read_only": "on"})
            )
        except BaseException:
            self._stop()
            raise

    def _call(self, coro: Any) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(self._timeout)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as e:
            raise LogError(f"{self.where}: {type(e).__name__}: {e}") from e

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        with self._lock:
            rows = self._call(self._conn.fetch(to_dollar_params(sql), *params))
        return _Rows([tuple(r) for r in rows])

    def close(self) -> None:
        with self._lock:
            if self._thread.is_alive():
                try:
                    self._call(self._conn.close())
                finally:
                    self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
