"""Which PostgreSQL failures are an outage (the connection or the server went away, so the same work
may succeed on a new connection) and how a failure reads in one line.  Shared by the asyncpg log
(store/postgres.py) and the API's synchronous readers (store/pg_sync.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

__all__ = ["connect_error", "is_transient"]

# Server errors that mean "this session is gone or the server is not taking sessions now": admin
# shutdown (pg_terminate_backend, a fast stop), crash shutdown, cannot connect now (starting up or
# shutting down), idle-in-transaction timeout, too many connections; every 08xxx is a connection error.
_TRANSIENT_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25P03", "53300"})


def is_transient(e: BaseException, conn: Any = None) -> bool:
    """Whether `e` means the connection (or the server) went away, so the same work may succeed on
    a new connection: network errors, timeouts, the server's connection and shutdown errors, and any
    driver error that left `conn` closed."""
    if isinstance(e, (OSError, TimeoutError, asyncio.TimeoutError, asyncpg.InternalClientError)):
        return True  # (an internal client error: a session left in a bad state, which is ended)
    if isinstance(e, asyncpg.PostgresError):
        state = str(getattr(e, "sqlstate", "") or "")
        if state.startswith("08") or state in _TRANSIENT_SQLSTATES:
            return True
    if isinstance(e, (asyncpg.InterfaceError, asyncpg.PostgresError)):
        return conn is not None and conn.is_closed()
    return False


def connect_error(e: BaseException, timeout: float | None = None) -> str:
    """One line naming why a connection or a statement failed (never empty: a timeout says so)."""
    if isinstance(e, (TimeoutError, asyncio.TimeoutError)) and not str(e):
        within = f" within {timeout:g} s" if timeout else ""
        return f"no answer from the server{within} (timed out)"
    text = " ".join(str(e).split()) or "no detail"
    return f"{type(e).__name__}: {text}"
