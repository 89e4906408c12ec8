"""Folding a session's decisions into its snapshot, as a cluster would answer them.

A bound pod becomes Running on its node (with the annotations the binder writes, such as
deviceshare's card choice), an evicted pod is removed from its node and job, and each PodGroup
takes the status the session wrote.  Used between the sessions of a dry run (`fumarole
schedule --cycles`) and by the study's core engine.  The snapshot is changed in place: whoever
hands it to later sessions with a `NodeDerived` cache must replace changed nodes instead
(daemon/scheduler/model/node_derived.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from fumarole.daemon.scheduler.framework.run import SessionResult
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

__all__ = ["apply_podgroups", "apply_result", "run_bound"]


def _task_index(snapshot: ClusterSnapshot) -> dict[str, tuple[str, TaskInfo]]:
    idx: dict[str, tuple[str, TaskInfo]] = {}
    for uid, job in snapshot.jobs.items():
        for t in job.tasks.values():
            idx[t.key] = (uid, t)
    return idx


def apply_result(snapshot: ClusterSnapshot, result: SessionResult) -> None:
    """Fold one session's decisions into the snapshot, as the cluster would answer them."""
    idx = _task_index(snapshot)
    nodes = {n.name: n for n in snapshot.nodes}
    for key in result.bind_order:
        node_name = result.binds.get(key)
        if node_name is None or key not in idx:
            continue
        job_uid, task = idx[key]
        node = nodes.get(node_name)
        if node is None:
            continue
        run_bound(snapshot.jobs[job_uid], task, node, result.bind_annotations.get(key, {}))
    for ev in result.evictions:
        if ev.task not in idx:
            continue
        job_uid, task = idx[ev.task]
        job = snapshot.jobs[job_uid]
        evicted_node = nodes.get(task.node_name)
        if evicted_node is not None and task.uid in evicted_node.tasks:
            evicted_node.remove_task(task)
        job.delete_task(task)
    apply_podgroups(snapshot, result)


def run_bound(job: JobInfo, task: TaskInfo, node: NodeInfo, annotations: Mapping[str, str]) -> None:
    """A bound pod as the cluster answers it: Running on its node, with the annotations the binder
    wrote on the pod (deviceshare's card choice), which later sessions see."""
    job.update_task_status(task, TaskStatus.RUNNING)
    task.node_name = node.name
    task.last_tx = None
    task.bind_annotations = dict(annotations)
    if task.uid in node.tasks:
        node.update_task(task)
    else:
        node.add_task(task)


def apply_podgroups(snapshot: ClusterSnapshot, result: SessionResult) -> None:
    """Each PodGroup takes the status the session wrote."""
    for uid, pg in result.podgroups.items():
        job = snapshot.jobs.get(uid)
        if job is None:
            continue
        job.status.phase = pg.phase
        job.status.conditions = list(pg.conditions)
        job.status.running = pg.running
        job.status.succeeded = pg.succeeded
        job.status.failed = pg.failed
