"""Damaged files and disks: a flipped byte anywhere in a finished SQLite log, a row damaged after
the newest snapshot, a file-size limit and a full disk while `fumarole run` writes, a read-only
log or data directory.  Every outcome is a correct result or ONE line naming the file (and the
seq, for a row), never a traceback.

The tests run as root, for whom permission bits change nothing: a read-only disk is a tmpfs
mounted read-only, a read-only log file is `chattr +i` (immutable), a full disk is a tiny tmpfs,
and the file-size limit is RLIMIT_FSIZE set in the child.  A test whose mechanism the machine
refuses (no mount, no chattr) is skipped, saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from fumarole_e2e_kit import FUMAROLE, env, read_log, run_daemon, write_small_sim

from fumarole.daemon.cli import main


def _cli(*args: str, preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FUMAROLE, *args], capture_output=True, text=True, timeout=300, env=env(), preexec_fn=preexec
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished small simulation's log (closed cleanly: no -wal beside it)."""
    d = tmp_path_factory.mktemp("finished")
    c, w = write_small_sim(d, jobs=8)
    data = d / "data"
    p = run_daemon("--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
    assert p.returncode == 0, p.stdout + p.stderr
    return data / "fumarole.db"


def _in_process(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capfd.readouterr()
    rc = main(argv)  # a traceback here fails the test: that is the point
    out, err = capfd.readouterr()
    return rc, out, err


def _one_line_naming(err: str, path: Path) -> None:
    assert err.count("\n") == 1 and err.startswith("fumarole: error: "), err
    assert str(path) in err, err
    if "cannot be decoded" in err:
        assert "seq=" in err, err


def test_a_flipped_byte_anywhere_gives_a_result_or_one_line_naming_the_file(
    finished: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    size = finished.stat().st_size
    offsets = sorted({int(size * (i + 0.37) / 64) for i in range(64)} | set(range(0, 100, 7)))
    outcomes: Counter[str] = Counter()
    for n, off in enumerate(offsets):
        db = tmp_path / "damaged.db"
        shutil.copyfile(finished, db)
        with db.open("r+b") as f:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x80]))
        commands: list[list[str]] = [["events", "--db", str(db)], ["explain", "--db", str(db), "e2e/j0"]]
        if n % 4 == 0:  # replay is the slow one: a quarter of the offsets
            commands.append(["replay", "--db", str(db), "--format", "json"])
        for argv in commands:
            rc, out, err = _in_process(argv, capfd)
            if rc == 2:
                _one_line_naming(err, db)
                outcomes[f"{argv[0]}: " + ("row" if "seq=" in err else "file")] += 1
            else:
                assert rc in (0, 1), (argv, off, rc, err)
                if argv[0] == "replay":
                    assert json.loads(out)["summary"]["cycles"] > 0
                outcomes[f"{argv[0]}: exit {rc}"] += 1
    # the offsets do reach damaged rows (named by seq) and damaged pages (named by file)
    assert outcomes["events: row"] >= 10, outcomes
    assert outcomes["events: exit 0"] >= 5, outcomes


def _damage_row_after_the_snapshot(src: Path, dst: Path) -> int:
    """A copy of the log without its snapshots, one pod.upserted row's body holding a byte that is
    not UTF-8 inside a string: every reader folds it at start."""
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    try:
        conn.execute("DELETE FROM snapshots")
        seq, body = conn.execute(
            "SELECT seq, body FROM events WHERE type = 'pod.upserted' ORDER BY seq LIMIT 1 OFFSET 3"
        ).fetchone()
        at = bytes(body).index(b"e2e")  # the namespace, a string inside the body
        bad = bytes(body)[:at] + b"\xff" + bytes(body)[at + 1 :]
        conn.execute("UPDATE events SET body = ? WHERE seq = ?", (bad, seq))
        conn.commit()
    finally:
        conn.close()
    return int(seq)


