"""`fumarole migrate --from sqlite:///… --to postgresql://…`, `migrate --db postgresql://…`, and
`events` / `replay` reading a PostgreSQL log (--db or FUMAROLE_DB), on a daemon's real log."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import new_pg_dsn, run_pg

from fumarole.daemon.cli import main
from fumarole.store.postgres import PostgresEventLog

FUMAROLE = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")


@pytest.fixture(scope="module")
def daemon_log(tmp_path_factory) -> Path:
    """The log of the bundled simulation (a few hundred cycles, a snapshot, a checkpoint)."""
    data = tmp_path_factory.mktemp("run")
    subprocess.run([FUMAROLE, "run", "--data-dir", str(data), "--no-api"], check=True, capture_output=True)
    return data / "fumarole.db"


def test_copy_then_read_replay_and_refuse_a_second_copy(daemon_log, capsys, monkeypatch):
    dsn = new_pg_dsn()
    assert main(["migrate", "--from", f"sqlite:///{daemon_log}", "--to", dsn]) == 0
    out = capsys.readouterr().out
    assert "verified (sha256 " in out and "1 snapshots, 1 checkpoints" in out

    assert main(["events", "--db", str(daemon_log)]) == 0
    from_sqlite = capsys.readouterr().out
    monkeypatch.setenv("FUMAROLE_DB", dsn)
    assert main(["events"]) == 0
    assert capsys.readouterr().out == from_sqlite
    assert len(from_sqlite.splitlines()) > 1000

    assert main(["replay", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)["summary"] | {"db": dsn}
    assert report["different"] == 0 and report["identical"] > 100

    async def tables() -> tuple[int, int]:
        async with await PostgresEventLog.open(dsn, readonly=True) as log:
            index = await log.fetch("SELECT count(*) FROM decision_index")
            cycles = await log.fetch("SELECT count(*) FROM decision_cycles")
            return int(index[0][0]), int(cycles[0][0])

    indexed, cycles = anyio.run(tables)
    assert indexed > 100 and cycles == report["identical"]

    before = run_pg(dsn, "SELECT count(*) FROM events")[0][0]
    assert main(["migrate", "--from", f"sqlite:///{daemon_log}", "--to", dsn]) == 2
    assert "not empty" in capsys.readouterr().err
    assert run_pg(dsn, "SELECT count(*) FROM events")[0][0] == before


def test_migrate_db_on_postgresql_creates_then_reports_up_to_date(capsys):
    dsn = new_pg_dsn()
    assert main(["migrate", "--db", dsn]) == 0
    assert "applied migration(s) 1, 2, 3, 4; schema version 4" in capsys.readouterr().out
    assert main(["migrate", "--db", dsn]) == 0
    assert "schema version 4, up to date" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["migrate", "--from", "sqlite:///x.db"], "--from and --to go together"),
        (["migrate", "--from", "sqlite:///x.db", "--to", "/tmp/other.db"], "expected a postgresql:// URL"),
        (["migrate", "--from", "sqlite:x.db", "--to", "postgresql://h/db"], "sqlite:///relative/path"),
        (["migrate", "--db", "a.db", "--to", "postgresql://h/db"], "either --db, or --from and --to"),
        (["migrate"], "is required"),
    ],
)
def test_bad_migrate_arguments(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_copy_of_a_missing_source_is_refused(tmp_path, capsys):
    dsn = new_pg_dsn()
    assert main(["migrate", "--from", f"sqlite:///{tmp_path}/none.db", "--to", dsn]) == 2
    assert "no such database file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("db", "message"),
    [
        ("fumarole-data/fumarole.db", "is not a postgresql:// URL"),
        ("postgresql://fumarole@127.0.0.1:1/nothing", "cannot open the event log"),
    ],
)
def test_run_with_a_bad_db_exits_2_and_creates_nothing(db, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--db", db, "--no-api"]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
