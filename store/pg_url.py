"""PostgreSQL connection strings and query text: telling a URL from a file, checking one, redacting
passwords, SQLite placeholders as PostgreSQL's. Pure text helpers shared by the asyncpg log and the
synchronous readers (imports nothing else from store, so neither depends on the other)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

__all__ = ["DsnError", "check_dsn", "is_postgres_url", "redact_dsn", "to_dollar_params"]

_SCHEMES = ("postgresql://", "postgres://")
# Query parameters libpq and asyncpg take a secret from.
_SECRET_PARAMS = re.compile(r"(?i)((?:^|[?&;])(?:password|sslpassword|passfile_password)=)[^&;#]*")
# scheme://userinfo@ : the userinfo's password (anything after its first ':'), for any scheme.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@]*)@")


class DsnError(ValueError):
    """A database URL that cannot be right (scheme, host or port); the message never shows a password."""


def is_postgres_url(db: str) -> bool:
    """Whether `--db` names a PostgreSQL database (postgresql:// or postgres://) rather than a file."""
    return db.startswith(_SCHEMES)


def looks_like_url(db: str) -> bool:
    """Whether `db` is written as a URL (`scheme://…`) rather than a file path."""
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", db) is not None


def redact_dsn(dsn: str) -> str:
    """The URL without any password (in its userinfo or its query), for messages and logs; works on
    any scheme and on URLs that do not parse."""

    def userinfo(m: re.Match[str]) -> str:
        info = m.group(2)
        user = info.split(":", 1)[0]
        return f"{m.group(1)}{user}:***@" if ":" in info else m.group(0)

    out = _USERINFO.sub(userinfo, dsn, count=1)
    return _SECRET_PARAMS.sub(lambda m: f"{m.group(1)}***", out)


def check_dsn(dsn: str, *, what: str = "db") -> None:
    """DsnError (one line, password redacted) unless `dsn` is a postgresql:// URL whose hosts and
    ports can be right: a host list `h1[:p1],h2[:p2]`, `[v6]` hosts closed, ports 1–65535."""
    shown = redact_dsn(dsn)
    if not is_postgres_url(dsn):
        scheme = dsn.split("://", 1)[0] + "://" if "://" in dsn else ""
        raise DsnError(
            f"{what}: {shown!r} is not a postgresql:// URL"
            + (f" (scheme {scheme} is not supported)" if scheme else "")
        )
    rest = dsn.split("://", 1)[1]
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    hostlist = netloc.rsplit("@", 1)[-1]
    for host in hostlist.split(",") if hostlist else []:
        _check_host(host, shown, what)
    query = dsn.split("?", 1)[1].split("#", 1)[0] if "?" in dsn else ""
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "port":
            for port in value.split(","):
                _check_port(port, shown, what)


def _check_host(host: str, shown: str, what: str) -> None:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise DsnError(f"{what}: {shown!r}: the IPv6 host {host!r} has no closing ']'")
        after = host[end + 1 :]
        if after and not after.startswith(":"):
            raise DsnError(f"{what}: {shown!r}: unexpected {after!r} after the IPv6 host")
        port = after[1:] if after else ""
    elif "]" in host or "[" in host:
        raise DsnError(f"{what}: {shown!r}: {host!r} is not a host (a stray bracket)")
    else:
        _, sep, port = host.rpartition(":")
        if not sep:
            port = ""
    if port or host.endswith(":"):
        _check_port(port, shown, what)


def _check_port(port: str, shown: str, what: str) -> None:
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise DsnError(f"{what}: {shown!r}: port {port!r} is not a number from 1 to 65535")


def to_dollar_params(sql: str) -> str:
    """SQLite's `?` placeholders as PostgreSQL's `$1, $2, …` (the shared queries use no `?` in text)."""
    n = 0

    def sub(_: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return f"${n}"

    return re.sub(r"\?", sub, sql)
