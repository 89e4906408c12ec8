"""Prometheus metrics with Volcano's names, folded from the decision events the daemon writes.

`SchedulerMetrics.observe(seq, event)` is called for every event the projection folds (the
daemon's writer, or `fumarole serve` following the log); `seed(...)` sets the gauges from the
state in force at start-up.  Names, labels and buckets follow Volcano's
pkg/scheduler/metrics (subsystem "volcano"):

* volcano_e2e_scheduling_latency_milliseconds — CycleClosed.duration_s, buckets 1..5000 ms (20);
* volcano_action_scheduling_latency_milliseconds{action} — CycleClosed.action_seconds, 1..2000 ms (20);
* volcano_plugin_scheduling_latency_milliseconds{plugin,OnSession} — CycleClosed.plugin_seconds
  (callback time of the whole session, OnSession="Callbacks"; measured only with tracing on),
  0.1..100 ms (15);
* volcano_schedule_attempts_total{result} — per cycle, "scheduled" += binds,
  "unschedulable" += tasks still pending;
* volcano_pod_preemption_victims — evictions by preempt of the last cycle;
* volcano_total_preemption_attempts — cycles that evicted for preemption;
* volcano_eviction_transactions_total{action} — cycles that evicted, by action;
* volcano_unschedule_task_count{job_id} — waiting pods of each explained job (Volcano labels
  it with the job's name: so do we); volcano_unschedule_job_count — explained jobs;
* volcano_queue_{allocated,request,deserved,real_capacity,inqueue}_{milli_cpu,memory_bytes},
  volcano_queue_*_scalar_resources{queue_name,resource} (scalars in milli-units, as Volcano's
  Resource holds them), volcano_queue_share, volcano_queue_weight, volcano_queue_overused.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from fumarole.daemon.scheduler.model.quantity import QuantityError, parse_quantity
from fumarole.store.events import CycleClosed, EvictDecided, JobExplained, QueueFigures, QueueFiguresRecorded

__all__ = ["SchedulerMetrics", "exponential_buckets_range"]

log = logging.getLogger("fumarole.api.metrics")

disable_created_metrics()  # type: ignore[no-untyped-call]  # Volcano (client_golang) exposes no *_created series

_NS = "volcano"
_PREEMPT_ACTIONS = ("preempt", "gangpreempt")
_EVICTION_ACTIONS = ("preempt", "reclaim", "gangpreempt", "gangreclaim")
_QUEUE_RESOURCES = ("allocated", "request", "deserved", "real_capacity", "inqueue")


def exponential_buckets_range(lo: float, hi: float, count: int) -> list[float]:
    """Prometheus' ExponentialBucketsRange: `count` buckets from lo to hi, growing geometrically."""
    factor = math.pow(hi / lo, 1.0 / (count - 1))
    return [lo * math.pow(factor, i) for i in range(count)]


def _number(quantity: str, *, milli: bool) -> float:
    try:
        value = parse_quantity(quantity)
    except QuantityError:
        return 0.0
    return float(value * 1000) if milli else float(value)


