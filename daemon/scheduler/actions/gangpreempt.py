"""The gangpreempt action (actions/gangpreempt): gang-aware preemption inside a queue, job by job.

Queues (every queue of a valid, non-Pending job) are served in QueueOrderFn order; the starving
jobs of a queue, in JobOrderFn order, each get one Statement.  For a preemptor job the action
collects the Pending tasks it still needs (non-gated, with a request; TaskOrderFn), their total
request, and the candidate victims of the domain: Bound/Running preemptable tasks of *other*
jobs of the same queue with strictly lower job priority whose PodGroup allows gang eviction.
Victims are grouped per job into bundles — "safe" tasks, whose eviction keeps their job at or
above minAvailable (and its roles at their minTaskMember), and the "whole" rest, which breaks
the gang — sorted safe first, then the job that would be scheduled last, then usefulness for the
request.  UnifiedEvictable (plugins' gang-eviction votes) filters them; a whole bundle survives
only if every task is allowed.  Bundles are then added one by one; as soon as the domain's
idle + releasing resources plus the selected victims cover the request, a dry run evicts them
and pipelines the pending tasks; if the job is then JobPipelined the plan is replayed into the
Statement, which is committed (evictions go out) — otherwise the next bundle is added.  A job
that does not become pipelined has its Statement discarded.

HyperNode domains are not used: the only domain is the whole cluster (Volcano's fallback for jobs
without hard network topology; for a hard one Volcano searches its eviction gradients), so
`maxDomains` has no effect beyond validation.  Arguments:
`maxDomains` (8; values <= 0 fall back to 8), `allowWholeBundle` (true); the dry run honours
allocate's `predicateErrorCacheEnable` (true).
"""

from __future__ import annotations

from fumarole.daemon.scheduler.actions.gang_eviction import BundleSort, GangEviction
from fumarole.daemon.scheduler.actions.victims import (
    Bundle,
    eviction_reason,
    gang_candidate_status,
    is_job_preemptable_for_gang_eviction,
    sort_bundles_for_preempt,
)
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskInfo

NAME = "gangpreempt"

__all__ = ["NAME", "GangPreempt", "new"]


class GangPreempt(GangEviction):
    name = NAME
    kind = cb.EVICTION_KIND_GANG_PREEMPT

    def candidate(self, ssn: Session, t: TaskInfo, job: JobInfo) -> bool:
        """Bound/Running tasks of another, lower-priority job of the preemptor's queue whose
        PodGroup allows gang eviction."""
        if not gang_candidate_status(t) or t.job == job.uid:
            return False
        vjob = ssn.jobs[t.job]
        return (
            vjob.queue == job.queue
            and is_job_preemptable_for_gang_eviction(vjob)
            and job.priority > vjob.priority
        )

    def bundle_sort(self, ssn: Session, job: JobInfo, need: Resource) -> BundleSort:
        def victim_job_less(l: JobInfo, r: JobInfo) -> bool:
            return not ssn.job_order_fn(l, r)

        def sort(bundles: list[Bundle]) -> None:
            sort_bundles_for_preempt(bundles, need, victim_job_less)

        return sort

    def reason(self, queue: QueueInfo, job: JobInfo, deciders: tuple[str, ...]) -> str:
        return eviction_reason("preempted", "", job, deciders)

    # Volcano's name for the per-job step.
    preempt_job = GangEviction.evict_for_job


def new() -> GangPreempt:
    return GangPreempt()
