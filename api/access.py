"""Who may talk to the API: the Host/Origin allow-list, the optional read token and the dashboard's
session cookie (one middleware, `access_middleware`, in front of every route).

* **Host allow-list** (against DNS rebinding: a page on attacker.example whose name the attacker
  re-points at 127.0.0.1 reaches a loopback daemon with `Host: attacker.example`). A request is
  answered only when its Host names this server: `localhost` (and `*.localhost`), a loopback
  address, the listen address, any IP address when the server listens on a wildcard address
  (0.0.0.0 or ::: each of the machine's addresses is then a listen address, and an IP literal
  cannot be re-pointed by DNS), or one of the operator's `allowed_hosts` (`name` for any port,
  `name:port` for that port only, `*` for any Host — which turns the protection off). Anything
  else gets 421 with a JSON body.
* **Origin**: a request carrying an `Origin` (a browser's cross-origin or non-GET request) is
  refused (403) unless the origin is this very Host or an allowed name (an IP literal only when
  it is the Host itself); `Origin: null` is refused.
* **Read token** (`read_token`, "" = reads open): every route except /healthz, /readyz, the
  dashboard's login page and static assets, and POST /v1/events (which has its own write token)
  needs `Authorization: Bearer <read token>` (compared in constant time) or, for GET/HEAD only,
  the dashboard's session cookie. A dashboard page asked for without either is redirected (303)
  to /ui/login; anything else gets 401 with `WWW-Authenticate: Bearer`.
* **Session cookie** (`fumarole_session`): set by POST /ui/login (api/ui/login.py) after the
  token was typed in; its value is `<expiry>.<HMAC-SHA256 of the expiry keyed by the read token>`
  (not the token itself; changing the token ends every session), `HttpOnly; SameSite=Strict`,
  `Secure` when the login came over https. Writes never accept it, and with SameSite=Strict plus
  the Origin check another site can neither send it nor read what it returns.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

import msgspec
from aiohttp import web

from fumarole.api.types import Problem

__all__ = [
    "ACCESS_KEY",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "Access",
    "AccessError",
    "access_middleware",
    "check_allowed_host",
    "read_token_from",
    "split_host",
]

SESSION_COOKIE = "fumarole_session"
SESSION_SECONDS = 12 * 3600  # a dashboard session lasts at most this long (then log in again)
MIN_READ_TOKEN = 16  # characters: a shorter read token is refused (it would be guessable)

_ENCODER = msgspec.json.Encoder()
_WILDCARDS = ("0.0.0.0", "::", "")
_HOST_CACHE = 1024  # Host headers whose answer is remembered
# routes that answer without a read token: the probes, the login page, the dashboard's static files
_OPEN_PATHS = ("/healthz", "/readyz", "/ui/login")
_OPEN_PREFIXES = ("/ui/assets/",)


class AccessError(ValueError):
    """A bad allowed-host entry or read-token source; the message names it."""


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header (or allowed-host entry) as (lower-cased name without a trailing dot, port or
    None); None when it is not a host[:port] at all."""
    value = value.strip()
    if not value or len(value) > 300 or any(c in value for c in " /\\?#@\t\r\n\x00"):
        return None
    port: str | None = None
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name = value  # no port (or an unbracketed IPv6 address, which is then a name of its own)
    if port is not None and (not port.isdigit() or not 0 < int(port) <= 65535):
        return None
    name = name.lower().rstrip(".")
    if not name:
        return None
    return name, int(port) if port is not None else None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def check_allowed_host(entry: str, where: str = "allowed_hosts") -> str:
    """An operator's allowed-host entry, checked: `*`, `name`, `name:port`, `[v6]:port`."""
    entry = entry.strip()
    if entry == "*":
        return entry
    if "://" in entry or split_host(entry) is None:
        raise AccessError(
            f"{where}: {entry!r} is not a host name (expected NAME or NAME:PORT, e.g. "
            "fumarole.example.com or fumarole.example.com:8321, or * for any)"
        )
    return entry


def read_token_from(token: str, token_file: str, *, where: str = "read_token_file") -> str:
    """The read token: `token` itself, or the first line of `token_file` (not both)."""
    if token and token_file:
        raise AccessError("read_token and read_token_file are both set: set one of them")
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline()
        except OSError as e:
            raise AccessError(f"{where}: {token_file}: cannot read the read token: {e.strerror}") from None
        except UnicodeDecodeError:
            raise AccessError(f"{where}: {token_file}: the read token is not UTF-8 text") from None
        token = token.strip()
        if not token:
            raise AccessError(f"{where}: {token_file}: the file holds no token (its first line is empty)")
    token = token.strip()
    if token and (len(token) < MIN_READ_TOKEN or not token.isprintable() or " " in token):
        source = f"{where}: {token_file}" if token_file else "read_token"
        raise AccessError(
            f"{source}: the read token must be at least {MIN_READ_TOKEN} printable characters "
            "without spaces (e.g. the output of `openssl rand -hex 24`)"
        )
    return token


