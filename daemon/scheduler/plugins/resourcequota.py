"""The resourcequota plugin (plugins/resourcequota): admit jobs whose minResources fit namespace quotas."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.quantity import QuantityError, format_quantity, parse_quantity
from fumarole.daemon.scheduler.model.queue import ResourceQuotaInfo
from fumarole.daemon.scheduler.model.resources import CPU, MEMORY, PODS, Resource

NAME = "resourcequota"

ResourceList = dict[str, Fraction]


def resource_list(r: Resource) -> ResourceList:
    """A PodGroup's minResources as a ResourceList of exact values.

    cpu and memory appear when non-zero (the model cannot tell `cpu: 0` from no cpu); every
    scalar kept by the model appears; `pods` is a count, other scalars are milli-units.
    """
    out: ResourceList = {}
    if r.cpu:
        out[CPU] = Fraction(r.cpu) / 1000
    if r.memory:
        out[MEMORY] = Fraction(r.memory)
    for name in sorted(r.scalars):
        v = Fraction(r.scalars[name])
        out[name] = v if name == PODS else v / 1000
    return out


def parse_list(text: dict[str, str]) -> ResourceList:
    out: ResourceList = {}
    for name in sorted(text):
        try:
            out[name] = parse_quantity(text[name])
        except QuantityError:
            continue
    return out


def add_lists(a: ResourceList, b: ResourceList) -> ResourceList:
    """quotav1.Add: union of names, values summed."""
    out = dict(a)
    for name, v in b.items():
        out[name] = out.get(name, Fraction(0)) + v
    return out


def mask(rl: ResourceList, names: set[str] | dict[str, Any]) -> ResourceList:
    """quotav1.Mask: only the given names."""
    return {k: v for k, v in rl.items() if k in names}


def exceeded_names(usage: ResourceList, hard: ResourceList) -> list[str]:
    """quotav1.LessThanOrEqual's failing names (names of `hard` that `usage` has and exceeds), sorted."""
    return sorted(k for k, limit in hard.items() if k in usage and usage[k] > limit)


def render(rl: ResourceList) -> str:
    """A ResourceList as `map[name:quantity ...]` (Go prints map keys sorted)."""
    parts = []
    for name in sorted(rl):
        v = rl[name]
        text = (
            format_quantity(v, milli=False)
            if name in (MEMORY, PODS)
            else format_quantity(v * 1000, milli=True)
        )
        parts.append(f"{name}:{text}")
    return "map[" + " ".join(parts) + "]"


def quota_check(
    requested_all: ResourceList, pending: ResourceList | None, quota: ResourceQuotaInfo
) -> str | None:
    """The rejection message when the request does not fit this quota's status, else None."""
    hard = parse_list(quota.hard)
    used = parse_list(quota.used)
    requested = mask(requested_all, hard)
    used_now = add_lists(pending, used) if pending is not None else used
    new_usage = mask(add_lists(used_now, requested), requested)
    exceeded = exceeded_names(new_usage, hard)
    if not exceeded:
        return None
    names = set(exceeded)
    return (
        f"resource quota insufficient, requested: {render(mask(requested, names))}, "
        f"used: {render(mask(used, names))}, limited: {render(mask(hard, names))}"
    )


class ResourceQuotaPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        # minResources of jobs admitted in this session, per namespace.
        self.pending: dict[str, ResourceList] = {}

    def on_session_open(self, ssn: Session) -> None:
        self.pending = {}

        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return cb.PERMIT
            ns = ssn.namespaces.get(job.namespace)
            if ns is None:
                return cb.PERMIT
            requested = resource_list(job.min_resources)
            for quota in sorted(ns.quotas, key=lambda q: q.name):
                msg = quota_check(requested, self.pending.get(job.namespace), quota)
                if msg is not None:
                    ssn.enqueue_rejections[job.uid] = f"{NAME}: {msg}"
                    return cb.REJECT
            return cb.PERMIT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None or job.namespace not in ssn.namespaces:
                return
            self.pending[job.namespace] = add_lists(
                self.pending.get(job.namespace, {}), resource_list(job.min_resources)
            )

        ssn.register(cb.JOB_ENQUEUEABLE, NAME, enqueueable)
        ssn.register(cb.JOB_ENQUEUED, NAME, enqueued)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> ResourceQuotaPlugin:
    return ResourceQuotaPlugin(arguments)
