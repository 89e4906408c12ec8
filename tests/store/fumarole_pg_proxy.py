"""A TCP proxy in front of the test PostgreSQL server that can cut one client off: a lost network
between one replica and its database, while the other replicas (connected directly) still reach it.

`CuttableProxy(port)` listens on 127.0.0.1 at a free port and forwards every connection to the
server on `port`; `dsn_through(dsn)` is `dsn` with the proxy's port.  `cut()` closes every
forwarded connection and the listening socket (new connections are refused, as by a stopped
server); `restore()` listens on the same port again.  Threads only: no event loop of the test's.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener = self._listen(0)
        self.port = int(self._listener.getsockname()[1])
        self._start()

    def dsn_through(self, dsn: str) -> str:
        return dsn.replace(f":{self.upstream_port}/", f":{self.port}/")

    @staticmethod
    def _listen(port: int) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        return s

    def _start(self) -> None:
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut or closed
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Every forwarded connection closed, new ones refused (until `restore`)."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # (wakes the thread blocked in accept)
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        self._listener = self._listen(self.port)
        self._start()

    def close(self) -> None:
        self.cut()
