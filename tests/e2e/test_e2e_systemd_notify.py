"""The real daemon talks sd_notify to NOTIFY_SOCKET: READY=1 once caught up, STATUS progress,
WATCHDOG=1 pings when WATCHDOG_USEC is set, STOPPING=1 at the end; and a reader that does not
read never holds the daemon up."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from fumarole_e2e_kit import run_daemon, write_small_sim


def _run(tmp_path: Path, path: Path, watchdog_usec: str) -> tuple[int, str]:
    c, w = write_small_sim(tmp_path, jobs=4)
    p = run_daemon(
        "--data-dir",
        str(tmp_path / "data"),
        "--cluster",
        str(c),
        "--workload",
        str(w),
        "--no-api",
        timeout=120,
        NOTIFY_SOCKET=str(path),
        WATCHDOG_USEC=watchdog_usec,
    )
    return p.returncode, p.stdout + p.stderr


def test_daemon_notifies_systemd(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(str(path))
    rx.settimeout(0.2)
    messages: list[str] = []
    done = threading.Event()

    def drain() -> None:  # as systemd does: read while the daemon runs
        while not done.is_set():
            try:
                messages.append(rx.recv(65536).decode())
            except TimeoutError:
                continue

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        rc, out = _run(tmp_path, path, "200000")
    finally:
        time.sleep(0.3)  # the last datagrams
        done.set()
        reader.join()
        rx.close()
    assert rc == 0, out
    assert any(m.startswith("READY=1") for m in messages), messages
    assert any("WATCHDOG=1" in m for m in messages)
    assert any(m.startswith("STATUS=t=") for m in messages)
    assert any(m.startswith("STOPPING=1") for m in messages)
    ready = next(i for i, m in enumerate(messages) if m.startswith("READY=1"))
    stopping = max(i for i, m in enumerate(messages) if m.startswith("STOPPING=1"))
    assert ready < stopping


def test_a_reader_that_never_reads_does_not_hold_the_daemon_up(tmp_path: Path) -> None:
    """Pings every 5 ms fill the socket's short queue (max_dgram_qlen) at once; a blocking send
    would then wait for ever (the test's timeout), a dropped message costs nothing."""
    path = tmp_path / "notify.sock"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(str(path))
    try:
        rc, out = _run(tmp_path, path, "10000")
        queued = 0
        rx.setblocking(False)
        while True:
            try:
                rx.recv(65536)
            except BlockingIOError:
                break
            queued += 1
    finally:
        rx.close()
    assert rc == 0, out
    assert "drained" in out, out
    assert queued >= 1  # the first messages were queued, the rest dropped
