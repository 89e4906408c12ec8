"""The gang-eviction skeleton shared by gangpreempt and gangreclaim (Volcano's two actions have
the same shape): starving jobs served queue by queue, one Statement per job, victim bundles of
the domain approved by UnifiedEvictable, then the first bundle prefix whose dry run lets the job
proceed.  Subclasses say which tasks are candidates, how bundles sort, the eviction kind and
cause, and any per-queue or per-job pre-check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fumarole.daemon.scheduler.actions.victims import (
    BUNDLE_WHOLE,
    Bundle,
    apply_allowed_tasks,
    build_nomination_plan,
    collect_pending_tasks_for_gang_eviction,
    create_job_bundles,
    flatten_bundles,
    session_task,
    sum_idle_and_releasing,
    sum_resreq,
)
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_bool, arg_int
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskInfo

MAX_DOMAINS = "maxDomains"
ALLOW_WHOLE_BUNDLE = "allowWholeBundle"
DEFAULT_MAX_DOMAINS = 8
DEFAULT_ALLOW_WHOLE_BUNDLE = True
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"
CLUSTER_DOMAIN = "<cluster-top-hypernode>"

BundleSort = Callable[[list[Bundle]], None]


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


class GangEviction:
    """One of Volcano's gang-eviction actions; subclasses fill in the hooks below."""

    name = ""
    kind = ""  # combinators.EVICTION_KIND_*

    def __init__(self) -> None:
        self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole_bundle = DEFAULT_ALLOW_WHOLE_BUNDLE
        self.enable_error_cache = True
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ hooks
    def skip_queue(self, ssn: Session, queue: QueueInfo) -> bool:
        return False

    def may_evict_for(self, ssn: Session, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo]) -> bool:
        return True

    def candidate(self, ssn: Session, t: TaskInfo, job: JobInfo) -> bool:
        raise NotImplementedError

    def bundle_sort(self, ssn: Session, job: JobInfo, need: Resource) -> BundleSort:
        raise NotImplementedError

    def reason(self, queue: QueueInfo, job: JobInfo, deciders: tuple[str, ...]) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ arguments
    def parse_arguments(self, args: dict[str, Any], allocate_args: dict[str, Any]) -> None:
        self.max_domains = arg_int(args, MAX_DOMAINS, self.max_domains)
        if self.max_domains <= 0:
            self.warnings.append(
                f"{self.name}: {MAX_DOMAINS} {self.max_domains} is not positive; using {DEFAULT_MAX_DOMAINS}"
            )
            self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole_bundle = arg_bool(args, ALLOW_WHOLE_BUNDLE, self.allow_whole_bundle)
        self.enable_error_cache = arg_bool(allocate_args, PREDICATE_ERROR_CACHE, True)

    # ------------------------------------------------------------------ the action
    def execute(self, ssn: Session) -> None:
        self.parse_arguments(ssn.conf.action_arguments(self.name), ssn.conf.action_arguments("allocate"))
        ssn.warnings.extend(w for w in self.warnings if w not in ssn.warnings)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        seen_queues: set[str] = set()
        starving: dict[str, PriorityQueue[JobInfo]] = {}
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
            starving.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)

        while not queues.empty():
            queue = queues.pop()
            if self.skip_queue(ssn, queue):
                continue
            jobs = starving.get(queue.uid)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                self.evict_for_job(ssn, stmt, queue, job)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()

    def evict_for_job(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> bool:
        """The job's evictions over the single cluster domain; True if a plan was applied."""
        pending = collect_pending_tasks_for_gang_eviction(ssn, job)
        if not pending or not self.may_evict_for(ssn, queue, job, pending):
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
            reason = self.reason(queue, job, deciders)
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
        """selectDomainBundles: the ordered, plugin-approved victim bundles of the domain, and the
        plugins whose UnifiedEvictable votes approved them."""
        by_job: dict[str, list[TaskInfo]] = {}
        for node in nodes:
            for nt in node.tasks.values():
                t = session_task(ssn, nt)
                if t is not None and self.candidate(ssn, t, job):
                    by_job.setdefault(t.job, []).append(t)
        bundles: list[Bundle] = []
        for uid in sorted(by_job):
            bundles.extend(create_job_bundles(ssn.jobs[uid], by_job[uid]))
        if not bundles:
            return [], ()
        sort = self.bundle_sort(ssn, job, need)
        sort(bundles)
        ctx = cb.EvictionContext(self.kind, job, CLUSTER_DOMAIN)
        allowed = ssn.unified_evictable(ctx, flatten_bundles(bundles))
        deciders = ssn.last_victim_deciders
        if not allowed:
            return [], ()
        valid = apply_allowed_tasks(bundles, {t.uid for t in allowed})
        if not valid:
            return [], ()
        sort(valid)
        return [b for b in valid if b.kind != BUNDLE_WHOLE or self.allow_whole_bundle], tuple(deciders)
