"""Schema migrations: finds migrations/NNNN_*.sql, applies them in order, refuses newer databases."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from fumarole.store.disk import readonly_uri
from fumarole.store.log import LogError

MIN_SQLITE = (3, 37, 0)  # STRICT tables
_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")
_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    sha256     TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
) STRICT
"""


class MigrationError(LogError):
    """The migrations cannot be found or applied, or the file is not a Fumarole event log."""


class SchemaTooNewError(MigrationError):
    """The database was migrated by a newer Fumarole than this one: refuse to touch it."""

    def __init__(self, path: str, db_version: int, code_version: int) -> None:
        super().__init__(
            f"{path}: database schema version {db_version} is newer than this Fumarole supports "
            f"(up to {code_version}); upgrade Fumarole to open it"
        )
        self.db_version = db_version
        self.code_version = code_version


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def _candidates() -> list[Path]:
    """Where migrations may live: shipped inside the package (store/migrations, package data; a
    symlink to the top-level directory in a source checkout), then the checkout's top level."""
    out: list[Path] = []
    try:
        packaged = resources.files("fumarole.store") / "migrations"
        out.append(Path(str(packaged)))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - store is always importable here
        pass
    out.append(Path(__file__).resolve().parent.parent / "migrations")
    return out


def migrations_dir() -> Path:
    """The directory holding the NNNN_*.sql files this code ships."""
    for cand in _candidates():
        if cand.is_dir() and any(_NAME.match(p.name) for p in cand.iterdir()):
            return cand
    tried = ", ".join(str(c) for c in _candidates())
    raise MigrationError(f"schema migrations not found (looked in {tried}); the installation is incomplete")


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """The migrations of `directory` (default: the shipped ones), in order; versions must run 1, 2, 3…"""
    d = migrations_dir() if directory is None else directory
    found: list[Migration] = []
    for p in sorted(d.iterdir()):
        m = _NAME.match(p.name)
        if m is None:
            if p.suffix == ".sql":
                raise MigrationError(f"{p}: a migration file must be named NNNN_name.sql")
            continue
        found.append(Migration(int(m.group(1)), m.group(2), p.read_text()))
    found.sort(key=lambda m: m.version)
    for i, mig in enumerate(found, start=1):
        if mig.version != i:
            raise MigrationError(
                f"{d}: migrations must be numbered 1, 2, 3… without gaps; found {mig.version} at {i}"
            )
    if not found:
        raise MigrationError(f"{d}: no migrations")
    return found


def split_statements(sql: str) -> list[str]:
    """Split a script into complete SQL statements (trigger bodies and strings are kept whole)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            stmt = buf.strip()
            if _strip_comments(stmt):
                out.append(stmt)
            buf = ""
    if _strip_comments(buf).strip():
        raise MigrationError(f"incomplete SQL statement at the end of a migration: {buf.strip()[:80]!r}")
    return out


def _strip_comments(sql: str) -> str:
    return (
        "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--")).strip().strip(";")
    )


def _check_sqlite() -> None:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        need = ".".join(map(str, MIN_SQLITE))
        raise MigrationError(f"SQLite {sqlite3.sqlite_version} is too old: Fumarole needs {need} or newer")


def schema_version(conn: sqlite3.Connection, path: str = "database") -> int | None:
    """The highest applied migration, 0 for an empty database, None when the file holds other tables."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise MigrationError(f"{path}: not an SQLite database ({e})") from e
    except UnicodeDecodeError as e:  # a damaged schema page: a table name that is not text
        raise MigrationError(f"{path}: the database file is damaged (its schema: {e})") from e
    if "schema_migrations" not in tables:
        return 0 if not tables else None
    try:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)
    except (sqlite3.DatabaseError, ValueError, TypeError) as e:
        raise MigrationError(f"{path}: the database file is damaged (schema_migrations: {e})") from e


def migrate(
    path: str, *, migrations: list[Migration] | None = None, busy_timeout_ms: int = 5000
) -> list[int]:
    """Bring the database at `path` (created if missing) to the newest schema; returns the versions applied.

    Each migration runs in its own transaction (BEGIN IMMEDIATE … COMMIT) together with its row in
    schema_migrations, so a failed migration leaves the previous version in place.  The journal
    mode is switched to WAL.  Raises SchemaTooNewError for a database newer than the code, and
    MigrationError for a file that is not an SQLite database or holds other tables.
    """
    _check_sqlite()
    migs = load_migrations() if migrations is None else migrations
    code_version = migs[-1].version if migs else 0
    if Path(path).is_dir():
        raise MigrationError(f"{path}: is a directory, not an event log (the log is DIR/fumarole.db)")
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as e:
        raise MigrationError(f"{path}: cannot open: {e}") from e
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        current = schema_version(conn, path)
        if current is None:
            raise MigrationError(f"{path}: not a Fumarole event log (it holds other tables)")
        if current > code_version:
            raise SchemaTooNewError(path, current, code_version)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise MigrationError(f"{path}: cannot switch to WAL journal mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(_BOOTSTRAP)
        applied: list[int] = []
        for mig in migs:
            if _apply_one(conn, mig, path, code_version):
                applied.append(mig.version)
        from fumarole.store.index import (
            backfill_index,  # the decision index (0002) covers rows written before it
        )

        backfill_index(conn)
        return applied
    except sqlite3.DatabaseError as e:
        raise MigrationError(f"{path}: {e}") from e
    finally:
        conn.close()


def _apply_one(conn: sqlite3.Connection, mig: Migration, path: str, code_version: int) -> bool:
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
        if done > code_version:
            raise SchemaTooNewError(path, done, code_version)
        if done >= mig.version:
            conn.execute("ROLLBACK")
            return False
        for stmt in split_statements(mig.sql):
            conn.execute(stmt)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, sha256, applied_at) "
            "VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            (mig.version, mig.name, mig.sha256),
        )
        conn.execute("COMMIT")
        return True
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def check_schema(path: str, *, migrations: list[Migration] | None = None) -> int:
    """Open `path` read-only and check it is a Fumarole event log at exactly the code's schema version."""
    _check_sqlite()
    migs = load_migrations() if migrations is None else migrations
    code_version = migs[-1].version
    p = Path(path)
    if p.is_dir():
        raise MigrationError(f"{path}: is a directory, not an event log (the log is DIR/fumarole.db)")
    if not p.is_file():
        raise MigrationError(f"{path}: no such database file")
    try:
        conn = sqlite3.connect(readonly_uri(p), uri=True)
    except sqlite3.Error as e:
        raise MigrationError(f"{path}: cannot open read-only: {e}") from e
    try:
        current = schema_version(conn, path)
    except sqlite3.DatabaseError as e:
        raise MigrationError(f"{path}: {e}") from e
    finally:
        conn.close()
    if current is None or current == 0:
        raise MigrationError(f"{path}: not a Fumarole event log (no schema_migrations table)")
    if current > code_version:
        raise SchemaTooNewError(path, current, code_version)
    if current < code_version:
        raise MigrationError(
            f"{path}: database schema version {current} is older than this Fumarole's ({code_version}); "
            f"run `fumarole migrate --db {path}`"
        )
    return current
