"""The gangreclaim action (actions/gangreclaim): gang-aware reclaim across queues, job by job.

Queues of valid, non-Pending jobs are served in QueueOrderFn order; an Overused queue is
skipped.  Each starving job of a queue (JobOrderFn order) gets one Statement.  The job's pending
tasks (non-gated, with a request, TaskOrderFn order) must together pass the queue's Preemptive
check; their summed request is the need.  Candidate victims are the Running, preemptable tasks
of jobs in *other* queues that are reclaimable and whose PodGroup allows gang eviction.  They are
grouped per job into bundles — "safe" tasks, whose eviction keeps their job gang-ready, and the
"whole" rest, which breaks it — sorted safe first, then by victim-queue order (the queue that
would be served last loses first), then by usefulness for the need.  UnifiedEvictable (kind
GangReclaim) filters them; a whole bundle survives only if every task is allowed, and whole
bundles are dropped when `allowWholeBundle` is false.  Bundles are then added one by one; once
the domain's idle + releasing resources plus all selected victims cover the need, a dry run
evicts them and pipelines the pending tasks; if the job is then JobPipelined the plan is
replayed into the Statement, else the next bundle is added.  The Statement is committed if the
job is JobPipelined, otherwise discarded.

Arguments: `maxDomains` (int, 8; values <= 0 fall back to 8 with a warning), `allowWholeBundle`
(bool, true); the dry run honours *allocate's* `predicateErrorCacheEnable` (true).

Volcano quirks kept: whole bundles are evicted as units (all of a bundle's tasks go, even when
fewer would do), at least the first bundle is selected before the need is checked; the domain's
room is Idle + Releasing (pipelined resources are not subtracted); only *Running* tasks are
victims.  HyperNode domains are not used: the only domain is the whole cluster (Volcano's
fallback for jobs without hard network topology; for a hard one Volcano searches its eviction
gradients), so `maxDomains` has no effect beyond validation.
"""

from __future__ import annotations

from fumarole.daemon.scheduler.actions.gang_eviction import BundleSort, GangEviction
from fumarole.daemon.scheduler.actions.victims import (
    Bundle,
    is_job_preemptable_for_gang_eviction,
    sort_bundles_for_reclaim,
)
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "gangreclaim"

__all__ = [
    "NAME",
    "GangReclaim",
    "gang_reclaim_reason",
    "new",
    "reclaim_candidate",
]


def gang_reclaim_reason(queue: QueueInfo, job: JobInfo, deciders: tuple[str, ...] | list[str]) -> str:
    """The eviction cause recorded with every victim of this action."""
    reason = f"reclaimed for queue {queue.name} by job {job.uid} (gang)"
    if deciders:
        reason += "; victims chosen by " + ", ".join(deciders)
    return reason


def reclaim_candidate(ssn: Session, t: TaskInfo, reclaimer: JobInfo) -> bool:
    """A task gangreclaim may take: Running and preemptable, of a job in another, reclaimable
    queue whose PodGroup allows gang eviction."""
    if t.status is not TaskStatus.RUNNING or not t.preemptable:
        return False
    vjob = ssn.jobs.get(t.job)
    if vjob is None or vjob.queue == reclaimer.queue:
        return False
    if not is_job_preemptable_for_gang_eviction(vjob):
        return False
    q = ssn.queues.get(vjob.queue)
    return q is not None and q.is_reclaimable()


class GangReclaim(GangEviction):
    name = NAME
    kind = cb.EVICTION_KIND_GANG_RECLAIM

    def skip_queue(self, ssn: Session, queue: QueueInfo) -> bool:
        return ssn.overused(queue)

    def may_evict_for(self, ssn: Session, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo]) -> bool:
        if ssn.preemptive(queue, pending):
            return True
        for t in pending:
            ssn.skip_reasons[t.uid] = (
                f"gangreclaim: queue {queue.name} may not reclaim for the job's pending tasks "
                "(Preemptive): together they do not fit the queue's deserved share"
            )
        return False

    def candidate(self, ssn: Session, t: TaskInfo, job: JobInfo) -> bool:
        return reclaim_candidate(ssn, t, job)

    def bundle_sort(self, ssn: Session, job: JobInfo, need: Resource) -> BundleSort:
        reclaimer_queue = ssn.queues.get(job.queue)

        def queue_less(l: QueueInfo, r: QueueInfo) -> bool:
            if reclaimer_queue is None:
                return ssn.queue_order_fn(l, r)
            return ssn.victim_queue_order_fn(l, r, reclaimer_queue)

        def sort(bundles: list[Bundle]) -> None:
            sort_bundles_for_reclaim(bundles, need, queue_less, ssn.queues)

        return sort

    def reason(self, queue: QueueInfo, job: JobInfo, deciders: tuple[str, ...]) -> str:
        return gang_reclaim_reason(queue, job, deciders)

    # Volcano's name for the per-job step.
    reclaim_job = GangEviction.evict_for_job

    @property
    def enable_predicate_error_cache(self) -> bool:
        return self.enable_error_cache


def new() -> GangReclaim:
    return GangReclaim()