def test_a_damaged_row_is_named_by_every_command_that_reads_it(finished: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "fumarole.db"
    seq = _damage_row_after_the_snapshot(finished, db)
    for argv in (
        ["events", "--db", str(db)],
        ["replay", "--db", str(db)],
        ["explain", "--db", str(db), "e2e/j0"],
        ["serve", "--db", str(db), "--listen", "127.0.0.1:0"],
        ["run", "--data-dir", str(data), "--no-api"],
    ):
        p = _cli(*argv)
        assert p.returncode == 2, (argv, p.stdout, p.stderr)
        last = p.stderr.strip().splitlines()[-1]
        assert "Traceback" not in p.stderr, p.stderr
        head = f"fumarole: error: {db}: event log row seq={seq} cannot be decoded: "
        assert last.startswith(head), p.stderr
        assert "UnicodeDecodeError" in last, last
        if argv[0] == "replay":
            assert re.search(
                r"; replay stopped: \d+ of \d+ cycle\(s\) verified before it \(\d+ identical\)", last
            )
    # `events` printed every row before the damaged one
    out = _cli("events", "--db", str(db)).stdout.splitlines()
    assert [json.loads(line)["seq"] for line in out] == list(range(1, seq))


def _fsize_limit(limit: int) -> Callable[[], None]:
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return set_limit


def test_the_file_size_limit_stops_run_in_one_line_and_the_log_stays_whole(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=24)
    data = tmp_path / "data"
    db = data / "fumarole.db"
    sim = ("run", "--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
    limit = 192 * 1024
    p = _cli(*sim, preexec=_fsize_limit(limit))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fumarole: error: {db}: write failed, nothing of it was written: "), p.stderr
    assert f"the file-size limit is reached (ulimit -f: {limit} bytes)" in last, last
    # what was acknowledged is there, gap-free; without the limit the run goes on to its end
    rows = read_log(db)
    assert rows and [r.seq for r in rows] == list(range(1, len(rows) + 1))
    again = _cli(*sim)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "== summary: workload drained" in again.stdout
    # at start: a limit the log has already reached is refused before any work
    size = db.stat().st_size
    before = db.read_bytes()
    p = _cli(*sim, preexec=_fsize_limit(size // 2))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr == (
        f"fumarole: error: {db}: the file-size limit (ulimit -f: {size // 2} bytes) does not exceed the "
        f"log's size ({size} bytes); the event log cannot grow\n"
    )
    assert db.read_bytes() == before


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    p = subprocess.run(mount, capture_output=True)
    if p.returncode != 0:
        why = p.stderr.decode().strip()
        pytest.skip(f"cannot mount a tmpfs here ({why}): no disk to fill or make read-only")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_full_disk_stops_run_in_one_line(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=24)
    with _tmpfs(tmp_path / "small", "384k") as small:
        data = small / "data"
        p = _cli("run", "--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
        assert p.returncode == 1, p.stdout + p.stderr
        assert "Traceback" not in p.stderr, p.stderr
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith(f"fumarole: error: {data / 'fumarole.db'}: write failed"), p.stderr
        assert "the disk is full" in last, last
        # at start: a disk already full is refused before any work
        with contextlib.suppress(OSError), (small / "filler").open("wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
        p = _cli("run", "--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr.startswith(f"fumarole: error: {data}: the disk is full ("), p.stderr
        assert p.stderr.count("\n") == 1, p.stderr


def test_a_read_only_disk_refuses_run_and_serves_the_readers(finished: Path, tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "ro", "16m") as ro:
        data = ro / "data"
        data.mkdir()
        shutil.copyfile(finished, data / "fumarole.db")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        db = data / "fumarole.db"
        p = _cli("run", "--data-dir", str(data), "--no-api")
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr == (
            f"fumarole: error: {data}: the data directory is not writable (read-only file system); "
            "the event log writes its files there\n"
        )
        p = _cli("run", "--data-dir", str(ro / "new"), "--no-api")
        assert p.returncode == 2, p.stdout + p.stderr
        new = ro / "new"
        assert p.stderr == f"fumarole: error: data directory {new}: cannot create it: Read-only file system\n"
        p = _cli("migrate", "--db", str(db))
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr.startswith(
            f"fumarole: error: {data}: the data directory is not writable (read-only"
        ), p.stderr
        # the readers open a log on a read-only disk (SQLite could not create its -shm file there)
        events = _cli("events", "--db", str(db))
        assert events.returncode == 0, events.stderr
        assert len(events.stdout.splitlines()) == len(read_log(finished))
        replay = _cli("replay", "--db", str(db), "--format", "json")
        assert replay.returncode == 0, replay.stdout + replay.stderr
        summary = json.loads(replay.stdout)["summary"]
        assert summary["cycles"] == summary["identical"] > 0
        explain = _cli("explain", "--db", str(db), "e2e/j0")
        assert explain.returncode == 0 and explain.stdout.startswith("job e2e/j0:"), explain.stderr


def test_an_immutable_log_file_refuses_run_before_any_work(finished: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "fumarole.db"
    shutil.copyfile(finished, db)
    p = subprocess.run(["chattr", "+i", str(db)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"chattr +i refused here ({p.stderr.decode().strip()}): no read-only file for root")
    try:
        p = _cli("run", "--data-dir", str(data), "--no-api")
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr == (
            f"fumarole: error: {db}: the event log file is not writable "
            "(permission denied (or an immutable file))\n"
        )
        assert p.stdout == ""  # no summary: nothing ran
        assert sorted(os.listdir(data)) == ["fumarole.db"]  # no lock, no -wal created
        events = _cli("events", "--db", str(db), "--limit", "1")
        assert events.returncode == 0 and msgspec.json.decode(events.stdout)["seq"] == 1
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
