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

from daemon.scheduler.framework.conf import arg_bool
from daemon.scheduler.framework.placement import SearchOptions, num_feasible_nodes_to_find
from daemon.scheduler.framework.priority_queue import PriorityQueue
from daemon.scheduler.framework.session import Session
from daemon.scheduler.framework.statement import Statement
from daemon.scheduler.model.fit import Code, FitError
from daemon.scheduler.model.job import JobInfo
from daemon.scheduler.model.node import NodeInfo
from daemon.scheduler.model.queue import QueueInfo
from daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "reclaim"
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"
PREEMPT_NEVER = "Never"

# Codes that make a node unusable even after evictions (PredicateForPreemptAction).
_PREEMPT_FATAL = frozenset({Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.ERROR, Code.SKIP, Code.WAIT})


def predicate_for_preempt(ssn: Session, task: TaskInfo, node: NodeInfo) -> bool:
    """Whether `node` stays a candidate for `task` once victims are evicted.

    A plain Unschedulable verdict is fine (evictions may cure it); an unresolvable one, an
    error, skip or wait status, or an error that is not a fit error excludes the node.
    """
    err = ssn.predicate_fn(task, node)
    if err is None:
        return True
    if not isinstance(err, FitError):
        return False
    return not (err.codes() & _PREEMPT_FATAL)


def schedulable_nodes(ssn: Session, task: TaskInfo) -> list[NodeInfo]:
    """FilterOutUnschedulableAndUnresolvableNodesForTask, in node-list order.

    Nodes an earlier action of this session found unresolvable for the task are left out.
    (Volcano walks its node map here, in random order; we keep the node list's order.)
    """
    job = ssn.jobs.get(task.job)
    fe = job.nodes_fit_errors.get(task.uid) if job is not None else None
    if fe is None:
        return ssn.node_list
    skip = fe.unresolvable_nodes()
    if not skip:
        return ssn.node_list
    return [n for n in ssn.node_list if n.name not in skip]


def preempt_candidate_nodes(
    ssn: Session, task: TaskInfo, nodes: list[NodeInfo], opts: SearchOptions
) -> list[NodeInfo]:
    """PredicateNodes with PredicateForPreemptAction: the feasible window, from the rotating start.

    As allocate's search, it starts at the session's last processed index, stops after the
    window of feasible nodes plus one more feasible node examined, and advances the index.
    """
    n = len(nodes)
    if n == 0:
        return []
    k = num_feasible_nodes_to_find(n, opts)
    start = ssn.last_processed_node_index % n
    found: list[NodeInfo] = []
    processed = 0
    for i in range(n):
        node = nodes[(start + i) % n]
        processed += 1
        if not predicate_for_preempt(ssn, task, node):
            continue
        if len(found) == k:
            break
        found.append(node)
    ssn.last_processed_node_index = (start + processed) % n
    return found


def victims_fit(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """util.ValidateVictims: the request fits FutureIdle plus everything the victims hold."""
    future = node.future_idle()
    for v in victims:
        future.add(v.resreq)
    return task.init_resreq.less_equal(future)


def victim_order(ssn: Session, preemptor: TaskInfo) -> PriorityQueue[TaskInfo]:
    """BuildVictimsPriorityQueue: the order in which victims are evicted.

    Same job: the task that would be scheduled last goes first.  A victim whose job left the
    session goes first.  Other queues: VictimQueueOrderFn (by default the reverse of queue
    order).  Same queue: the job that would be scheduled last goes first, then task order
    reversed.
    """
    preemptor_job = ssn.jobs.get(preemptor.job)

    def job_then_task(lj: JobInfo, rj: JobInfo, lt: TaskInfo, rt: TaskInfo) -> bool:
        c = ssn.job_order_compare(lj, rj)
        if c != 0:
            return c > 0
        return not ssn.task_order_fn(lt, rt)

    def less(lt: TaskInfo, rt: TaskInfo) -> bool:
        if lt.job == rt.job:
            return not ssn.task_order_fn(lt, rt)
        lj = ssn.jobs.get(lt.job)
        rj = ssn.jobs.get(rt.job)
        if lj is None or rj is None:
            if lj is None and rj is None:
                return not ssn.task_order_fn(lt, rt)
            return lj is None
        if preemptor_job is None:
            return job_then_task(lj, rj, lt, rt)
        if lj.queue != rj.queue:
            return ssn.victim_queue_order_fn(
                ssn.queues[lj.queue], ssn.queues[rj.queue], ssn.queues[preemptor_job.queue]
            )
        return job_then_task(lj, rj, lt, rt)

    return PriorityQueue(less)


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

        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            if job.is_pending():
                continue
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if queue.uid not in seen_queues:
                seen_queues.add(queue.uid)
                queues.push(queue)
            if ssn.job_starving(job):
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
        nodes = preempt_candidate_nodes(ssn, task, schedulable_nodes(ssn, task), self.search)
        for node in nodes:
            reclaimees = self.reclaimees_on(ssn, node, job)
            if not reclaimees:
                continue
            victims = ssn.reclaimable(task, reclaimees)
            deciders = list(ssn.last_victim_deciders)
            if not victims_fit(task, node, victims):
                continue
            order = victim_order(ssn, task)
            for v in victims:
                order.push(v)
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
