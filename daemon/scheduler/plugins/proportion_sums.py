"""proportion's per-queue sums at session open, kept from one session to the next.

At open proportion adds up, per queue, four figures over every job of the cluster: allocated (the
job's allocated-status requests), request (allocated plus the pending tasks' requests), inqueue
(what an admitted job with minResources reserves) and elastic.  A cluster of thousands of jobs,
almost none of which changed since the session before, paid four vector additions per job at
every cycle.

`KeptSums` (kept in `Session.kept_jobs` under proportion's name; only the daemon's session loop
keeps one) holds each job's contribution (`JobShare`, derived from the snapshot's JobInfo object
and its phase) and the per-queue totals.  An open re-derives the contribution of a job only when
the snapshot holds another JobInfo object for it (the freeze builds a new one for a changed job
and shares unchanged ones) or its phase differs, subtracts the old contribution and adds the
new, and subtracts the jobs that left.

Exactly the cold sums, or not used (the rules of framework/kept_sum.py, per sum):

* Every contribution must be non-negative integer-valued on every dimension and every total
  below 2**53: then additions and subtractions are exact, so the totals do not depend on the order
  of the operations.  Every request a manifest gives is such an integer (cpu and scalars in
  milli-units, memory in bytes, rounded up at decode).  A job whose figures are not (a test's
  fractional request) makes the open sum task by task, as a cold open does, and drops the kept
  sums.
* A cold sum holds a scalar name (even at 0) when some job's figure holds it: each total counts,
  per scalar name, the contributions that hold it and drops the name when none is left.
* A cold sum lists its scalar names in the order the jobs (in uid order) brought them; kept sums
  may list them in another order, so they are used only while every total has at most one
  scalar name (otherwise the open sums cold).

tests/scheduler/framework/test_job_derived_cold_warm.py runs warm and cold sessions through
random clusters and changes (jobs added, changed, removed; fractional and scalar requests) and
compares every queue figure exactly, scalar names included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fumarole.daemon.scheduler.framework.kept_sum import add_counted, below_limit, exact
from fumarole.daemon.scheduler.model.job import PHASE_INQUEUE, PHASE_RUNNING, JobInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.util import (
    allocated_task_num,
    deduct_sch_gated,
    elastic_resources,
    inqueue_resource,
)

__all__ = [
    "JobFigures",
    "JobShare",
    "KeptSums",
    "QueueSums",
    "add_requests",
    "add_twice",
    "job_figures",
    "kept_queue_sums",
]


@dataclass(slots=True, frozen=True)
class JobFigures:
    """What proportion's open adds for one job besides its allocated sum.

    `pending_sum`: the pending tasks' requests summed (None when not asked, or when some request
    is not a non-negative integer: then they are added task by task); `inqueue`: what the job
    reserves in its queue (None: nothing added); `elastic`: elastic_resources (None: the
    cpu/memory shortcut for a job without minResources and scalars).
    """

    phase: str
    pending_sum: Resource | None
    inqueue: Resource | None
    elastic: Resource | None


def job_figures(job: JobInfo, allocated: Resource, *, sum_pending: bool) -> JobFigures:
    """A job's `JobFigures`, as proportion's open derives them (`pending_sum` only if asked)."""
    pending = job.peek_in(TaskStatus.PENDING)
    pending_sum: Resource | None = None
    if sum_pending and exact(allocated) and all(exact(t.resreq) for t in pending.values()):
        pending_sum = Resource()
        add_requests(pending_sum, pending.values())
        if not below_limit(pending_sum):
            pending_sum = None
    inqueue: Resource | None = None
    elastic: Resource | None = None
    if job.min_resources is not None:
        phase = job.status.phase
        if phase == PHASE_INQUEUE or (
            phase == PHASE_RUNNING and allocated_task_num(job) >= job.min_available
        ):
            inqueue = deduct_sch_gated(job, inqueue_resource(job, allocated))
        elastic = elastic_resources(job)
    elif allocated.scalars:
        elastic = elastic_resources(job)
    return JobFigures(job.status.phase, pending_sum, inqueue, elastic)


def add_twice(a: Resource, b: Resource, r: Resource) -> None:
    """`a.add(r)` then `b.add(r)` (the same additions, in one call)."""
    cpu, memory, scalars = r.cpu, r.memory, r.scalars
    a.cpu += cpu
    a.memory += memory
    b.cpu += cpu
    b.memory += memory
    if scalars:
        sa, sb = a.scalars, b.scalars
        for n, v in scalars.items():
            sa[n] = sa.get(n, 0) + v
        for n, v in scalars.items():
            sb[n] = sb.get(n, 0) + v


def add_requests(total: Resource, tasks: Iterable[TaskInfo]) -> None:
    """`total.add(t.resreq)` for each task in turn (the same additions, without a call each)."""
    cpu, memory, scalars = total.cpu, total.memory, total.scalars
    for t in tasks:
        r = t.resreq
        cpu += r.cpu
        memory += r.memory
        if r.scalars:
            for n, v in r.scalars.items():
                scalars[n] = scalars.get(n, 0) + v
    total.cpu, total.memory = cpu, memory


@dataclass(slots=True, frozen=True)
class JobShare:
    """One job's contribution to its queue's sums, derived from `origin` (the snapshot's JobInfo)
    in `phase`: allocated, pending requests, inqueue (None: none) and elastic (the shortcut's
    positive cpu/memory part when the job has no elastic figure)."""

    origin: JobInfo
    phase: str
    queue: str
    allocated: Resource
    pending: Resource
    inqueue: Resource | None
    elastic: Resource


def job_share(job: JobInfo, origin: JobInfo) -> JobShare | None:
    """`job`'s contribution, or None when some figure is not exact (then the open sums cold)."""
    allocated = job.allocated
    figures = job_figures(job, allocated, sum_pending=True)
    if figures.pending_sum is None:
        return None
    if figures.inqueue is not None and not exact(figures.inqueue):
        return None
    elastic = figures.elastic
    if elastic is None:
        elastic = Resource(cpu=allocated.cpu if allocated.cpu > 0 else 0.0)
        elastic.memory = allocated.memory if allocated.memory > 0 else 0.0
    elif not exact(elastic):
        return None
    # The job's allocated sum is copied (what was added is what a later open subtracts, whatever
    # becomes of the job's own); the other figures are new objects already.
    pending = figures.pending_sum
    return JobShare(origin, figures.phase, job.queue, allocated.clone(), pending, figures.inqueue, elastic)


@dataclass(slots=True)
class QueueSums:
    """One queue's four sums, and per sum the number of figures holding each scalar name."""

    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    names: tuple[dict[str, int], ...] = field(default_factory=lambda: ({}, {}, {}, {}))
    jobs: int = 0

    def change(self, share: JobShare, sign: int) -> None:
        alloc_names, request_names, inqueue_names, elastic_names = self.names
        add_counted(self.allocated, alloc_names, share.allocated, sign)
        add_counted(self.request, request_names, share.allocated, sign)
        if share.pending.cpu or share.pending.memory or share.pending.scalars:
            add_counted(self.request, request_names, share.pending, sign)
        if share.inqueue is not None:
            add_counted(self.inqueue, inqueue_names, share.inqueue, sign)
        add_counted(self.elastic, elastic_names, share.elastic, sign)
        self.jobs += sign

    def usable(self) -> bool:
        """Exact (below 2**53) and at most one scalar name per sum (see the module notes)."""
        return all(len(n) <= 1 for n in self.names) and all(
            below_limit(r) for r in (self.allocated, self.request, self.inqueue, self.elastic)
        )


@dataclass(slots=True)
class KeptSums:
    """Per job its `JobShare`, per queue its `QueueSums`, as of the last open."""

    jobs: dict[str, JobShare] = field(default_factory=dict)
    queues: dict[str, QueueSums] = field(default_factory=dict)


def kept_queue_sums(
    jobs: Mapping[str, JobInfo], snapshot_jobs: Mapping[str, JobInfo], kept: KeptSums
) -> dict[str, QueueSums] | None:
    """Bring `kept` up to date with the session's `jobs` (in uid order) and answer the sums of
    every queue that has jobs, in the order a cold open meets them; None when they cannot be
    used (a figure not exact, or a sum with several scalar names): `kept` must then be dropped."""
    shares = kept.jobs
    queues = kept.queues
    order: dict[str, None] = {}
    get_origin = snapshot_jobs.get
    for uid, job in jobs.items():
        queue = job.queue
        if queue not in order:
            order[queue] = None
        origin = get_origin(uid)
        old = shares.get(uid)
        if old is not None and old.origin is origin and old.phase == job.status.phase and old.queue == queue:
            continue
        if origin is None:
            return None
        share = job_share(job, origin)
        if share is None:
            return None
        if old is not None:
            queues[old.queue].change(old, -1)
        sums = queues.get(queue)
        if sums is None:
            sums = queues[queue] = QueueSums()
        sums.change(share, 1)
        shares[uid] = share
    if len(shares) != len(jobs):
        for uid in sorted(shares.keys() - jobs.keys()):
            old = shares.pop(uid)
            queues[old.queue].change(old, -1)
    for name in [n for n, s in queues.items() if not s.jobs]:
        del queues[name]
    out = {name: queues[name] for name in order}
    if not all(s.usable() for s in out.values()):
        return None
    return out
