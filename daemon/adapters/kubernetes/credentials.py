"""Where the adapter's TLS settings and request headers come from: a kubeconfig read directly, or
kubernetes_asyncio's loaders.

Importing kubernetes_asyncio costs about 0.3–0.4 s of start-up (its `client` package imports every
generated API and model), so a kubeconfig whose current context needs nothing but static
credentials is read here, with PyYAML, after `check_kubeconfig` validated it: the user has only
`token`, `tokenFile`, `username`/`password`, `client-certificate[-data]` and
`client-key[-data]`; the cluster only `server`, `certificate-authority[-data]`,
`insecure-skip-tls-verify`, `tls-server-name` and `proxy-url`.  Anything else (an `exec` plugin,
an `auth-provider`, impersonation, extensions, a value of an unexpected type) and the in-cluster
configuration go to kubernetes_asyncio's loader, as before.  The environment variable
`FUMAROLE_KUBECONFIG_LOADER=kubernetes_asyncio` sends every kubeconfig there.

The direct reading gives what the loader gives (kubernetes_asyncio config/kube_config.py,
`_load_user_token`, `_load_user_pass_token`, `_load_cluster_info`): `token` before `tokenFile`,
then `username`/`password` (Basic); `-data` fields (base64) before files; files relative to the
kubeconfig's directory; TLS files read only for an https server.  One difference, as client-go
does (tools/clientcmd's tokenFile, transport.NewCachedFileTokenSource): the `tokenFile` is read
again (at most every 10 s), so a rotated token is picked up, and surrounding whitespace is
trimmed.  Every problem is one line naming the field (the caller prefixes the kubeconfig's path).
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

LOADER_ENV = "FUMAROLE_KUBECONFIG_LOADER"
TOKEN_FILE_REREAD_S = 10.0

STATIC_USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "username",
        "password",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
    }
)
STATIC_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "proxy-url",
    }
)


class Credentials(Protocol):
    """The headers every request carries (asked before each request; cheap when nothing changed)."""

    async def headers(self) -> dict[str, str]: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """What the session's SSL context is made of (files, or PEM bytes from `-data` fields)."""

    verify: bool = True
    ca_file: str | None = None
    ca_pem: bytes | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None


def ssl_context(tls: TlsSettings, bad: Callable[[str], Exception]) -> ssl.SSLContext:
    """The SSL context for `tls`; `bad(cause)` for a CA, certificate or key that cannot be loaded."""
    if tls.verify:
        try:
            ctx = ssl.create_default_context(
                cafile=tls.ca_file, cadata=tls.ca_pem.decode("ascii", "replace") if tls.ca_pem else None
            )
        except (OSError, ssl.SSLError, ValueError) as e:
            where = tls.ca_file or "(certificate-authority-data)"
            raise bad(f"certificate authority {where}: {_why(e)}") from None
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_pem is not None or tls.cert_file:
        _load_cert_chain(ctx, tls, bad)
    return ctx


def _load_cert_chain(ctx: ssl.SSLContext, tls: TlsSettings, bad: Callable[[str], Exception]) -> None:
    """The client certificate and key (ssl loads them from files only: PEM bytes go through a
    private temporary directory, removed at once)."""
    with tempfile.TemporaryDirectory(prefix="fumarole-tls-") as tmp:
        cert, key = tls.cert_file, tls.key_file
        if tls.cert_pem is not None:
            cert = os.path.join(tmp, "cert.pem")
            Path(cert).write_bytes(tls.cert_pem)
        if tls.key_pem is not None:
            key = os.path.join(tmp, "key.pem")
            Path(key).write_bytes(tls.key_pem)
        assert cert is not None
        try:
            ctx.load_cert_chain(cert, keyfile=key)
        except (OSError, ssl.SSLError) as e:
            cert_where = tls.cert_file or "(client-certificate-data)"
            key_where = tls.key_file or "(client-key-data)"
            raise bad(f"client certificate {cert_where} / key {key_where}: {_why(e)}") from None


def _why(e: Exception) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower() if e.strerror.startswith("No such") else e.strerror
    return " ".join(str(e).split()) or type(e).__name__


@dataclass(frozen=True, slots=True)
class StaticKubeconfig:
    """What a kubeconfig with static credentials says (see the module notes)."""

    server: str
    tls: TlsSettings
    server_hostname: str | None
    proxy: str | None
    token: str | None  # the header's value, "Bearer …" or "Basic …"
    token_file: str | None  # read for each header (at most every TOKEN_FILE_REREAD_S)


