"""The gangpreempt action (actions/gangpreempt): gang-aware preemption inside a queue, job by job.

Queues (every queue of a valid, non-Pending job) are served in QueueOrderFn order; the starving
jobs of a queue, in JobOrderFn order, each get one Statement.  For a preemptor job the action
collects the Pending tasks it still needs (non-gated, with a request; TaskOrderFn), their total
request, and the candidate victims of the domain: Bound/Running preemptable tasks of *other*
jobs of the same queue with strictly lower job priority whose PodGroup allows gang eviction.
Victims are grouped per job into bundles — "safe" tasks, whose eviction keeps their job at or
above minAvailable (and its roles at their minTaskMember), and the "whole" rest, which breaks
the gang — sorted safe first, then the job that would be scheduled last, then usefulness for the
request.  UnifiedEvictable (plugins' gang-eviction votes) filters them; a whole bundle survives
only if every task is allowed.  Bundles are then added one by one; as soon as the domain's
idle + releasing resources plus the selected victims cover the request, a dry run evicts them
and pipelines the pending tasks; if the job is then JobPipelined the plan is replayed into the
Statement, which is committed (evictions go out) — otherwise the next bundle is added.  A job
that does not become pipelined has its Statement discarded.

Hypernodes are not modelled: the only domain is the whole cluster (Volcano's fallback for jobs
without hard network topology), so `maxDomains` has no effect beyond validation.  Arguments:
`maxDomains` (8; values <= 0 fall back to 8), `allowWholeBundle` (true); the dry run honours
allocate's `predicateErrorCacheEnable` (true).
"""

from __future__ import annotations

from typing import Any

from daemon.scheduler.actions.victims import (
    BUNDLE_WHOLE,
    Bundle,
    apply_allowed_tasks,
    build_nomination_plan,
    collect_pending_tasks_for_gang_eviction,
    create_job_bundles,
    eviction_reason,
    flatten_bundles,
    gang_candidate_status,
    is_job_preemptable_for_gang_eviction,
    session_task,
    sort_bundles_for_preempt,
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
from daemon.scheduler.model.task import TaskInfo

NAME = "gangpreempt"
MAX_DOMAINS = "maxDomains"
ALLOW_WHOLE_BUNDLE = "allowWholeBundle"
DEFAULT_MAX_DOMAINS = 8
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"
CLUSTER_DOMAIN = "<cluster-top-hypernode>"


def pick_domains_from_gradients(gradients: list[list[str]], max_domains: int, fallback: str) -> list[str]:
    """PickDomainsFromGradients: flatten, de-duplicate, cap at `max_domains`; `fallback` if none."""
    seen: set[str] = set()
    out: list[str] = []
    for row in gradients:
        for name in row:
            if not name or name in seen:
                continue
            seen.add(name)
            out.append(name)
            if max_domains > 0 and len(out) >= max_domains:
                return out
    if not out and fallback:
        out.append(fallback)
    return out


class GangPreempt:
    name = NAME

    def __init__(self) -> None:
        self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole_bundle = True
        self.enable_error_cache = True
        self.warnings: list[str] = []

    def parse_arguments(self, args: dict[str, Any], allocate_args: dict[str, Any]) -> None:
        self.max_domains = arg_int(args, MAX_DOMAINS, self.max_domains)
        if self.max_domains <= 0:
            self.warnings.append(
                f"{NAME}: {MAX_DOMAINS} {self.max_domains} is not positive; using {DEFAULT_MAX_DOMAINS}"
            )
            self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole_bundle = arg_bool(args, ALLOW_WHOLE_BUNDLE, self.allow_whole_bundle)
        self.enable_error_cache = arg_bool(allocate_args, PREDICATE_ERROR_CACHE, True)

    # ------------------------------------------------------------------ the action
    def execute(self, ssn: Session) -> None:
        self.parse_arguments(ssn.conf.action_arguments(NAME), ssn.conf.action_arguments("allocate"))
        ssn.warnings.extend(w for w in self.warnings if w not in ssn.warnings)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        seen_queues: set[str] = set()
        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
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
            preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)

        while not queues.empty():
            queue = queues.pop()
            jobs = preemptors.get(queue.uid)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                self.preempt_job(ssn, stmt, queue, job)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()

    def preempt_job(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> bool:
        """preemptJobInDomains over the single cluster domain; True if a plan was applied."""
        pending = collect_pending_tasks_for_gang_eviction(ssn, job)
        if not pending:
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
            reason = eviction_reason("preempted", "", job, deciders)
            selected: list[TaskInfo] = []
            for bundle in bundles:
                selected.extend(bundle.tasks)
                available = idle.clone().add(sum_resreq(selected))
                if not need.less_equal(available):
                    continue
                plan = build_nomination_plan(
                    ssn, queue, job, nodes, list(selected), reason, self.enable_error_cache
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
        """selectDomainBundles: the ordered, plugin-approved victim bundles of the domain."""
        by_job: dict[str, list[TaskInfo]] = {}
        for node in nodes:
            for nt in node.tasks.values():
                t = session_task(ssn, nt)
                if t is None or not gang_candidate_status(t):
                    continue
                vjob = ssn.jobs[t.job]
                if vjob.queue != job.queue or not is_job_preemptable_for_gang_eviction(vjob):
                    continue
                if job.priority <= vjob.priority or t.job == job.uid:
                    continue
                by_job.setdefault(t.job, []).append(t)
        bundles: list[Bundle] = []
        for uid in sorted(by_job):
            bundles.extend(create_job_bundles(ssn.jobs[uid], by_job[uid]))
        if not bundles:
            return [], ()

        def victim_job_less(l: JobInfo, r: JobInfo) -> bool:
            return not ssn.job_order_fn(l, r)

        sort_bundles_for_preempt(bundles, need, victim_job_less)
        ctx = cb.EvictionContext(cb.EVICTION_KIND_GANG_PREEMPT, job, CLUSTER_DOMAIN)
        allowed = ssn.unified_evictable(ctx, flatten_bundles(bundles))
        deciders = ssn.last_victim_deciders
        if not allowed:
            return [], ()
        valid = apply_allowed_tasks(bundles, {t.uid for t in allowed})
        if not valid:
            return [], ()
        sort_bundles_for_preempt(valid, need, victim_job_less)
        return [b for b in valid if b.kind != BUNDLE_WHOLE or self.allow_whole_bundle], deciders


def new() -> GangPreempt:
    return GangPreempt()
