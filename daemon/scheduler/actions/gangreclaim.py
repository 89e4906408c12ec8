"""The gangreclaim action (actions/gangreclaim): gang-aware reclaim across queues, job by job.

Queues of valid, non-Pending jobs are served in QueueOrderFn order; an Overused queue is
skipped.  Each starving job of a queue (JobOrderFn order) gets one Statement.  The job's pending
tasks (non-gated, with a request, TaskOrderFn order) must together pass the queue's Preemptive
check; their summed request is the need.  Candidate victims are the Running, preemptable tasks
of jobs in *other* queues that are reclaimable and whose PodGroup allows gang eviction.  They are
grouped per job into bundles — "safe" tasks, whose eviction keeps their job gang-ready, and the
"whole" rest, which breaks it — sorted safe first, then by victim-queue order (the queue that
would be served last loses first), then by usefulness for the need.  UnifiedEvictable (kind
GangReclaim) filters them; a whole bundle survives only if every task is allowed, and whole
bundles are dropped when `allowWholeBundle` is false.  Bundles are then added one by one; once
the domain's idle + releasing resources plus all selected victims cover the need, a dry run
evicts them and pipelines the pending tasks; if the job is then JobPipelined the plan is
replayed into the Statement, else the next bundle is added.  The Statement is committed if the
job is JobPipelined, otherwise discarded.

Arguments: `maxDomains` (int, 8; values <= 0 fall back to 8 with a warning), `allowWholeBundle`
(bool, true); the dry run honours *allocate's* `predicateErrorCacheEnable` (true).

Volcano quirks kept: whole bundles are evicted as units (all of a bundle's tasks go, even when
fewer would do), at least the first bundle is selected before the need is checked; the domain's
room is Idle + Releasing (pipelined resources are not subtracted); only *Running* tasks are
victims.  Hypernodes are not modelled: the only domain is the whole cluster (Volcano's fallback
for jobs without hard network topology), so `maxDomains` has no effect beyond validation.
"""

from __future__ import annotations

from typing import Any

from daemon.scheduler.actions.gangpreempt import pick_domains_from_gradients
from daemon.scheduler.actions.victims import (
    BUNDLE_WHOLE,
    Bundle,
    apply_allowed_tasks,
    build_nomination_plan,
    collect_pending_tasks_for_gang_eviction,
    create_job_bundles,
    flatten_bundles,
    is_job_preemptable_for_gang_eviction,
    session_task,
    sort_bundles_for_reclaim,
    sum_idle_and_releasing,
    sum_resreq,
)
from daemon.scheduler.framework import combinators as cb
from daemon.scheduler.framework.conf import arg_bool, arg_int
from daemon.scheduler.framework.priority_queue import PriorityQueue
from daemon.scheduler.framework.session import Session
from daemon.scheduler.framework.statement import Statement
from daemon.scheduler.model.job import JobInfo
from daemon.scheduler.model.node import NodeInfo
from daemon.scheduler.model.queue import QueueInfo
from daemon.scheduler.model.resources import Resource
from daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "gangreclaim"
MAX_DOMAINS = "maxDomains"
ALLOW_WHOLE_BUNDLE = "allowWholeBundle"
DEFAULT_MAX_DOMAINS = 8
DEFAULT_ALLOW_WHOLE_BUNDLE = True
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"
CLUSTER_DOMAIN = "<cluster-top-hypernode>"


def gang_reclaim_reason(queue: QueueInfo, job: JobInfo, deciders: tuple[str, ...] | list[str]) -> str:
    """The eviction cause recorded with every victim of this action."""
    reason = f"reclaimed for queue {queue.name} by job {job.uid} (gang)"
    if deciders:
        reason += "; victims chosen by " + ", ".join(deciders)
    return reason


def reclaim_candidate(ssn: Session, t: TaskInfo, reclaimer: JobInfo) -> bool:
    """A task gangreclaim may take: Running and preemptable, of a job in another, reclaimable
    queue whose PodGroup allows gang eviction."""
    if t.status is not TaskStatus.RUNNING or not t.preemptable:
        return False
    vjob = ssn.jobs.get(t.job)
    if vjob is None or vjob.queue == reclaimer.queue:
        return False
    if not is_job_preemptable_for_gang_eviction(vjob):
        return False
    q = ssn.queues.get(vjob.queue)
    return q is not None and q.is_reclaimable()


