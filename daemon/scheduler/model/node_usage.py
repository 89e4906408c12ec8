"""Node resource usage read from a metrics source (Volcano's NodeInfo.ResourceUsage).

Volcano's cache polls its metrics client every `metrics.interval` and stores, per node, the
average CPU and memory utilisation (percent, 0-100) under the period key "10m"
(source.NODE_METRICS_PERIOD) together with the time the sample was taken.  Here the same facts
arrive as observed events (store.events.NodeUsageObserved) and are folded into the snapshot's
`node_usage`, so a session reads them as it reads any other fact and replay stays exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["METRICS_ACTIVE_SECONDS", "NODE_METRICS_PERIOD", "NodeUsage", "node_usage"]

NODE_METRICS_PERIOD = "10m"
"""The only period key Volcano's cache fills (source.NODE_METRICS_PERIOD)."""
METRICS_ACTIVE_SECONDS = 300.0
"""usage.MetricsActiveTime: metrics older than this (event clock) are ignored."""


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node's usage: percentages by period key, and when they were sampled.

    `metrics_time` is in seconds on the event clock; None means "sampled at the session's now"
    (a manifest annotation without a time, for `fumarole schedule`).  A node without a
    NodeUsage reads as Volcano's empty ResourceUsage: no averages and a zero time (stale).
    """

    cpu: Mapping[str, float] = field(default_factory=dict)
    memory: Mapping[str, float] = field(default_factory=dict)
    metrics_time: float | None = 0.0

    def cpu_avg(self, period: str) -> float:
        return self.cpu.get(period, 0.0)

    def mem_avg(self, period: str) -> float:
        return self.memory.get(period, 0.0)

    def age(self, now: float) -> float:
        """Seconds since the sample (0 for an untimed annotation; huge for no sample)."""
        if self.metrics_time is None:
            return 0.0
        return now - self.metrics_time


EMPTY = NodeUsage(metrics_time=float("-inf"))


def node_usage(usages: Mapping[str, NodeUsage], node: str) -> NodeUsage:
    """The usage of `node`, or the empty one (no averages, never sampled)."""
    return usages.get(node, EMPTY)
