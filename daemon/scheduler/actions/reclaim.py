"""The reclaim action (actions/reclaim/reclaim.go): a starving job takes back its queue's share.

Queues of running (not Pending) valid jobs are served in QueueOrderFn order; an Overused queue
is skipped.  Every starving job of a queue (JobStarving) gets one statement: its pending tasks,
in TaskOrderFn order and while the job is still starving, look for a node where evicting
Running, preemptable tasks of jobs in *other*, reclaimable queues (those the Reclaimable
callbacks hand back) frees enough room; the task is then pipelined onto that node.  The job's
statement is committed (evictions go out) only if the job is then JobPipelined, else discarded
as a whole.  Each node is tried under its own statement, so evictions on a node that does not
end up used are undone at once.

Volcano quirks kept: a task whose pod says `preemptionPolicy: Never`, whose queue fails the
Preemptive check or whose PrePredicate fails is skipped (the next task is tried); victims are
only *Running* tasks (Bound ones are not reclaimed); victims are evicted in victim order only
until the request fits the node's FutureIdle plus what was evicted, and predicates are not
re-run afterwards; the `predicateErrorCacheEnable` argument is read but has no effect
(Volcano builds a fresh error cache for every task, so nothing is ever looked up in it).
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.actions.victims import (
    PredicateErrorCache,
    nodes_without_unresolvable,
    predicate_for_preempt,
    predicate_nodes,
    validate_victims,
    victims_queue,
)
from fumarole.daemon.scheduler.framework.conf import arg_bool
from fumarole.daemon.scheduler.framework.placement import SearchOptions
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "reclaim"
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"
PREEMPT_NEVER = "Never"


def reclaim_reason(queue: QueueInfo, task: TaskInfo, job: JobInfo, deciders: list[str]) -> str:
    """The eviction cause recorded with every victim of this action."""
    reason = f"reclaimed for queue {queue.name} by {task.key} of job {job.uid}"
    if deciders:
        reason += "; victims chosen by " + ", ".join(deciders)
    return reason


class Reclaim:
    name = NAME

    def __init__(self, search: SearchOptions | None = None) -> None:
        self.search = search or SearchOptions()
        self.enable_predicate_error_cache = True

    def execute(self, ssn: Session) -> None:
        args: dict[str, Any] = ssn.conf.action_arguments(NAME)
        self.enable_predicate_error_cache = arg_bool(args, PREDICATE_ERROR_CACHE, True)

        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        seen_queues: set[str] = set()
        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
        preemptor_tasks: dict[str, PriorityQueue[TaskInfo]] = {}

        for job in ssn.jobs.values():  # in uid order (Session.__init__ fills it sorted)
            if job.is_pending():
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            # JobValid and JobStarving are pure, so they may be asked in any order: a job that is
            # not starving, of a queue already in line, changes nothing whether valid or not.
            starving = ssn.job_starving(job)
            if not starving and queue.uid in seen_queues:
                continue
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            if queue.uid not in seen_queues:
                seen_queues.add(queue.uid)
                queues.push(queue)
            if starving:
                if job.queue not in preemptors:
                    preemptors[job.queue] = PriorityQueue(ssn.job_order_fn)
                preemptors[job.queue].push(job)
                tasks: PriorityQueue[TaskInfo] = PriorityQueue(ssn.task_order_fn)
                for t in job.tasks_in(TaskStatus.PENDING):
                    if not t.sch_gated:
                        tasks.push(t)
                preemptor_tasks[job.uid] = tasks

        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            while True:
                jobs = preemptors.get(queue.uid)
                if jobs is None or jobs.empty():
                    break
                job = jobs.pop()
                stmt = Statement(ssn)
                while ssn.job_starving(job):
                    tasks = preemptor_tasks[job.uid]
                    if tasks.empty():
                        break
                    task = tasks.pop()
                    if task.pod.preemption_policy == PREEMPT_NEVER:
                        ssn.skip_reasons[task.uid] = "reclaim: the pod's preemptionPolicy is Never"
                        continue
                    if not ssn.preemptive(queue, task):
                        ssn.skip_reasons[task.uid] = (
                            f"reclaim: queue {queue.name} may not reclaim for the task (Preemptive): "
                            "its request does not fit the queue's deserved share"
                        )
                        continue
                    if ssn.pre_predicate_fn(task) is not None:
                        continue
                    self.reclaim_for_task(ssn, stmt, queue, job, task)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
                # Volcano pushes the queue back while it has starving jobs left (and keeps
                # serving it in this inner loop); the extra entries are popped later as no-ops.
                if not jobs.empty():
                    queues.push(queue)

    # ------------------------------------------------------------------ one task
    def reclaim_for_task(
        self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo, task: TaskInfo
    ) -> bool:
        """Try nodes in order; on the first where victims free enough, pipeline the task there."""
        # Volcano builds a fresh predicate error cache here, for this one task: it never hits.
        cache = PredicateErrorCache(self.enable_predicate_error_cache)
        candidates = nodes_without_unresolvable(ssn, task)
        nodes = predicate_nodes(
            ssn, task, candidates, lambda t, n: predicate_for_preempt(ssn, t, n), cache, self.search
        )
        for node in nodes:
            reclaimees = self.reclaimees_on(ssn, node, job)
            if not reclaimees:
                continue
            victims = ssn.reclaimable(task, reclaimees)
            deciders = list(ssn.last_victim_deciders)
            if not validate_victims(task, node, victims):
                continue
            order = victims_queue(ssn, victims, task)
            request = task.init_resreq
            available = node.future_idle()
            node_stmt = Statement(ssn)
            evicted = False
            reason = reclaim_reason(queue, task, job, deciders)
            while not order.empty():
                if request.less_equal(available):
                    break
                victim = order.pop()
                node_stmt.evict(victim, reason)
                available.add(victim.resreq)
                evicted = True
            if not request.less_equal(available):
                node_stmt.discard()
                continue
            try:
                node_stmt.pipeline(task, node.name, evicted)
            except Exception:
                node_stmt.discard()
                continue
            stmt.merge(node_stmt)
            return True
        return False

    @staticmethod
    def reclaimees_on(ssn: Session, node: NodeInfo, job: JobInfo) -> list[TaskInfo]:
        """Running, preemptable tasks on `node` of jobs in other queues that are reclaimable.

        Volcano walks the node's task map (random order); we take the tasks by uid so the
        Reclaimable callbacks, which may depend on the order, see a stable list.  The session's
        own task objects are returned (the node keeps copies).
        """
        out: list[TaskInfo] = []
        for uid in sorted(node.tasks):
            on_node = node.tasks[uid]
            if on_node.status is not TaskStatus.RUNNING or not on_node.preemptable:
                continue
            other = ssn.jobs.get(on_node.job)
            if other is None or other.queue == job.queue:
                continue
            q = ssn.queues.get(other.queue)
            if q is None or not q.is_reclaimable():
                continue
            out.append(other.tasks.get(uid, on_node))
        return out


def new() -> Reclaim:
    return Reclaim()