class GangReclaim:
    name = NAME

    def __init__(self) -> None:
        self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole_bundle = DEFAULT_ALLOW_WHOLE_BUNDLE
        self.enable_predicate_error_cache = True
        self.warnings: list[str] = []

    def parse_arguments(self, args: dict[str, Any], allocate_args: dict[str, Any]) -> None:
        self.max_domains = arg_int(args, MAX_DOMAINS, self.max_domains)
        if self.max_domains <= 0:
            self.warnings.append(
                f"{NAME}: {MAX_DOMAINS} {self.max_domains} is not positive; using {DEFAULT_MAX_DOMAINS}"
            )
            self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole_bundle = arg_bool(args, ALLOW_WHOLE_BUNDLE, self.allow_whole_bundle)
        self.enable_predicate_error_cache = arg_bool(allocate_args, PREDICATE_ERROR_CACHE, True)

    # ------------------------------------------------------------------ the action
    def execute(self, ssn: Session) -> None:
        self.parse_arguments(ssn.conf.action_arguments(NAME), ssn.conf.action_arguments("allocate"))
        ssn.warnings.extend(w for w in self.warnings if w not in ssn.warnings)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        seen_queues: set[str] = set()
        reclaimers: dict[str, PriorityQueue[JobInfo]] = {}
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
            if not ssn.job_starving(job):
                continue
            reclaimers.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)

        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = reclaimers.get(queue.uid)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                self.reclaim_job(ssn, stmt, queue, job)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()

    def reclaim_job(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> bool:
        """reclaimJobInDomains over the single cluster domain; True if a plan was applied."""
        pending = collect_pending_tasks_for_gang_eviction(ssn, job)
        if not pending:
            return False
        if not ssn.preemptive(queue, pending):
            for t in pending:
                ssn.skip_reasons[t.uid] = (
                    f"gangreclaim: queue {queue.name} may not reclaim for the job's pending tasks "
                    "(Preemptive): together they do not fit the queue's deserved share"
                )
            return False
        need = Resource()
        for t in pending:
            need.add(t.init_resreq)
        nodes = list(ssn.node_list)
        for _domain in pick_domains_from_gradients([[CLUSTER_DOMAIN]], self.max_domains, CLUSTER_DOMAIN):
            if not nodes:
                continue
            bundles, deciders = self.select_domain_bundles(ssn, job, nodes, need)
            if not bundles:
                continue
            idle = sum_idle_and_releasing(nodes)
            reason = gang_reclaim_reason(queue, job, deciders)
            selected: list[TaskInfo] = []
            for bundle in bundles:
                selected.extend(bundle.tasks)
                available = idle.clone().add(sum_resreq(selected))
                if not need.less_equal(available):
                    continue
                plan = build_nomination_plan(
                    ssn, queue, job, nodes, list(selected), reason, self.enable_predicate_error_cache
                )
                if plan is None:
                    continue
                try:
                    stmt.recover_operations(plan)
                except Exception:
                    continue
                return True
        return False

    def select_domain_bundles(
        self, ssn: Session, job: JobInfo, nodes: list[NodeInfo], need: Resource
    ) -> tuple[list[Bundle], tuple[str, ...]]:
        """selectDomainBundles: the ordered, plugin-approved victim bundles of the domain, and the
        plugins whose UnifiedEvictable votes approved them."""
        by_job: dict[str, list[TaskInfo]] = {}
        for node in nodes:
            for nt in node.tasks.values():
                t = session_task(ssn, nt)
                if t is None or not reclaim_candidate(ssn, t, job):
                    continue
                by_job.setdefault(t.job, []).append(t)
        bundles: list[Bundle] = []
        for uid in sorted(by_job):
            bundles.extend(create_job_bundles(ssn.jobs[uid], by_job[uid]))
        if not bundles:
            return [], ()
        reclaimer_queue = ssn.queues.get(job.queue)

        def queue_less(l: QueueInfo, r: QueueInfo) -> bool:
            if reclaimer_queue is None:
                return ssn.queue_order_fn(l, r)
            return ssn.victim_queue_order_fn(l, r, reclaimer_queue)

        sort_bundles_for_reclaim(bundles, need, queue_less, ssn.queues)
        ctx = cb.EvictionContext(cb.EVICTION_KIND_GANG_RECLAIM, job, CLUSTER_DOMAIN)
        allowed = ssn.unified_evictable(ctx, flatten_bundles(bundles))
        deciders = ssn.last_victim_deciders
        if not allowed:
            return [], ()
        valid = apply_allowed_tasks(bundles, {t.uid for t in allowed})
        if not valid:
            return [], ()
        sort_bundles_for_reclaim(valid, need, queue_less, ssn.queues)
        return [b for b in valid if b.kind != BUNDLE_WHOLE or self.allow_whole_bundle], deciders


def new() -> GangReclaim:
    return GangReclaim()
