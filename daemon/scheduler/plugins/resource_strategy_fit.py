"""The resource-strategy-fit plugin: per-resource Most/LeastAllocated scores, `sra` and `proportional`.

Arguments (decoded as Volcano's mapstructure does: numbers for ints and floats, floats truncated
to ints, anything else for a typed field is a configuration error -- Volcano exits):
`resourceStrategyFitWeight` (int, default 10; negative means 10), `resources` (map of resource
name or `prefix*` pattern to {type: MostAllocated|LeastAllocated, weight}; default cpu and memory
LeastAllocated weight 1), `sra` ({enable, resources: "a,b", weight, resourceWeight: {a: 1}})
and `proportional` ({enable, resources: "a,b", resourceProportion: {"a.cpu": 4, "a.memory": 8}}).
A pod may override the strategy with the annotations `volcano.sh/resource-strategy-scoring-type`
and `volcano.sh/resource-strategy-weight` (JSON map of resource -> int weight).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import ConfError
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import CPU, MEMORY
from fumarole.daemon.scheduler.model.task import TaskInfo

NAME = "resource-strategy-fit"
DEFAULT_WEIGHT = 10
MAX_NODE_SCORE = 100
MOST_ALLOCATED = "MostAllocated"
LEAST_ALLOCATED = "LeastAllocated"
SCORING_TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
SCORING_WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"


# --------------------------------------------------------------------------- argument decoding
class _Decode:
    """mapstructure.Decode without weak typing; errors name the argument path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, what: str, v: Any) -> ConfError:
        return ConfError(f"plugin {NAME}: arguments.{self.path}: expected {what}, got {v!r}")

    def int_(self, v: Any) -> int:
        if v is None:
            return 0
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.fail("a number", v)
        return int(v)

    def float_(self, v: Any) -> float:
        if v is None:
            return 0.0
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.fail("a number", v)
        return float(v)

    def bool_(self, v: Any) -> bool:
        if v is None:
            return False
        if not isinstance(v, bool):
            raise self.fail("true or false", v)
        return v

    def str_(self, v: Any) -> str:
        if v is None:
            return ""
        if not isinstance(v, str):
            raise self.fail("a string", v)
        return v

    def map_(self, v: Any) -> dict[str, Any]:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self.fail("a map", v)
        for k in v:
            if not isinstance(k, str):
                raise self.fail("a map with string keys", v)
        return {k: v[k] for k in sorted(v)}

    def field(self, m: dict[str, Any], name: str) -> Any:
        """A struct field: the exact key, else the first key equal ignoring case."""
        if name in m:
            return m[name]
        for k in m:
            if k.lower() == name.lower():
                return m[k]
        return None

    def at(self, key: str) -> _Decode:
        return _Decode(f"{self.path}.{key}")


@dataclass(frozen=True, slots=True)
class ResourceStrategy:
    type: str
    weight: int


@dataclass(slots=True)
class SraWeight:
    weight: int = 0
    resources: dict[str, int] = field(default_factory=dict)
    weight_sum: int = 0


@dataclass(frozen=True, slots=True)
class BaseResource:
    cpu: float
    memory: float


def valid_wildcard(pattern: str) -> bool:
    """Only one trailing '*' (and not '*' alone) is a valid pattern."""
    if "*" not in pattern:
        return True
    return pattern != "*" and pattern.endswith("*") and pattern.count("*") == 1


