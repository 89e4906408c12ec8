"""The usage plugin (plugins/usage): keep pods off loaded nodes and prefer idle ones, by real load.

Reads each node's CPU and memory utilisation averages (the snapshot's `node_usage`, from
NodeUsageObserved events: model/node_usage.py) under Volcano's period key "10m".  Metrics
older than 5 minutes of the session's `now` (the event clock, not the wall clock) are ignored:
the predicate passes and the score is 0.

* Predicate: average CPU above `thresholds.cpu` (then memory above `thresholds.mem`) is
  UnschedulableAndUnresolvable, "the CPU load of the node exceeds the upper limit." (or the
  memory message).
* Node order: ((1 - cpuComp)·cpu.weight + (1 - memComp)·memory.weight) / (cpu.weight +
  memory.weight) × 100 × usage.weight, where comp = min(1, (real% / 100 × capacity +
  shadow) / capacity) per resource and `shadow` is the session's shadow load estimate of the
  node (estimator.go, shadow_cache.go): pods placed but not yet visible to the metrics source
  (Allocated / Binding / Bound, or Running for less than `metrics.interval`, default 30s, from
  status.startTime; a Running pod without a start time counts), each estimated as
  (request × request_ratio + (limit − request) × burst_ratio) × risk, clamped to [0, limit]
  (limit = request when unset or lower), or be_cpu / be_mem × risk for BestEffort pods, where
  risk = risk_factor once the node's weighted composite load reaches risk_threshold, else 1.
  Allocations during the session add their estimate (event handler), deallocations subtract
  the recorded one.

Volcano walks nodes and each node's tasks in map order when it warms the shadow cache (the
risk factor can change part-way through a node); here tasks go by uid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_float, arg_int
from fumarole.daemon.scheduler.framework.nodetable import FloatArray, IntArray
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_usage import (
    METRICS_ACTIVE_SECONDS,
    NODE_METRICS_PERIOD,
    NodeUsage,
    node_usage,
)
from fumarole.daemon.scheduler.model.quantity import QuantityError, milli_value, parse_quantity, whole_value
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.sla import NANOS_PER_SECOND, GoDurationError, parse_go_duration

NAME = "usage"
MAX_NODE_SCORE = 100.0
NODE_USAGE_CPU_EXTEND = "the CPU load of the node exceeds the upper limit."
NODE_USAGE_MEMORY_EXTEND = "the memory load of the node exceeds the upper limit."
DEFAULT_METRICS_INTERVAL = 30.0  # seconds: usage's defaultMetricsInterval
_SHADOW_STATUSES = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND})


def _section(arguments: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """getUsageSectionArgs: the section when it is a mapping with string keys, else None."""
    value = arguments.get(name)
    if not isinstance(value, Mapping):
        return None
    if not all(isinstance(k, str) for k in value):
        return None
    return value


def _best_effort_cpu(value: Any, default: float) -> float:
    """parseBestEffortCPU: an int is milliCPU; a quantity string its MilliValue; else the default."""
    if isinstance(value, int) and not isinstance(value, bool):
        return default if value < 0 else float(value)
    if isinstance(value, str):
        try:
            if parse_quantity(value) < 0:
                return default
            return float(milli_value(value))
        except QuantityError:
            return default
    return default


def _best_effort_memory(value: Any, default: float) -> float:
    """parseBestEffortMemory: an int is MiB; a quantity string its Value in bytes; else the default."""
    if isinstance(value, int) and not isinstance(value, bool):
        return default if value < 0 else float(value) * 1024 * 1024
    if isinstance(value, str):
        try:
            if parse_quantity(value) < 0:
                return default
            return float(whole_value(value))
        except QuantityError:
            return default
    return default


def composite(real_percent: float, shadow: float, capacity: float) -> float:
    """CalcCompositeUtilization: (real% / 100 × capacity + shadow) / capacity, within [0, 1]."""
    if capacity <= 0:
        return 0.0
    value = (real_percent / 100.0 * capacity + shadow) / capacity
    return min(1.0, max(0.0, value))


def load_composite(cpu: float, mem: float, cpu_weight: int, mem_weight: int) -> float:
    total = cpu_weight + mem_weight
    if total == 0:
        return 0.0
    return (cpu * cpu_weight + mem * mem_weight) / total


def node_score(cpu: float, mem: float, cpu_weight: int, mem_weight: int, usage_weight: int) -> float:
    """CalcNodeScore."""
    total = cpu_weight + mem_weight
    if total == 0:
        return 0.0
    score = ((1.0 - cpu) * cpu_weight + (1.0 - mem) * mem_weight) / total
    return score * MAX_NODE_SCORE * usage_weight


def estimate_pod(request: float, limit: float, ratio: float, burst: float, risk: float) -> float:
    """EstimatePodResource."""
    request = max(request, 0.0)
    effective = request if limit <= 0 or limit < request else limit
    est = (request * ratio + max(effective - request, 0.0) * burst) * risk
    return min(max(est, 0.0), effective)


class ShadowLoad:
    """ShadowLoadCache: estimated load of pods the metrics cannot see yet, per node."""

    def __init__(self, rows: Mapping[str, int] | None = None) -> None:
        self.cpu: dict[str, float] = {}
        self.mem: dict[str, float] = {}
        self.snapshots: dict[str, tuple[str, float, float]] = {}
        # The same sums by session node row (for the batch score), when `rows` is given.
        self.rows = rows or {}
        self.cpu_rows = np.zeros(len(self.rows))
        self.mem_rows = np.zeros(len(self.rows))

    def _mirror(self, node: str) -> None:
        i = self.rows.get(node)
        if i is not None:
            self.cpu_rows[i] = self.cpu[node]
            self.mem_rows[i] = self.mem[node]

    def add(self, node: str, task: str, cpu: float, mem: float) -> None:
        if task in self.snapshots:
            self._subtract(self.snapshots[task])
        self.cpu[node] = self.cpu.get(node, 0.0) + cpu
        self.mem[node] = self.mem.get(node, 0.0) + mem
        self.snapshots[task] = (node, cpu, mem)
        self._mirror(node)

    def remove(self, task: str) -> None:
        snap = self.snapshots.pop(task, None)
        if snap is not None:
            self._subtract(snap)

    def _subtract(self, snap: tuple[str, float, float]) -> None:
        node, cpu, mem = snap
        self.cpu[node] = max(0.0, self.cpu.get(node, 0.0) - cpu)
        self.mem[node] = max(0.0, self.mem.get(node, 0.0) - mem)
        self._mirror(node)

    def of(self, node: str) -> tuple[float, float]:
        return self.cpu.get(node, 0.0), self.mem.get(node, 0.0)


class UsagePlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.usage_weight = arg_int(arguments, "usage.weight", 5)
        if self.usage_weight < 0:
            self.usage_weight = 5
        self.cpu_weight = arg_int(arguments, "cpu.weight", 1)
        if self.cpu_weight < 0:
            self.cpu_weight = 1
        self.memory_weight = arg_int(arguments, "memory.weight", 1)
        if self.memory_weight < 0:
            self.memory_weight = 1
        self.cpu_threshold = 80.0
        self.mem_threshold = 80.0
        self.period = NODE_METRICS_PERIOD
        self.request_ratio = 0.7
        self.burst_ratio = 0.0
        self.risk_threshold = 0.6
        self.risk_factor = 1.2
        self.be_cpu = 250.0
        self.be_memory = float(200 * 1024 * 1024)
        self.metrics_interval = DEFAULT_METRICS_INTERVAL
        thresholds = _section(arguments, "thresholds")
        if thresholds is not None:
            cpu = arg_int(dict(thresholds), "cpu", int(self.cpu_threshold))
            if 0 <= cpu <= 100:
                self.cpu_threshold = float(cpu)
            mem = arg_int(dict(thresholds), "mem", int(self.mem_threshold))
            if 0 <= mem <= 100:
                self.mem_threshold = float(mem)
        est = _section(arguments, "estimator")
        if est is not None:
            e = dict(est)
            v = arg_float(e, "request_ratio", self.request_ratio)
            if 0 <= v <= 1:
                self.request_ratio = v
            v = arg_float(e, "burst_ratio", self.burst_ratio)
            if 0 <= v <= 1:
                self.burst_ratio = v
            v = arg_float(e, "risk_threshold", self.risk_threshold)
            if 0 <= v <= 1:
                self.risk_threshold = v
            v = arg_float(e, "risk_factor", self.risk_factor)
            if v >= 1:
                self.risk_factor = v
            self.be_cpu = _best_effort_cpu(e.get("be_cpu"), self.be_cpu)
            self.be_memory = _best_effort_memory(e.get("be_mem"), self.be_memory)
        self.shadow = ShadowLoad()
        self.now = 0.0
        self.usages: Mapping[str, NodeUsage] = {}

    # ------------------------------------------------------------------ helpers
    def fresh(self, node: str) -> bool:
        """isMetricsAvailable: sampled within the last 5 minutes of `now`."""
        return self.period != "" and node_usage(self.usages, node).age(self.now) <= METRICS_ACTIVE_SECONDS

    def composites(self, node: NodeInfo) -> tuple[float, float]:
        u = node_usage(self.usages, node.name)
        cpu_est, mem_est = self.shadow.of(node.name)
        cpu = composite(u.cpu_avg(self.period), cpu_est, float(node.capability.cpu))
        mem = composite(u.mem_avg(self.period), mem_est, float(node.capability.memory))
        return cpu, mem

    def risk(self, node: NodeInfo) -> float:
        """calcAppliedRiskFactor."""
        if self.risk_factor < 1.0:
            return 1.0
        cpu, mem = self.composites(node)
        if load_composite(cpu, mem, self.cpu_weight, self.memory_weight) >= self.risk_threshold:
            return self.risk_factor
        return 1.0

    def estimate(self, task: TaskInfo, risk: float) -> tuple[float, float]:
        if task.best_effort:
            return max(self.be_cpu, 0.0) * risk, max(self.be_memory, 0.0) * risk
        cpu_lim, mem_lim = task.pod.cpu_mem_limits if task.pod is not None else (0.0, 0.0)
        cpu = estimate_pod(float(task.resreq.cpu), cpu_lim, self.request_ratio, self.burst_ratio, risk)
        mem = estimate_pod(float(task.resreq.memory), mem_lim, self.request_ratio, self.burst_ratio, risk)
        return cpu, mem

    def is_shadow(self, task: TaskInfo) -> bool:
        """shouldAddToShadowCache (a Running pod's age from the session's now)."""
        if not task.node_name:
            return False
        if task.status in _SHADOW_STATUSES:
            return True
        if task.status is TaskStatus.RUNNING:
            start = task.pod.start_time if task.pod is not None else None
            if start is None:
                return True
            return self.now - start < self.metrics_interval
        return False

    def add(self, node: NodeInfo, task: TaskInfo) -> None:
        cpu, mem = self.estimate(task, self.risk(node))
        self.shadow.add(node.name, task.uid, cpu, mem)

    # ------------------------------------------------------------------ session
    def on_session_open(self, ssn: Session) -> None:
        nodes = ssn.node_list
        self.shadow = ShadowLoad({n.name: i for i, n in enumerate(nodes)})
        self.now = ssn.now
        self.usages = ssn.node_usage
        # Per session node row, for the batch score (the same arithmetic as node_order's).
        real_cpu = np.array(
            [node_usage(self.usages, n.name).cpu_avg(self.period) for n in nodes], dtype=np.float64
        )
        real_mem = np.array(
            [node_usage(self.usages, n.name).mem_avg(self.period) for n in nodes], dtype=np.float64
        )
        cap_cpu = np.array([float(n.capability.cpu) for n in nodes], dtype=np.float64)
        cap_mem = np.array([float(n.capability.memory) for n in nodes], dtype=np.float64)
        fresh = np.array([self.fresh(n.name) for n in nodes], dtype=np.bool_)
        interval = ssn.conf.metrics.get("interval")
        if interval is not None:
            try:
                ns = parse_go_duration(interval)
                if ns > 0:
                    self.metrics_interval = ns / NANOS_PER_SECOND
            except GoDurationError:
                pass
        for node in ssn.node_list:
            for uid in sorted(node.tasks):
                task = node.tasks[uid]
                if self.is_shadow(task):
                    self.add(node, task)

        def on_allocate(task: TaskInfo) -> None:
            node = ssn.nodes.get(task.node_name)
            if node is not None:
                self.add(node, task)

        def on_deallocate(task: TaskInfo) -> None:
            self.shadow.remove(task.uid)

        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

        # The predicate depends on the node only: its reason, computed once per node.
        reasons: dict[str, str] = {}
        for n in nodes:
            if not self.fresh(n.name):
                continue
            u = node_usage(self.usages, n.name)
            if u.cpu_avg(self.period) > self.cpu_threshold:
                reasons[n.name] = NODE_USAGE_CPU_EXTEND
            elif u.mem_avg(self.period) > self.mem_threshold:
                reasons[n.name] = NODE_USAGE_MEMORY_EXTEND

        def predicate(task: TaskInfo, node: NodeInfo) -> FitError | None:
            reason = reasons.get(node.name)
            if reason is None:
                return None
            return fit_error(
                task.namespace, task.name, node.name, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason
            )

        def node_order(task: TaskInfo, node: NodeInfo) -> float:
            if not self.fresh(node.name):
                return 0.0
            cpu, mem = self.composites(node)
            return node_score(cpu, mem, self.cpu_weight, self.memory_weight, self.usage_weight)

        cw, mw, uw = self.cpu_weight, self.memory_weight, self.usage_weight
        shadow = self.shadow

        def comp_rows(real: FloatArray, cap: FloatArray, est: FloatArray) -> FloatArray:
            ok = cap > 0
            safe = np.where(ok, cap, 1.0)
            value = (real / 100.0 * cap + est) / safe
            return np.where(ok, np.minimum(1.0, np.maximum(0.0, value)), 0.0)

        def batch(task: TaskInfo, rows: IntArray) -> FloatArray | None:
            if cw + mw == 0:
                return None
            cpu = comp_rows(real_cpu[rows], cap_cpu[rows], shadow.cpu_rows[rows])
            mem = comp_rows(real_mem[rows], cap_mem[rows], shadow.mem_rows[rows])
            score = ((1.0 - cpu) * cw + (1.0 - mem) * mw) / (cw + mw) * MAX_NODE_SCORE * uw
            return np.where(fresh[rows], score, 0.0)

        cpu_failed = np.array([reasons.get(n.name) == NODE_USAGE_CPU_EXTEND for n in nodes], dtype=np.bool_)
        mem_failed = np.array(
            [reasons.get(n.name) == NODE_USAGE_MEMORY_EXTEND for n in nodes], dtype=np.bool_
        )

        def predicate_batch(task: TaskInfo, rows: IntArray) -> tuple[Any, list[tuple[str, Any]], Any]:
            cpu, mem = cpu_failed[rows], mem_failed[rows]
            failed = cpu | mem
            out: list[tuple[str, Any]] = []
            if cpu.any():
                out.append((NODE_USAGE_CPU_EXTEND, cpu))
            if mem.any():
                out.append((NODE_USAGE_MEMORY_EXTEND, mem))
            return ~failed, out, failed

        ssn.register(cb.PREDICATE, NAME, predicate, predicate_batch)
        ssn.register(cb.NODE_ORDER, NAME, node_order, batch)

    def on_session_close(self, ssn: Session) -> None:
        self.shadow = ShadowLoad()


def new(arguments: dict[str, Any]) -> UsagePlugin:
    return UsagePlugin(arguments)
