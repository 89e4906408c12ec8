"""The connection to the Kubernetes API: credentials, raw JSON requests, watch streams, start-up checks.

Credentials come from the kubeconfig named by the `kubeconfig` setting (flag `--kubeconfig`), else
`$KUBECONFIG`, else `~/.kube/config` when it exists, else the in-cluster service-account
configuration (inside a pod).  A kubeconfig with static credentials (a token, a token file, a
client certificate, a CA...) is read directly, without importing kubernetes_asyncio (a third of a
second of start-up); exec plugins, auth providers, the in-cluster configuration and anything
unusual go through kubernetes_asyncio's loaders (credentials.py says which is which).  Requests
do not go through the generated client (its `call_api` costs more of the interpreter than the
HTTP exchange itself, and its models cannot parse the Status a `pods/binding` answers with): the
adapter keeps its own aiohttp session, built with the kubeconfig's TLS settings, with the
credentials' headers on every request, and reads and writes plain JSON maps with msgspec.  The
session puts no limit on connections: how many calls are in flight is the sink's adaptive limit's
business (flow.py).  HTTP/1.1 with keep-alive, one connection per call in flight;
docs/kubernetes.md gives the measurements behind choosing aiohttp over an HTTP/2 client.

Before a kubeconfig is used, `check_kubeconfig` reads it and names, on one line,
the first thing that keeps it from naming a server and credentials: unreadable, empty, not YAML,
not a mapping, no current-context, a context naming no entry of `contexts`, a context naming a
cluster or user absent from `clusters` / `users` (as client-go's clientcmd validateContext
refuses them: tools/clientcmd/validation.go), a cluster without `server`, or a server that is not
an http(s) URL with a host.

`KubeApi.preflight()` is the start-up check: it waits for the server (a repeated log line, with
backoff, while it cannot be reached), then fails with `KubeSetupError` naming what is wrong when
Volcano's CRDs are missing or the credentials lack a permission the adapter uses (asked with
SelfSubjectAccessReview, so nothing is read or written to find out).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import msgspec
import yarl

from fumarole.daemon.adapters.kubernetes.credentials import (
    Credentials,
    LoaderCredentials,
    StaticCredentials,
    TlsSettings,
    ssl_context,
    static_kubeconfig,
)

log = logging.getLogger("fumarole.kubernetes")

TRANSIENT_CODES = frozenset({408, 429, 500, 502, 503, 504})


class KubeSetupError(RuntimeError):
    """The adapter cannot start: bad kubeconfig, missing CRDs or permissions (exit 2)."""


class KubeTransientError(RuntimeError):
    """The server could not be reached or answered with a transient error (retry with backoff)."""


@dataclass(frozen=True, slots=True)
class Permission:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""  # "" = in every namespace

    def __str__(self) -> str:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {res}" + (f".{self.group}" if self.group else "") + where


def _perms(verbs: tuple[str, ...], group: str, resource: str, sub: str = "") -> list[Permission]:
    return [Permission(v, group, resource, sub) for v in verbs]


REQUIRED_PERMISSIONS: tuple[Permission, ...] = tuple(
    [
        *_perms(("list", "watch"), "", "nodes"),
        *_perms(("list", "watch"), "", "namespaces"),
        *_perms(("list", "watch", "get", "delete"), "", "pods"),
        *_perms(("list", "watch"), "", "resourcequotas"),
        *_perms(("list", "watch"), "scheduling.k8s.io", "priorityclasses"),
        *_perms(("list", "watch"), "policy", "poddisruptionbudgets"),
        *_perms(("list", "watch", "patch"), "scheduling.volcano.sh", "podgroups"),
        *_perms(("list", "watch", "get", "create"), "scheduling.volcano.sh", "queues"),
        *_perms(("list", "watch"), "topology.volcano.sh", "hypernodes"),
        *_perms(("list", "watch"), "nodeinfo.volcano.sh", "numatopologies"),
        Permission("create", "", "pods", "binding"),
        Permission("patch", "", "pods", "status"),
        Permission("create", "", "events"),
        Permission("patch", "", "events"),  # client-go's correlator patches a repeated Event's count
        Permission("patch", "scheduling.volcano.sh", "queues", "status"),
    ]
)
"""Exactly the (verb, resource) pairs the adapter uses; deploy/kubernetes' ClusterRole grants these."""

VOLCANO_GROUP_VERSION = "scheduling.volcano.sh/v1beta1"
VOLCANO_RESOURCES = ("podgroups", "queues")


def kubeconfig_path(setting: str, env: dict[str, str] | None = None) -> str | None:
    """The kubeconfig file to use, or None for the in-cluster configuration."""
    environ = os.environ if env is None else env
    if setting:
        return setting
    if environ.get("KUBECONFIG"):
        return environ["KUBECONFIG"].split(os.pathsep)[0]
    default = Path.home() / ".kube" / "config"
    if default.exists() or not environ.get("KUBERNETES_SERVICE_HOST"):
        return str(default)
    return None


