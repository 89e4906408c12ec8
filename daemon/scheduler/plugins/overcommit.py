"""The overcommit plugin: admit jobs while inqueue minResources fit the over-committed idle cluster."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_float
from fumarole.daemon.scheduler.framework.kept_sum import KeptSum, exact
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import PHASE_INQUEUE, PHASE_RUNNING, JobInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.plugins.util import (
    allocated_task_num,
    deduct_sch_gated,
    format_resource_names,
    inqueue_resource,
)

NAME = "overcommit"
FACTOR_KEY = "overcommit-factor"
DEFAULT_FACTOR = 1.2


class OvercommitPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.factor = DEFAULT_FACTOR
        self.idle = Resource()
        self.inqueue = Resource()

    def on_session_open(self, ssn: Session) -> None:
        self.factor = arg_float(self.arguments, FACTOR_KEY, DEFAULT_FACTOR)
        if self.factor < 1.0:
            ssn.warnings.append(
                f"overcommit: {FACTOR_KEY} {self.factor} is below 1.0; using the default {DEFAULT_FACTOR}"
            )
            self.factor = DEFAULT_FACTOR
        used = Resource()
        for node in ssn.node_list:
            used.add(node.used)
        self.idle = ssn.total_resource.clone().multi(self.factor).sub(used)
        inqueue = _kept_inqueue(ssn)
        if inqueue is None:
            inqueue = Resource()
            for job in ssn.jobs.values():  # in uid order (Session.__init__ fills it sorted)
                part = _inqueue_part(job)
                if part is not None:
                    inqueue.add(part)
        self.inqueue = inqueue

        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return cb.PERMIT
            total = self.inqueue.clone().add(job.min_resources)
            ok, names = total.less_equal_with_dimension(self.idle, job.min_resources)
            if ok:
                return cb.PERMIT
            ssn.enqueue_rejections[job.uid] = (
                f"overcommit: {format_resource_names('resource in cluster is overused', 'overused', names)}"
            )
            return cb.REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None:
                return
            self.inqueue.add(deduct_sch_gated(job, job.min_resources))

        ssn.register(cb.JOB_ENQUEUEABLE, NAME, enqueueable)
        ssn.register(cb.JOB_ENQUEUED, NAME, enqueued)

    def on_session_close(self, ssn: Session) -> None:
        return None


def _inqueue_part(job: JobInfo) -> Resource | None:
    """What an admitted job with minResources reserves (None: nothing): its minResources while
    Inqueue, what of them its allocated tasks do not cover while Running with enough of them
    (less the scheduling-gated pending tasks' requests)."""
    if job.min_resources is None:
        return None
    if job.status.phase == PHASE_INQUEUE:
        return deduct_sch_gated(job, job.min_resources)
    if job.status.phase == PHASE_RUNNING and allocated_task_num(job) >= job.min_available:
        return deduct_sch_gated(job, inqueue_resource(job, job.allocated))
    return None


def _kept_inqueue(ssn: Session) -> Resource | None:
    """The jobs' inqueue sum from the one kept across sessions (framework/kept_sum.py), re-deriving
    the parts of changed jobs only; None without a store or when it must be summed cold (the store
    is then dropped)."""
    kept = ssn.kept_state(NAME, KeptSum)
    if kept is None:
        return None
    origins = ssn.snapshot_jobs
    for uid, job in ssn.jobs.items():
        origin = origins.get(uid)
        phase = job.status.phase
        if origin is not None and kept.holds(uid, origin, phase):
            continue
        part = _inqueue_part(job)
        if origin is None or (part is not None and not exact(part)):
            ssn.forget_kept(NAME)
            return None
        kept.put(uid, origin, phase, part)
    kept.keep_only(ssn.jobs)
    if not kept.usable():
        ssn.forget_kept(NAME)
        return None
    return kept.total.clone()


def new(arguments: dict[str, Any]) -> OvercommitPlugin:
    return OvercommitPlugin(arguments)
