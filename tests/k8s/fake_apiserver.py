"""A fake Kubernetes API server for tests: the wire protocol of what Fumarole's adapter uses.

Speaks HTTP (no TLS) on 127.0.0.1 and answers as kube-apiserver 1.36 does, for the resources the
Kubernetes adapter reads and writes: discovery (/api, /api/v1, /apis, /apis/G/V, /version), LIST
with a resourceVersion (one global, monotonically increasing counter, as etcd's revision), WATCH
(`?watch=1&resourceVersion=…&allowWatchBookmarks=true&timeoutSeconds=…`, newline-delimited JSON
events ADDED / MODIFIED / DELETED / BOOKMARK / ERROR), an ERROR event carrying a `410 Expired`
Status for a resourceVersion older than the compaction floor, create / get / update (PUT, with
optimistic concurrency: 409 Conflict on a stale resourceVersion) / merge and strategic-merge
PATCH / DELETE (a bound, unfinished pod with a grace period stays, with deletionTimestamp, until
deleted with gracePeriodSeconds=0), the `pods/binding`, `pods/eviction`, `pods/status`,
`nodes/status` and `queues/status` subresources (PodGroups have none: `podgroups/X/status` is 404,
as with Volcano's CRD), core v1 Events, coordination.k8s.io Leases, and bearer tokens mapped to
allowed (verb, resource) sets (401 for an unknown token, 403 Forbidden Status for a missing verb).

Shapes follow recorded payloads (tests/k8s/payloads/): Status objects, list kind/apiVersion/
metadata (built-in list items carry no kind/apiVersion, custom resources' do), managedFields on
every object.  Test controls (`FakeApiServer.compact()`, `.break_watches()`) expire old
resourceVersions and end every open watch.  Run it in a thread (`FakeApiServer().start()`) or as a
program (`python fake_apiserver.py --port-file F --token T`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime as dt
import json
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

CRDS = Path(__file__).resolve().parents[3] / "shared" / "k8s" / "crds"
if not CRDS.is_dir():  # the worktree layout: <root>/../shared
    CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "k8s" / "crds"
PAYLOADS = Path(__file__).resolve().parent / "payloads"
SERVER_VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2-fake",
    "gitCommit": "fake",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.27.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}
ALL = "*"


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    custom: bool = False
    short: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gr(self) -> str:
        """group/resource as RBAC and Status details name it ("pods", "podgroups.scheduling.volcano.sh")."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _crd_resources() -> list[Resource]:
    out = []
    for name in ("scheduling.volcano.sh_podgroups.json", "scheduling.volcano.sh_queues.json"):
        crd = json.loads((CRDS / name).read_text())
        spec = crd["spec"]
        for v in spec["versions"]:
            if not v.get("served"):
                continue
            subs = tuple(sorted((v.get("subresources") or {}).keys()))
            out.append(
                Resource(
                    spec["group"],
                    v["name"],
                    spec["names"]["plural"],
                    spec["names"]["kind"],
                    spec["scope"] == "Namespaced",
                    subs,
                    custom=True,
                    short=tuple(spec["names"].get("shortNames", ())),
                )
            )
    return out


BUILTIN = [
    Resource("", "v1", "namespaces", "Namespace", False, ("status",), short=("ns",)),
    Resource("", "v1", "nodes", "Node", False, ("status",), short=("no",)),
    Resource("", "v1", "pods", "Pod", True, ("binding", "eviction", "status"), short=("po",)),
    Resource("", "v1", "events", "Event", True, short=("ev",)),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True, ("status",), short=("quota",)),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ("token",), short=("sa",)),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    Resource(
        "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("status",), short=("pdb",)
    ),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
]


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A metav1.Status as the API server writes it (kind/apiVersion first, `details` when known)."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
    }
    if code >= 400:
        out["message"] = message
        out["reason"] = reason
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = status(code, reason, message, details)
        self.code = code


def _details(res: Resource, name: str, sub: str = "") -> dict[str, Any]:
    out = {"name": name} | ({"group": res.group} if res.group else {})
    return out | {"kind": f"{res.plural}/{sub}" if sub else res.plural}