@dataclass(frozen=True, slots=True)
class Access:
    """The access rules of one server (see the module docstring)."""

    listen_host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    read_token: str = ""
    # Host header -> answer (bounded: Host is the client's to choose; emptied when full)
    _hosts: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def _named(self, name: str, port: int | None) -> bool:
        """Allowed without the wildcard-listen rule: localhost, loopback, listen host, configured."""
        if name == "localhost" or name.endswith(".localhost"):
            return True
        ip = _ip(name)
        if ip is not None and ip.is_loopback:
            return True
        if name == self.listen_host.strip("[]").lower().rstrip("."):
            return True
        for entry in self.allowed_hosts:
            if entry == "*":
                return True
            parsed = split_host(entry)
            if parsed is not None and parsed[0] == name and parsed[1] in (None, port):
                return True
        return False

    def host_allowed(self, host: str) -> bool:
        """Whether a request with this Host header is answered."""
        known = self._hosts.get(host)
        if known is None:
            if len(self._hosts) >= _HOST_CACHE:
                self._hosts.clear()
            known = self._hosts[host] = self._host_allowed(host)
        return known

    def _host_allowed(self, host: str) -> bool:
        parsed = split_host(host)
        if parsed is None:
            return "*" in self.allowed_hosts
        name, port = parsed
        if self.listen_host in _WILDCARDS and _ip(name) is not None:
            return True
        return self._named(name, port)

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Whether a request with this Origin (and Host) is answered."""
        if "*" in self.allowed_hosts:
            return True
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            return False  # "null", or not an origin
        theirs = split_host(parts.netloc)
        if theirs is None:
            return False
        if theirs == split_host(host):
            return True  # same origin
        return self._named(*theirs)

    # ------------------------------------------------------------------ the read token

    def token_equals(self, given: str) -> bool:
        """`given` is the read token (compared in constant time)."""
        return bool(self.read_token) and hmac.compare_digest(given.encode(), self.read_token.encode())

    def bearer_ok(self, request: web.Request) -> bool:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.token_equals(given.strip())

    def session_value(self, now: float | None = None) -> str:
        """A fresh session cookie value: `<expiry>.<mac>`."""
        expiry = int(now if now is not None else time.time()) + SESSION_SECONDS
        return f"{expiry}.{self._mac(expiry)}"

    def session_ok(self, value: str, now: float | None = None) -> bool:
        raw, sep, mac = value.partition(".")
        if not sep or not raw.isdigit() or len(raw) > 12:
            return False
        expiry = int(raw)
        if expiry < (now if now is not None else time.time()):
            return False
        return hmac.compare_digest(mac.encode(), self._mac(expiry).encode())

    def _mac(self, expiry: int) -> str:
        msg = f"fumarole dashboard session until {expiry}".encode()
        return hmac.new(self.read_token.encode(), msg, hashlib.sha256).hexdigest()

    def authorised(self, request: web.Request) -> bool:
        """A read is allowed: no read token is configured, or the request carries it (or a session)."""
        if not self.read_token:
            return True
        if self.bearer_ok(request):
            return True
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return request.method in ("GET", "HEAD") and bool(cookie) and self.session_ok(cookie)


ACCESS_KEY: web.AppKey[Access] = web.AppKey("access", Access)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _refuse(
    status: int, error: str, detail: str, path: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = _ENCODER.encode(Problem(error=error, detail=detail, path=path))
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)


def _needs_token(request: web.Request) -> bool:
    path = request.path
    if path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES) or path in ("/", "/ui"):
        return False
    return not (request.method == "POST" and path == "/v1/events")  # the write token guards it


def _is_page(request: web.Request) -> bool:
    """A dashboard page (the HTML shell), which a browser without a session is sent to log in for."""
    return request.method == "GET" and request.path.startswith("/ui/") and request.path != "/ui/live"


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host, then Origin, then (where a route needs it) the read token; see the module docstring."""
    access = request.app[ACCESS_KEY]
    host = request.headers.get("Host", "")
    if not access.host_allowed(host):
        return _refuse(
            421,
            "misdirected-request",
            f"this server does not answer to Host {host[:100]!r}; if that is a name of this server, "
            "add it to allowed_hosts (--allowed-host NAME, FUMAROLE_ALLOWED_HOSTS)",
            "header.Host",
        )
    origin = request.headers.get("Origin")
    if origin is not None and not access.origin_allowed(origin, host):
        return _refuse(
            403,
            "forbidden-origin",
            f"cross-origin requests from {origin[:100]!r} are refused (allowed: this server's own "
            "pages, and names in allowed_hosts)",
            "header.Origin",
        )
    if access.read_token and _needs_token(request) and not access.authorised(request):
        if _is_page(request):
            target = quote(request.rel_url.path_qs, safe="/")
            return web.Response(status=303, headers={"Location": f"/ui/login?next={target}"})
        return _refuse(
            401,
            "unauthorized",
            "a read token is required (Authorization: Bearer <read token>, or log in at /ui/login)",
            "header.Authorization",
            headers={"WWW-Authenticate": 'Bearer realm="fumarole"'},
        )
    return await handler(request)
