"""The backfill action (actions/backfill/backfill.go): place best-effort tasks (no requests).

Candidates are the BestEffort Pending tasks of valid, non-Pending jobs, plus BestEffort
Pipelined tasks, which are first un-pipelined; ordered by queue, then job, then task.  There is
no resource check (best-effort pods request nothing); plugin predicates decide, the best-scored
node is taken and the task allocated immediately (dispatched once the job is ready).
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework.combinators import ScoringError
from fumarole.daemon.scheduler.framework.conf import arg_bool
from fumarole.daemon.scheduler.framework.placement import (
    ErrorCache,
    SearchOptions,
    best_scored,
    predicate_nodes,
)
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.fit import FitErrors
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "backfill"


class Backfill:
    name = NAME

    def __init__(self, search: SearchOptions | None = None) -> None:
        self.search = search or SearchOptions()

    def execute(self, ssn: Session) -> None:
        args: dict[str, Any] = ssn.conf.action_arguments(NAME)
        use_cache = arg_bool(args, "predicateErrorCacheEnable", True)
        for task in self.pick_up_pending_tasks(ssn):
            job = ssn.jobs[task.job]
            cache = ErrorCache() if use_cache else None
            err = ssn.pre_predicate_fn(task)
            if err is not None:
                fe = FitErrors()
                for node in ssn.node_list:
                    fe.set_node_error(node.name, err)
                job.nodes_fit_errors[task.uid] = fe
                continue
            candidates, fe = predicate_nodes(ssn, task, None, cache, self.search, check_resources=False)
            if candidates.size == 0:
                job.nodes_fit_errors[task.uid] = fe
                continue
            if candidates.size == 1:
                node = ssn.table.nodes[int(candidates[0])]
            else:
                try:
                    node = best_scored(ssn, task, candidates, self.search.tie_seed)
                except ScoringError:
                    # Volcano dereferences the nil node it then has (a panic); the task is skipped.
                    continue
            try:
                ssn.allocate(task, node)
            except Exception as e:  # accounting conflict: recorded as this node's error
                fe = FitErrors()
                fe.set_node_error(node.name, e)
                job.nodes_fit_errors[task.uid] = fe

    @staticmethod
    def pick_up_pending_tasks(ssn: Session) -> list[TaskInfo]:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        jobs: dict[str, PriorityQueue[JobInfo]] = {}
        tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        # Only jobs with a Pending or Pipelined task at open, or pending themselves, can pass the
        # filters below (Session.jobs_with_work, in uid order).
        for job in ssn.jobs_with_work:
            if job.is_pending():
                continue
            if not job.count(TaskStatus.PENDING) and not job.count(TaskStatus.PIPELINED):
                continue  # nothing to backfill (job_valid is pure: skipping it changes nothing)
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            for t in job.tasks_in(TaskStatus.PENDING):
                if not t.best_effort or t.sch_gated:
                    continue
                tasks.setdefault(job.uid, PriorityQueue(ssn.task_order_fn)).push(t)
            for t in job.tasks_in(TaskStatus.PIPELINED):
                if not t.best_effort:
                    continue
                Statement(ssn).unpipeline(t)
                tasks.setdefault(job.uid, PriorityQueue(ssn.task_order_fn)).push(t)
            if job.uid not in tasks:
                continue
            if queue.uid not in jobs:
                queues.push(queue)
                jobs[queue.uid] = PriorityQueue(ssn.job_order_fn)
            jobs[queue.uid].push(job)
        out: list[TaskInfo] = []
        while not queues.empty():
            q = queues.pop()
            jq = jobs[q.uid]
            while not jq.empty():
                j = jq.pop()
                tq = tasks[j.uid]
                while not tq.empty():
                    out.append(tq.pop())
        return out


def new() -> Backfill:
    return Backfill()
