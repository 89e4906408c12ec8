"""Helpers shared by queue-share plugins (plugins/util/util.go, api/helpers)."""

from __future__ import annotations

from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.resources import EPHEMERAL_STORAGE, PODS, Resource, exceeded_part
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskStatus


def inqueue_resource(job: JobInfo, allocated: Resource) -> Resource:
    """GetInqueueResource: what an admitted job still reserves, max(min - allocated, 0) per dimension."""
    mr = job.min_resources or Resource()
    out = Resource()
    if mr.cpu - allocated.cpu > 0:
        out.cpu = mr.cpu - allocated.cpu
    if mr.memory - allocated.memory > 0:
        out.memory = mr.memory - allocated.memory
    for name in sorted(mr.scalars):
        if name == EPHEMERAL_STORAGE:
            continue
        reserved = mr.scalars[name]
        if name == PODS:
            left = reserved - allocated.scalars.get(PODS, 0)
            if left > 0:
                out.scalars[PODS] = left
            continue
        if name not in allocated.scalars:
            out.scalars[name] = reserved
        elif reserved - allocated.scalars[name] > 0:
            out.scalars[name] = reserved - allocated.scalars[name]
    return out


def sch_gated_resources(job: JobInfo) -> Resource:
    total = Resource()
    for t in job.peek_in(TaskStatus.PENDING).values():
        if t.sch_gated:
            total.add(t.resreq)
    return total


def deduct_sch_gated(job: JobInfo, res: Resource) -> Resource:
    gated = sch_gated_resources(job)
    if gated.is_empty():
        return res
    out = res.clone()
    out.cpu = max(out.cpu - gated.cpu, 0)
    out.memory = max(out.memory - gated.memory, 0)
    for name, v in res.scalars.items():
        if name in gated.scalars:
            out.scalars[name] = max(v - gated.scalars[name], 0)
    return out


def elastic_resources(job: JobInfo) -> Resource:
    return exceeded_part(job.allocated, job.min_resources or Resource())


def allocated_task_num(job: JobInfo) -> int:
    return sum(job.count(s) for s in ALLOCATED_STATUSES)


def resource_max(l: Resource, r: Resource) -> Resource:
    """helpers.Max: per-dimension max, dropping negative scalars (the infinity marker)."""
    out = Resource(max(l.cpu, r.cpu), max(l.memory, r.memory))
    for n, v in l.scalars.items():
        if v >= 0:
            out.scalars[n] = v
    for n, v in r.scalars.items():
        if v >= 0:
            out.scalars[n] = max(v, out.scalars.get(n, 0))
    return out


def deep_equal(l: Resource, r: Resource) -> bool:
    """equality.Semantic.DeepEqual on two Resources (exact, scalar keys included)."""
    return l.cpu == r.cpu and l.memory == r.memory and l.scalars == r.scalars


def format_resource_names(head: str, verb: str, names: list[str]) -> str:
    """util.FormatResourceNames: '<head>: <verb> <name>, <verb> <name>'."""
    if not names:
        return head
    return f"{head}: " + ", ".join(f"{verb} {n}" for n in names)