class SchedulerMetrics:
    """The metrics registry of one daemon (or one `fumarole serve`)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.leader: Gauge | None = None  # created with leader election only
        self.lease_holder: Gauge | None = None
        self._holder = ""
        self.e2e = Histogram(
            "e2e_scheduling_latency_milliseconds",
            "Duration of a scheduling session (cycle) in milliseconds.",
            namespace=_NS,
            buckets=exponential_buckets_range(1, 5000, 20),
            registry=r,
        )
        self.action = Histogram(
            "action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds.",
            ["action"],
            namespace=_NS,
            buckets=exponential_buckets_range(1, 2000, 20),
            registry=r,
        )
        self.plugin = Histogram(
            "plugin_scheduling_latency_milliseconds",
            "Plugin scheduling latency in milliseconds.",
            ["plugin", "OnSession"],
            namespace=_NS,
            buckets=exponential_buckets_range(0.1, 100, 15),
            registry=r,
        )
        self.attempts = Counter(
            "schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result"],
            namespace=_NS,
            registry=r,
        )
        self.victims = Gauge(
            "pod_preemption_victims", "Number of selected preemption victims.", namespace=_NS, registry=r
        )
        self.preemption_attempts = Counter(
            "total_preemption_attempts",
            "Total preemption attempts in the cluster till now.",
            namespace=_NS,
            registry=r,
        )
        self.eviction_transactions = Counter(
            "eviction_transactions",
            "Total number of committed eviction transactions, by action.",
            ["action"],
            namespace=_NS,
            registry=r,
        )
        self.unschedule_tasks = Gauge(
            "unschedule_task_count",
            "Number of tasks could not be scheduled.",
            ["job_id"],
            namespace=_NS,
            registry=r,
        )
        self.unschedule_jobs = Gauge(
            "unschedule_job_count", "Number of jobs could not be scheduled.", namespace=_NS, registry=r
        )
        self.queue: dict[str, Gauge] = {}
        for what in _QUEUE_RESOURCES:
            self.queue[f"{what}_milli_cpu"] = Gauge(
                f"queue_{what}_milli_cpu",
                f"{what} CPU of the queue (milli).",
                ["queue_name"],
                namespace=_NS,
                registry=r,
            )
            self.queue[f"{what}_memory_bytes"] = Gauge(
                f"queue_{what}_memory_bytes",
                f"{what} memory of the queue (bytes).",
                ["queue_name"],
                namespace=_NS,
                registry=r,
            )
            self.queue[f"{what}_scalar_resources"] = Gauge(
                f"queue_{what}_scalar_resources",
                f"{what} scalar resources of the queue (milli-units).",
                ["queue_name", "resource"],
                namespace=_NS,
                registry=r,
            )
        self.queue_share = Gauge(
            "queue_share", "Share of the queue.", ["queue_name"], namespace=_NS, registry=r
        )
        self.queue_weight = Gauge(
            "queue_weight", "Weight of the queue.", ["queue_name"], namespace=_NS, registry=r
        )
        self.queue_overused = Gauge(
            "queue_overused",
            "Whether the queue is overused (share >= 1).",
            ["queue_name"],
            namespace=_NS,
            registry=r,
        )
        self._waiting: dict[str, str] = {}  # job id -> the job_id label in use
        self._queues: set[str] = set()
        self._cycle_victims = 0
        self._cycle_evictions: set[str] = set()
        self.observed = 0

    # ------------------------------------------------------------------------- feeding
    def seed(
        self, explanations: Mapping[str, JobExplained], queue_figures: Mapping[str, QueueFigures]
    ) -> None:
        """Set the gauges from the state in force (start-up)."""
        for ev in explanations.values():
            self._explained(ev)
        if queue_figures:
            self._queue_figures(queue_figures)

    def observe(self, seq: int, event: Any) -> None:
        """Fold one event of the log (never raises: metrics must not stop the writer)."""
        try:
            self._observe(event)
            self.observed += 1
        except Exception:  # pragma: no cover - defensive
            log.exception("metrics: cannot fold event seq=%d", seq)

    def _observe(self, event: Any) -> None:
        if isinstance(event, EvictDecided):
            self._cycle_evictions.add(event.action)
            if event.action in _PREEMPT_ACTIONS:
                self._cycle_victims += 1
        elif isinstance(event, JobExplained):
            self._explained(event)
        elif isinstance(event, QueueFiguresRecorded):
            self._queue_figures(event.queues)
        elif isinstance(event, CycleClosed):
            self._closed(event)

    def _closed(self, e: CycleClosed) -> None:
        self.e2e.observe(e.duration_s * 1000.0)
        for action, secs in sorted(e.action_seconds.items()):
            self.action.labels(action=action).observe(secs * 1000.0)
        for plugin, secs in sorted(e.plugin_seconds.items()):
            self.plugin.labels(plugin=plugin, OnSession="Callbacks").observe(secs * 1000.0)
        if e.binds:
            self.attempts.labels(result="scheduled").inc(e.binds)
        if e.pending_tasks:
            self.attempts.labels(result="unschedulable").inc(e.pending_tasks)
        self.victims.set(self._cycle_victims)
        if self._cycle_victims:
            self.preemption_attempts.inc()
        for action in sorted(self._cycle_evictions):
            if action in _EVICTION_ACTIONS:
                self.eviction_transactions.labels(action=action).inc()
        self._cycle_victims = 0
        self._cycle_evictions = set()

    def _explained(self, e: JobExplained) -> None:
        job = f"{e.namespace}/{e.name}"
        if not e.message and not e.reasons:
            label = self._waiting.pop(job, None)
            if label is not None and label not in self._waiting.values():
                self.unschedule_tasks.remove(label)
        else:
            self._waiting[job] = e.name
            self.unschedule_tasks.labels(job_id=e.name).set(len(e.pods))
        self.unschedule_jobs.set(len(self._waiting))

    def _queue_figures(self, queues: Mapping[str, QueueFigures]) -> None:
        for name in sorted(self._queues - set(queues)):
            self._drop_queue(name)
        for name in sorted(queues):
            f = queues[name]
            for what, res in (
                ("allocated", f.allocated),
                ("request", f.request),
                ("deserved", f.deserved),
                ("real_capacity", f.capability),
                ("inqueue", f.inqueue),
            ):
                self.queue[f"{what}_milli_cpu"].labels(queue_name=name).set(
                    _number(res.get("cpu", "0"), milli=True)
                )
                self.queue[f"{what}_memory_bytes"].labels(queue_name=name).set(
                    _number(res.get("memory", "0"), milli=False)
                )
                scalars = self.queue[f"{what}_scalar_resources"]
                for rname in sorted(res):
                    if rname not in ("cpu", "memory"):
                        scalars.labels(queue_name=name, resource=rname).set(_number(res[rname], milli=True))
            self.queue_share.labels(queue_name=name).set(f.share)
            self.queue_weight.labels(queue_name=name).set(f.weight)
            self.queue_overused.labels(queue_name=name).set(1 if f.share >= 1 else 0)
        self._queues = set(queues)

    def _drop_queue(self, name: str) -> None:
        for g in (*self.queue.values(), self.queue_share, self.queue_weight, self.queue_overused):
            for sample_labels in [labels for labels in list(g._metrics) if labels and labels[0] == name]:
                g.remove(*sample_labels)

    def set_leading(self, leading: bool, holder: str = "") -> None:
        """Leader election: 1 while this replica holds the lease, 0 while it stands by; and who holds
        it (`fumarole_lease_holder{holder="…"} 1`, one sample, on every replica)."""
        if self.leader is None:
            self.leader = Gauge(
                "leader",
                "1 while this replica holds the leader lease (shared log or Kubernetes Lease), "
                "0 while it stands by.",
                namespace="fumarole",
                registry=self.registry,
            )
            self.lease_holder = Gauge(
                "lease_holder",
                "1 for the replica that holds the leader lease, as this replica last saw it.",
                ["holder"],
                namespace="fumarole",
                registry=self.registry,
            )
        self.leader.set(1 if leading else 0)
        holders = self.lease_holder
        if holder != self._holder and holders is not None:
            if self._holder:
                holders.remove(self._holder)
            if holder:
                holders.labels(holder=holder).set(1)
            self._holder = holder

    # ------------------------------------------------------------------------- output
    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
