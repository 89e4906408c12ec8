"""Schema migrations: discovery, order, one transaction each, recorded versions, packaging as package data."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fumarole.store.migrate import (
    Migration,
    MigrationError,
    SchemaTooNewError,
    check_schema,
    load_migrations,
    migrate,
    migrations_dir,
    split_statements,
)

REPO = Path(__file__).resolve().parents[2]


def _versions(path: Path) -> list[tuple[int, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    finally:
        conn.close()


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    finally:
        conn.close()


def test_shipped_migrations_are_the_top_level_files_numbered_from_one():
    migs = load_migrations()
    assert [m.version for m in migs] == list(range(1, len(migs) + 1))
    top = sorted(p.name for p in (REPO / "migrations").glob("*.sql"))
    assert [f"{m.version:04d}_{m.name}.sql" for m in migs] == top
    assert (migrations_dir() / top[0]).read_text() == (REPO / "migrations" / top[0]).read_text()


def test_migrate_applies_records_and_is_idempotent(tmp_path):
    db = tmp_path / "e.db"
    n = len(load_migrations())
    assert migrate(str(db)) == list(range(1, n + 1))
    assert [v for v, _ in _versions(db)] == list(range(1, n + 1))
    assert {"events", "checkpoints", "snapshots", "schema_migrations"} <= _tables(db)
    assert migrate(str(db)) == []
    assert check_schema(str(db)) == n


def _write(d: Path, files: dict[str, str]) -> Path:
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def test_migrations_run_in_order_each_in_one_transaction(tmp_path):
    d = _write(
        tmp_path / "m",
        {
            "0002_second.sql": "CREATE TABLE b (x INTEGER) STRICT;\nINSERT INTO a VALUES (2);",
            "0001_first.sql": "-- the first\nCREATE TABLE a (x INTEGER) STRICT;\nINSERT INTO a VALUES (1);",
            "0003_broken.sql": "CREATE TABLE c (x INTEGER) STRICT;\nINSERT INTO nowhere VALUES (1);",
            "README.txt": "ignored",
        },
    )
    migs = load_migrations(d)
    assert [(m.version, m.name) for m in migs] == [(1, "first"), (2, "second"), (3, "broken")]
    db = tmp_path / "e.db"
    with pytest.raises(MigrationError, match="nowhere"):
        migrate(str(db), migrations=migs)
    # 1 and 2 committed; 3 rolled back entirely (its first statement too)
    assert _versions(db) == [(1, "first"), (2, "second")]
    assert "b" in _tables(db)
    assert "c" not in _tables(db)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT x FROM a ORDER BY x").fetchall() == [(1,), (2,)]
    conn.close()
    # fixed, it resumes from version 3
    (d / "0003_broken.sql").write_text("CREATE TABLE c (x INTEGER) STRICT;")
    assert migrate(str(db), migrations=load_migrations(d)) == [3]


def test_numbering_must_have_no_gaps_and_names_must_be_well_formed(tmp_path):
    d = _write(tmp_path / "gap", {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 1;"})
    with pytest.raises(MigrationError, match="without gaps"):
        load_migrations(d)
    d2 = _write(tmp_path / "bad", {"0001_a.sql": "SELECT 1;", "2_b.sql": "SELECT 1;"})
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        load_migrations(d2)
    with pytest.raises(MigrationError, match="no migrations"):
        load_migrations(_write(tmp_path / "empty", {}))


def test_newer_database_is_refused_and_left_alone(tmp_path):
    db = tmp_path / "e.db"
    migrate(str(db))
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO schema_migrations VALUES (42, 'future', '', '')")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNewError) as ei:
        migrate(str(db))
    assert ei.value.db_version == 42
    assert "upgrade Fumarole" in str(ei.value)
    with pytest.raises(SchemaTooNewError):
        check_schema(str(db))
    assert max(v for v, _ in _versions(db)) == 42


def test_older_database_needs_an_explicit_migrate_for_read_only_use(tmp_path):
    d = _write(tmp_path / "m", {"0001_a.sql": "CREATE TABLE a (x INTEGER) STRICT;"})
    db = tmp_path / "e.db"
    migrate(str(db), migrations=load_migrations(d))
    (d / "0002_b.sql").write_text("CREATE TABLE b (x INTEGER) STRICT;")
    with pytest.raises(MigrationError, match="run `fumarole migrate --db"):
        check_schema(str(db), migrations=load_migrations(d))


def test_split_statements_keeps_trigger_bodies_and_strings_whole():
    sql = """
    -- comment; with a semicolon
    CREATE TABLE t (x TEXT);
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN
        INSERT INTO t VALUES ('a;b');
    END;
    INSERT INTO t VALUES ('x;y');
    """
    stmts = split_statements(sql)
    assert len(stmts) == 3
    assert stmts[1].startswith("CREATE TRIGGER") and stmts[1].endswith("END;")
    with pytest.raises(MigrationError, match="incomplete"):
        split_statements("CREATE TABLE t (x TEXT)")


def test_migration_checksum_is_recorded(tmp_path):
    db = tmp_path / "e.db"
    migrate(str(db))
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT version, sha256 FROM schema_migrations ORDER BY version").fetchall()
    conn.close()
    assert rows == [(m.version, m.sha256) for m in load_migrations()]
    assert Migration(1, "x", "a").sha256 != Migration(1, "x", "b").sha256


def test_migrations_are_found_in_a_built_package_outside_the_checkout(tmp_path):
    """Build the package the way a wheel is built (setuptools build_py with the project's own
    pyproject.toml), then import `store` from the build output alone: the migrations must come along."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(REPO / "pyproject.toml", src / "pyproject.toml")
    shutil.copytree(REPO / "migrations", src / "migrations")
    shutil.copytree(
        REPO / "store", src / "store", symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    (src / "fumarole").mkdir()
    shutil.copy(REPO / "fumarole" / "__init__.py", src / "fumarole" / "__init__.py")
    (src / "fumarole" / "store").symlink_to("../store")
    out = tmp_path / "build-lib"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import setuptools; setuptools.setup()",
            "-q",
            "build_py",
            "--build-lib",
            str(out),
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    shipped = out / "fumarole" / "store" / "migrations"
    assert shipped.is_dir() and not shipped.is_symlink()
    for p in (REPO / "migrations").glob("*.sql"):
        assert (shipped / p.name).read_text() == p.read_text()
    probe = (
        "import fumarole.store as store, fumarole.store.migrate as m, sys; "
        "d = m.migrations_dir(); "
        "assert str(d).startswith(sys.argv[1]), (d, store.__file__); "
        "print(m.migrate(sys.argv[2]))"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = subprocess.run(
        [sys.executable, "-c", probe, str(out), str(elsewhere / "e.db")],
        cwd=elsewhere,
        env={"PYTHONPATH": str(out), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(list(range(1, len(load_migrations()) + 1)))
