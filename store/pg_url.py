"""PostgreSQL connection strings and query text: telling a URL from a file, redacting passwords,
SQLite placeholders as PostgreSQL's. Pure text helpers shared by the asyncpg log and the
synchronous readers (imports nothing else from store, so neither depends on the other)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_postgres_url", "redact_dsn", "to_dollar_params"]


def is_postgres_url(db: str) -> bool:
    """Whether `--db` names a PostgreSQL database (postgresql:// or postgres://) rather than a file."""
    return db.startswith(("postgresql://", "postgres://"))


def redact_dsn(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def to_dollar_params(sql: str) -> str:
    """SQLite's `?` placeholders as PostgreSQL's `$1, $2, …` (the shared queries use no `?` in text)."""
    n = 0

    def sub(_: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return f"${n}"

    return re.sub(r"\?", sub, sql)
