"""The aiohttp application factory: routes, middlewares (errors as JSON, auth) and the objects they share."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from fumarole.api.access import ACCESS_KEY, Access, access_middleware
from fumarole.api.openapi import openapi_document
from fumarole.api.types import (
    CycleDetail,
    CyclePage,
    CycleRow,
    DecisionRow,
    EventPage,
    EventRow,
    Health,
    HyperNodeList,
    IngestRequest,
    IngestResponse,
    JobList,
    NodeList,
    Problem,
    QueueList,
    Ready,
)
from fumarole.api.ui import DEFAULT_JAEGER_URL, mount_dashboard
from fumarole.api.view import DaemonView
from fumarole.daemon.manifests.redaction import redact_event
from fumarole.store.codec import current_version
from fumarole.store.events import EVENT_TYPES, CycleClosed, CycleOpened
from fumarole.store.index import DECISION_TYPES
from fumarole.store.log import READ_PATIENCE, LogError, StoredEvent

__all__ = ["MAX_LIMIT", "TOKEN_KEY", "VIEW_KEY", "WORKER_HEADER", "build_app"]

log = logging.getLogger("fumarole.api")

VIEW_KEY: web.AppKey[DaemonView] = web.AppKey("view", DaemonView)
TOKEN_KEY: web.AppKey[str] = web.AppKey("token", str)
OPENAPI_KEY: web.AppKey[bytes] = web.AppKey("openapi", bytes)
WORKER_KEY: web.AppKey[str] = web.AppKey("worker", str)
WORKER_HEADER = "X-Fumarole-Worker"

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
DEFAULT_HISTORY_POINTS = 200  # GET /v1/queue-history: sample cycles by default, and at most
MAX_HISTORY_POINTS = 2000
MAX_EVENTS_LIMIT = 10000
MAX_INT = 2**62  # query integers beyond this are refused (SQLite integers are 64-bit)

_ENCODER = msgspec.json.Encoder()
_INGEST = msgspec.json.Decoder(IngestRequest)
_AT = re.compile(r"^(.*?)(?: - at `(\$[^`]*)`)?$", re.S)


class BadRequest(Exception):
    """A request the API refuses with 400 (message and the JSON path / parameter at fault)."""

    def __init__(self, detail: str, path: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.path = path


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=_ENCODER.encode(obj), status=status, content_type="application/json", headers=headers
    )


def _problem(
    status: int, error: str, detail: str, path: str = "", headers: dict[str, str] | None = None
) -> web.Response:
    return _json(Problem(error=error, detail=detail, path=path), status=status, headers=headers)


# ----------------------------------------------------------------------------- middlewares

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# How long a request's reads of the log wait for a lost database before answering 503.
READ_PATIENCE_SECONDS = 2.0


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    patience = READ_PATIENCE.set(READ_PATIENCE_SECONDS)
    try:
        return await handler(request)
    except BadRequest as e:
        return _problem(400, "bad-request", e.detail, e.path)
    except web.HTTPRequestEntityTooLarge:
        return _problem(
            413, "too-large", f"request body too large (limit {request.app._client_max_size} bytes)"
        )
    except web.HTTPException as e:
        if e.status < 400:
            raise
        keep = {
            k: v for k, v in e.headers.items() if k.lower() in ("www-authenticate", "allow", "retry-after")
        }
        code = e.reason.lower().replace(" ", "-")
        return _problem(e.status, code, e.text or e.reason, headers=keep or None)
    except LogError as e:
        log.error("log error serving %s: %s", request.path, e)
        return _problem(503, "log-unavailable", str(e))
    finally:
        READ_PATIENCE.reset(patience)


# ----------------------------------------------------------------------------- parameters


def _int(
    request: web.Request, name: str, default: int | None, *, lo: int = 0, hi: int = MAX_INT
) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(
            f"query parameter {name!r} must be an integer, got {raw!r}", f"query.{name}"
        ) from None
    if not lo <= value <= hi:
        raise BadRequest(
            f"query parameter {name!r} must be between {lo} and {hi}, got {value}", f"query.{name}"
        )
    return value


def _limit(request: web.Request, hi: int = MAX_LIMIT) -> int:
    value = _int(request, "limit", DEFAULT_LIMIT, lo=1, hi=hi)
    assert value is not None
    return value


def _since(request: web.Request) -> int:
    value = _int(request, "since", 1, lo=0)
    assert value is not None
    return max(1, value)


def _str(request: web.Request, name: str) -> str | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    if len(raw) > 512 or "\x00" in raw:
        raise BadRequest(f"query parameter {name!r} is not a valid name", f"query.{name}")
    return raw


def _next(rows: list[StoredEvent], limit: int) -> int | None:
    return rows[-1].seq + 1 if len(rows) >= limit else None


# ----------------------------------------------------------------------------- health, metrics, spec


async def healthz(request: web.Request) -> web.Response:
    """Liveness (never touches the log); with leader election also who leads, as readyz."""
    worker = request.app[WORKER_KEY]
    view = request.app[VIEW_KEY]
    leading, leader = view.leadership() if hasattr(view, "leadership") else (None, "")
    body = Health(status="ok", leading=leading, leader=leader)
    return _json(body, headers={WORKER_HEADER: worker} if worker else None)


async def readyz(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    ready = view.is_ready()
    leading, leader = view.leadership() if hasattr(view, "leadership") else (None, "")
    body = Ready(
        ready=ready,
        folded_seq=view.folded_seq(),
        last_seq=await view.event_log.last_seq(),
        leading=leading,
        leader=leader,
        config_warnings=view.config_warnings(),
    )
    return _json(body, status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    body, content_type = request.app[VIEW_KEY].metrics_text()
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = content_type
    return resp


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[OPENAPI_KEY], content_type="application/json")


# ----------------------------------------------------------------------------- cycles, decisions


def _cycle_row(seq: int, opened: CycleOpened, closed: CycleClosed | None) -> CycleRow:
    return CycleRow(
        cycle=opened.cycle,
        seq=seq,
        watermark=opened.watermark,
        conf_hash=opened.conf_hash,
        now_ms=opened.now_ms,
        trace_id=opened.trace_id,
        closed=closed,
    )


def _latest_since(view: DaemonView, latest: int) -> int:
    """The seq of the oldest of the `latest` newest cycles (through the decision index)."""
    last = view.last_cycle()
    for cid in range(max(1, last - latest + 1), last + 1):
        head = view.decisions(cycle=cid, types=("cycle.opened",), limit=1)
        if head:
            return head[0].seq
    return MAX_INT  # no cycle yet: an empty page


async def cycles(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    since, limit = _since(request), _limit(request)
    latest = _int(request, "latest", None, lo=1, hi=MAX_LIMIT)
    if latest is not None:
        if request.query.get("since"):
            raise BadRequest("pass either since or latest, not both", "query.latest")
        since, limit = _latest_since(view, latest), latest
    opened = await view.event_log.read(since, limit, types=["cycle.opened"])
    closed: dict[int, CycleClosed] = {}
    if opened:
        rows = await view.event_log.read(opened[0].seq, len(opened), types=["cycle.closed"])
        for r in rows:
            if isinstance(r.event, CycleClosed):
                closed.setdefault(r.event.cycle, r.event)
    items = [
        _cycle_row(r.seq, r.event, closed.get(r.event.cycle))
        for r in opened
        if isinstance(r.event, CycleOpened)
    ]
    return _json(CyclePage(items=items, next_since=_next(opened, limit)))


async def cycle(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    raw = request.match_info["id"]
    if not raw.isdigit() or len(raw) > 18:
        raise BadRequest(f"cycle id must be a non-negative integer, got {raw!r}", "path.id")
    cid = int(raw)
    since, limit = _since(request), _limit(request)
    head = view.decisions(cycle=cid, types=("cycle.opened",), limit=1)
    if not head or not isinstance(head[0].event, CycleOpened):
        return _problem(404, "not-found", f"cycle {cid} is not in the log")
    tail = view.decisions(cycle=cid, types=("cycle.closed",), limit=1)
    closed = tail[0].event if tail and isinstance(tail[0].event, CycleClosed) else None
    rows = view.decisions(cycle=cid, since=since, limit=limit)
    body = CycleDetail(
        cycle=_cycle_row(head[0].seq, head[0].event, closed),
        decisions=[DecisionRow(seq=r.seq, type=r.type, event=r.event) for r in rows],  # type: ignore[arg-type]
        next_since=_next(rows, limit),
    )
    return _json(body)


async def decisions(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    since, limit = _since(request), _limit(request)
    filters: dict[str, str | int | None] = {
        "job": _str(request, "job"),
        "queue": _str(request, "queue"),
        "node": _str(request, "node"),
        "namespace": _str(request, "namespace"),
        "cycle": _int(request, "cycle", None, lo=0),
    }
    pod = _str(request, "pod")
    if pod is not None:
        ns, sep, name = pod.rpartition("/")
        if sep:
            if filters["namespace"] is not None and filters["namespace"] != ns:
                raise BadRequest("pod names another namespace than the namespace parameter", "query.pod")
            filters["namespace"] = ns
        filters["pod"] = name
    types: tuple[str, ...] = ()
    raw_types = [t for v in request.query.getall("type", []) for t in v.split(",") if t]
    for t in raw_types:
        if t not in DECISION_TYPES:
            raise BadRequest(
                f"unknown decision type {t!r} (known: {', '.join(DECISION_TYPES)})", "query.type"
            )
    types = tuple(sorted(set(raw_types)))
    body = view.decision_page(since=since, limit=limit, types=types, **filters)
    return web.Response(body=body, content_type="application/json")


# ----------------------------------------------------------------------------- events


async def events(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    since, limit = _since(request), _limit(request, MAX_EVENTS_LIMIT)
    raw_types = [t for v in request.query.getall("type", []) for t in v.split(",") if t]
    for t in raw_types:
        if t not in EVENT_TYPES:
            raise BadRequest(f"unknown event type {t!r}", "query.type")
    rows = await view.event_log.read(since, limit, types=sorted(set(raw_types)) if raw_types else None)
    # redacted on the way out too: a log written before redaction must not serve pods' secrets
    items = [EventRow(seq=r.seq, type=r.type, idem_key=r.idem_key, event=redact_event(r.event)) for r in rows]
    return _json(EventPage(items=items, next_since=_next(rows, limit)))


def _check_token(request: web.Request) -> None:
    view = request.app[VIEW_KEY]
    if not view.writable:
        raise web.HTTPForbidden(text="this server is read-only (fumarole serve): events cannot be written")
    token = request.app[TOKEN_KEY]
    if not token:
        raise web.HTTPForbidden(
            text="writes are disabled: no API token is configured (set api_token in the daemon settings "
            "or FUMAROLE_API_TOKEN)"
        )
    auth = request.headers.get("Authorization", "")
    scheme, _, given = auth.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise web.HTTPUnauthorized(
            text="a bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": 'Bearer realm="fumarole"'},
        )
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise web.HTTPUnauthorized(
            text="the bearer token is not valid", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
        )


def parse_ingest(body: bytes) -> IngestRequest:
    """The POST /v1/events body, validated; BadRequest names the JSON path of the first problem."""
    if not body.strip():
        raise BadRequest('the request body is empty; expected {"events": [...]}', "$")
    try:
        req = _INGEST.decode(body)
    except msgspec.ValidationError as e:
        detail, path = _split_path(str(e))
        raise BadRequest(detail, path) from None
    except msgspec.DecodeError as e:
        raise BadRequest(f"the request body is not valid JSON: {e}", "$") from None
    if not req.events:
        raise BadRequest("events: at least one event is required", "$.events")
    for i, item in enumerate(req.events):
        if not item.idem_key or len(item.idem_key) > 512:
            raise BadRequest(
                "idem_key must be a non-empty string of at most 512 characters", f"$.events[{i}].idem_key"
            )
        tag = item.event.__struct_config__.tag
        assert isinstance(tag, str)
        want = current_version(tag)
        if item.event.v != want:
            raise BadRequest(
                f"{tag}: this server accepts schema version {want} only", f"$.events[{i}].event.v"
            )
        at = getattr(item.event, "at_ms", 0)
        if not 0 <= at <= MAX_INT:
            raise BadRequest("at_ms must be a non-negative integer", f"$.events[{i}].event.at_ms")
    return req


def _split_path(message: str) -> tuple[str, str]:
    m = _AT.match(message)
    if m is None:  # pragma: no cover - the pattern matches any text
        return message, "$"
    return m.group(1), m.group(2) or "$"


async def post_events(request: web.Request) -> web.Response:
    _check_token(request)
    ctype = request.content_type
    if ctype not in ("application/json", ""):
        raise web.HTTPUnsupportedMediaType(text=f"expected application/json, got {ctype}")
    body = await request.read()
    req = parse_ingest(body)
    view = request.app[VIEW_KEY]
    events = [item.event for item in req.events]
    keys: list[str | None] = [item.idem_key for item in req.events]
    last_before = await view.event_log.last_seq()
    seqs = await view.ingest(events, keys)
    written = len({s for s in seqs if s > last_before})  # a key repeated inside the batch counts once
    return _json(IngestResponse(seqs=seqs, written=written, duplicates=len(seqs) - written))


# ----------------------------------------------------------------------------- jobs, queues, nodes


async def jobs(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    items = view.jobs(queue=_str(request, "queue"), phase=_str(request, "phase"))
    return _json(JobList(items=items, folded_seq=view.folded_seq()))


async def job(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    ns, name = request.match_info["namespace"], request.match_info["name"]
    detail = view.job(ns, name)
    if detail is None:
        return _problem(404, "not-found", f"job {ns}/{name} is not known")
    return _json(detail)


async def queues(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    return _json(QueueList(items=view.queues(), folded_seq=view.folded_seq()))


async def queue(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    for q in request.app[VIEW_KEY].queues():
        if q.name == name:
            return _json(q)
    return _problem(404, "not-found", f"queue {name} is not known")


async def queue_history(request: web.Request) -> web.Response:
    first = _int(request, "from", None, lo=0)
    last = _int(request, "to", None, lo=0)
    if first is not None and last is not None and last < first:
        raise BadRequest(f"query parameter 'to' ({last}) is before 'from' ({first})", "query.to")
    points = _int(request, "points", DEFAULT_HISTORY_POINTS, lo=1, hi=MAX_HISTORY_POINTS)
    assert points is not None
    view = request.app[VIEW_KEY]
    return _json(view.queue_history(from_cycle=first, to_cycle=last, points=points))


async def nodes(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    return _json(NodeList(items=view.nodes(), folded_seq=view.folded_seq()))


async def node(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    for n in request.app[VIEW_KEY].nodes():
        if n.name == name:
            return _json(n)
    return _problem(404, "not-found", f"node {name} is not known")


async def hypernodes(request: web.Request) -> web.Response:
    answer: HyperNodeList = request.app[VIEW_KEY].hypernodes()
    return _json(answer)


# ----------------------------------------------------------------------------- the application


def build_app(
    view: DaemonView,
    *,
    token: str = "",
    max_body_bytes: int = 1_048_576,
    worker: str = "",
    dashboard: bool = True,
    jaeger_url: str = DEFAULT_JAEGER_URL,
    access: Access | None = None,
    live_idle_timeout: float = 300.0,
    live_per_client: int = 8,
) -> web.Application:
    """The API over `view`; POST /v1/events needs `token` as a bearer token ("" = writes refused);
    a non-empty `worker` (the serving process's id) is sent back by GET /healthz as X-Fumarole-Worker;
    `dashboard` mounts the web dashboard at /ui/ (api/ui), its cycle pages linking to `jaeger_url`;
    `access` is who may ask (the Host/Origin allow-list and the read token, api/access.py; default:
    loopback and localhost names only, reads open)."""
    app = web.Application(client_max_size=max_body_bytes, middlewares=[access_middleware, _errors])
    app[ACCESS_KEY] = access if access is not None else Access()
    app[VIEW_KEY] = view
    app[TOKEN_KEY] = token
    app[WORKER_KEY] = worker
    app[OPENAPI_KEY] = msgspec.json.encode(openapi_document())
    r = app.router
    r.add_get("/healthz", healthz)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics)
    r.add_get("/openapi.json", openapi)
    r.add_get("/v1/cycles", cycles)
    r.add_get("/v1/cycles/{id}", cycle)
    r.add_get("/v1/decisions", decisions)
    r.add_get("/v1/events", events)
    r.add_post("/v1/events", post_events)
    r.add_get("/v1/jobs", jobs)
    r.add_get("/v1/jobs/{namespace}/{name}", job)
    r.add_get("/v1/queues", queues)
    r.add_get("/v1/queues/{name}", queue)
    r.add_get("/v1/queue-history", queue_history)
    r.add_get("/v1/nodes", nodes)
    r.add_get("/v1/nodes/{name}", node)
    r.add_get("/v1/hypernodes", hypernodes)
    if dashboard:
        mount_dashboard(
            app,
            view,
            jaeger_url=jaeger_url,
            live_idle_timeout=live_idle_timeout,
            live_per_client=live_per_client,
        )
    return app