def _not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.gr} "{name}" not found', _details(res, name))


def _conflict(res: Resource, name: str, why: str, sub: str = "") -> ApiError:
    what = f"{res.gr}/{sub}" if sub else res.gr
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}', _details(res, name, sub)
    )


# ---------------------------------------------------------------------------------------- merging
_MERGE_KEYS = {("status", "conditions"): "type", ("spec", "containers"): "name"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    """Strategic merge patch for the lists the adapter patches (conditions by `type`)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        key = _MERGE_KEYS.get((*path[-1:], k))
        if v is None:
            out.pop(k, None)
        elif key and isinstance(v, list):
            merged = [dict(x) for x in out.get(k) or []]
            for item in v:
                if not isinstance(item, dict) or key not in item:
                    raise ApiError(422, "Invalid", f"{'.'.join((*path, k))}: merge key {key!r} missing")
                for i, cur in enumerate(merged):
                    if cur.get(key) == item[key]:
                        merged[i] = strategic_merge_patch(cur, item, (*path, k))
                        break
                else:
                    merged.append(copy.deepcopy(item))
            out[k] = merged
        else:
            out[k] = strategic_merge_patch(out.get(k), v, (*path, k))
    return out


# ------------------------------------------------------------------------------------- the store
@dataclass(slots=True)
class WatchEvent:
    rv: int
    res: Resource
    namespace: str
    type: str
    obj: dict[str, Any]


@dataclass(slots=True)
class Watcher:
    res: Resource
    namespace: str | None
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=asyncio.Queue)


class Store:
    def __init__(self, resources: Iterable[Resource]) -> None:
        self.resources = list(resources)
        self.objects: dict[Resource, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in self.resources}
        self.rv = 1
        self.floor = 0  # watch resourceVersions below this are expired (410)
        self.history: list[WatchEvent] = []
        self.watchers: list[Watcher] = []

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def emit(self, res: Resource, ns: str, type_: str, obj: dict[str, Any]) -> None:
        ev = WatchEvent(int(obj["metadata"]["resourceVersion"]), res, ns, type_, copy.deepcopy(obj))
        self.history.append(ev)
        for w in self.watchers:
            if w.res == res and (w.namespace is None or w.namespace == ns):
                w.queue.put_nowait(ev)


# ---------------------------------------------------------------------------------------- server
class FakeApiServer:
    """The fake server; `tokens` maps a bearer token to allowed {(verb, "group/resource[/sub]")} or ALL."""

    def __init__(
        self,
        *,
        tokens: dict[str, set[tuple[str, str]] | str] | None = None,
        bookmark_interval: float = 1.0,
        crds: bool = True,
    ) -> None:
        self.resources = list(BUILTIN) + (_crd_resources() if crds else [])
        self.store = Store(self.resources)
        self.tokens: dict[str, set[tuple[str, str]] | str] = tokens if tokens is not None else {"admin": ALL}
        self.users: dict[str, str] = {}  # token -> user name (default: the token itself)
        self.grants: dict[str, set[tuple[str, str]]] = {}  # service account user -> allowed (verb, resource)
        self.bookmark_interval = bookmark_interval
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status) of every request
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._by_path: dict[tuple[str, str], Resource] = {
            (r.api_version, r.plural): r for r in self.resources
        }

    # -------------------------------------------------------------- lifecycle (thread or program)
    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.port

    def start(self, port: int = 0) -> FakeApiServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self.serve(port=port))
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-apiserver", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self.call(self._end_watches)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def call(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the server's loop (thread-safe) and return its result."""
        assert self._loop is not None
        done: asyncio.Future[Any] = asyncio.run_coroutine_threadsafe(_as_coro(fn, *args), self._loop)  # type: ignore[assignment]
        return done.result(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -------------------------------------------------------------- test controls
    def compact(self) -> int:
        """Expire every resourceVersion up to now (watches from older ones get 410); returns the floor."""

        def go() -> int:
            self.store.floor = self.store.rv + 1
            self.store.history.clear()
            return self.store.floor

        return int(self.call(go))

    def break_watches(self) -> None:
        """End every open watch stream (as an API server restart or a load balancer would)."""
        self.call(self._end_watches)

    def _end_watches(self) -> None:
        for w in self.store.watchers:
            w.queue.put_nowait(None)

    # -------------------------------------------------------------- request handling
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            resp = await self._route(request)
        except ApiError as e:
            resp = web.json_response(e.body, status=e.code)
        except json.JSONDecodeError as e:
            err = status(400, "BadRequest", f"the body of the request could not be decoded: {e}")
            resp = web.json_response(err, status=400)
        self.requests.append((request.method, request.path_qs, resp.status))
        return resp

    def _auth(self, request: web.Request, verb: str, res: Resource | None, sub: str, ns: str | None) -> None:
        header = request.headers.get("Authorization", "")
        token = header[7:] if header.startswith("Bearer ") else ""
        allowed = self.tokens.get(token)
        if allowed is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        if allowed == ALL or res is None:
            return
        gr = f"{res.group}/{res.plural}" + (f"/{sub}" if sub else "")
        if (verb, gr) in allowed or (verb, f"{res.group}/*") in allowed:
            return
        what = f"{res.plural}/{sub}" if sub else res.plural
        user = self.users.get(token, token)
        scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
        raise ApiError(
            403,
            "Forbidden",
            f'{what}{"." + res.group if res.group else ""} is forbidden: User "{user}" cannot {verb} '
            f'resource "{what}" in API group "{res.group}" {scope}',
            {"kind": what} | ({"group": res.group} if res.group else {}),
        )

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts == ["version"]:
            return web.json_response(SERVER_VERSION)
        if parts and parts[0] in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        if parts[:1] == ["api"]:
            if len(parts) == 1:
                self._auth(request, "get", None, "", None)
                return web.json_response(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                        ],
                    }
                )
            gv, rest = parts[1], parts[2:]
        elif parts[:1] == ["apis"]:
            if len(parts) == 1:
                self._auth(request, "get", None, "", None)
                return web.json_response(self._group_list())
            if len(parts) == 2:
                groups = [g for g in self._group_list()["groups"] if g["name"] == parts[1]]
                if not groups:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **groups[0]})
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            self._auth(request, "get", None, "", None)
            return web.json_response(self._resource_list(gv))
        return await self._resource_request(request, gv, rest)

    def _group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for r in self.resources:
            if r.group:
                groups.setdefault(r.group, [])
                if r.version not in groups[r.group]:
                    groups[r.group].append(r.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in groups.items()
            ],
        }

    def _resource_list(self, gv: str) -> dict[str, Any]:
        items = []
        for r in self.resources:
            if r.api_version != gv:
                continue
            entry: dict[str, Any] = {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(r.verbs),
            }
            if r.short:
                entry["shortNames"] = list(r.short)
            entry["storageVersionHash"] = base64.b64encode(r.gr.encode()).decode()[:11]
            items.append(entry)
            for sub in r.subresources:
                verbs = {"binding": ["create"], "eviction": ["create"]}.get(sub, ["get", "patch", "update"])
                items.append(
                    {
                        "name": f"{r.plural}/{sub}",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": {"binding": "Binding", "eviction": "Eviction"}.get(sub, r.kind),
                        "verbs": verbs,
                    }
                    | ({"group": "policy", "version": "v1"} if sub == "eviction" else {})
                )
        if not items:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": items}

    # -------------------------------------------------------------- resources
    async def _resource_request(self, request: web.Request, gv: str, rest: list[str]) -> web.StreamResponse:
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and (gv, rest[2]) in self._by_path:
            ns, rest = rest[1], rest[2:]
        res = self._by_path.get((gv, rest[0]))
        if res is None or (ns is not None and not res.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (sub and sub not in res.subresources):
            if res.custom and len(rest) == 3:  # a CRD without that subresource: the object "is not found"
                raise _not_found(res, name)
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if res.namespaced and name and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        q = request.query
        m = request.method
        if m == "GET" and not name:
            verb = "watch" if _go_bool(q.get("watch", "")) else "list"
        else:
            verb = {
                "GET": "get",
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete",
            }.get(m)
            if verb is None or (m == "POST" and name and not sub) or (m != "POST" and not name):
                raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {res.gr}")
        if res.plural == "selfsubjectaccessreviews":
            return web.json_response(self._access_review(request, await request.json()), status=201)
        self._auth(request, verb, res, sub, ns)
        if verb == "watch":
            return await self._watch(request, res, ns)
        if verb == "list":
            return web.json_response(self._list(res, ns, q))
        if sub == "token":
            return web.json_response(self._token_request(res, ns or "", name), status=201)
        if sub == "binding":
            return self._bind(res, ns or "", name, await request.json())
        if sub == "eviction":
            return self._evict(res, ns or "", name, await request.json())
        if verb == "get":
            return web.json_response(self._get(res, ns or "", name))
        if verb == "create":
            return web.json_response(self._create(res, ns, await request.json(), request), status=201)
        if verb == "update":
            return web.json_response(self._update(res, ns or "", name, sub, await request.json(), request))
        if verb == "patch":
            ctype = request.content_type
            return web.json_response(
                self._patch(res, ns or "", name, sub, ctype, await request.json(), request)
            )
        body = await request.read()
        return web.json_response(self._delete(res, ns or "", name, json.loads(body) if body else {}, q))

    def _access_review(self, request: web.Request, body: Any) -> dict[str, Any]:
        """SelfSubjectAccessReview: may the caller's token do this? (any authenticated caller may ask)"""
        self._auth(request, "create", None, "", None)
        attrs = ((body or {}).get("spec") or {}).get("resourceAttributes") or {}
        res = next(
            (
                r
                for r in self.resources
                if r.plural == attrs.get("resource") and r.group == attrs.get("group", "")
            ),
            None,
        )
        allowed = True
        if res is not None:
            try:
                self._auth(
                    request, attrs.get("verb", ""), res, attrs.get("subresource", ""), attrs.get("namespace")
                )
            except ApiError:
                allowed = False
        else:
            header = request.headers.get("Authorization", "")
            allowed = self.tokens.get(header[7:]) == ALL
        return {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": {"resourceAttributes": attrs},
            "status": {"allowed": allowed} | ({} if allowed else {"reason": ""}),
        }

    def _token_request(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        """TokenRequest: a token for the ServiceAccount, with the rights `grants` gives its user."""
        self._current(res, ns, name)
        user = f"system:serviceaccount:{ns}:{name}"
        token = "sa-" + uuid.uuid4().hex
        self.users[token] = user
        self.tokens[token] = self.grants.setdefault(user, set())
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": None},
            "spec": {
                "audiences": ["https://kubernetes.default.svc"],
                "expirationSeconds": 3600,
                "boundObjectRef": None,
            },
            "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
        }

    def _key(self, res: Resource, ns: str | None, name: str) -> tuple[str, str]:
        return (ns or "", name) if res.namespaced else ("", name)

    def _out(self, res: Resource, obj: dict[str, Any], *, in_list: bool = False) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        if in_list and not res.custom:
            out.pop("kind", None)
            out.pop("apiVersion", None)
        return out

    def _get(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self.store.objects[res].get(self._key(res, ns, name))
        if obj is None:
            raise _not_found(res, name)
        return self._out(res, obj)

    def _list(self, res: Resource, ns: str | None, q: Any) -> dict[str, Any]:
        rv = q.get("resourceVersion")
        if q.get("resourceVersionMatch") == "Exact" and rv and int(rv) < self.store.floor:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.store.floor})")
        items = [
            self._out(res, o, in_list=True)
            for (ons, _), o in sorted(self.store.objects[res].items())
            if ns is None or ons == ns
        ]
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if res.custom:
            meta = {"continue": "", **meta}
        limit = int(q.get("limit", "0") or 0)
        start = int(base64.b64decode(q["continue"]).decode()) if q.get("continue") else 0
        if limit:
            page = items[start : start + limit]
            if start + limit < len(items):
                meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
                meta["remainingItemCount"] = len(items) - start - limit
            items = page
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": items}

    async def _watch(self, request: web.Request, res: Resource, ns: str | None) -> web.StreamResponse:
        q = request.query
        rv_text = q.get("resourceVersion", "")
        bookmarks = _go_bool(q.get("allowWatchBookmarks", ""))
        timeout = float(q.get("timeoutSeconds", "1800"))
        resp = web.StreamResponse(status=200)
        resp.content_type = "application/json"
        resp.enable_chunked_encoding()
        await resp.prepare(request)

        async def send(type_: str, obj: dict[str, Any]) -> None:
            await resp.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")

        if rv_text and rv_text != "0" and int(rv_text) < self.store.floor:
            await send(
                "ERROR",
                status(410, "Expired", f"too old resource version: {rv_text} ({self.store.floor})"),
            )
            return resp
        watcher = Watcher(res, ns)
        self.store.watchers.append(watcher)
        try:
            if not rv_text or rv_text == "0":
                for (ons, _), o in sorted(self.store.objects[res].items()):
                    if ns is None or ons == ns:
                        await send("ADDED", self._out(res, o))
            else:
                since = int(rv_text)
                for ev in list(self.store.history):
                    if ev.rv > since and ev.res == res and (ns is None or ev.namespace == ns):
                        await send(ev.type, self._out(res, ev.obj))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            next_bookmark = loop.time() + self.bookmark_interval
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                wait = min(left, max(0.0, next_bookmark - loop.time())) if bookmarks else left
                try:
                    ev = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and loop.time() >= next_bookmark:
                        await send(
                            "BOOKMARK",
                            {
                                "kind": res.kind,
                                "apiVersion": res.api_version,
                                "metadata": {
                                    "resourceVersion": str(self.store.rv),
                                    "creationTimestamp": None,
                                },
                            },
                        )
                        next_bookmark = loop.time() + self.bookmark_interval
                    continue
                if ev is None:
                    break
                await send(ev.type, self._out(res, ev.obj))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.watchers.remove(watcher)
        return resp

    # -------------------------------------------------------------- writes
    def _manager(self, request: web.Request | None) -> str:
        ua = request.headers.get("User-Agent", "") if request is not None else ""
        return ua.split("/")[0] or "unknown"

    def _stamp(
        self, res: Resource, obj: dict[str, Any], request: web.Request | None, op: str, sub: str = ""
    ) -> None:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.store.next_rv())
        if request is None:  # the server's own writes (binding, graceful deletion) track no manager
            return
        entry = {
            "manager": self._manager(request),
            "operation": op,
            "apiVersion": res.api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {}, "f:spec": {}} if not sub else {"f:status": {}},
        }
        if sub:
            entry["subresource"] = sub
        # One entry per (manager, operation, subresource), updated in place.
        fields = list(meta.get("managedFields", []))
        ident = (entry["manager"], op, sub)
        for i, f in enumerate(fields):
            if (f.get("manager"), f.get("operation"), f.get("subresource", "")) == ident:
                fields[i] = entry
                break
        else:
            fields.append(entry)
        meta["managedFields"] = fields

    def _check_body(self, res: Resource, body: Any, ns: str | None, name: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        if body.get("kind") not in (None, res.kind) or body.get("apiVersion") not in (None, res.api_version):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({body.get('apiVersion')}) does not match the expected "
                f"API version ({res.api_version})",
            )
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(
                422, "Invalid", f'{res.kind} "" is invalid: metadata.name: Required value: name is required'
            )
        if name is not None and meta.get("name") not in (None, name):
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        if res.namespaced and ns is not None and meta.get("namespace") not in (None, ns):
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        return body

    def _create(
        self, res: Resource, ns: str | None, body: Any, request: web.Request | None
    ) -> dict[str, Any]:
        obj = copy.deepcopy(self._check_body(res, body, ns, None))
        meta = obj["metadata"]
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["name"] = name
        if not name:
            raise ApiError(
                422, "Invalid", f'{res.kind} "" is invalid: metadata.name: Required value: name is required'
            )
        if res.namespaced:
            ns = ns or meta.get("namespace") or "default"
            meta["namespace"] = ns
            ns_res = self._by_path[("v1", "namespaces")]
            nsobj = self.store.objects[ns_res].get(("", ns))
            if nsobj is None:
                raise ApiError(
                    404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"}
                )
            if res.plural != "events" and nsobj.get("status", {}).get("phase") == "Terminating":
                raise ApiError(
                    403,
                    "Forbidden",
                    f"unable to create new content in namespace {ns} because it is being terminated",
                )
        key = self._key(res, ns, name)
        if key in self.store.objects[res]:
            raise ApiError(
                409, "AlreadyExists", f'{res.gr} "{name}" already exists', {"name": name, "kind": res.plural}
            )
        for k in ("resourceVersion", "deletionTimestamp", "managedFields"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if res.custom or res.kind in ("PodDisruptionBudget", "Pod"):
            meta["generation"] = 1
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        self._defaults(res, obj)
        if res.kind == "Pod" and "status" in body and obj["status"].get("phase") != "Pending":
            obj["status"] = {"phase": "Pending", "qosClass": obj["status"].get("qosClass", "BestEffort")}
        self._stamp(res, obj, request, "Update")
        self.store.objects[res][key] = obj
        self.store.emit(res, ns or "", "ADDED", obj)
        return self._out(res, obj)

    def _defaults(self, res: Resource, obj: dict[str, Any]) -> None:
        if res.kind == "Pod":
            spec = obj.setdefault("spec", {})
            if not spec.get("containers"):
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{obj["metadata"]["name"]}" is invalid: spec.containers: Required value',
                )
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("securityContext", {})
            for c in spec["containers"]:
                c.setdefault("imagePullPolicy", "Always")
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
            # DefaultTolerationSeconds admission
            tolerations = spec.setdefault("tolerations", [])
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
                if not any(t.get("key") == key for t in tolerations):
                    tolerations.append(
                        {"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300}
                    )
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("enableServiceLinks", True)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            pcs = self.store.objects[self._by_path[("scheduling.k8s.io/v1", "priorityclasses")]]
            pcn = spec.get("priorityClassName")
            if pcn:
                pc = pcs.get(("", pcn))
                if pc is None and pcn not in ("system-cluster-critical", "system-node-critical"):
                    raise ApiError(
                        403,
                        "Forbidden",
                        f'pods "{obj["metadata"]["name"]}" is forbidden: '
                        f"no PriorityClass with name {pcn} was found",
                    )
                spec["priority"] = pc["value"] if pc else 2000000000
            else:
                default = [p for p in pcs.values() if p.get("globalDefault")]
                spec["priority"] = default[0]["value"] if default else 0
            requests = [c.get("resources", {}).get("requests") for c in spec["containers"]]
            obj["status"] = {"phase": "Pending", "qosClass": "Burstable" if any(requests) else "BestEffort"}
        elif res.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif res.kind == "Node":
            spec = obj.setdefault("spec", {})
            obj.setdefault("status", {})
            # TaintNodesByCondition admission: a new node is not ready until its controller says so.
            taints = [t for t in spec.get("taints") or [] if t.get("key") != "node.kubernetes.io/not-ready"]
            spec["taints"] = [*taints, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
        elif res.kind == "PriorityClass":
            if "value" not in obj:
                raise ApiError(
                    422,
                    "Invalid",
                    f'PriorityClass "{obj["metadata"]["name"]}" is invalid: value: Required value',
                )
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        elif res.kind == "Event":
            obj.setdefault("reportingComponent", "")
            obj.setdefault("reportingInstance", "")

    def _current(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self.store.objects[res].get(self._key(res, ns, name))
        if obj is None:
            raise _not_found(res, name)
        return obj

    def _store_update(
        self,
        res: Resource,
        ns: str,
        name: str,
        new: dict[str, Any],
        request: web.Request | None,
        sub: str,
        op: str,
    ) -> dict[str, Any]:
        old = self._current(res, ns, name)
        if res.kind == "Pod" and old["spec"].get("nodeName") != new.get("spec", {}).get("nodeName"):
            raise ApiError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than ...',
            )
        # The main resource of a kind with a status subresource ignores status; /status ignores the rest.
        if "status" in res.subresources:
            if sub == "status":
                new = {
                    **copy.deepcopy(old),
                    "status": new.get("status", {}),
                    "metadata": _status_meta(old, new),
                }
            else:
                new = {**new, "status": copy.deepcopy(old.get("status", {}))}
        for k in (
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if k in old["metadata"]:
                new["metadata"][k] = old["metadata"][k]
        new["kind"], new["apiVersion"] = res.kind, res.api_version
        # Custom resources count every change outside metadata (status too, without a status
        # subresource); built-in pods only spec changes.
        if res.custom and sub != "status":
            outside = {k: v for k, v in new.items() if k != "metadata"}
            if outside != {k: v for k, v in old.items() if k != "metadata"}:
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        elif res.kind == "Pod" and new.get("spec") != old.get("spec"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if _same(old, new):
            return self._out(res, old)  # a no-op write does not bump the resourceVersion
        new["metadata"]["managedFields"] = copy.deepcopy(old["metadata"].get("managedFields", []))
        self._stamp(res, new, request, op, sub)
        self.store.objects[res][self._key(res, ns, name)] = new
        self.store.emit(res, ns, "MODIFIED", new)
        return self._out(res, new)

    def _update(
        self, res: Resource, ns: str, name: str, sub: str, body: Any, request: web.Request
    ) -> dict[str, Any]:
        new = copy.deepcopy(self._check_body(res, body, ns, name))
        old = self._current(res, ns, name)
        rv = new["metadata"].get("resourceVersion")
        if not rv and res.custom:
            raise ApiError(
                422,
                "Invalid",
                f'{res.kind}.{res.group} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0: '
                "must be specified for an update",
            )
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise _conflict(
                res,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        return self._store_update(res, ns, name, new, request, sub, "Update")

    def _patch(
        self, res: Resource, ns: str, name: str, sub: str, ctype: str, body: Any, request: web.Request
    ) -> dict[str, Any]:
        old = self._current(res, ns, name)
        if ctype == "application/merge-patch+json":
            new = merge_patch(old, body)
        elif ctype == "application/strategic-merge-patch+json" and not res.custom:
            new = strategic_merge_patch(old, body)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                + ("" if res.custom else ", application/strategic-merge-patch+json"),
            )
        if not isinstance(new.get("metadata"), dict):
            raise ApiError(422, "Invalid", "metadata must be an object")
        rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise _conflict(
                res,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._store_update(res, ns, name, new, request, sub, "Update")

    def _remove(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self.store.objects[res].pop(self._key(res, ns, name))
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.emit(res, ns, "DELETED", obj)
        return obj

    def _delete(self, res: Resource, ns: str, name: str, body: Any, q: Any) -> dict[str, Any]:
        obj = self._current(res, ns, name)
        pre = (body or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            raise _conflict(
                res,
                name,
                _uid_mismatch(pre["uid"], obj),
            )
        grace = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
        if grace is None and q.get("gracePeriodSeconds") is not None:
            grace = int(q["gracePeriodSeconds"])
        if res.kind == "Pod":
            finished = obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
            bound = bool(obj["spec"].get("nodeName"))
            if grace is None:
                grace = obj["spec"].get("terminationGracePeriodSeconds", 30)
            if bound and not finished and grace > 0:
                if obj["metadata"].get("deletionTimestamp"):
                    return self._out(res, obj)
                new = copy.deepcopy(obj)
                when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)
                new["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                self._stamp(res, new, None, "Update")
                self.store.objects[res][self._key(res, ns, name)] = new
                self.store.emit(res, ns, "MODIFIED", new)
                return self._out(res, new)
            if bound and not finished:  # grace 0: marked for deletion (MODIFIED), then removed
                new = copy.deepcopy(obj)
                meta = new["metadata"]
                meta.setdefault("deletionTimestamp", now_rfc3339())
                meta["deletionGracePeriodSeconds"] = 0
                meta["generation"] = meta.get("generation", 1) + 1
                self._stamp(res, new, None, "Update")
                self.store.objects[res][self._key(res, ns, name)] = new
                self.store.emit(res, ns, "MODIFIED", new)
        return self._out(res, self._remove(res, ns, name))

    def _bind(self, res: Resource, ns: str, name: str, body: Any) -> web.Response:
        if not isinstance(body, dict) or body.get("kind") not in (None, "Binding"):
            raise ApiError(400, "BadRequest", "expected a Binding")
        target = body.get("target") or {}
        if not target.get("name"):
            raise ApiError(422, "Invalid", 'Binding.core "" is invalid: target.name: Required value')
        if target.get("kind") not in (None, "", "Node"):
            raise ApiError(422, "Invalid", "must be empty or 'Node'")
        meta = body.get("metadata") or {}
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
        obj = self.store.objects[res].get((ns, name))
        if obj is None:
            raise _not_found(res, name)
        uid = meta.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            raise _conflict(res, name, _uid_mismatch(uid, obj), "binding")
        if obj["metadata"].get("deletionTimestamp"):
            raise _conflict(
                res, name, f"pod {name} is being deleted, cannot be assigned to a host", "binding"
            )
        if obj["spec"].get("nodeName"):
            node = obj["spec"]["nodeName"]
            raise _conflict(res, name, f'pod {name} is already assigned to node "{node}"', "binding")
        new = copy.deepcopy(obj)
        new["spec"]["nodeName"] = target["name"]
        if meta.get("annotations"):
            new["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        conds = [c for c in new["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
        conds.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(),
            }
        )
        new["status"]["conditions"] = conds
        self._stamp(res, new, None, "Update")
        self.store.objects[res][(ns, name)] = new
        self.store.emit(res, ns, "MODIFIED", new)
        return web.json_response(status(201, "", ""), status=201)

    def _evict(self, res: Resource, ns: str, name: str, body: Any) -> web.Response:
        obj = self._current(res, ns, name)
        finished = obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if obj["spec"].get("nodeName") and not finished:
            if not obj["metadata"].get("deletionTimestamp"):
                new = copy.deepcopy(obj)
                grace = ((body or {}).get("deleteOptions") or {}).get("gracePeriodSeconds")
                grace = obj["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
                when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)
                new["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                conds = [
                    c for c in new["status"].get("conditions", []) if c.get("type") != "DisruptionTarget"
                ]
                conds.append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "EvictionByEvictionAPI",
                        "message": "Eviction API: evicting",
                        "lastProbeTime": None,
                        "lastTransitionTime": now_rfc3339(),
                    }
                )
                new["status"]["conditions"] = conds
                self._stamp(res, new, None, "Update")
                self.store.objects[res][(ns, name)] = new
                self.store.emit(res, ns, "MODIFIED", new)
        else:
            self._remove(res, ns, name)
        return web.json_response(status(201, "", ""), status=201)


def _status_meta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    meta = copy.deepcopy(old["metadata"])
    meta["resourceVersion"] = new.get("metadata", {}).get("resourceVersion", meta["resourceVersion"])
    return meta


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def strip(o: dict[str, Any]) -> dict[str, Any]:
        o = copy.deepcopy(o)
        o["metadata"].pop("managedFields", None)
        o["metadata"].pop("resourceVersion", None)
        return o

    return strip(a) == strip(b)


def _uid_mismatch(uid: str, obj: dict[str, Any]) -> str:
    return f"Precondition failed: UID in precondition: {uid}, UID in object meta: {obj['metadata']['uid']}"


def _go_bool(text: str) -> bool:
    """Query booleans as Go's strconv.ParseBool reads them (what the API server uses)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("", "0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ApiError(400, "BadRequest", f"invalid boolean value: {text!r}")


async def _as_coro(fn: Any, *args: Any) -> Any:
    return fn(*args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", default="")
    ap.add_argument("--token", default="admin")
    args = ap.parse_args()
    server = FakeApiServer(tokens={args.token: ALL})

    async def go() -> None:
        port = await server.serve(port=args.port)
        if args.port_file:
            Path(args.port_file).write_text(str(port))
        print(f"fake kube-apiserver on http://127.0.0.1:{port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(go())


if __name__ == "__main__":
    main()
