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
as with Volcano's CRD), HyperNodes (topology.volcano.sh/v1alpha1, cluster-scoped, from Volcano's
CRD; `FakeApiServer(hypernodes=False)` is a cluster without that CRD, answering 404 for them),
core v1 Events, coordination.k8s.io Leases, and bearer tokens mapped to
allowed (verb, resource) sets (401 for an unknown token, 403 Forbidden Status for a missing verb).
`/metrics` serves `apiserver_request_total` with the real server's name and labels (verb as the
API server reports it: GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE; group, version,
resource, subresource, scope, code), so a benchmark counts writes per resource and verb the same
way on either server; `FakeApiServer.request_totals` holds the same counts.

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
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_api_model import (
    ALL,
    BUILTIN,
    SERVER_VERSION,
    ApiError,
    Resource,
    Store,
    Watcher,
    as_coro,
    crd_resources,
    go_bool,
    not_found,
    status,
)
from fake_api_writes import FakeWrites

__all__ = ["ALL", "FakeApiServer"]


class FakeApiServer(FakeWrites):
    """The fake server; `tokens` maps a bearer token to allowed {(verb, "group/resource[/sub]")} or ALL."""

    def __init__(
        self,
        *,
        tokens: dict[str, set[tuple[str, str]] | str] | None = None,
        bookmark_interval: float = 1.0,
        crds: bool = True,
        hypernodes: bool = True,
        numa_crd: bool = True,
    ) -> None:
        self.resources = list(BUILTIN) + (crd_resources(hypernodes, numa_crd) if crds else [])
        self.store = Store(self.resources)
        self.tokens: dict[str, set[tuple[str, str]] | str] = tokens if tokens is not None else {"admin": ALL}
        self.users: dict[str, str] = {}  # token -> user name (default: the token itself)
        self.grants: dict[str, set[tuple[str, str]]] = {}  # service account user -> allowed (verb, resource)
        self.bookmark_interval = bookmark_interval
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status) of every request
        # apiserver_request_total: (verb, group, version, resource, subresource, scope, code) -> count
        self.request_totals: Counter[tuple[str, str, str, str, str, str, str]] = Counter()
        self.binding_delay = 0.0  # seconds every pods/binding waits before it is handled (a slow server)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._by_path: dict[tuple[str, str], Resource] = {
            (r.api_version, r.plural): r for r in self.resources
        }
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):  # as a new cluster has
            self._create(self._by_path[("v1", "namespaces")], None, {"metadata": {"name": ns}}, None)

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

    def __enter__(self) -> FakeApiServer:
        """`with FakeApiServer(...) as fake:` starts it on a free port and stops it after."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self.call(self._end_watches)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def call(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the server's loop (thread-safe) and return its result."""
        assert self._loop is not None
        done: asyncio.Future[Any] = asyncio.run_coroutine_threadsafe(as_coro(fn, *args), self._loop)  # type: ignore[assignment]
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
        if self.binding_delay and request.method == "POST" and request.path.endswith("/binding"):
            await asyncio.sleep(self.binding_delay)
        try:
            resp = await self._route(request)
        except ApiError as e:
            resp = web.json_response(e.body, status=e.code)
        except json.JSONDecodeError as e:
            err = status(400, "BadRequest", f"the body of the request could not be decoded: {e}")
            resp = web.json_response(err, status=400)
        self.requests.append((request.method, request.path_qs, resp.status))
        labels = request.get(_METRIC_LABELS)
        if labels is not None:
            self.request_totals[(*labels, str(resp.status))] += 1
        return resp

    def write_counts(self) -> Counter[tuple[str, str, str]]:
        """Requests that change something, by (verb, resource, subresource) as /metrics labels them."""
        out: Counter[tuple[str, str, str]] = Counter()
        for (verb, _g, _v, resource, sub, _scope, _code), n in self.request_totals.items():
            if verb in ("POST", "PUT", "PATCH", "APPLY", "DELETE"):
                out[(verb, resource, sub)] += n
        return out

    def _metrics_text(self) -> str:
        lines = [
            "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each "
            "verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            "# TYPE apiserver_request_total counter",
        ]
        for (verb, group, version, resource, sub, scope, code), n in sorted(self.request_totals.items()):
            lines.append(
                f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",group="{group}",'
                f'resource="{resource}",scope="{scope}",subresource="{sub}",system_client="",'
                f'verb="{verb}",version="{version}"}} {n}'
            )
        return "\n".join(lines) + "\n"

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
        if parts == ["metrics"]:
            self._auth(request, "get", None, "", None)
            return web.Response(text=self._metrics_text(), content_type="text/plain")
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
                raise not_found(res, name)
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if res.namespaced and name and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        q = request.query
        m = request.method
        if m == "GET" and not name:
            verb = "watch" if go_bool(q.get("watch", "")) else "list"
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
        request[_METRIC_LABELS] = (
            _metric_verb(request, verb or "", name),
            res.group,
            res.version,
            res.plural,
            sub,
            "resource" if name else ("namespace" if ns is not None else "cluster"),
        )
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
            raise not_found(res, name)
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
        bookmarks = go_bool(q.get("allowWatchBookmarks", ""))
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


_METRIC_LABELS = web.RequestKey("apiserver_request_total labels", tuple)


def _metric_verb(request: web.Request, verb: str, name: str) -> str:
    """The verb label of apiserver_request_total (the API server's metrics.CleanVerb)."""
    if verb in ("list", "watch"):
        return verb.upper()
    if request.method == "PATCH" and request.content_type == "application/apply-patch+yaml":
        return "APPLY"
    return request.method.upper()


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
