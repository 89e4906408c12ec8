"""The priority plugin (plugins/priority): task and job order by priority, priority-based victims."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.task import TaskInfo

NAME = "priority"


class PriorityPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        def task_order(l: TaskInfo, r: TaskInfo) -> int:
            if l.priority == r.priority:
                return 0
            return -1 if l.priority > r.priority else 1

        def job_order(l: JobInfo, r: JobInfo) -> int:
            if l.priority > r.priority:
                return -1
            if l.priority < r.priority:
                return 1
            return 0

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            pjob = ssn.jobs.get(preemptor.job)
            victims = []
            for p in preemptees:
                job = ssn.jobs.get(p.job)
                if job is None or pjob is None:
                    continue
                if job.uid != pjob.uid:
                    if job.priority < pjob.priority:
                        victims.append(p)
                elif p.priority < preemptor.priority:
                    victims.append(p)
            return victims, cb.PERMIT

        def unified_evictable(
            ctx: cb.EvictionContext, candidates: list[TaskInfo]
        ) -> tuple[list[TaskInfo], int]:
            # Gang reclaim is about fairness between queues: priority does not gate it.
            if ctx.kind == cb.EVICTION_KIND_GANG_RECLAIM:
                return list(candidates), cb.PERMIT
            victims = []
            for c in candidates:
                cjob = ssn.jobs.get(c.job)
                if cjob is not None and cjob.priority < ctx.job.priority:
                    victims.append(c)
            return victims, cb.PERMIT

        def job_starving(job: JobInfo) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < job.task_num()

        ssn.register(cb.TASK_ORDER, NAME, task_order)
        ssn.register(cb.JOB_ORDER, NAME, job_order)
        ssn.register(cb.PREEMPTABLE, NAME, preemptable)
        ssn.register(cb.UNIFIED_EVICTABLE, NAME, unified_evictable)
        ssn.register(cb.JOB_STARVING, NAME, job_starving)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> PriorityPlugin:
    return PriorityPlugin(arguments)
