"""PostgreSQL schema migrations: migrations/postgresql/NNNN_*.sql, the same version numbers as SQLite's.

Each file is the PostgreSQL dialect of the SQLite migration with the same number (some add what a
log shared by several replicas needs: the log head, leadership and terms; see 0001).  The pending
ones are applied in order in one transaction (DDL is transactional in PostgreSQL: a failure leaves
the previous version) with their rows in schema_migrations, under a
transaction-level advisory lock so two processes opening a new database at once do not race.  A
database migrated by a newer Fumarole is refused (SchemaTooNewError), as with SQLite.
"""

from __future__ import annotations

from typing import Any

from store.migrate import Migration, MigrationError, SchemaTooNewError, load_migrations, migrations_dir

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
    return int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))


async def migrate_pg(conn: Any, where: str, *, migrations: list[Migration] | None = None) -> list[int]:
    """Bring the database behind `conn` to the newest schema; returns the versions applied."""
    migs = pg_migrations() if migrations is None else migrations
    code_version = migs[-1].version
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        current = await schema_version_pg(conn)
        if current is None:
            raise MigrationError(f"{where}: not a Fumarole event log (the database holds other tables)")
        if current > code_version:
            raise SchemaTooNewError(where, current, code_version)
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
    return applied


async def check_schema_pg(conn: Any, where: str, *, migrations: list[Migration] | None = None) -> int:
    """The database is a Fumarole event log at exactly the code's schema version (read-only opens)."""
    migs = pg_migrations() if migrations is None else migrations
    code_version = migs[-1].version
    current = await schema_version_pg(conn)
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