def static_kubeconfig(
    path: str, cluster: dict[str, Any], user: dict[str, Any], bad: Callable[[str], Exception]
) -> StaticKubeconfig | None:
    """The static reading of a checked kubeconfig's cluster and user; None when it needs the
    loader (see the module notes).  `bad(cause)` for a file or field that cannot be read."""
    if os.environ.get(LOADER_ENV, "") == "kubernetes_asyncio":
        return None
    if set(user) - STATIC_USER_KEYS or set(cluster) - STATIC_CLUSTER_KEYS:
        return None
    strings = ("tls-server-name", "proxy-url", "certificate-authority", "certificate-authority-data")
    if any(k in cluster and not isinstance(cluster[k], str) for k in strings):
        return None
    if "insecure-skip-tls-verify" in cluster and not isinstance(cluster["insecure-skip-tls-verify"], bool):
        return None
    if any(not isinstance(v, str) for v in user.values()):
        return None
    base = os.path.dirname(os.path.abspath(path))
    server = str(cluster["server"]).rstrip("/")

    def file_of(obj: dict[str, Any], key: str) -> str | None:
        return os.path.normpath(os.path.join(base, obj[key])) if obj.get(key) else None

    def pem_of(obj: dict[str, Any], key: str) -> bytes | None:
        if not obj.get(key):
            return None
        try:
            return base64.standard_b64decode(obj[key].encode())
        except (binascii.Error, ValueError):
            raise bad(f"{key}: not base64") from None

    tls = TlsSettings(verify=not cluster.get("insecure-skip-tls-verify", False))
    if server.startswith("https"):
        ca_pem = pem_of(cluster, "certificate-authority-data")
        cert_pem, key_pem = pem_of(user, "client-certificate-data"), pem_of(user, "client-key-data")
        tls = TlsSettings(
            verify=tls.verify,
            ca_pem=ca_pem,
            ca_file=None if ca_pem else file_of(cluster, "certificate-authority"),
            cert_pem=cert_pem,
            cert_file=None if cert_pem else file_of(user, "client-certificate"),
            key_pem=key_pem,
            key_file=None if key_pem else file_of(user, "client-key"),
        )
        if (tls.cert_pem or tls.cert_file) and not (tls.key_pem or tls.key_file):
            raise bad("a client certificate without its client key (client-key or client-key-data)")
    token = token_file = None
    if user.get("token"):
        token = f"Bearer {user['token']}"
    elif user.get("tokenFile"):
        token_file = file_of(user, "tokenFile")
    elif "username" in user and "password" in user:
        token = "Basic " + base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
    return StaticKubeconfig(
        server=server,
        tls=tls,
        server_hostname=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        token=token,
        token_file=token_file,
    )


class StaticCredentials:
    """The Authorization header of a static kubeconfig; a `tokenFile` is read again every 10 s."""

    def __init__(self, token: str | None, token_file: str | None, bad: Callable[[str], Exception]) -> None:
        self._token = token
        self._file = token_file
        self._read_at = 0.0
        if token_file is not None:
            self._token = self._read(bad)

    def _read(self, bad: Callable[[str], Exception]) -> str:
        assert self._file is not None
        try:
            text = Path(self._file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise bad(f"tokenFile {self._file}: {_why(e)}") from None
        self._read_at = time.monotonic()
        return f"Bearer {text}"

    async def headers(self) -> dict[str, str]:
        if self._file is not None and time.monotonic() - self._read_at > TOKEN_FILE_REREAD_S:
            try:
                self._token = self._read(ValueError)
            except ValueError:
                self._read_at = time.monotonic()  # keep the last token; try again later
        return {"Authorization": self._token} if self._token else {}

    async def close(self) -> None:
        return None


class LoaderCredentials:
    """The headers of kubernetes_asyncio's configuration, asked at most every 10 s (a refreshing
    token source, as exec plugins and in-cluster service-account tokens are, is asked again then)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self._auth: dict[str, str] | None = None
        self._auth_at = 0.0

    async def headers(self) -> dict[str, str]:
        now = time.monotonic()
        if self._auth is None or now - self._auth_at > 10.0:
            settings = await self.api_client.configuration.auth_settings()
            headers: dict[str, str] = {}
            for entry in settings.values():
                if entry.get("in") == "header" and entry.get("value"):
                    headers[entry["key"]] = entry["value"]
            self._auth, self._auth_at = headers, now
        return self._auth

    async def close(self) -> None:
        await self.api_client.close()
