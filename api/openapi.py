"""The OpenAPI 3.1 document of the API, with every schema generated from the msgspec types."""

from __future__ import annotations

from typing import Any

import msgspec

from fumarole.api.types import (
    CycleDetail,
    CyclePage,
    DecisionPage,
    EventPage,
    Health,
    HyperNodeList,
    HyperNodeRow,
    IngestRequest,
    IngestResponse,
    JobDetail,
    JobList,
    NodeList,
    NodeRow,
    Problem,
    QueueHistory,
    QueueList,
    QueueRow,
    QueueSeries,
    Ready,
)

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{name}"
_TYPES: tuple[type[Any], ...] = (
    Problem,
    Health,
    Ready,
    CyclePage,
    CycleDetail,
    DecisionPage,
    EventPage,
    IngestRequest,
    IngestResponse,
    JobList,
    JobDetail,
    QueueList,
    QueueRow,
    QueueHistory,
    QueueSeries,
    NodeList,
    NodeRow,
    HyperNodeList,
    HyperNodeRow,
)


def _ref(t: type[Any]) -> dict[str, str]:
    return {"$ref": _REF.format(name=t.__name__)}


def _json(t: type[Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(t)}}}


def _q(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def _p(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema or {"type": "string", "minLength": 1},
    }


_SINCE = _q(
    "since",
    "keyset cursor: the first log sequence to return (the previous page's next_since)",
    {"type": "integer", "minimum": 0, "maximum": 2**62},
)
_STR = {"type": "string", "minLength": 1, "maxLength": 512}


def _limit(hi: int) -> dict[str, Any]:
    return _q("limit", f"page size (1..{hi}, default 100)", {"type": "integer", "minimum": 1, "maximum": hi})


def _bad(description: str) -> dict[str, Any]:
    """A 400: the API's JSON Problem, or aiohttp's plain text for a request line over 8190 bytes."""
    out = _json(Problem, description)
    out["content"]["text/plain"] = {"schema": {"type": "string"}}
    return out


def _get(
    summary: str,
    ok: dict[str, Any],
    params: list[dict[str, Any]],
    *,
    not_found: bool = False,
    bad: bool = True,
) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": ok}
    responses["400"] = _bad("bad query parameter (`path` names it)" if bad else "request line too long")
    if not_found:
        responses["404"] = _json(Problem, "not found")
    responses["503"] = _json(Problem, "the event log is not available")
    return {"get": {"summary": summary, "parameters": params, "responses": responses}}


_PROBES = ("/healthz", "/readyz")  # answered without the read token (api/access.py)


def _access_responses(paths: dict[str, Any]) -> None:
    """Every operation may answer 421 (a Host this server does not answer to) and 403 (a foreign
    Origin); the reads, when the server requires a read token, 401 (and accept it as a bearer)."""
    for path, ops in paths.items():
        for method, op in ops.items():
            responses = op["responses"]
            responses.setdefault(
                "421", _json(Problem, "the Host header names another server (DNS rebinding)")
            )
            responses.setdefault("403", _json(Problem, "a cross-origin request (the Origin header)"))
            if method == "get" and path not in _PROBES:
                responses.setdefault("401", _json(Problem, "the server requires its read token"))
                op["security"] = [{}, {"bearer": []}]


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document served at /openapi.json."""
    _, components = msgspec.json.schema_components(_TYPES, ref_template=_REF)
    ready_ok = _json(Ready, "ready: the cache has caught up with the log")
    paths: dict[str, Any] = {
        "/healthz": _get("liveness", _json(Health, "alive"), [], bad=False),
        "/readyz": {
            "get": {
                "summary": "readiness: the projection has caught up with the log",
                "responses": {"200": ready_ok, "503": _json(Ready, "not ready yet")},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (Volcano's names)",
                "responses": {
                    "200": {
                        "description": "Prometheus text exposition format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "this document",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/v1/cycles": _get(
            "cycles, keyset paged by log sequence",
            _json(CyclePage, "a page of cycles"),
            [
                _SINCE,
                _limit(1000),
                _q(
                    "latest",
                    "the newest N cycles, oldest first (instead of since; limit is then N)",
                    {"type": "integer", "minimum": 1, "maximum": 1000},
                ),
            ],
        ),
        "/v1/cycles/{id}": _get(
            "one cycle and its decisions",
            _json(CycleDetail, "the cycle"),
            [_p("id", "cycle number", {"type": "string", "pattern": "^[0-9]{1,18}$"}), _SINCE, _limit(1000)],
            not_found=True,
        ),
        "/v1/decisions": _get(
            "decision events by job, pod, queue, node or cycle (the decision index)",
            _json(DecisionPage, "a page of decisions"),
            [
                _q("job", "job id <namespace>/<podgroup>", _STR),
                _q("pod", "pod as <namespace>/<name> (or a name, with namespace)", _STR),
                _q("namespace", "namespace", _STR),
                _q("queue", "queue name", _STR),
                _q("node", "node name", _STR),
                _q("cycle", "cycle number", {"type": "integer", "minimum": 0, "maximum": 2**62}),
                _q("type", "decision type(s), comma-separated", {"type": "string"}),
                _SINCE,
                _limit(1000),
            ],
        ),
        "/v1/events": {
            **_get(
                "the raw log, keyset paged",
                _json(EventPage, "a page of events"),
                [_q("type", "event type(s), comma-separated", {"type": "string"}), _SINCE, _limit(10000)],
            ),
            "post": {
                "summary": "ingest observed events (idempotent by idem_key); bearer token required",
                "security": [{"bearer": []}],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(IngestRequest)}},
                },
                "responses": {
                    "200": _json(IngestResponse, "appended (or already there)"),
                    "400": _bad("invalid body; `path` is the JSON path of the problem; nothing written"),
                    "401": _json(Problem, "missing or wrong bearer token"),
                    "403": _json(Problem, "writes disabled (no token configured, or a read-only server)"),
                    "413": _json(Problem, "body larger than max_body_bytes"),
                    "415": _json(Problem, "not JSON"),
                    "503": _json(Problem, "the event log is not available"),
                },
            },
        },
        "/v1/jobs": _get(
            "jobs (PodGroups) now",
            _json(JobList, "jobs"),
            [
                _q("queue", "only this queue", _STR),
                _q("phase", "only this phase (Pending, Inqueue, Running…)", _STR),
            ],
        ),
        "/v1/jobs/{namespace}/{name}": _get(
            "one job: phase, tasks by status, and why it is pending",
            _json(JobDetail, "the job"),
            [_p("namespace", "namespace"), _p("name", "PodGroup name")],
            not_found=True,
            bad=False,
        ),
        "/v1/queues": _get(
            "queues with their spec and the queue-share plugin's figures",
            _json(QueueList, "queues"),
            [],
            bad=False,
        ),
        "/v1/queues/{name}": _get(
            "one queue", _json(QueueRow, "the queue"), [_p("name", "queue name")], not_found=True, bad=False
        ),
        "/v1/queue-history": _get(
            "every queue's allocated, deserved, share and waiting jobs over cycles, downsampled",
            _json(QueueHistory, "the series, one value per sample cycle"),
            [
                _q("from", "first cycle (default 1)", {"type": "integer", "minimum": 0, "maximum": 2**62}),
                _q(
                    "to",
                    "last cycle (default and at most: the log's last cycle)",
                    {"type": "integer", "minimum": 0, "maximum": 2**62},
                ),
                _q(
                    "points",
                    "at most this many evenly spaced sample cycles (1..2000, default 200)",
                    {"type": "integer", "minimum": 1, "maximum": 2000},
                ),
            ],
        ),
        "/v1/nodes": _get("nodes: allocatable, idle, used, pods", _json(NodeList, "nodes"), [], bad=False),
        "/v1/nodes/{name}": _get(
            "one node", _json(NodeRow, "the node"), [_p("name", "node name")], not_found=True, bad=False
        ),
        "/v1/hypernodes": _get(
            "HyperNodes: tier, parent, children and the nodes each holds",
            _json(HyperNodeList, "hypernodes"),
            [],
            bad=False,
        ),
    }
    _access_responses(paths)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Fumarole",
            "version": "1",
            "description": "Decisions, cycles, jobs, queues, nodes and why-pending of Fumarole.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
