"""Why a pod is still not bound after a session, in words a user understands.

Built from what the session recorded: enqueue rejections, JobValid failures, the gang count,
the task's fit errors (Volcano's histogram, e.g. "0/12 nodes are unavailable: 9 Insufficient
cpu, 3 node(s) didn't match Pod's node affinity/selector.") and its last discarded placement.
A job with a hard network topology that no HyperNode could hold says so first, naming the tiers
tried (with their tierName) and, for a task that failed in the last HyperNode tried, Volcano's
fit error for it ("In hyperNode <name>: ...").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fumarole.daemon.scheduler.model.job import PHASE_INQUEUE, PHASE_PENDING, JobInfo
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import Session

UNBOUND = (TaskStatus.PENDING, TaskStatus.PIPELINED, TaskStatus.ALLOCATED)


def gang_summary(job: JobInfo) -> str:
    schedulable = job.ready_task_num()
    for t in job.peek_in(TaskStatus.PENDING).values():
        if t.last_tx is not None and t.last_tx[0] in ALLOCATED_STATUSES:
            schedulable += 1
    return f"gang: {schedulable}/{job.task_num()} tasks schedulable (minMember {job.min_available})"


def task_reason(ssn: Session, job: JobInfo, task: TaskInfo) -> str:
    if job.status.phase in ("", PHASE_PENDING) and "enqueue" in ssn.configured_actions:
        why = ssn.enqueue_rejections.get(job.uid)
        if why:
            return f"job {job.uid} not admitted (Pending): {why}"
        return f"job {job.uid} is Pending: not admitted by enqueue in this cycle"
    vr = ssn.job_valid(job)
    if vr is not None:
        return f"job {job.uid} is not valid: {vr.message}"
    queue = ssn.queues.get(job.queue)
    if queue is None:
        return f"queue {job.queue} does not exist"
    if task.status is TaskStatus.PIPELINED:
        return f"pipelined on {task.node_name}: waits for resources being released there; {gang_summary(job)}"
    if task.status is TaskStatus.ALLOCATED:
        return f"can be placed on {task.node_name} once minAvailable is satisfied; {gang_summary(job)}"
    topo = ssn.topology_reasons.get(job.uid)
    if topo is not None and task.status is TaskStatus.PENDING:
        # Before the trial placements (last_tx): they were in HyperNodes that could not hold the
        # gang.  The task's own fit error, when it has one, is Volcano's text for the last
        # HyperNode tried ("In hyperNode s1: 0/2 nodes are unavailable: ...").
        fe = job.nodes_fit_errors.get(task.uid)
        return f"{gang_summary(job)}; {topo}" + (f"; {fe.message()}" if fe is not None else "")
    if task.last_tx is not None:
        status, node = task.last_tx
        if status is TaskStatus.ALLOCATED:
            return f"could be placed on {node} but the gang is incomplete; {gang_summary(job)}"
        if status is TaskStatus.PIPELINED:
            return f"could wait for {node} but the gang is incomplete; {gang_summary(job)}"
    skipped = ssn.skip_reasons.get(task.uid)
    if skipped is not None:
        return f"{gang_summary(job)}; {skipped}"
    fe = job.nodes_fit_errors.get(task.uid)
    if fe is not None:
        return f"{gang_summary(job)}; {fe.message()}"
    if task.best_effort and "backfill" not in ssn.configured_actions:
        return "best-effort pod (no requests): only the backfill action places it, and it is not configured"
    if not queue.is_open():
        return f"queue {queue.name} is {queue.state or 'not open'}"
    if ssn.overused(queue):
        return f"queue {queue.name} is overused (allocated has reached deserved)"
    if not ssn.allocatable_fn(queue, task):
        return f"queue {queue.name} has no room within its deserved share for this pod's request"
    if job.nodes_fit_errors:
        return f"{gang_summary(job)}; another task of the job did not fit, so the job's turn stopped"
    if job.status.phase == PHASE_INQUEUE and task.status is TaskStatus.PENDING:
        return f"{gang_summary(job)}; not reached in this cycle"
    return "not reached in this cycle"


def pending_reasons(ssn: Session) -> dict[str, str]:
    out: dict[str, str] = {}
    for job in ssn.jobs.values():  # in uid order (Session.__init__ fills it sorted)
        index = job.peek_index()  # a bucket is never left empty (JobInfo._index_del)
        if not (
            index.get(TaskStatus.PENDING)
            or index.get(TaskStatus.PIPELINED)
            or index.get(TaskStatus.ALLOCATED)
        ):
            continue
        # Filtered before sorting (same order: the sort is stable and keys are unique in a job).
        # Read-only: a job the session never touched hands out the snapshot's tasks (equal values).
        unbound = (t for t in job.peek_tasks().values() if t.status in UNBOUND)
        for t in sorted(unbound, key=lambda t: t.key):
            out[t.key] = task_reason(ssn, job, t)
    return out