def strategy_arguments(args: dict[str, Any]) -> tuple[int, dict[str, ResourceStrategy]]:
    """calculateWeight: the plugin weight and the per-resource strategies."""
    weight = DEFAULT_WEIGHT
    if "resourceStrategyFitWeight" in args:
        weight = _Decode("resourceStrategyFitWeight").int_(args["resourceStrategyFitWeight"])
        if weight < 0:
            weight = DEFAULT_WEIGHT
    raw: dict[str, Any] = {}
    if "resources" in args:
        raw = _Decode("resources").map_(args["resources"])
    resources: dict[str, ResourceStrategy] = {}
    if not raw:
        return weight, {
            CPU: ResourceStrategy(LEAST_ALLOCATED, 1),
            MEMORY: ResourceStrategy(LEAST_ALLOCATED, 1),
        }
    for name, v in raw.items():
        d = _Decode(f"resources.{name}")
        m = d.map_(v)
        typ = d.at("type").str_(d.field(m, "type"))
        w = d.at("weight").int_(d.field(m, "weight"))
        if not valid_wildcard(name):
            continue
        if w <= 0:
            w = 1
        if typ not in (LEAST_ALLOCATED, MOST_ALLOCATED):
            typ = LEAST_ALLOCATED
        resources[name] = ResourceStrategy(typ, w)
    return weight, resources


def _names(text: str) -> list[str]:
    return [r.strip() for r in text.split(",") if r.strip()]


def sra_arguments(args: dict[str, Any]) -> SraWeight:
    d = _Decode("sra")
    m = d.map_(args.get("sra"))
    if not d.at("enable").bool_(d.field(m, "enable")):
        return SraWeight()
    names = d.at("resources").str_(d.field(m, "resources"))
    rw_d = d.at("resourceWeight")
    rw = {k: rw_d.at(k).int_(v) for k, v in rw_d.map_(d.field(m, "resourceWeight")).items()}
    sra = SraWeight(weight=d.at("weight").int_(d.field(m, "weight")))
    for name in _names(names):
        w = rw.get(name, 1)
        if w < 0:
            w = 1
        sra.resources[name] = w
        sra.weight_sum += w
    return sra


def proportional_arguments(args: dict[str, Any]) -> dict[str, BaseResource] | None:
    d = _Decode("proportional")
    m = d.map_(args.get("proportional"))
    if not d.at("enable").bool_(d.field(m, "enable")):
        return None
    names = d.at("resources").str_(d.field(m, "resources"))
    rp_d = d.at("resourceProportion")
    rp = {k: rp_d.at(k).float_(v) for k, v in rp_d.map_(d.field(m, "resourceProportion")).items()}
    out: dict[str, BaseResource] = {}
    for name in _names(names):
        cpu = rp.get(name + ".cpu", 1.0)
        mem = rp.get(name + ".memory", 1.0)
        out[name] = BaseResource(cpu if cpu >= 0 else 1.0, mem if mem >= 0 else 1.0)
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- scoring
def find_strategy(name: str, resources: dict[str, ResourceStrategy]) -> ResourceStrategy | None:
    """An exact entry wins; else the wildcard with the longest matching prefix."""
    exact = resources.get(name)
    if exact is not None:
        return exact
    best: ResourceStrategy | None = None
    best_len = 0
    for key, cfg in resources.items():
        if "*" in key:
            prefix = key[:-1]
            if name.startswith(prefix) and len(prefix) > best_len:
                best, best_len = cfg, len(prefix)
    return best


def most_requested(requested: float, used: float, capacity: float, weight: int) -> float | None:
    """None: the node has not enough of the resource."""
    if weight == 0 or capacity == 0:
        return 0.0
    total = requested + used
    if total > capacity:
        return None
    return total * weight / capacity


def least_requested(requested: float, used: float, capacity: float, weight: int) -> float | None:
    if weight == 0 or capacity == 0:
        return 0.0
    total = requested + used
    if total > capacity:
        return None
    return (capacity - total) * weight / capacity


def _pod_weights(text: str) -> dict[str, int] | None:
    """json.Unmarshal into map[ResourceName]int (null is an empty map); None on error."""
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if v is None:
        return {}
    if not isinstance(v, dict):
        return None
    out: dict[str, int] = {}
    for k, w in v.items():
        if w is None:
            out[k] = 0
            continue
        if isinstance(w, bool) or not isinstance(w, int):
            return None
        out[k] = w
    return out


