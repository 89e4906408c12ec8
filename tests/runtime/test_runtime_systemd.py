"""sd_notify over a real unix datagram socket, as systemd would receive it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from fumarole.daemon.runtime.systemd import Notifier


def _receiver(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(2)
    return s


def test_messages_arrive_on_notify_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    rx = _receiver(path)
    n = Notifier.from_env({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "4000000"})
    assert n.enabled
    assert n.watchdog_interval == 2.0
    assert n.ready("caught up")
    assert rx.recv(4096) == b"READY=1\nSTATUS=caught up"
    assert n.watchdog()
    assert rx.recv(4096) == b"WATCHDOG=1"
    assert n.stopping()
    assert rx.recv(4096) == b"STOPPING=1"
    n.close()
    rx.close()


def test_abstract_socket_address() -> None:
    name = f"fumarole-test-{os.getpid()}"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind("\0" + name)
    rx.settimeout(2)
    n = Notifier.from_env({"NOTIFY_SOCKET": "@" + name})
    assert n.status("cycle 3")
    assert rx.recv(4096) == b"STATUS=cycle 3"
    rx.close()


def test_noop_outside_systemd_and_foreign_watchdog_pid() -> None:
    n = Notifier.from_env({})
    assert not n.enabled
    assert not n.ready()
    assert n.watchdog_interval is None
    other = Notifier.from_env({"WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"})
    assert other.watchdog_interval is None or os.getpid() == 1
