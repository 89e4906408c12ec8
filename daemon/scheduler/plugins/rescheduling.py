"""The rescheduling plugin (plugins/rescheduling): VictimTasks for the shuffle action, by node load.

Every `interval` (default 5m) the plugin registers its strategies' VictimTasks callbacks; the
shuffle action evicts what they name.  One strategy exists, as in Volcano: `lowNodeUtilization`
(low_node_utilization.go, node_utilization_util.go).  Node utilisation is the metrics source's
CPU and memory averages read under the key `metricsPeriod` (default "5m"); Volcano's cache only
fills the key "10m", so unless `metricsPeriod: 10m` is configured every node reads 0% (all
nodes are then under-utilised and nothing is evicted).  Staleness is not checked.

lowNodeUtilization: nodes under every `thresholds` percentage (and schedulable) are low; other
nodes over any `targetThresholds` percentage are high.  Nothing is evicted unless there are low
and high nodes and not every node is low.  The room on the low nodes (target% minus use, per
resource, in milli CPU and bytes, each truncated) is the eviction budget.  High nodes go by
CPU% + memory% descending (ties by name); on each, pods go by priority ascending, then QoS
(BestEffort, Burstable, Guaranteed; ties by pod uid); a pod is picked (the first offered task
with its *name*) while the node has a resource at or above its target and no budget is exactly
zero (a negative one does not stop it), each pick taking its request from the budget and its
share of the node's capacity from the node's utilisation.

The interval gate is the one place this departs from Volcano: Volcano runs when `interval` has
passed since its last run (first counted from the scheduler's start: process state).  Here a
session runs the strategies when its `now` is in a later `interval` window (multiples of the
interval on the event clock) than the previous session's; the first session never does; an
interval of 0 or less runs every session.  Same rate, deterministic from the log.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_usage import node_usage
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.sla import NANOS_PER_SECOND, GoDurationError, parse_go_duration

NAME = "rescheduling"
DEFAULT_INTERVAL_S = 300.0
DEFAULT_METRICS_PERIOD = "5m"
DEFAULT_STRATEGY = "lowNodeUtilization"
CPU, MEMORY = "cpu", "memory"
_RESOURCES = (CPU, MEMORY)


@dataclass(slots=True)
class LowNodeUtilizationConf:
    thresholds: dict[str, float] = field(default_factory=lambda: {"cpu": 100, "memory": 100, "pods": 100})
    target_thresholds: dict[str, float] = field(
        default_factory=lambda: {"cpu": 100, "memory": 100, "pods": 100}
    )


def _parse_threshold(raw: Mapping[str, Any], into: dict[str, float], where: str, warnings: list[str]) -> None:
    """parseThreshold: keys cpu, memory and pod (sic: the defaults say pods) as integers."""
    values: dict[str, int] = {}
    for k, v in raw.items():
        if not isinstance(v, int) or isinstance(v, bool):
            warnings.append(
                f"rescheduling: {where}.{k}: expected an integer, got {v!r}; ignored (Volcano would crash)"
            )
            continue
        values[str(k)] = v
    for key in ("cpu", "memory", "pod"):
        if key in values:
            into[key] = float(values[key])


def parse_lnu(params: Any, warnings: list[str]) -> LowNodeUtilizationConf:
    """LowNodeUtilizationConf.parse: a non-mapping `thresholds` stops before `targetThresholds`."""
    conf = LowNodeUtilizationConf()
    if not isinstance(params, Mapping) or not params:
        return conf
    if "thresholds" in params:
        raw = params["thresholds"]
        if not isinstance(raw, Mapping):
            return conf
        _parse_threshold(raw, conf.thresholds, "thresholds", warnings)
    if "targetThresholds" in params:
        raw = params["targetThresholds"]
        if not isinstance(raw, Mapping):
            return conf
        _parse_threshold(raw, conf.target_thresholds, "targetThresholds", warnings)
    return conf


@dataclass(slots=True)
class Strategy:
    name: str
    params: Any


@dataclass(slots=True)
class ReschedulingConf:
    interval_s: float = DEFAULT_INTERVAL_S
    metrics_period: str = DEFAULT_METRICS_PERIOD
    strategies: list[Strategy] = field(default_factory=lambda: [Strategy(DEFAULT_STRATEGY, None)])


def parse_arguments(arguments: Mapping[str, Any], warnings: list[str]) -> ReschedulingConf:
    """Configs.parseArguments (a value of the wrong type, which Volcano crashes on, is warned and skipped)."""
    conf = ReschedulingConf()
    interval = arguments.get("interval", "")
    if not isinstance(interval, str):
        warnings.append(f"rescheduling: interval: expected a duration string, got {interval!r}; using 5m")
    else:
        try:
            conf.interval_s = parse_go_duration(interval) / NANOS_PER_SECOND
        except GoDurationError:
            conf.interval_s = DEFAULT_INTERVAL_S
    if "metricsPeriod" in arguments:
        period = arguments["metricsPeriod"]
        if isinstance(period, str):
            conf.metrics_period = period or DEFAULT_METRICS_PERIOD
        else:
            warnings.append(f"rescheduling: metricsPeriod: expected a string, got {period!r}; using 5m")
    strategies = arguments.get("strategies")
    if isinstance(strategies, list) and strategies:
        conf.strategies = []
        for i, entry in enumerate(strategies):
            if not isinstance(entry, Mapping):
                warnings.append(f"rescheduling: strategies[{i}]: expected a mapping; skipped")
                continue
            name = entry.get("name", "")
            params = entry.get("params")
            if not isinstance(name, str) or (params is not None and not isinstance(params, Mapping)):
                warnings.append(
                    f"rescheduling: strategies[{i}]: name must be a string, params a mapping; skipped"
                )
                continue
            conf.strategies.append(Strategy(name, params))
    return conf


def time_to_run(interval_s: float, now: float, previous: float | None) -> bool:
    """The interval gate (see the module notes)."""
    if interval_s <= 0:
        return True
    if previous is None:
        return False
    return math.floor(now / interval_s) > math.floor(previous / interval_s)


@dataclass(slots=True)
class NodeUtilization:
    node: NodeInfo
    utilization: dict[str, float]


def _qos_rank(task: TaskInfo) -> int:
    """BestEffort 0, Burstable 1, Guaranteed 2 (Guaranteed: CPU and memory limits equal requests)."""
    if task.best_effort:
        return 0
    if task.pod is not None:
        cpu_lim, mem_lim = task.pod.cpu_mem_limits
        if (
            cpu_lim > 0
            and mem_lim > 0
            and cpu_lim == float(task.resreq.cpu)
            and mem_lim == float(task.resreq.memory)
        ):
            return 2
    return 1


def _to_amount(resource: str, percent: float, node: NodeInfo) -> int:
    """convertPercentToQuan over the node's allocatable (getNodeCapacity), truncated."""
    cap = node.allocatable.cpu if resource == CPU else node.allocatable.memory
    return int(percent * float(cap) * 0.01)


