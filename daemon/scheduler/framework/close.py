"""Session close: PodGroup phase and counts (session.go jobStatus) and queue allocated totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fumarole.daemon.scheduler.model.job import (
    PHASE_COMPLETED,
    PHASE_INQUEUE,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_UNKNOWN,
    JobInfo,
)
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskStatus

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import Session

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
    """Write phase and counts; return the uids of PodGroups whose status changed this session.

    The phase is `pod_group_phase` with the status counts read once from the job's index (every
    job of the cluster passes here at each close).
    """
    changed = []
    sid = ssn.uid
    # The snapshot's jobs: the session never writes to them, so their status is the old one.
    old = ssn.snapshot_jobs
    jobs = ssn.jobs
    running_s, succeeded_s, failed_s = TaskStatus.RUNNING, TaskStatus.SUCCEEDED, TaskStatus.FAILED
    bound_s, releasing_s = TaskStatus.BOUND, TaskStatus.RELEASING
    for uid, job in jobs.items():  # in uid order (Session.__init__ fills it sorted)
        index = job.peek_index()
        status = job.status
        got = index.get(running_s)
        running = len(got) if got else 0
        got = index.get(succeeded_s)
        succeeded = len(got) if got else 0
        got = index.get(failed_s)
        failed = len(got) if got else 0
        completed = succeeded + failed
        got = index.get(bound_s)
        scheduled = running + completed + (len(got) if got else 0)
        releasing = index.get(releasing_s)
        if releasing:
            scheduled += sum(1 for t in releasing.values() if t.node_name)
        unschedulable_now = False
        if running:
            for c in status.conditions:
                if c.transition_id == sid and c.type == UNSCHEDULABLE and c.status == "True":
                    unschedulable_now = True
                    break
        if unschedulable_now:
            phase = PHASE_UNKNOWN
        elif scheduled >= job.min_available:
            phase = PHASE_COMPLETED if scheduled == completed else PHASE_RUNNING
        elif status.phase != PHASE_INQUEUE:
            phase = PHASE_PENDING
        else:
            phase = status.phase
        status.phase = phase
        status.running = running
        status.failed = failed
        status.succeeded = succeeded
        if not status.same_as(old[uid].status):
            changed.append(uid)
    return changed


def update_queue_allocated(ssn: Session) -> None:
    """Each queue's allocated total: the sum of its jobs' allocated-status requests, rolled up.

    This is the figure Volcano's session close writes to each Queue's `status.allocated`
    (framework/session.go updateQueueStatus): the requests of the tasks whose status is
    Allocated, Binding, Bound or Running (api/helpers.go AllocatedStatus) — a Pipelined task is
    not counted, unlike in proportion's own `allocated` — for every queue of the session (a
    queue without jobs gets a zero total), each task also added to every ancestor up to `root`
    when the session has a `root` queue.  Volcano's walk adds a task of a job in `root` itself
    to `root` twice (once as its queue, once as the parent of a queue without a parent); so do
    we.  A parent missing from the session ends the walk (Volcano would dereference nil).

    JobInfo keeps that sum per job (`JobInfo.allocated`, kept as tasks are added, moved and
    removed), so the queue total adds one vector per job instead of one per task; integer vectors
    give the same sum in any order (a scalar a removed task brought may stay as an explicit 0,
    which `Resource` equality treats as absent, as Volcano does).
    """
    totals: dict[str, Resource] = {name: Resource() for name in ssn.queues}
    for job in ssn.jobs.values():
        acc = totals.get(job.queue)
        if acc is None:
            acc = totals[job.queue] = Resource()
        acc.add(job.allocated)
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
        if "root" in totals:  # a job in `root` itself: its own queue, then the default parent
            rolled["root"].add(totals["root"])
        totals = rolled
    for name, q in ssn.queues.items():
        q.allocated = totals.get(name, Resource())
