"""`fumarole migrate` and `fumarole events`: through main() and once through the console script."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import bind, clock, node

from fumarole.daemon.cli import main
from fumarole.store.codec import encode
from fumarole.store.migrate import load_migrations
from fumarole.store.sqlite import SqliteEventLog


def _fill(path: Path) -> None:
    async def go() -> None:
        lg = await SqliteEventLog.open(path)
        await lg.append([node(1), clock(2), bind(3), node(4), bind(5)])
        await lg.close()

    anyio.run(go)


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_migrate_creates_and_then_reports_up_to_date(tmp_path, capsys):
    db = tmp_path / "e.db"
    versions = [m.version for m in load_migrations()]
    assert main(["migrate", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"applied migration(s) {', '.join(map(str, versions))}; schema version {versions[-1]}" in out
    assert main(["migrate", "--db", str(db)]) == 0
    assert f"schema version {versions[-1]}, up to date" in capsys.readouterr().out
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (versions[-1],)
    conn.close()


def test_migrate_refuses_a_newer_database(tmp_path, capsys):
    db = tmp_path / "e.db"
    main(["migrate", "--db", str(db)])
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO schema_migrations VALUES (7, 'future', '', '')")
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert main(["migrate", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fumarole: error: ") and "schema version 7 is newer" in err


def test_events_dumps_json_lines(tmp_path, capsys):
    db = tmp_path / "e.db"
    _fill(db)
    assert main(["events", "--db", str(db)]) == 0
    rows = _lines(capsys.readouterr().out)
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    assert list(rows[0]) == ["seq", "type", "event"]
    assert rows[0]["type"] == "node.upserted"
    assert rows[0]["event"] == {
        "type": "node.upserted",
        "name": "n1",
        "manifest": {"metadata": {"name": "n1"}, "i": 1},
        "at_ms": 1,
        "v": 1,
    }


@pytest.mark.parametrize(
    ("args", "seqs"),
    [
        (["--since", "3"], [3, 4, 5]),
        (["--since", "0"], [1, 2, 3, 4, 5]),
        (["--since", "6"], []),
        (["--type", "decision.bind"], [3, 5]),
        (["--type", "decision.bind,clock.advanced"], [2, 3, 5]),
        (["--type", "decision.bind", "--type", "node.upserted", "--since", "2"], [3, 4, 5]),
        (["--limit", "2"], [1, 2]),
        (["--limit", "0"], []),
        (["--type", "node.upserted", "--limit", "1", "--since", "2"], [4]),
    ],
)
def test_events_filters(tmp_path, capsys, args, seqs):
    db = tmp_path / "e.db"
    _fill(db)
    assert main(["events", "--db", str(db), *args]) == 0
    assert [r["seq"] for r in _lines(capsys.readouterr().out)] == seqs


def test_events_is_read_only(tmp_path, capsys):
    db = tmp_path / "e.db"
    _fill(db)
    before = db.read_bytes()
    assert main(["events", "--db", str(db)]) == 0
    assert db.read_bytes() == before
    missing = tmp_path / "missing.db"
    assert main(["events", "--db", str(missing)]) == 2
    assert not missing.exists()


@pytest.mark.parametrize("kind", ["missing", "garbage", "foreign", "unknown-type", "negative-limit"])
def test_events_bad_input_exits_2_with_a_message(tmp_path, capsys, kind):
    db = tmp_path / "e.db"
    extra: list[str] = []
    if kind == "garbage":
        db.write_bytes(b"not sqlite" * 200)
    elif kind == "foreign":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE x (y)")
        conn.commit()
        conn.close()
    elif kind in ("unknown-type", "negative-limit"):
        _fill(db)
        extra = ["--type", "node.exploded"] if kind == "unknown-type" else ["--limit", "-1"]
    assert main(["events", "--db", str(db), *extra]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    expected = {
        "missing": "no such database file",
        "garbage": "not an SQLite database",
        "foreign": "not a Fumarole event log",
        "unknown-type": "unknown event type(s) node.exploded",
        "negative-limit": "--limit",
    }[kind]
    assert cap.err.startswith("fumarole: error: ") and expected in cap.err


def test_events_stops_at_a_corrupt_row_naming_its_seq(tmp_path, capsys):
    db = tmp_path / "e.db"
    _fill(db)
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO events (seq, type, v, body) VALUES (6, 'node.upserted', 1, ?)", (encode(clock(1)),)
    )
    conn.commit()
    conn.close()
    assert main(["events", "--db", str(db), "--since", "5"]) == 2
    cap = capsys.readouterr()
    assert "seq=6" in cap.err


def test_console_script(tmp_path):
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    db = tmp_path / "e.db"
    r = subprocess.run([exe, "migrate", "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    _fill(db)
    r = subprocess.run(
        [exe, "events", "--db", str(db), "--type", "decision.bind"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert [row["event"]["name"] for row in _lines(r.stdout)] == ["p3", "p5"]


def test_migrate_in_a_missing_directory_says_so_and_creates_nothing(tmp_path, capsys):
    db = tmp_path / "nowhere" / "e.db"
    assert main(["migrate", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"fumarole: error: {db}: the directory {db.parent} does not exist")
    assert list(tmp_path.iterdir()) == []
