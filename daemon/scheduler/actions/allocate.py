"""The allocate action (actions/allocate/allocate.go): place pending tasks of Inqueue jobs.

Queues are served in QueueOrderFn order one job turn at a time; an Overused queue is dropped
for the rest of the action.  A job turn places tasks in TaskOrderFn order until JobReady; a
ready job is committed (binds go out) and, with tasks left, pushed back; a job that is only
pipelined keeps its tasks Allocated/Pipelined in the session uncommitted; otherwise the turn is
discarded.  A job with a hard network topology goes through the HyperNode search instead
(allocate_hypernodes.py); a job with a network topology is skipped while the HyperNodes are not
ready.  Sub-group policies are not implemented (such jobs are scheduled as plain jobs).
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.actions.allocate_hypernodes import allocate_for_job, commit_decision
from fumarole.daemon.scheduler.framework.conf import arg_bool
from fumarole.daemon.scheduler.framework.placement import (
    ErrorCache,
    SearchOptions,
    choose_node,
    full_search,
    predicate_nodes,
)
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import EventError, Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.framework.topology import session_topology
from fumarole.daemon.scheduler.model.fit import FitErrors
from fumarole.daemon.scheduler.model.hypernode import CLUSTER_TOP
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeError, NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "allocate"
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"


class Allocate:
    name = NAME

    def __init__(self, search: SearchOptions | None = None) -> None:
        self.search = search or SearchOptions()
        self.enable_error_cache = True
        # job uid -> the sub-job HyperNode of the plan a turn returned (recorder's sub-job decision).
        self.pending_subjob: dict[str, str] = {}
        # Job uid -> a sub-job's best dry run that failed when replayed (allocate_hypernodes.py).
        self.replay_failures: dict[str, str] = {}

    def execute(self, ssn: Session) -> None:
        args: dict[str, Any] = ssn.conf.action_arguments(NAME)
        self.enable_error_cache = arg_bool(args, PREDICATE_ERROR_CACHE, True)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_of: dict[str, PriorityQueue[TaskInfo]] = {}
        enqueue_configured = "enqueue" in ssn.configured_actions

        # Only jobs with a Pending or Pipelined task at open, or pending themselves, can pass the
        # filters below (Session.jobs_with_work, in uid order).
        for job in ssn.jobs_with_work:
            if job.is_pending():
                if enqueue_configured:
                    continue
                ssn.promote_pending(job)
            if not job.count(TaskStatus.PENDING):
                # No pending task to place (job_valid is pure: skipping it for such a job, most of
                # a busy cluster, changes nothing).
                continue
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            if job.queue not in ssn.queues:
                continue
            if job.network_topology is not None and not session_topology(ssn).ready:
                continue
            tasks: PriorityQueue[TaskInfo] = PriorityQueue(ssn.task_order_fn)
            for t in job.tasks_in(TaskStatus.PENDING):
                if t.sch_gated:
                    continue
                if t.best_effort:
                    continue
                tasks.push(t)
            if tasks.empty():
                continue
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order_fn)
                queues.push(ssn.queues[job.queue])
            jobs_by_queue[job.queue].push(job)
            tasks_of[job.uid] = tasks

        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = jobs_by_queue.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            tasks = tasks_of[job.uid]
            nt = job.network_topology
            if nt is not None and nt.hard_tier() is not None:
                stmt, tasks, chosen = allocate_for_job(self, ssn, job, queue, tasks)
                if stmt is not None and ssn.job_ready(job):
                    stmt.commit()
                    commit_decision(ssn, self, job, chosen)
                    tasks_of[job.uid] = tasks
                    if not tasks.empty():
                        jobs.push(job)
                queues.push(queue)
                continue
            stmt = self.allocate_for_tasks(ssn, job, queue, tasks)
            if stmt is not None and ssn.job_ready(job):
                stmt.commit()
                if not tasks.empty():
                    jobs.push(job)
            queues.push(queue)

    # ------------------------------------------------------------------ one job turn
    def allocate_for_tasks(
        self,
        ssn: Session,
        job: JobInfo,
        queue: QueueInfo,
        tasks: PriorityQueue[TaskInfo],
        *,
        hypernode: str | None = None,
    ) -> Statement | None:
        """allocateResourcesForTasks on every node, or (`hypernode`) on that HyperNode's nodes."""
        rows = None
        nodes = ssn.node_list
        if hypernode is not None and hypernode != CLUSTER_TOP:
            nodes = [ssn.nodes[n] for n in session_topology(ssn).real_nodes.get(hypernode, ())]
            rows = ssn.table_rows(nodes)
        if not nodes:
            return None
        # A job with a network topology: its running allocated HyperNode (getNewAllocatedHyperNode).
        with_topology = job.network_topology is not None
        allocated_hn = job.subjob_allocated_hypernode
        stmt = Statement(ssn)
        cache = ErrorCache() if self.enable_error_cache else None
        while not tasks.empty():
            task = tasks.pop()
            if not ssn.allocatable_fn(queue, task):
                ssn.skip_reasons[task.uid] = (
                    f"queue {queue.name} refused the task (Allocatable): its request does not fit the "
                    "queue's remaining share"
                )
                continue
            if task.sch_gated:
                continue
            if job.task_has_fit_errors(task):
                fe = FitErrors()
                fe.set_error(
                    f"Task {task.name} with role spec {task.role} has already predicated failed, skip"
                )
                job.nodes_fit_errors[task.uid] = fe
                continue
            err = ssn.pre_predicate_fn(task)
            if err is not None:
                fe = FitErrors()
                for node in nodes:
                    fe.set_node_error(node.name, err)
                job.nodes_fit_errors[task.uid] = fe
                if job.need_continue_allocating():
                    continue
                break

            candidates = None
            nominated = task.pod.nominated_node_name
            if (
                nominated
                and nominated in ssn.nodes
                and (rows is None or nominated in {n.name for n in nodes})
            ):
                nnode = ssn.nodes[nominated]
                if task.resreq.less_equal(nnode.future_idle()):
                    rows = ssn.table_rows([nnode])
                    found, _ = predicate_nodes(ssn, task, rows, cache, self.search)
                    if found.size:
                        candidates = found
            if candidates is None:
                if rows is None:
                    candidates, fe = predicate_nodes(ssn, task, None, cache, self.search)
                else:
                    candidates, fe = full_search(ssn, task, rows, cache, self.search, rotate=True)
                if candidates.size == 0:
                    if rows is not None:
                        fe.hypernode = hypernode or ""
                    job.nodes_fit_errors[task.uid] = fe
                    if job.need_continue_allocating():
                        continue
                    break
            if with_topology:
                ssn.task_allocated_hypernode[task.uid] = allocated_hn
            best = choose_node(ssn, task, candidates, self.search.tie_seed)
            if best is None:
                continue
            if not self.allocate_task(stmt, task, best):
                continue
            if with_topology:
                hn = session_topology(ssn).hypernode_of_node(best.name)
                if hn:
                    allocated_hn = session_topology(ssn).lca(hn, allocated_hn) if allocated_hn else hn
            if ssn.job_ready(job):
                break

        if ssn.job_ready(job):
            return stmt
        if ssn.job_pipelined(job):
            return stmt
        stmt.discard()
        return None

    @staticmethod
    def allocate_task(stmt: Statement, task: TaskInfo, node: NodeInfo) -> bool:
        """allocateResourcesForTask: allocate on idle, else pipeline on future idle.  False when
        neither fits or the operation was rolled back (an allocate handler failed, e.g.
        deviceshare found no card or a locked node): Volcano then goes on with the job's next
        task, recording no fit error; why-pending names the failure."""
        try:
            if task.resreq.less_equal(node.idle):
                stmt.allocate(task, node)
                return True
            if task.resreq.less_equal(node.future_idle()):
                stmt.pipeline(task, node.name, False)
                return True
        except EventError as e:
            stmt.ssn.skip_reasons[task.uid] = f"the allocation on {node.name} failed: {e}"
            return False
        except NodeError:
            return False
        return False


def new() -> Allocate:
    return Allocate()
