"""The REST API's listening socket, bound before the daemon creates anything.

`fumarole run` (and `fumarole serve`) bind and listen on the address during the start-up checks
and hand the socket to aiohttp later, so a port already in use is refused (exit 2, one line
naming the address) before the data directory exists, and no other process can take the port
in between.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["ListenError", "bind_error", "bind_listen", "format_address"]

_BACKLOG = 128

_HINTS = {
    errno.EADDRINUSE: "address already in use (another daemon or `fumarole serve` on that port?)",
    errno.EADDRNOTAVAIL: "address not available on this machine",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


class ListenError(Exception):
    """The listen address cannot be bound; the message names it."""


def format_address(host: str, port: int) -> str:
    """HOST:PORT, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0 picks a free one), or ListenError."""
    where = format_address(host, port)
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        raise ListenError(f"listen {where}: cannot resolve the host: {e.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does: TIME_WAIT is fine
        sock.bind(addr)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise bind_error(host, port, e) from None
    return sock


def bind_error(host: str, port: int, e: OSError) -> ListenError:
    """The one-line ListenError for an OSError met binding host:port."""
    why = _HINTS.get(e.errno or 0, e.strerror or str(e))
    return ListenError(f"listen {format_address(host, port)}: {why}")