def _to_percent(resource: str, amount: int, node: NodeInfo) -> float:
    """convertQuanToPercent over the node's capacity (status.capacity, not allocatable)."""
    cap = float(node.capability.cpu if resource == CPU else node.capability.memory)
    if cap == 0:
        return math.inf if amount > 0 else (-math.inf if amount < 0 else math.nan)
    return amount * 100 / cap


def low_node_utilization(
    ssn: Session, conf: LowNodeUtilizationConf, period: str, tasks: list[TaskInfo]
) -> list[TaskInfo]:
    nodes = [
        NodeUtilization(
            n,
            {
                CPU: node_usage(ssn.node_usage, n.name).cpu_avg(period),
                MEMORY: node_usage(ssn.node_usage, n.name).mem_avg(period),
            },
        )
        for n in ssn.node_list
    ]
    low: list[NodeUtilization] = []
    high: list[NodeUtilization] = []
    for nu in nodes:
        if not nu.node.facts.unschedulable and all(
            nu.utilization[r] < conf.thresholds[r] for r in _RESOURCES if r in conf.thresholds
        ):
            low.append(nu)
        elif any(
            nu.utilization[r] > conf.target_thresholds[r] for r in _RESOURCES if r in conf.target_thresholds
        ):
            high.append(nu)
    if not low or len(low) == len(ssn.node_list) or not high:
        return []
    budget = {CPU: 0, MEMORY: 0}
    for nu in low:
        for r in _RESOURCES:
            budget[r] += _to_amount(r, conf.target_thresholds[r], nu.node)
            budget[r] -= _to_amount(r, nu.utilization[r], nu.node)

    def keep_going(nu: NodeUtilization) -> bool:
        over = any(
            nu.utilization[r] >= conf.target_thresholds[r] for r in _RESOURCES if r in conf.target_thresholds
        )
        return over and all(v != 0 for v in budget.values())

    high.sort(key=lambda nu: nu.node.name)
    high.sort(key=lambda nu: -(nu.utilization[CPU] + nu.utilization[MEMORY]))
    victims: list[TaskInfo] = []
    for nu in high:
        pods = sorted(nu.node.tasks.values(), key=lambda t: (t.priority, _qos_rank(t), t.uid))
        for pod in pods:
            if not keep_going(nu):
                break
            for task in tasks:
                if task.name == pod.name:
                    cpu, mem = int(task.resreq.cpu), int(task.resreq.memory)
                    budget[CPU] -= cpu
                    budget[MEMORY] -= mem
                    nu.utilization[CPU] -= _to_percent(CPU, cpu, nu.node)
                    nu.utilization[MEMORY] -= _to_percent(MEMORY, mem, nu.node)
                    victims.append(task)
                    break
    return victims


StrategyFn = Callable[[Session, Any, str, list[TaskInfo], list[str]], list[TaskInfo]]


def _lnu(
    ssn: Session, params: Any, period: str, tasks: list[TaskInfo], warnings: list[str]
) -> list[TaskInfo]:
    return low_node_utilization(ssn, parse_lnu(params, warnings), period, tasks)


STRATEGIES: dict[str, StrategyFn] = {"lowNodeUtilization": _lnu}


class ReschedulingPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        conf = parse_arguments(self.arguments, ssn.warnings)
        if not time_to_run(conf.interval_s, ssn.now, ssn.previous_now):
            return
        # RegisteredStrategyConfigs is keyed by name: the last entry of a name gives its params.
        params = {s.name: s.params for s in conf.strategies}
        fns = [(s.name, STRATEGIES[s.name]) for s in conf.strategies if s.name in STRATEGIES]
        if not fns:
            return

        def victim_tasks(tasks: list[TaskInfo]) -> list[TaskInfo]:
            out: list[TaskInfo] = []
            for name, fn in fns:
                out.extend(fn(ssn, params[name], conf.metrics_period, tasks, ssn.warnings))
            return out

        ssn.register(cb.VICTIM_TASKS, NAME, victim_tasks)

    def on_session_close(self, ssn: Session) -> None:
        pass


def new(arguments: dict[str, Any]) -> ReschedulingPlugin:
    return ReschedulingPlugin(arguments)