KUBECONFIG_SHAPE = "a kubeconfig is a YAML mapping with clusters, users, contexts and current-context"


def check_kubeconfig(path: str) -> None:
    """KubeSetupError (`kubeconfig PATH: cause`, one line) for what `check_kubeconfig` checks (see
    the module notes); None when the current context names a cluster with an http(s) server."""
    checked_kubeconfig(path)


@dataclass(frozen=True, slots=True)
class CheckedKubeconfig:
    """A kubeconfig that passed `check_kubeconfig`: its current context's cluster and user maps."""

    cluster_name: str
    cluster: dict[str, Any]
    user_name: str
    user: dict[str, Any]  # {} when the context names no user


def checked_kubeconfig(path: str) -> CheckedKubeconfig:
    """As `check_kubeconfig`, returning what it read (the current context's cluster and user)."""

    def bad(cause: str) -> KubeSetupError:
        return KubeSetupError(f"kubeconfig {path}: {cause}")

    p = Path(path)
    if p.is_dir():
        raise bad("is a directory, not a kubeconfig file")
    if not p.exists():
        raise bad(
            "no such file (pass --kubeconfig, set KUBECONFIG, or run inside a pod for the in-cluster "
            "configuration)"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise bad(f"cannot read it: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise bad(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise bad(f"not valid YAML: {_yaml_cause(e)}") from None
    if doc is None:
        raise bad(f"empty ({KUBECONFIG_SHAPE})")
    if not isinstance(doc, dict):
        raise bad(f"expected a mapping, got {_kind(doc)} ({KUBECONFIG_SHAPE})")
    current = doc.get("current-context")
    if not current:
        raise bad("no current-context (set one with kubectl config use-context NAME)")
    context = _named(doc, "contexts", "context", current, bad)
    if context is None:
        raise bad(f"current-context {current!r} names no entry of contexts")
    cluster_name, user_name = context.get("cluster"), context.get("user")
    if not cluster_name:
        raise bad(f"context {current!r} names no cluster")
    cluster = _named(doc, "clusters", "cluster", cluster_name, bad)
    if cluster is None:
        raise bad(f"context {current!r} names cluster {cluster_name!r}, which is not in clusters")
    user = _named(doc, "users", "user", user_name, bad) if user_name else {}
    if user is None:
        raise bad(f"context {current!r} names user {user_name!r}, which is not in users")
    server = cluster.get("server")
    if not server or not isinstance(server, str):
        raise bad(f"cluster {cluster_name!r} has no server address (clusters[].cluster.server)")
    try:
        url = urlsplit(server)
        host = url.hostname
        url.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as e:
        raise bad(f"cluster {cluster_name!r}: server {server!r} is not a valid URL ({e})") from None
    if url.scheme not in ("http", "https") or not host:
        raise bad(f"cluster {cluster_name!r}: server {server!r} is not an http(s):// URL with a host")
    return CheckedKubeconfig(str(cluster_name), cluster, str(user_name or ""), user)


def _named(doc: dict[str, Any], section: str, key: str, name: str, bad: Any) -> dict[str, Any] | None:
    """The `key` map of the entry of the list `section` named `name` (None when there is none)."""
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise bad(f"{section}: expected a list, got {_kind(entries)}")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key) or {}
            if not isinstance(body, dict):
                raise bad(f"{section} entry {name!r}: {key} is {_kind(body)}, not a mapping")
            return body
    return None


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _yaml_cause(e: Exception) -> str:
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    mark = getattr(e, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no message)"


class KubeApi:
    """Raw JSON requests and watch streams over our own aiohttp session (see the module notes)."""

    def __init__(
        self,
        server: str,
        credentials: Credentials,
        *,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        proxy: str | None = None,
        loader: str = "static",
    ) -> None:
        self.server = server
        self.credentials = credentials
        self.loader = loader  # "static" (the kubeconfig read directly) or "kubernetes_asyncio"
        self._base = server.rstrip("/")
        self._tls = tls
        self._server_hostname = server_hostname
        self._proxy = proxy
        self._session: aiohttp.ClientSession | None = None
        self.calls = 0  # requests sent (every attempt), for the dispatcher's figures
        self._header_sets: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    @classmethod
    async def connect(cls, kubeconfig: str) -> KubeApi:
        """Load credentials (see the module notes); KubeSetupError names the file and the problem."""
        path = kubeconfig_path(kubeconfig)
        if path is not None:
            checked = checked_kubeconfig(path)

            def bad(cause: str) -> KubeSetupError:
                return KubeSetupError(f"kubeconfig {path}: {cause}")

            static = static_kubeconfig(path, checked.cluster, checked.user, bad)
            if static is not None:
                api = cls(
                    static.server,
                    StaticCredentials(static.token, static.token_file, bad),
                    tls=ssl_context(static.tls, bad) if static.server.startswith("https") else None,
                    server_hostname=static.server_hostname,
                    proxy=static.proxy,
                    loader="static",
                )
                log.info("Kubernetes credentials from kubeconfig %s; server %s", path, static.server)
                return api
        return await cls._connect_with_loader(path)

    @classmethod
    async def _connect_with_loader(cls, path: str | None) -> KubeApi:
        """kubernetes_asyncio's loaders: in-cluster, or a kubeconfig needing more than static credentials."""
        from kubernetes_asyncio import client, config
        from kubernetes_asyncio.config.config_exception import ConfigException

        cfg = client.Configuration()
        where = f"kubeconfig {path}" if path else "in-cluster configuration"
        try:
            if path is None:
                config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            else:
                await config.load_kube_config(config_file=path, client_configuration=cfg)
        except (ConfigException, ValueError, KeyError, TypeError, OSError) as e:
            raise KubeSetupError(f"{where}: {_one_line(str(e)) if str(e) else type(e).__name__}") from None
        except Exception as e:  # the loader's other errors (an exec plugin, a certificate file...)
            raise KubeSetupError(f"{where}: {type(e).__name__}: {_one_line(str(e))}") from None
        if not cfg.host:
            raise KubeSetupError(f"{where if path else 'in-cluster service account'}: no server address")

        def bad(cause: str) -> KubeSetupError:
            return KubeSetupError(f"{where}: {cause}")

        tls = TlsSettings(
            verify=bool(cfg.verify_ssl),
            ca_file=cfg.ssl_ca_cert,
            cert_file=cfg.cert_file,
            key_file=cfg.key_file,
        )
        api_client = client.ApiClient(configuration=cfg)
        try:
            context = ssl_context(tls, bad) if str(cfg.host).startswith("https") else None
        except KubeSetupError:
            await api_client.close()
            raise
        log.info(
            "Kubernetes credentials from %s; server %s",
            f"kubeconfig {path}" if path else "in-cluster service account",
            cfg.host,
        )
        return cls(
            cfg.host,
            LoaderCredentials(api_client),
            tls=context,
            server_hostname=getattr(cfg, "tls_server_name", None) or None,
            proxy=cfg.proxy or None,
            loader="kubernetes_asyncio",
        )

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        await self.credentials.close()

    def _client_session(self) -> aiohttp.ClientSession:
        """Our own aiohttp session, with the kubeconfig's TLS settings (see the module notes)."""
        if self._session is None:
            # No connection limit here: the sink's adaptive limit (flow.py) decides how many calls
            # are in flight; keep-alive reuses the connections it opened.
            connector = aiohttp.TCPConnector(limit=0, ssl=self._tls or False, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(
                connector=connector, read_bufsize=2**21, skip_auto_headers=("User-Agent",)
            )
        return self._session

    async def _headers(self, content_type: str) -> dict[str, str]:
        """The request headers for a content type (made again when the credentials are asked again)."""
        auth = await self._auth_headers()
        made = self._header_sets.get(content_type)
        if made is None or made[0] is not auth:
            made = (auth, {"Accept": "application/json", "Content-Type": content_type, **auth})
            self._header_sets[content_type] = made
        return made[1]

    async def _auth_headers(self) -> dict[str, str]:
        return await self.credentials.headers()

    async def _call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: Any,
    ) -> aiohttp.ClientResponse:
        session = self._client_session()
        headers = await self._headers(content_type)
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = self._timeouts.get(timeout) or self._timeouts.setdefault(
                timeout, aiohttp.ClientTimeout(total=timeout)
            )
        data = None if body is None else (body if isinstance(body, bytes) else _encode(body))
        if query:
            params = [(k, _q(v)) for k, v in query.items() if v is not None]
            url: Any = self._base + path
        else:  # the common case (every write): a URL built once per path shape, not parsed again
            params = []
            url = yarl.URL(self._base + path, encoded=True)
        self.calls += 1
        try:
            resp = await session.request(
                method,
                url,
                params=params or None,
                data=data,
                headers=headers,
                timeout=timeout,
                proxy=self._proxy,
                server_hostname=self._server_hostname,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise KubeTransientError(f"{method} {path}: {type(e).__name__}: {e}") from None
        return resp

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 60.0,
    ) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None); KubeTransientError when the server cannot be reached."""
        code, data, _ = await self.request_full(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        return code, data

    async def request_full(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 60.0,
    ) -> tuple[int, Any, float | None]:
        """As `request`, plus the seconds of a `Retry-After` header (None without one)."""
        resp = await self._call(method, path, query, body, content_type, timeout)
        try:
            raw = await resp.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise KubeTransientError(f"{method} {path}: {type(e).__name__}: {e}") from None
        finally:
            resp.release()
        try:
            data = _decode(raw) if raw else None
        except msgspec.DecodeError:
            data = {"message": raw[:500].decode(errors="replace")}
        return resp.status, data, _retry_after(resp.headers.get("Retry-After"))

    async def request_bytes(
        self, method: str, path: str, *, query: dict[str, Any] | None = None, timeout: float = 60.0
    ) -> tuple[int, bytes]:
        """(HTTP status, the body undecoded): for large listings the caller decodes as it needs."""
        resp = await self._call(method, path, query, None, "application/json", timeout)
        try:
            return resp.status, await resp.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise KubeTransientError(f"{method} {path}: {type(e).__name__}: {e}") from None
        finally:
            resp.release()

    async def open_watch(self, path: str, query: dict[str, Any]) -> aiohttp.ClientResponse:
        """An open watch stream (the caller reads lines and releases it)."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)
        return await self._call("GET", path, query, None, "application/json", timeout)

    # ------------------------------------------------------------------ start-up checks
    async def preflight(
        self,
        *,
        permissions: tuple[Permission, ...] = REQUIRED_PERMISSIONS,
        wait_log_every: float = 5.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        """Wait for the server, then check Volcano's CRDs and the permissions (KubeSetupError)."""
        delay = 0.2
        said = 0.0
        body: Any = None
        loop = asyncio.get_running_loop()
        while True:
            try:
                code, body = await self.request("GET", "/version", timeout=10)
            except KubeTransientError as e:
                if loop.time() - said >= wait_log_every:
                    log.warning("waiting for the Kubernetes API server at %s: %s", self.server, e)
                    said = loop.time()
                await sleep(delay)
                delay = min(delay * 2, wait_log_every)
                continue
            if code == 401:
                raise KubeSetupError(f"{self.server}: the credentials were refused (401 Unauthorized)")
            if code in TRANSIENT_CODES:
                await sleep(delay)
                delay = min(delay * 2, wait_log_every)
                continue
            break
        log.info("Kubernetes API server %s, version %s", self.server, (body or {}).get("gitVersion", "?"))
        # Discovery and every access review at once (one round trip instead of ~25); the errors
        # are still named in this order: the CRDs first, then the permissions in their order.
        discovery, *reviews = await asyncio.gather(
            self.request("GET", f"/apis/{VOLCANO_GROUP_VERSION}"),
            *(self.allowed(p) for p in permissions),
            return_exceptions=True,
        )
        if isinstance(discovery, BaseException):
            raise discovery
        code, body = discovery
        served = {r.get("name") for r in (body or {}).get("resources", [])} if code == 200 else set()
        missing = [r for r in VOLCANO_RESOURCES if r not in served]
        if missing:
            raise KubeSetupError(
                f"{self.server}: Volcano's CRDs are not installed (no {', '.join(missing)} in "
                f"{VOLCANO_GROUP_VERSION}); apply Volcano's CRDs first "
                "(installer/helm/chart/volcano/crd/bases in Volcano's tree)"
            )
        for answer in reviews:
            if isinstance(answer, BaseException):
                raise answer
        denied = [p for p, answer in zip(permissions, reviews, strict=True) if not answer]
        if denied:
            raise KubeSetupError(
                f"{self.server}: the credentials lack {len(denied)} permission(s) the adapter needs: "
                + ", ".join(str(p) for p in denied)
                + " (see deploy/kubernetes' ClusterRole)"
            )

    async def allowed(self, p: Permission) -> bool:
        attrs: dict[str, Any] = {"verb": p.verb, "group": p.group, "resource": p.resource}
        if p.subresource:
            attrs["subresource"] = p.subresource
        if p.namespace:
            attrs["namespace"] = p.namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        code, body = await self.request(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review
        )
        if code not in (200, 201):
            raise KubeSetupError(
                f"{self.server}: SelfSubjectAccessReview answered {code}: {message_of(body)}"
            )
        return bool(((body or {}).get("status") or {}).get("allowed"))


def message_of(body: Any) -> str:
    """The message of a Status (or whatever came back), for logs and failed outcomes."""
    if isinstance(body, dict):
        msg = body.get("message") or body.get("reason")
        if msg:
            return str(msg)
    return json.dumps(body)[:300] if body is not None else "(no body)"


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def _retry_after(value: str | None) -> float | None:
    """A Retry-After header's seconds (the API server sends whole seconds); None if absent or odd."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _q(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v
