"""Which backend a `--db` value names, and opening it: a postgresql:// URL or an SQLite file path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fumarole.store.postgres import is_postgres_url, redact_dsn

if TYPE_CHECKING:
    from fumarole.store.postgres import PostgresEventLog
    from fumarole.store.sqlite import SqliteEventLog

__all__ = ["describe_db", "is_postgres_url", "open_log"]


async def open_log(
    db: str, *, readonly: bool = False, retry_for: float | None = 30.0
) -> SqliteEventLog | PostgresEventLog:
    """Open the event log `db` names (PostgreSQL URL or SQLite file); readonly opens apply no migration.
    `retry_for`: how long a PostgreSQL log's operations wait out a lost database (None: for ever)."""
    if is_postgres_url(db):
        from fumarole.store.postgres import PostgresEventLog

        return await PostgresEventLog.open(db, readonly=readonly, retry_for=retry_for)
    from fumarole.store.sqlite import SqliteEventLog

    return await SqliteEventLog.open(db, readonly=readonly)


def describe_db(db: str) -> str:
    """How messages name the log: the URL without its password, or the file path."""
    return redact_dsn(db) if is_postgres_url(db) else db
