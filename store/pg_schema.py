"""PostgreSQL schema migrations: migrations/postgresql/NNNN_*.sql, the same version numbers as SQLite's.

Each file is the PostgreSQL dialect of the SQLite migration with the same number (some add what a
log shared by several replicas needs: the log head, leadership and terms; see 0001).  The pending
ones are applied in order in one transaction (DDL is transactional in PostgreSQL: a failure leaves
the previous version) with their rows in schema_migrations, under a
transaction-level advisory lock so two processes opening a new database at once do not race.  A
database already at the code's version is only read (no CREATE privilege needed then); a
`schema_migrations` table that is not ours, or a migration the role may not apply (no CREATE on
the schema), is one MigrationError line.  A
database migrated by a newer Fumarole is refused (SchemaTooNewError), as with SQLite.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from fumarole.store.migrate import (
    Migration,
    MigrationError,
    SchemaTooNewError,
    load_migrations,
    migrations_dir,
)

__all__ = ["check_schema_pg", "migrate_pg", "pg_migrations", "schema_version_pg"]

_LOCK_KEY = 0x66756D61726F6C65 & 0x7FFFFFFFFFFFFFFF  # "fumarole": the advisory lock of the migrator
_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER     PRIMARY KEY,
    name       TEXT        NOT NULL,
    sha256     TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL
)
"""


def pg_migrations() -> list[Migration]:
    """The PostgreSQL dialect of the shipped migrations (migrations/postgresql), in order."""
    return load_migrations(migrations_dir() / "postgresql")


async def schema_version_pg(conn: Any) -> int | None:
    """The highest applied migration; 0 for an empty database; None when it holds other tables."""
    tables = {
        str(r[0])
        for r in await conn.fetch(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
        )
    }
    if "schema_migrations" not in tables:
        return 0 if not tables else None
    try:
        return int(await conn.fetchval("SELECT coalesce(max(version)::bigint, 0) FROM schema_migrations"))
    except (asyncpg.PostgresError, TypeError, ValueError) as e:  # a table of that name, not ours
        raise MigrationError(
            f"schema_migrations is not a Fumarole migration table ({type(e).__name__}: {e})"
        ) from e


async def migrate_pg(conn: Any, where: str, *, migrations: list[Migration] | None = None) -> list[int]:
    """Bring the database behind `conn` to the newest schema; returns the versions applied."""
    migs = pg_migrations() if migrations is None else migrations
    code_version = migs[-1].version
    applied: list[int] = []
    # Up to date (every start of a replica): nothing is created, so the role needs no CREATE.
    if await _version(conn, where, code_version) == code_version:
        return applied
    try:
        await _apply(conn, where, migs, code_version, applied)
    except asyncpg.PostgresError as e:  # rolled back: the previous version stands
        raise MigrationError(
            f"{where}: cannot bring the schema up to date (the role needs CREATE on the schema for it; "
            f"`fumarole migrate --db` as its owner): {type(e).__name__}: {e}"
        ) from e
    return applied


async def _apply(conn: Any, where: str, migs: list[Migration], code_version: int, applied: list[int]) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        current = await _version(conn, where, code_version)
        if current == 0:
            await conn.execute(_BOOTSTRAP)
        for mig in migs:
            if mig.version <= current:
                continue
            await conn.execute(mig.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, sha256, applied_at) "
                "VALUES ($1, $2, $3, clock_timestamp())",
                mig.version,
                mig.name,
                mig.sha256,
            )
            applied.append(mig.version)


async def _version(conn: Any, where: str, code_version: int) -> int:
    """The applied version, refusing a database of other tables or of a newer Fumarole."""
    try:
        current = await schema_version_pg(conn)
    except MigrationError as e:
        raise MigrationError(f"{where}: not a Fumarole event log: {e}") from None
    if current is None:
        raise MigrationError(f"{where}: not a Fumarole event log (the database holds other tables)")
    if current > code_version:
        raise SchemaTooNewError(where, current, code_version)
    return current


async def check_schema_pg(conn: Any, where: str, *, migrations: list[Migration] | None = None) -> int:
    """The database is a Fumarole event log at exactly the code's schema version (read-only opens)."""
    migs = pg_migrations() if migrations is None else migrations
    code_version = migs[-1].version
    try:
        current = await schema_version_pg(conn)
    except MigrationError as e:
        raise MigrationError(f"{where}: not a Fumarole event log: {e}") from None
    if current is None or current == 0:
        raise MigrationError(f"{where}: not a Fumarole event log (no schema_migrations table)")
    if current > code_version:
        raise SchemaTooNewError(where, current, code_version)
    if current < code_version:
        raise MigrationError(
            f"{where}: database schema version {current} is older than this Fumarole's ({code_version}); "
            f"run `fumarole migrate --db {where}`"
        )
    return current
