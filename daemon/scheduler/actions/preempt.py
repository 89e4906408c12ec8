"""The preempt action (actions/preempt/preempt.go): evict lower-priority tasks of the same queue.

Preemptor jobs are the starving, valid, non-Pending jobs without a network topology; queues are
served in QueueOrderFn order (Overused is not consulted).  Phase 1, between jobs of one queue:
each starving job, in
JobOrderFn order, gets one Statement; its Pending tasks (TaskOrderFn) preempt Bound/Running,
preemptable tasks of *other jobs of the same queue* while the job is starving; the Statement is
committed only if the job is then JobPipelined, otherwise discarded (no eviction leaves).
Phase 2, within a job: for every starving job of the queue, each Pending task preempts tasks of
its *own* job in its own Statement, committed if the task was placed, else discarded and the
job stops.  A BestEffort preemptor never evicts a non-BestEffort task; tasks with
`preemptionPolicy: Never` never preempt.

Per task, candidate nodes are all nodes minus those an earlier action found
UnschedulableAndUnresolvable, filtered by PredicateForPreemptAction.  Normal mode walks them by
score and, on the first node where enough victims exist (ValidateVictims), evicts victims in
BuildVictimsPriorityQueue order until the preemptor fits (queue Allocatable, FutureIdle and
PredicateFn), then pipelines it there; a node where it still does not fit has its evictions
undone.  Topology-aware mode (`enableTopologyAwarePreemption`) dry-runs every node on a clone
(remove victims until it fits, then reprieve what is not needed), picks the node whose victims
matter least and evicts exactly those.

Every eviction's reason names the preemptor pod and job, the job's priority and the plugins
whose Preemptable votes chose the victims.  Arguments (Volcano's names and defaults):
`predicateErrorCacheEnable` (true), `enableTopologyAwarePreemption` (false),
`topologyAwarePreemptWorkerNum` (16; accepted, the dry run is sequential),
`minCandidateNodesPercentage` (10), `minCandidateNodesAbsolute` (1),
`maxCandidateNodesAbsolute` (100).
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.actions.victims import (
    Candidate,
    PredicateErrorCache,
    TaskFilter,
    eviction_reason,
    nodes_without_unresolvable,
    pick_candidate,
    predicate_for_preempt,
    predicate_nodes,
    preemptor_fits_on_node,
    select_victims_on_node,
    sort_nodes_by_score,
    tasks_on_node,
    validate_victims,
    victims_queue,
)
from fumarole.daemon.scheduler.framework.conf import arg_bool, arg_int
from fumarole.daemon.scheduler.framework.placement import SearchOptions
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.fit import FitError
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import PREEMPTABLE_STATUSES, TaskInfo, TaskStatus

NAME = "preempt"
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"
TOPOLOGY_AWARE = "enableTopologyAwarePreemption"
WORKER_NUM = "topologyAwarePreemptWorkerNum"
MIN_CANDIDATE_PERCENTAGE = "minCandidateNodesPercentage"
MIN_CANDIDATE_ABSOLUTE = "minCandidateNodesAbsolute"
MAX_CANDIDATE_ABSOLUTE = "maxCandidateNodesAbsolute"
PREEMPT_NEVER = "Never"


class Preempt:
    name = NAME

    def __init__(self, search: SearchOptions | None = None) -> None:
        self.search = search or SearchOptions()
        self.enable_error_cache = True
        self.topology_aware = False
        self.worker_num = 16
        self.min_candidate_percentage = 10
        self.min_candidate_absolute = 1
        self.max_candidate_absolute = 100

    def parse_arguments(self, args: dict[str, Any]) -> None:
        self.enable_error_cache = arg_bool(args, PREDICATE_ERROR_CACHE, self.enable_error_cache)
        self.topology_aware = arg_bool(args, TOPOLOGY_AWARE, self.topology_aware)
        self.worker_num = arg_int(args, WORKER_NUM, self.worker_num)
        self.min_candidate_percentage = arg_int(args, MIN_CANDIDATE_PERCENTAGE, self.min_candidate_percentage)
        self.min_candidate_absolute = arg_int(args, MIN_CANDIDATE_ABSOLUTE, self.min_candidate_absolute)
        self.max_candidate_absolute = arg_int(args, MAX_CANDIDATE_ABSOLUTE, self.max_candidate_absolute)

    # ------------------------------------------------------------------ the action
    def execute(self, ssn: Session) -> None:
        self.parse_arguments(ssn.conf.action_arguments(NAME))
        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
        preemptor_tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        under_request: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():  # in uid order (Session.__init__ fills it sorted)
            if job.is_pending():
                continue
            if job.queue not in ssn.queues:
                continue
            # JobStarving and JobValid are pure: testing the (more selective) starving first
            # leaves out the same jobs and spares job_valid for the cluster's satisfied jobs.
            if not ssn.job_starving(job):
                continue
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            if job.network_topology is not None:
                continue  # Volcano: jobs with a network topology do not preempt (issue 4374)
            preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)
            under_request.setdefault(job.queue, []).append(job)
            preemptor_tasks[job.uid] = self._pending_tasks(ssn, job)

        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        for qid in sorted(preemptors):
            queues.push(ssn.queues[qid])

        cache = PredicateErrorCache(self.enable_error_cache)
        while not queues.empty():
            queue = queues.pop()
            jobs = preemptors.get(queue.uid)
            # Phase 1: between jobs of the queue.
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                tasks = preemptor_tasks[job.uid]
                while ssn.job_starving(job) and not tasks.empty():
                    preemptor = tasks.pop()
                    self.preempt(ssn, stmt, preemptor, between_jobs_filter(ssn, preemptor, job), cache)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
            # Phase 2: between tasks of one job.
            for job in under_request.get(queue.uid, []):
                intra = self._pending_tasks(ssn, job)
                while not intra.empty():
                    preemptor = intra.pop()
                    stmt = Statement(ssn)
                    if not self.preempt(ssn, stmt, preemptor, within_job_filter(preemptor), cache):
                        stmt.discard()
                        break
                    stmt.commit()

    @staticmethod
    def _pending_tasks(ssn: Session, job: JobInfo) -> PriorityQueue[TaskInfo]:
        q: PriorityQueue[TaskInfo] = PriorityQueue(ssn.task_order_fn)
        for t in job.tasks_in(TaskStatus.PENDING):
            if not t.sch_gated:
                q.push(t)
        return q

    # ------------------------------------------------------------------ one preemptor
    def preempt(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        keep: TaskFilter,
        cache: PredicateErrorCache | None,
    ) -> bool:
        """Try to place `preemptor` by evicting tasks that pass `keep`; changes go into `stmt`."""
        if not eligible_to_preempt(ssn, preemptor):
            return False
        if ssn.pre_predicate_fn(preemptor) is not None:
            return False
        nodes = nodes_without_unresolvable(ssn, preemptor)
        found = predicate_nodes(
            ssn, preemptor, nodes, lambda t, n: predicate_for_preempt(ssn, t, n), cache, self.search
        )
        if self.topology_aware:
            return self.topology_aware_preempt(ssn, stmt, preemptor, keep, found)
        return self.normal_preempt(ssn, stmt, preemptor, keep, found)

    def normal_preempt(
        self, ssn: Session, stmt: Statement, preemptor: TaskInfo, keep: TaskFilter, nodes: list[NodeInfo]
    ) -> bool:
        job = ssn.jobs.get(preemptor.job)
        if job is None:
            return False
        queue = ssn.queues[job.queue]
        for node in sort_nodes_by_score(ssn, preemptor, nodes):
            preemptees = tasks_on_node(ssn, node, keep)
            # Victims are a subset of the preemptees: if all of them cannot make room, no vote can
            # (a shortcut; Volcano asks the plugins and then fails ValidateVictims the same way).
            if not validate_victims(preemptor, node, preemptees):
                continue
            victims = ssn.preemptable(preemptor, preemptees) if preemptees else []
            reason = eviction_reason("preempted", preemptor.key, job, ssn.last_victim_deciders)
            if not validate_victims(preemptor, node, victims):
                continue
            node_stmt = Statement(ssn)
            order = victims_queue(ssn, victims, preemptor)
            freed = Resource()
            fits = preemptor_fits_on_node(ssn, queue, preemptor, node)
            while not fits and not order.empty():
                victim = order.pop()
                node_stmt.evict(victim, reason)
                freed.add(victim.resreq)
                fits = preemptor_fits_on_node(ssn, queue, preemptor, node)
            if fits:
                try:
                    node_stmt.pipeline(preemptor, node.name, not freed.is_empty())
                except Exception:
                    node_stmt.discard()
                    continue
                stmt.merge(node_stmt)
                return True
            node_stmt.discard()
        return False

    def topology_aware_preempt(
        self, ssn: Session, stmt: Statement, preemptor: TaskInfo, keep: TaskFilter, nodes: list[NodeInfo]
    ) -> bool:
        job = ssn.jobs.get(preemptor.job)
        if job is None or not nodes:
            return False
        queue = ssn.queues[job.queue]
        wanted = self.num_candidates(len(nodes))
        base = ssn.cycle_state(preemptor.uid)
        candidates: list[Candidate] = []
        for node in nodes:
            cand, _ = select_victims_on_node(ssn, base.clone(), preemptor, queue, node.clone(), keep)
            if cand is not None:
                candidates.append(cand)
                if len(candidates) >= wanted:
                    break
        best = pick_candidate(candidates)
        if best is None:
            return False
        tmp = Statement(ssn)
        reason = eviction_reason("preempted", preemptor.key, job, best.deciders)
        for victim in best.victims:
            tmp.evict(victim, reason)
        try:
            tmp.pipeline(preemptor, best.node, True)
        except Exception:
            tmp.discard()
            return False
        stmt.merge(tmp)
        return True

    def num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_candidate_percentage // 100
        n = max(n, self.min_candidate_absolute)
        n = min(n, self.max_candidate_absolute)
        return min(n, num_nodes)


# ---------------------------------------------------------------------- filters and eligibility
def between_jobs_filter(ssn: Session, preemptor: TaskInfo, job: JobInfo) -> TaskFilter:
    """Phase 1 victims: Bound/Running, preemptable, BestEffort rule, same queue, another job."""

    def keep(t: TaskInfo) -> bool:
        if t.status not in PREEMPTABLE_STATUSES:
            return False
        if preemptor.best_effort and not t.best_effort:
            return False
        if not t.preemptable:
            return False
        tjob = ssn.jobs.get(t.job)
        if tjob is None:
            return False
        return tjob.queue == job.queue and preemptor.job != t.job

    return keep


def within_job_filter(preemptor: TaskInfo) -> TaskFilter:
    """Phase 2 victims: Bound/Running, preemptable, BestEffort rule, same job."""

    def keep(t: TaskInfo) -> bool:
        if t.status not in PREEMPTABLE_STATUSES:
            return False
        if preemptor.best_effort and not t.best_effort:
            return False
        if not t.preemptable:
            return False
        return preemptor.job == t.job

    return keep


def eligible_to_preempt(ssn: Session, preemptor: TaskInfo) -> bool:
    """taskEligibleToPreempt: not `preemptionPolicy: Never`; with a nominated node, only if that
    node is in the session and the preemptor fails PredicateFn there.  (Volcano also refuses while a
    lower-priority pod on the nominated node is terminating because of preemption; the model has no
    pod conditions, so that case never applies.)"""
    if preemptor.pod.preemption_policy == PREEMPT_NEVER:
        return False
    nominated = preemptor.pod.nominated_node_name
    if not nominated:
        return True
    node = ssn.nodes.get(nominated)
    if node is None:
        return False
    err = ssn.predicate_fn(preemptor, node)
    return err is not None and isinstance(err, FitError)


def new() -> Preempt:
    return Preempt()
