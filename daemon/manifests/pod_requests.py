"""A pod spec's resource requests, as the scheduler and the controllers count them.

Volcano's GetPodResourceRequest (api/pod_info.go: milli values, + `pods: 1`, pod-level requests,
overhead) and the quota usage the controllers read (k8s PodRequests, exact values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypeVar

from fumarole.daemon.manifests.fields import to_resource
from fumarole.daemon.scheduler.model.resources import PODS, Resource

T = TypeVar("T")


@dataclass(slots=True)
class Requests:
    """Per-container request/limit lists of one pod spec, validated."""

    containers: list[tuple[dict[str, Fraction], dict[str, Fraction]]] = field(default_factory=list)
    # the app containers' names, in spec order (numa-aware names the container it cannot place)
    names: list[str] = field(default_factory=list)
    inits: list[tuple[dict[str, Fraction], dict[str, Fraction], bool]] = field(default_factory=list)
    pod_level: dict[str, Fraction] = field(default_factory=dict)
    overhead: dict[str, Fraction] = field(default_factory=dict)


def _effective(
    requests: dict[str, Fraction], limits: dict[str, Fraction], defaulted: bool
) -> dict[str, Fraction]:
    if not defaulted or not limits:
        return requests
    out = dict(limits)
    out.update(requests)
    return out


def _aggregate(
    r: Requests,
    defaulted: bool,
    new: Callable[[], T],
    conv: Callable[[dict[str, Fraction]], T],
    add: Callable[[T, T], object],
    setmax: Callable[[T, T], object],
) -> T:
    """Sum of containers, max with each init container; restartable init containers run alongside."""
    result = new()
    for req, lim in r.containers:
        add(result, conv(_effective(req, lim, defaulted)))
    restartable = new()
    init_max = new()
    for req, lim, sidecar in r.inits:
        cur = conv(_effective(req, lim, defaulted))
        if sidecar:
            add(result, cur)
            add(restartable, cur)
            cur = restartable
        else:
            tmp = new()
            add(tmp, cur)
            add(tmp, restartable)
            cur = tmp
        setmax(init_max, cur)
    setmax(result, init_max)
    return result


def _pod_level_supported(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def volcano_request(r: Requests) -> Resource:
    """GetPodResourceRequest: per-container milli values, + pods 1, pod-level override, + overhead."""
    res = _aggregate(r, True, Resource, to_resource, Resource.add, Resource.set_max_resource)
    res.scalars[PODS] = res.scalars.get(PODS, 0) + 1
    if r.pod_level:
        level = to_resource(r.pod_level)
        for name in sorted(r.pod_level):
            if _pod_level_supported(name):
                res.set(name, level.get(name))
    if r.overhead:
        res.add(to_resource(r.overhead))
    return res


def cpu_mem_limits(r: Requests) -> tuple[float, float]:
    """GetPodResourceLimit's CPU (milli) and memory (bytes): containers' limits summed, max with
    each init container's (restartable ones run alongside), as requests are aggregated."""
    as_req = Requests(
        containers=[(lim, {}) for _req, lim in r.containers],
        inits=[(lim, {}, sidecar) for _req, lim, sidecar in r.inits],
    )
    res = _aggregate(as_req, False, Resource, to_resource, Resource.add, Resource.set_max_resource)
    return float(res.cpu), float(res.memory)


def _empty_list() -> dict[str, Fraction]:
    return {}


def add_list(a: dict[str, Fraction], b: dict[str, Fraction]) -> None:
    """a += b, per resource name."""
    for k, v in b.items():
        a[k] = a.get(k, Fraction(0)) + v


def _max_list(a: dict[str, Fraction], b: dict[str, Fraction]) -> None:
    for k, v in b.items():
        if k not in a or v > a[k]:
            a[k] = v


def quota_usage(r: Requests, defaulted: bool) -> dict[str, Fraction]:
    """util.GetPodQuotaUsage as the controllers read it: PodRequests (exact) + pods 1."""
    usage = _aggregate(r, defaulted, _empty_list, dict, add_list, _max_list)
    for name in sorted(r.pod_level):
        if _pod_level_supported(name):
            usage[name] = r.pod_level[name]
    add_list(usage, r.overhead)
    usage[PODS] = Fraction(1)
    return usage


def times(usage: Mapping[str, Fraction], count: int) -> dict[str, Fraction]:
    """usage × count, per resource name."""
    return {k: v * count for k, v in usage.items()}


# =============================================================================================


_QOS_RESOURCES = ("cpu", "memory")


def guaranteed_qos(r: Requests) -> bool:
    """v1qos.GetPodQOS(pod) == Guaranteed, over init and app containers (cpu and memory only;
    requests defaulted from limits, as the API server does; pod-level resources not read)."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    every = [(q, l) for q, l in r.containers] + [(q, l) for q, l, _ in r.inits]
    for req, lim in every:
        eff = _effective(req, lim, True)
        for name in _QOS_RESOURCES:
            if eff.get(name, 0) > 0:
                requests[name] = requests.get(name, Fraction(0)) + eff[name]
        found = set()
        for name in _QOS_RESOURCES:
            if lim.get(name, 0) > 0:
                found.add(name)
                limits[name] = limits.get(name, Fraction(0)) + lim[name]
        if len(found) != len(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return False
    if guaranteed:
        for name, q in requests.items():
            if limits.get(name) != q:
                guaranteed = False
                break
    return guaranteed and len(requests) == len(limits)


def container_cpu_requests(r: Requests) -> tuple[tuple[str, Fraction | None], ...]:
    """Each app container's name and effective cpu request (None: no cpu request)."""
    names = r.names + [""] * (len(r.containers) - len(r.names))
    return tuple(
        (n, _effective(q, l, True).get("cpu")) for n, (q, l) in zip(names, r.containers, strict=False)
    )
