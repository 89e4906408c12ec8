"""A ClusterSnapshot as plain, ordered data (for equality checks, debugging and diffs)."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo

__all__ = ["describe_snapshot"]


def _res(r: Resource | None) -> Any:
    if r is None:
        return None
    return [r.cpu, r.memory, sorted(r.scalars.items())]


def _task(t: TaskInfo) -> dict[str, Any]:
    p = t.pod
    return {
        "uid": t.uid,
        "key": t.key,
        "job": t.job,
        "status": t.status.label,
        "node": t.node_name,
        "priority": t.priority,
        "role": t.role,
        "preemptable": t.preemptable,
        "creation": t.creation,
        "resreq": _res(t.resreq),
        "best_effort": t.best_effort,
        "sch_gated": t.sch_gated,
        "pod": [
            p.labels,
            p.annotations,
            p.node_selector,
            p.affinity,
            [vars(x) if hasattr(x, "__dict__") else repr(x) for x in p.tolerations],
            [repr(x) for x in p.host_ports],
            p.priority_class_name,
            p.preemption_policy,
            p.scheduler_name,
            p.nominated_node_name,
            list(p.scheduling_gates),
            list(p.images),
            list(p.topology_spread_constraints),
            p.owner_uid,
            p.phase,
            p.deleting,
        ],
    }


def _node(n: NodeInfo) -> dict[str, Any]:
    return {
        "name": n.name,
        "allocatable": _res(n.allocatable),
        "capability": _res(n.capability),
        "idle": _res(n.idle),
        "used": _res(n.used),
        "releasing": _res(n.releasing),
        "pipelined": _res(n.pipelined),
        "facts": repr(n.facts),
        "tasks": [_task(t) for t in n.tasks.values()],
    }


def _job(j: JobInfo) -> dict[str, Any]:
    st = j.status
    return {
        "uid": j.uid,
        "queue": j.queue,
        "min_available": j.min_available,
        "task_min_available": j.task_min_available,
        "priority": j.priority,
        "priority_class_name": j.priority_class_name,
        "min_resources": _res(j.min_resources),
        "creation": j.creation,
        "annotations": j.annotations,
        "preemptable": j.preemptable,
        "has_pod_group": j.has_pod_group,
        "status": {
            "phase": st.phase,
            "conditions": [c.as_dict() | {"id": c.transition_id} for c in st.conditions],
            "counts": [st.running, st.succeeded, st.failed],
        },
        "allocated": _res(j.allocated),
        "total_request": _res(j.total_request),
        "tasks": [_task(t) for t in j.tasks.values()],
    }


def describe_snapshot(s: ClusterSnapshot) -> dict[str, Any]:
    """Every field a session reads, in the snapshot's own order (orders are part of the value)."""
    return {
        "now": s.now,
        "session_id": s.session_id,
        "nodes": [_node(n) for n in s.nodes],
        "jobs": [_job(j) for j in s.jobs.values()],
        "queues": [repr(q) for q in s.queues.values()],
        "namespaces": [repr(n) for n in s.namespaces.values()],
        "priority_classes": [repr(p) for p in s.priority_classes.values()],
        "other_tasks": [_task(t) for t in s.other_tasks],
    }
