"""Node usage from Prometheus, as Volcano's scheduler cache reads it, observed as NodeUsageObserved.

Volcano (pkg/scheduler/cache/cache.go GetMetricsData, metrics/source/metrics_client_prometheus.go)
polls its metrics source every `metrics.interval` of the scheduler configuration (a Go duration;
unparsable or <= 0: 30s), waiting the interval after each poll ends (wait.Until), and for every
node of its cache runs two instant queries at the current time:

    avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total{mode="idle",
      instance="NODE"}[5m])) * 100), 0)[10m:30s])
    100*avg_over_time(((1-node_memory_MemAvailable_bytes{instance="NODE"}/
      node_memory_MemTotal_bytes{instance="NODE"}))[10m:30s])

taking the first sample of a vector answer as the CPU / memory percentage.  A query that fails or
answers no vector leaves that value 0, and the sample is still stamped with the poll's time (so a
Prometheus that is down yields fresh 0% samples: Volcano's behaviour, kept).  Each poll here
becomes one NodeUsageObserved per node (`metrics_ms` and `at_ms` from the adapter's clock), so
sessions read the samples from the log and replay is exact.

Configuration (the scheduler configuration's `metrics:` section, read at start as Volcano does):
`type` ("" or absent: no collection; `prometheus`; `elasticsearch` and `prometheus_adaptor` are
not implemented: a warning, no collection; anything else is refused), `address` (required for
prometheus), `interval`, `tls.insecureSkipVerify` ("true" skips certificate checks).
The Go client POSTs the query form and falls back to GET on 405; so does this one.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from fumarole.daemon.scheduler.model.node_usage import NODE_METRICS_PERIOD
from fumarole.daemon.scheduler.plugins.sla import NANOS_PER_SECOND, GoDurationError, parse_go_duration
from fumarole.store.events import NodeUsageObserved, ObservedEvent

__all__ = [
    "DEFAULT_INTERVAL_S",
    "MetricsConfError",
    "MetricsSettings",
    "PrometheusSource",
    "cpu_query",
    "memory_query",
    "metrics_settings",
]

log = logging.getLogger("fumarole.kubernetes.metrics")

SOURCE = "prometheus"
DEFAULT_INTERVAL_S = 30.0  # cache.go defaultMetricsInternal
QUERY_TIMEOUT_S = 60.0  # the context of one poll
_NOT_IMPLEMENTED = ("elasticsearch", "prometheus_adaptor")


class MetricsConfError(ValueError):
    """A `metrics:` section this adapter cannot use (one line naming the key)."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    address: str
    interval_s: float = DEFAULT_INTERVAL_S
    insecure_skip_verify: bool = False


def metrics_settings(
    metrics: Mapping[str, str], source: str = "scheduler configuration"
) -> MetricsSettings | None:
    """The Prometheus settings of a `metrics:` section, or None when nothing is to be collected."""
    kind = metrics.get("type", "")
    if not kind:
        return None
    if kind in _NOT_IMPLEMENTED:
        log.warning(
            "%s: metrics.type %s is not implemented by Fumarole; node usage is not collected", source, kind
        )
        return None
    if kind != "prometheus":
        raise MetricsConfError(
            f"{source}: metrics.type: {kind!r} is not a monitoring system Volcano supports "
            "(prometheus, elasticsearch, prometheus_adaptor)"
        )
    address = metrics.get("address", "")
    if not address:
        raise MetricsConfError(f"{source}: metrics.address: required with metrics.type prometheus")
    if not address.startswith(("http://", "https://")):
        raise MetricsConfError(f"{source}: metrics.address: {address!r} is not an http:// or https:// URL")
    interval = DEFAULT_INTERVAL_S
    try:
        ns = parse_go_duration(metrics.get("interval", ""))
        if ns > 0:
            interval = ns / NANOS_PER_SECOND
    except GoDurationError:
        pass
    return MetricsSettings(address.rstrip("/"), interval, metrics.get("tls.insecureSkipVerify") == "true")


def cpu_query(node: str) -> str:
    return (
        'avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total{mode="idle",'
        f'instance="{node}"}}[5m])) * 100), 0)[{NODE_METRICS_PERIOD}:30s])'
    )


def memory_query(node: str) -> str:
    return (
        f'100*avg_over_time(((1-node_memory_MemAvailable_bytes{{instance="{node}"}}/'
        f'node_memory_MemTotal_bytes{{instance="{node}"}}))[{NODE_METRICS_PERIOD}:30s])'
    )


def _first_vector_value(body: Any) -> float | None:
    """The first sample of a vector answer ({"status": "success", "data": {"resultType": "vector",
    "result": [{"metric": ..., "value": [t, "v"]}, ...]}}), or None."""
    if not isinstance(body, dict) or body.get("status") != "success":
        return None
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        return None
    result = data.get("result")
    if not isinstance(result, list) or not result:
        return None
    value = result[0].get("value") if isinstance(result[0], dict) else None
    if not isinstance(value, list) or len(value) != 2:
        return None
    try:
        return float(value[1])
    except (TypeError, ValueError):
        return 0.0  # strconv.ParseFloat's error is ignored: the value stays 0


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class PrometheusSource:
    """Polls Prometheus for every node's usage; `poll` gives the events of one round."""

    def __init__(
        self,
        settings: MetricsSettings,
        nodes: Callable[[], Iterable[str]],
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.settings = settings
        self.nodes = nodes
        self.clock = clock
        self.polls = 0
        self.failures = 0

    async def _query(self, http: aiohttp.ClientSession, query: str, at_ms: int) -> float | None:
        url = self.settings.address + "/api/v1/query"
        form = {"query": query, "time": f"{at_ms / 1000:.3f}"}
        try:
            async with http.post(url, data=form) as resp:
                if resp.status == 405:
                    async with http.get(url, params=form) as again:
                        return _first_vector_value(await again.json(content_type=None))
                return _first_vector_value(await resp.json(content_type=None))
        except (TimeoutError, aiohttp.ClientError, ValueError) as e:
            self.failures += 1
            log.warning("querying Prometheus at %s: %s", self.settings.address, e or type(e).__name__)
            return None

    async def poll(self) -> list[ObservedEvent]:
        """One round: every node's CPU and memory averages, stamped with the clock at the start."""
        at = self.clock()
        names = sorted(set(self.nodes()))
        ssl_ctx: ssl.SSLContext | bool = not self.settings.insecure_skip_verify
        timeout = aiohttp.ClientTimeout(total=QUERY_TIMEOUT_S)
        out: list[ObservedEvent] = []
        async with aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(ssl=ssl_ctx)
        ) as http:
            for node in names:
                cpu = await self._query(http, cpu_query(node), at)
                mem = await self._query(http, memory_query(node), at)
                out.append(
                    NodeUsageObserved(
                        node=node,
                        cpu=cpu or 0.0,
                        memory=mem or 0.0,
                        metrics_ms=at,
                        period=NODE_METRICS_PERIOD,
                        source=SOURCE,
                        at_ms=at,
                    )
                )
        self.polls += 1
        return out

    async def run(self, submit: Callable[[list[ObservedEvent], list[str | None]], Awaitable[Any]]) -> None:
        """Poll now, then `interval` after each poll ends, until cancelled (wait.Until)."""
        while True:
            events = await self.poll()
            if events:
                await submit(events, [None] * len(events))
            await asyncio.sleep(self.settings.interval_s)