def strategy_score(
    task: TaskInfo, node: NodeInfo, weight: int, resources: dict[str, ResourceStrategy]
) -> float:
    """Score: weighted mean of the per-resource scores, times 100 and the plugin weight."""
    score = 0.0
    weight_sum = 0
    ann = task.pod.annotations
    pod_type = ann.get(SCORING_TYPE_ANNOTATION, "")
    pod_weights: dict[str, int] = {}
    if pod_type:
        text = ann.get(SCORING_WEIGHT_ANNOTATION, "")
        if not text:
            return 0.0
        parsed = _pod_weights(text)
        if parsed is None:
            return 0.0
        pod_weights = parsed
    req = task.resreq
    for rn in req.resource_names():
        if pod_type:
            if rn not in pod_weights:
                continue
            typ, w = pod_type, pod_weights[rn]
        else:
            cfg = find_strategy(rn, resources)
            if cfg is None:
                continue
            typ, w = cfg.type, cfg.weight
        request, capacity, used = (
            float(req.get(rn)),
            float(node.allocatable.get(rn)),
            float(node.used.get(rn)),
        )
        if typ == MOST_ALLOCATED:
            rs = most_requested(request, used, capacity, w)
        elif typ == LEAST_ALLOCATED:
            rs = least_requested(request, used, capacity, w)
        else:
            rs = 0.0
        if rs is None:
            return 0.0
        score += rs
        weight_sum += w
    if weight_sum > 0:
        score /= weight_sum
    return score * float(MAX_NODE_SCORE) * float(weight)


def sra_score(task: TaskInfo, node: NodeInfo, sra: SraWeight) -> float:
    """sraScore: nodes holding fewer of the scarce resources score higher."""
    alloc = node.allocatable
    for rn in task.resreq.resource_names():
        if alloc.get(rn) == 0:
            return 0.0
    score = float(sum(w for rn, w in sra.resources.items() if alloc.get(rn) > 0))
    if sra.weight_sum > 0:
        score = 1.0 - score / sra.weight_sum
    return score * float(MAX_NODE_SCORE * sra.weight)


def proportional_reason(task: TaskInfo, node: NodeInfo, proportional: dict[str, BaseResource]) -> str | None:
    """checkNodeResourceIsProportional: tasks asking none of the resources keep cpu/memory in reserve."""
    for rn in proportional:
        if task.resreq.scalars.get(rn, 0) > 0:
            return None
    idle = node.idle
    for rn, rate in proportional.items():
        if rn not in idle.scalars:
            continue
        value = idle.scalars[rn]
        cpu_reserved = value * rate.cpu
        mem_reserved = value * rate.memory * 1000 * 1000
        if idle.cpu - task.resreq.cpu < cpu_reserved or idle.memory - task.resreq.memory < mem_reserved:
            return f"proportional of resource {rn} check failed"
    return None


class ResourceStrategyFitPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight, self.resources = strategy_arguments(arguments)
        self.sra = sra_arguments(arguments)
        self.proportional = proportional_arguments(arguments)

    def predicate(self, task: TaskInfo, node: NodeInfo) -> FitError | None:
        assert self.proportional is not None
        reason = proportional_reason(task, node, self.proportional)
        if reason is None:
            return None
        return fit_error(task.namespace, task.name, node.name, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        score = 0.0
        if self.weight > 0:
            score += strategy_score(task, node, self.weight, self.resources)
        if self.sra.weight > 0:
            score += sra_score(task, node, self.sra)
        return score

    def on_session_open(self, ssn: Session) -> None:
        if self.proportional is not None:
            ssn.register(cb.PREDICATE, NAME, self.predicate)
        if self.weight > 0 or self.sra.weight > 0:
            ssn.register(cb.NODE_ORDER, NAME, self.node_order)

    def on_session_close(self, ssn: Session) -> None:
        pass


def new(arguments: dict[str, Any]) -> ResourceStrategyFitPlugin:
    return ResourceStrategyFitPlugin(arguments)
