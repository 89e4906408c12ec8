"""`fumarole serve --workers N`: worker processes on one SO_REUSEPORT port, supervised by the parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fumarole_api_kit import FUMAROLE, child_env, history_fixture, stop, wait_for_url

from fumarole.api.app import WORKER_HEADER

history = history_fixture("api-workers", cycles=2)


def _start(db: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [FUMAROLE, "serve", "--db", str(db), "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def _worker_of(url: str) -> int:
    """GET /healthz on a new connection; the pid of the worker that answered."""
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as resp:
        assert resp.status == 200
        assert json.loads(resp.read()) == {"status": "ok"}
        return int(resp.headers[WORKER_HEADER])


def _workers_seen(url: str, want: int, tries: int = 200) -> set[int]:
    seen: set[int] = set()
    for _ in range(tries):
        seen.add(_worker_of(url))
        if len(seen) >= want:
            break
    return seen


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.add(int(d.name))
    return out


def _gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_two_workers_answer_on_one_port_and_sigterm_exits_0(history: Path) -> None:
    proc = _start(history, "--workers", "2")
    try:
        url = wait_for_url(proc)
        workers = _children(proc.pid)
        assert len(workers) == 2
        assert _workers_seen(url, 2) == workers  # the kernel spreads new connections over both
        with urllib.request.urlopen(f"{url}/v1/jobs/team-a/bad-fit", timeout=10) as resp:
            assert json.loads(resp.read())["pending"] is True  # each worker serves the whole API
        req = urllib.request.Request(f"{url}/v1/events", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 403
    finally:
        rc = stop(proc)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    assert all(_gone(pid) for pid in workers)


def test_sigint_is_forwarded_and_exits_0(history: Path) -> None:
    proc = _start(history, "--workers", "2")
    try:
        wait_for_url(proc)
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    finally:
        stop(proc)
    assert rc == 0
    assert all(_gone(pid) for pid in workers)


def test_a_killed_worker_stops_the_others_and_exits_1(history: Path) -> None:
    proc = _start(history, "--workers", "2")
    try:
        url = wait_for_url(proc)
        workers = _workers_seen(url, 2)
        assert len(workers) == 2
        victim, other = sorted(workers)
        os.kill(victim, signal.SIGKILL)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        stop(proc)
    assert rc == 1
    assert f"(pid {victim}) was killed by SIGKILL after start-up; stopping the other workers" in err
    assert _gone(other)


def test_one_worker_is_the_single_process_server(history: Path) -> None:
    proc = _start(history)
    try:
        url = wait_for_url(proc)
        assert _children(proc.pid) == set()
        assert _worker_of(url) == proc.pid
    finally:
        assert stop(proc) == 0


@pytest.mark.parametrize("n", ["0", "-3"])
def test_workers_below_one_is_bad_input(history: Path, n: str) -> None:
    r = subprocess.run(
        [FUMAROLE, "serve", "--db", str(history), "--listen", "127.0.0.1:0", "--workers", n],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert r.returncode == 2
    assert f"--workers must be at least 1, got {n}" in r.stderr


def test_a_worker_refusing_the_log_makes_the_supervisor_exit_2(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not a sqlite file at all" * 100)
    proc = _start(foreign, "--workers", "2")
    try:
        rc = proc.wait(timeout=60)
        out = proc.stdout.read() if proc.stdout else ""
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        stop(proc)
    assert rc == 2
    assert "REST API on" not in out
    assert "during start-up; stopping the other workers" in err


def test_workers_get_the_access_options_but_never_the_token(history: Path, tmp_path: Path) -> None:
    """The supervisor hands each worker the allowed hosts and the read token's file name; the token
    itself is on no command line."""
    token = "workers-read-token-0123456789"
    f = tmp_path / "read-token"
    f.write_text(token + "\n")
    proc = _start(history, "--workers", "2", "--read-token", str(f), "--allowed-host", "serve.test")
    try:
        url = wait_for_url(proc)
        workers = _children(proc.pid)
        assert len(workers) == 2
        for pid in (proc.pid, *workers):
            assert token not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        seen: set[int] = set()
        for _ in range(200):  # every worker asks for the token and answers with it
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"{url}/v1/queues", timeout=10)
            assert err.value.code == 401
            req = urllib.request.Request(
                f"{url}/healthz", headers={"Host": f"serve.test:{url.rsplit(':', 1)[1]}"}
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                seen.add(int(resp.headers[WORKER_HEADER]))
            if seen == workers:
                break
        assert seen == workers
        req = urllib.request.Request(f"{url}/v1/queues", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
    finally:
        assert stop(proc) == 0
