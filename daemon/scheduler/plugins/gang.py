"""The gang plugin: minMember validity, readiness, pipelining, starving, victims and conditions."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.plugin import ValidateResult
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import Condition, JobInfo
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskInfo, TaskStatus

NAME = "gang"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
READY_REASON = "tasks in gang are ready to be scheduled"


def job_valid(job: JobInfo) -> ValidateResult | None:
    if not job.check_task_valid():
        return ValidateResult(
            False, NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling"
        )
    vtn = job.valid_task_num()
    if vtn < job.min_available:
        return ValidateResult(
            False,
            NOT_ENOUGH_TASKS,
            f"Not enough valid tasks for gang-scheduling, valid: {vtn}, min: {job.min_available}",
        )
    return None


def schedulable_task_num(job: JobInfo) -> int:
    """Ready tasks plus Pending tasks whose last (discarded) transaction was an allocation."""
    num = 0
    for t in job.peek_in(TaskStatus.PENDING).values():
        status = t.last_tx[0] if t.last_tx is not None else t.status
        if status in ALLOCATED_STATUSES:
            num += 1
    return num + job.ready_task_num()


def should_skip_unschedulable_for_releasing(job: JobInfo) -> bool:
    releasing = job.releasing_scheduled_task_num()
    if releasing == 0:
        return False
    if job.count(TaskStatus.PENDING) or job.count(TaskStatus.PIPELINED):
        return False
    return job.scheduled_task_num() + releasing >= job.min_available


def set_condition(job: JobInfo, cond: Condition) -> None:
    """Replace the condition of the same type, or append (session.UpdatePodGroupCondition)."""
    for i, c in enumerate(job.status.conditions):
        if c.type == cond.type:
            job.status.conditions[i] = cond
            return
    job.status.conditions.append(cond)


class GangPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        def victims(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            occupied: dict[str, int] = {}
            out = []
            for p in preemptees:
                job = ssn.jobs.get(p.job)
                if job is None:
                    continue
                if job.uid not in occupied:
                    occupied[job.uid] = job.ready_task_num()
                if occupied[job.uid] > job.min_available:
                    occupied[job.uid] -= 1
                    out.append(p)
            return out, cb.PERMIT

        def unified(ctx: cb.EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            # Gang-aware actions keep minMember through their safe/whole bundles: permit all.
            return list(candidates), cb.PERMIT

        def job_order(l: JobInfo, r: JobInfo) -> int:
            lr, rr = l.is_ready(), r.is_ready()
            if lr and rr:
                return 0
            if lr:
                return 1
            if rr:
                return -1
            return 0

        def job_ready(job: JobInfo) -> bool:
            return job.check_task_ready() and job.is_ready()

        def job_pipelined(job: JobInfo) -> int:
            return cb.PERMIT if job.check_task_pipelined() and job.is_pipelined() else cb.REJECT

        def job_starving(job: JobInfo) -> bool:
            return job.is_starving()

        ssn.register(cb.JOB_VALID, NAME, job_valid)
        ssn.register(cb.RECLAIMABLE, NAME, victims)
        ssn.register(cb.PREEMPTABLE, NAME, victims)
        ssn.register(cb.UNIFIED_EVICTABLE, NAME, unified)
        ssn.register(cb.JOB_ORDER, NAME, job_order)
        ssn.register(cb.JOB_READY, NAME, job_ready)
        ssn.register(cb.JOB_PIPELINED, NAME, job_pipelined)
        ssn.register(cb.JOB_STARVING, NAME, job_starving)

    def on_session_close(self, ssn: Session) -> None:
        # Every ready job gets the same condition: one object for them all (conditions are never
        # changed in place, PodGroupStatus.shared_copy).
        scheduled = Condition(SCHEDULED, "True", READY_REASON, "", ssn.uid)
        for job in ssn.jobs.values():  # in uid order (Session.__init__ fills it sorted)
            if not job.task_num():
                continue
            if not job.is_ready():
                if should_skip_unschedulable_for_releasing(job):
                    continue
                unready = job.min_available - schedulable_task_num(job)
                msg = f"{unready}/{job.task_num()} tasks in gang unschedulable: {job.fit_error()}"
                set_condition(job, Condition(UNSCHEDULABLE, "True", NOT_ENOUGH_RESOURCES, msg, ssn.uid))
            else:
                set_condition(job, scheduled)


def new(arguments: dict[str, Any]) -> GangPlugin:
    return GangPlugin(arguments)
