"""Session close: PodGroup phase and counts (session.go jobStatus) and queue allocated totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from daemon.scheduler.model.job import (
    PHASE_COMPLETED,
    PHASE_INQUEUE,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_UNKNOWN,
    JobInfo,
)
from daemon.scheduler.model.resources import Resource
from daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskStatus

if TYPE_CHECKING:
    from daemon.scheduler.framework.session import Session

UNSCHEDULABLE = "Unschedulable"


def pod_group_phase(ssn: Session, job: JobInfo) -> str:
    unschedulable = any(
        c.type == UNSCHEDULABLE and c.status == "True" and c.transition_id == ssn.uid
        for c in job.status.conditions
    )
    if job.count(TaskStatus.RUNNING) and unschedulable:
        return PHASE_UNKNOWN
    scheduled = job.scheduled_task_num() + job.releasing_scheduled_task_num()
    completed = job.count(TaskStatus.SUCCEEDED) + job.count(TaskStatus.FAILED)
    if scheduled >= job.min_available:
        return PHASE_COMPLETED if scheduled == completed else PHASE_RUNNING
    if job.status.phase != PHASE_INQUEUE:
        return PHASE_PENDING
    return job.status.phase


def update_job_statuses(ssn: Session) -> list[str]:
    """Write phase and counts; return the uids of PodGroups whose status changed this session."""
    changed = []
    for uid in sorted(ssn.jobs):
        job = ssn.jobs[uid]
        job.status.phase = pod_group_phase(ssn, job)
        job.status.running = job.count(TaskStatus.RUNNING)
        job.status.failed = job.count(TaskStatus.FAILED)
        job.status.succeeded = job.count(TaskStatus.SUCCEEDED)
        if job.status.comparable() != ssn.pod_group_old.get(uid):
            changed.append(uid)
    return changed


def update_queue_allocated(ssn: Session) -> None:
    totals: dict[str, Resource] = {name: Resource() for name in ssn.queues}
    for job in ssn.jobs.values():
        acc = totals.setdefault(job.queue, Resource())
        for st in ALLOCATED_STATUSES:
            for t in job.index.get(st, {}).values():
                acc.add(t.resreq)
    if "root" in ssn.queues:
        # Roll usage up to every ancestor; a queue without a parent hangs under `root`.
        rolled = {name: r.clone() for name, r in totals.items()}
        for name in sorted(totals):
            q = ssn.queues.get(name)
            seen = {name}
            while q is not None and q.name != "root":
                parent = q.parent or "root"
                if parent in seen or parent not in ssn.queues:
                    break
                rolled.setdefault(parent, Resource()).add(totals[name])
                seen.add(parent)
                q = ssn.queues.get(parent)
        totals = rolled
    for name, q in ssn.queues.items():
        q.allocated = totals.get(name, Resource())
