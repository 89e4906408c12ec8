"""The Prometheus node-usage source against a real aiohttp server speaking Prometheus's HTTP API
(/api/v1/query, POST form with GET fallback on 405): Volcano's queries, the first sample of a
vector, failures as fresh 0% samples, and the `metrics:` section's checks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from fumarole.daemon.adapters.kubernetes.metrics import (
    MetricsConfError,
    MetricsSettings,
    PrometheusSource,
    cpu_query,
    memory_query,
    metrics_settings,
)
from fumarole.store.events import NodeUsageObserved

VALUES = {cpu_query("n1"): "42.5", memory_query("n1"): "63.25", cpu_query("n2"): "7"}


class Prom:
    def __init__(self, *, post_allowed: bool = True) -> None:
        self.post_allowed = post_allowed
        self.seen: list[tuple[str, str, str]] = []

    async def query(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            if not self.post_allowed:
                return web.Response(status=405)
            form: Any = await request.post()
        else:
            form = request.query
        q, t = form["query"], form["time"]
        self.seen.append((request.method, q, t))
        if q not in VALUES:  # n2's memory: an empty vector
            return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})
        return web.json_response(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {"metric": {"instance": "x"}, "value": [float(t), VALUES[q]]},
                        {"metric": {"instance": "y"}, "value": [float(t), "99"]},
                    ],
                },
            }
        )


async def serve(prom: Prom) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/api/v1/query", prom.query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def poll(prom: Prom) -> list[NodeUsageObserved]:
    gen = serve(prom)
    address = await gen.__anext__()
    try:
        src = PrometheusSource(
            MetricsSettings(address), lambda: ["n2", "n1", "n1"], clock=lambda: 1_700_000_000_123
        )
        events = await src.poll()
    finally:
        await gen.aclose()
    assert all(isinstance(e, NodeUsageObserved) for e in events)
    return events  # type: ignore[return-value]


@pytest.mark.parametrize("post_allowed", [True, False])
def test_volcanos_queries_first_sample_of_the_vector(post_allowed: bool) -> None:
    prom = Prom(post_allowed=post_allowed)
    events = asyncio.run(poll(prom))
    assert [(e.node, e.cpu, e.memory, e.metrics_ms, e.at_ms, e.period, e.source) for e in events] == [
        ("n1", 42.5, 63.25, 1_700_000_000_123, 1_700_000_000_123, "10m", "prometheus"),
        ("n2", 7.0, 0.0, 1_700_000_000_123, 1_700_000_000_123, "10m", "prometheus"),
    ]
    assert [m for m, _q, _t in prom.seen] == ["POST" if post_allowed else "GET"] * 4
    assert prom.seen[0][1] == (
        'avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total{mode="idle",'
        'instance="n1"}[5m])) * 100), 0)[10m:30s])'
    )
    assert prom.seen[1][1] == (
        '100*avg_over_time(((1-node_memory_MemAvailable_bytes{instance="n1"}/'
        'node_memory_MemTotal_bytes{instance="n1"}))[10m:30s])'
    )
    assert {t for _m, _q, t in prom.seen} == {"1700000000.123"}


def test_an_unreachable_prometheus_gives_fresh_zero_samples_as_volcano() -> None:
    async def go() -> list[Any]:
        gen = serve(Prom())
        address = await gen.__anext__()
        await gen.aclose()  # nobody listens there any more
        src = PrometheusSource(MetricsSettings(address), lambda: ["n1"], clock=lambda: 5_000)
        events = await src.poll()
        assert src.failures == 2
        return events

    events = asyncio.run(go())
    assert [(e.node, e.cpu, e.memory, e.metrics_ms) for e in events] == [("n1", 0.0, 0.0, 5_000)]


def test_metrics_section() -> None:
    assert metrics_settings({}) is None
    assert metrics_settings({"type": "elasticsearch", "address": "http://es"}) is None
    s = metrics_settings({"type": "prometheus", "address": "http://p:9090/", "interval": "45s"})
    assert s == MetricsSettings("http://p:9090", 45.0, False)
    s = metrics_settings(
        {"type": "prometheus", "address": "https://p", "interval": "bad", "tls.insecureSkipVerify": "true"}
    )
    assert s == MetricsSettings("https://p", 30.0, True)
    assert metrics_settings(
        {"type": "prometheus", "address": "http://p", "interval": "-1s"}
    ) == MetricsSettings("http://p", 30.0)
    with pytest.raises(MetricsConfError, match=r"conf.yaml: metrics.address: required"):
        metrics_settings({"type": "prometheus"}, "conf.yaml")
    with pytest.raises(MetricsConfError, match=r"metrics.type: 'graphite'"):
        metrics_settings({"type": "graphite"}, "conf.yaml")
    with pytest.raises(MetricsConfError, match=r"metrics.address: 'p:9090' is not an http"):
        metrics_settings({"type": "prometheus", "address": "p:9090"}, "conf.yaml")
