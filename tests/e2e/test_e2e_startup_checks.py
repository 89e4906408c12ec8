"""The daemon's start-up checks as a new user meets them: one daemon per data directory (the
readers keep working beside it), a port already in use, a missing scheduler configuration."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path

from fumarole_e2e_kit import (
    FUMAROLE,
    env,
    read_log,
    rest_url,
    run_daemon,
    start_daemon,
    start_serve,
    write_small_sim,
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FUMAROLE, *args], capture_output=True, text=True, timeout=300, env=env())


def _read_until(stream: object, needle: str) -> list[str]:
    seen = []
    for line in stream:  # type: ignore[attr-defined]
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"the process ended before printing {needle!r}:\n{''.join(seen)}")


def test_a_second_daemon_on_the_same_data_dir_is_refused_and_readers_keep_working(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=24)
    data = tmp_path / "data"
    db = data / "fumarole.db"
    sim = ("--data-dir", str(data), "--cluster", str(c), "--workload", str(w))
    first = start_daemon(*sim, "--listen", "127.0.0.1:0", "--serve", "--log-level", "warning")
    assert first.stdout is not None
    try:
        printed = _read_until(first.stdout, "REST API on http://127.0.0.1:")  # log open, lock held
        for second_args in (("--no-api",), ("--listen", "127.0.0.1:0")):
            second = run_daemon(*sim, *second_args, timeout=120)
            assert second.returncode == 2, second.stdout + second.stderr
            assert second.stderr.count("\n") == 1, second.stderr
            assert f"in use by process {first.pid}" in second.stderr
            assert str(data) in second.stderr
        printed += _read_until(first.stdout, "workload drained; serving the API")

        # the read-only commands work beside the running daemon
        events = _cli("events", "--db", str(db), "--type", "cycle.opened", "--limit", "1")
        assert events.returncode == 0, events.stderr
        assert json.loads(events.stdout)["type"] == "cycle.opened"
        explain = _cli("explain", "--db", str(db), "e2e/j0")
        assert explain.returncode == 0, explain.stderr
        assert explain.stdout.startswith("job e2e/j0:")
        replay = _cli("replay", "--db", str(db), "--format", "json")
        assert replay.returncode == 0, replay.stdout + replay.stderr
        serve = start_serve(db)
        with urllib.request.urlopen(f"{rest_url(serve)}/v1/cycles?limit=1", timeout=60) as resp:
            assert resp.status == 200
        serve.send_signal(signal.SIGTERM)
        _, serve_err = serve.communicate(timeout=60)
        assert serve.returncode == 0, serve_err

        # migrate refuses a log a daemon holds, and says why
        migrate = _cli("migrate", "--db", str(db))
        assert migrate.returncode == 2
        assert f"in use by process {first.pid}" in migrate.stderr

        first.send_signal(signal.SIGTERM)
        rest, err = first.communicate(timeout=60)
        out = "".join(printed) + rest
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, out + err
    rows = read_log(db)
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    binds = Counter(r.type for r in rows)["decision.bind"]
    assert out.count("== summary: workload drained") == 1
    assert f"binds {binds}," in out
    replay = _cli("replay", "--db", str(db), "--format", "json")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    summary = json.loads(replay.stdout)["summary"]
    assert summary["different"] == 0 and summary["cycles"] == summary["identical"] > 0
    # the lock died with its holder: the same data directory opens again
    again = run_daemon(*sim, "--no-api", timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_port_in_use_exits_2_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = tmp_path / "data"
        p = run_daemon("--data-dir", str(data), "--listen", f"127.0.0.1:{port}", timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"fumarole: error: listen 127.0.0.1:{port}: address already in use")
    assert not data.exists()


def test_a_missing_scheduler_conf_exits_2_said_once_and_creates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    missing = tmp_path / "MISSING.yaml"
    p = run_daemon("--data-dir", str(data), "--conf", str(missing), "--no-api", timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr == (
        f"fumarole: error: {missing}: cannot read the scheduler configuration: No such file or directory\n"
    )
    assert not data.exists()


def test_serve_on_a_port_in_use_exits_2_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    assert _cli("migrate", "--db", str(db)).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for workers in ("1", "2"):
            p = _cli("serve", "--db", str(db), "--listen", f"127.0.0.1:{port}", "--workers", workers)
            assert p.returncode == 2, p.stdout + p.stderr
            assert p.stderr.count("\n") == 1, p.stderr
            assert p.stderr.startswith(f"fumarole: error: listen 127.0.0.1:{port}: address already in use")
