"""systemd service notification over the raw NOTIFY_SOCKET datagram socket (no libsystemd).

`Notifier.from_env()` reads NOTIFY_SOCKET (a path, or `@name` for the abstract namespace) and
WATCHDOG_USEC / WATCHDOG_PID; outside systemd every call is a cheap no-op.  The service
sends READY=1 once the cache has caught up, STATUS= lines with progress, WATCHDOG=1 at half
the watchdog interval, and STOPPING=1 on shutdown.

The socket is non-blocking: a datagram socket whose reader lags has a short queue (Linux's
`net.unix.max_dgram_qlen`, 10 by default), and a blocking send to a full queue waits until the
reader takes one, which would stop the event loop, the cycles and the API with it.  A message
that finds the queue full is dropped and `notify` returns False (systemd reads its socket
promptly; a watchdog ping lost now is followed by the next one).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends sd_notify messages; `enabled` is False when not started by systemd with Type=notify."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address
        self.watchdog_usec = watchdog_usec
        self._sock: socket.socket | None = None
        if address:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)  # never wait on a lagging reader (module notes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if env is None else env
        address = env.get("NOTIFY_SOCKET") or None
        watchdog: int | None = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            watchdog = int(usec)
        return cls(address, watchdog)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between WATCHDOG=1 pings: half of WATCHDOG_USEC, as sd_watchdog_enabled advises."""
        return None if self.watchdog_usec is None else self.watchdog_usec / 2_000_000

    def notify(self, **fields: str | int) -> bool:
        """Send `KEY=value` lines (READY=1, STATUS=..., ...); False when not under systemd, when the
        send failed, or when the reader's queue was full (the message is dropped, never waited on)."""
        if self._sock is None or self.address is None:
            return False
        text = "\n".join(f"{k}={v}" for k, v in fields.items())
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            self._sock.sendto(text.encode(), target)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify(READY=1, STATUS=status) if status else self.notify(READY=1)

    def status(self, text: str) -> bool:
        return self.notify(STATUS=text)

    def watchdog(self) -> bool:
        return self.notify(WATCHDOG=1)

    def stopping(self, status: str = "") -> bool:
        return self.notify(STOPPING=1, STATUS=status) if status else self.notify(STOPPING=1)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
