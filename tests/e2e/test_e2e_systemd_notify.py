"""The real daemon talks sd_notify to NOTIFY_SOCKET: READY=1 once caught up, STATUS progress,
WATCHDOG=1 pings when WATCHDOG_USEC is set, STOPPING=1 at the end."""

from __future__ import annotations

import socket
from pathlib import Path

from fumarole_e2e_kit import run_daemon, write_small_sim


def test_daemon_notifies_systemd(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(str(path))
    rx.settimeout(0.2)
    c, w = write_small_sim(tmp_path, jobs=4)
    p = run_daemon(
        "--data-dir",
        str(tmp_path / "data"),
        "--cluster",
        str(c),
        "--workload",
        str(w),
        "--no-api",
        NOTIFY_SOCKET=str(path),
        WATCHDOG_USEC="200000",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    messages: list[str] = []
    while True:
        try:
            messages.append(rx.recv(65536).decode())
        except TimeoutError:
            break
    rx.close()
    assert any(m.startswith("READY=1") for m in messages), messages
    assert any("WATCHDOG=1" in m for m in messages)
    assert any(m.startswith("STATUS=t=") for m in messages)
    assert any(m.startswith("STOPPING=1") for m in messages)
    ready = next(i for i, m in enumerate(messages) if m.startswith("READY=1"))
    stopping = max(i for i, m in enumerate(messages) if m.startswith("STOPPING=1"))
    assert ready < stopping
