"""The proportion plugin: weighted fair share of the cluster between queues (plugins/proportion).

Deserved shares are computed by Volcano's iterative division among queues that have jobs;
queues are ordered by priority then share; a queue is overused once allocated reaches deserved
on every dimension; a task is allocatable while the queue stays within deserved on the task's
dimensions; jobs are admitted while minResources fit the queue's real capability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Default, Resource, exceeded_part, share
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.proportion_sums import (
    KeptSums,
    add_requests,
    add_twice,
    job_figures,
    kept_queue_sums,
)
from fumarole.daemon.scheduler.plugins.util import (
    deduct_sch_gated,
    deep_equal,
    format_resource_names,
    resource_max,
)

NAME = "proportion"
INF = float("inf")


@dataclass(slots=True)
class QueueAttr:
    name: str
    weight: int
    deserved: Resource = field(default_factory=Resource)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    guarantee: Resource = field(default_factory=Resource)
    capability: Resource | None = None
    real_capability: Resource = field(default_factory=Resource)
    share: float = 0.0

    def update_share(self) -> None:
        res = 0.0
        for rn in self.deserved.resource_names():
            s = share(self.allocated.get(rn), self.deserved.get(rn))
            if s > res:
                res = s
        self.share = res


def compute_deserved(attrs: dict[str, QueueAttr], total: Resource) -> None:
    """Volcano's iterative division of `total` by weight (queues visited in name order)."""
    remaining = total.clone()
    meet: set[str] = set()
    names = sorted(attrs)
    while True:
        total_weight = sum(attrs[n].weight for n in names if n not in meet)
        if total_weight == 0:
            break
        old_remaining = remaining.clone()
        increased = Resource()
        decreased = Resource()
        for n in names:
            if n in meet:
                continue
            attr = attrs[n]
            old = attr.deserved.clone()
            attr.deserved.add(remaining.clone().multi(attr.weight / total_weight))
            attr.deserved.min_dimension_resource(attr.real_capability, Default.INFINITY)
            attr.deserved.min_dimension_resource(attr.request, Default.ZERO)
            attr.deserved = resource_max(attr.deserved, attr.guarantee)
            attr.update_share()
            if attr.request.less_equal(attr.deserved, Default.ZERO) or deep_equal(attr.deserved, old):
                meet.add(n)
            inc, dec = attr.deserved.diff(old, Default.ZERO)
            increased.add(inc)
            decreased.add(dec)
        remaining = exceeded_part(remaining.clone().add(decreased), increased)
        if remaining.is_empty() or deep_equal(remaining, old_remaining):
            break


class ProportionPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.attrs: dict[str, QueueAttr] = {}

    def queue_figures(self) -> dict[str, dict[str, Any]]:
        """Per queue: deserved, allocated, capability (real), share; for `schedule` output."""
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(self.attrs):
            a = self.attrs[name]
            out[name] = {
                "weight": a.weight,
                "deserved": a.deserved,
                "allocated": a.allocated,
                "capability": a.real_capability,
                "request": a.request,
                "share": a.share,
            }
        return out

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource.clone()
        total_guarantee = Resource()
        for qname in sorted(ssn.queues):
            q = ssn.queues[qname]
            if q.guarantee is not None and not _empty_list(q.guarantee):
                total_guarantee.add(q.guarantee)
        attrs = self._kept_sums(ssn, total, total_guarantee)
        if attrs is None:
            attrs = self._queue_sums(ssn, total, total_guarantee)
        compute_deserved(attrs, total)
        self.attrs = attrs
        self._register(ssn, attrs)

    def _kept_sums(
        self, ssn: Session, total: Resource, total_guarantee: Resource
    ) -> dict[str, QueueAttr] | None:
        """The queue sums from the ones kept across sessions (proportion_sums.py), or None (no
        store, or sums that must be made cold; the store is then dropped)."""
        kept = ssn.kept_state(NAME, KeptSums)
        if kept is None:
            return None
        sums = kept_queue_sums(ssn.jobs, ssn.snapshot_jobs, kept)
        if sums is None:
            ssn.forget_kept(NAME)
            return None
        attrs: dict[str, QueueAttr] = {}
        for name, s in sums.items():
            attr = attrs[name] = self._new_attr(ssn.queues[name], total, total_guarantee)
            attr.allocated = s.allocated.clone()
            attr.request = s.request.clone()
            attr.inqueue = s.inqueue.clone()
            attr.elastic = s.elastic.clone()
        return attrs

    def _queue_sums(self, ssn: Session, total: Resource, total_guarantee: Resource) -> dict[str, QueueAttr]:
        """Per queue the sums of its jobs' allocated, request, inqueue and elastic figures, job by
        job in uid order and task by task (Volcano's order)."""
        attrs: dict[str, QueueAttr] = {}
        for job in ssn.jobs.values():  # in uid order (Session.__init__ fills it sorted)
            attr = attrs.get(job.queue)
            if attr is None:
                attr = attrs[job.queue] = self._new_attr(ssn.queues[job.queue], total, total_guarantee)
            # JobInfo keeps the sum of its allocated-status requests (integer vectors: the same sum
            # as task by task).
            allocated = job.allocated
            add_twice(attr.allocated, attr.request, allocated)
            figures = job_figures(job, allocated, sum_pending=False)
            pending = job.peek_in(TaskStatus.PENDING)
            if pending:
                add_requests(attr.request, pending.values())
            if figures.inqueue is not None:
                attr.inqueue.add(figures.inqueue)
            if figures.elastic is not None:
                attr.elastic.add(figures.elastic)
            else:
                # elastic_resources of a job without minResources and scalars: the positive part
                # of its cpu and memory (what adding exceeded_part(allocated, {}) adds).
                elastic = attr.elastic
                if allocated.cpu > 0:
                    elastic.cpu += allocated.cpu
                if allocated.memory > 0:
                    elastic.memory += allocated.memory
        return attrs

    @staticmethod
    def _new_attr(queue: QueueInfo, total: Resource, total_guarantee: Resource) -> QueueAttr:
        attr = QueueAttr(name=queue.name, weight=queue.weight)
        if queue.capability is not None and not _empty_list(queue.capability):
            cap = queue.capability.clone()
            if cap.cpu <= 0:
                cap.cpu = INF
            if cap.memory <= 0:
                cap.memory = INF
            attr.capability = cap
        if queue.guarantee is not None and not _empty_list(queue.guarantee):
            attr.guarantee = queue.guarantee.clone()
        real = exceeded_part(total, total_guarantee).add(attr.guarantee)
        if attr.capability is not None:
            real.min_dimension_resource(attr.capability, Default.INFINITY)
        attr.real_capability = real
        return attr

    def _register(self, ssn: Session, attrs: dict[str, QueueAttr]) -> None:
        def queue_order(l: QueueInfo, r: QueueInfo) -> int:
            if l.priority != r.priority:
                return r.priority - l.priority
            ls, rs = attrs[l.uid].share, attrs[r.uid].share
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def reclaimable(reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            allocations: dict[str, Resource] = {}
            victims = []
            for r in reclaimees:
                job = ssn.jobs.get(r.job)
                if job is None:
                    continue
                attr = attrs.get(job.queue)
                if attr is None:
                    continue
                if job.queue not in allocations:
                    allocations[job.queue] = attr.allocated.clone()
                allocated = allocations[job.queue]
                if not allocated.less_equal(attr.deserved, Default.ZERO):
                    allocated.sub(r.resreq)
                    victims.append(r)
            return victims, cb.PERMIT

        def overused(queue: QueueInfo) -> bool:
            attr = attrs.get(queue.uid)
            if attr is None:
                return False
            return attr.deserved.less_equal(attr.allocated, Default.ZERO)

        def queue_allocatable(queue: QueueInfo, req: Resource) -> bool:
            if not queue.is_open():
                return False
            attr = attrs.get(queue.uid)
            if attr is None:
                return False
            future = attr.allocated.clone().add(req)
            ok, _ = future.less_equal_with_dimension(attr.deserved, req)
            return ok

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            return queue_allocatable(queue, task.resreq)

        def preemptive(queue: QueueInfo, candidates: TaskInfo | Sequence[TaskInfo]) -> bool:
            # Volcano's PreemptiveFn takes a list (gangreclaim asks for a whole job's pending
            # tasks at once): their summed request must fit the deserved share.
            tasks = [candidates] if isinstance(candidates, TaskInfo) else candidates
            total = Resource()
            for t in tasks:
                total.add(t.resreq)
            return queue_allocatable(queue, total)

        def enqueueable(job: JobInfo) -> int:
            queue = ssn.queues[job.queue]
            attr = attrs[job.queue]
            if not queue.is_open():
                ssn.enqueue_rejections[job.uid] = (
                    f"proportion: queue {queue.name} is not open (state {queue.state!r})"
                )
                return cb.REJECT
            if job.min_resources is None:
                return cb.PERMIT
            min_req = job.min_resources
            r = min_req.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
            ok, names = r.less_equal_with_dimension(attr.real_capability, min_req)
            if ok:
                return cb.PERMIT
            ssn.enqueue_rejections[job.uid] = "proportion: " + format_resource_names(
                "queue resource quota insufficient", "insufficient", names
            )
            return cb.REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None:
                return
            attr = attrs.get(job.queue)
            if attr is None:
                return
            attr.inqueue.add(deduct_sch_gated(job, job.min_resources))

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            attr = attrs.get(job.queue) if job is not None else None
            if attr is None:
                return
            attr.allocated.add(task.resreq)
            attr.update_share()

        def on_deallocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            attr = attrs.get(job.queue) if job is not None else None
            if attr is None:
                return
            attr.allocated.sub(task.resreq)
            attr.update_share()

        ssn.register(cb.QUEUE_ORDER, NAME, queue_order)
        ssn.register(cb.RECLAIMABLE, NAME, reclaimable)
        ssn.register(cb.OVERUSED, NAME, overused)
        ssn.register(cb.ALLOCATABLE, NAME, allocatable)
        ssn.register(cb.PREEMPTIVE, NAME, preemptive)
        ssn.register(cb.JOB_ENQUEUEABLE, NAME, enqueueable)
        ssn.register(cb.JOB_ENQUEUED, NAME, enqueued)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))
        self._register_simulate(ssn, attrs)

    @staticmethod
    def _register_simulate(ssn: Session, attrs: dict[str, QueueAttr]) -> None:
        """PrePredicate (writes the queue figures into the task's cycle state) and Simulate*.

        As in Volcano, SimulateAllocatable answers false when the cycle state holds no proportion
        state, i.e. when proportion's PrePredicate (flag enablePredicate) did not run for the task.
        """

        def pre_predicate(task: TaskInfo) -> Exception | None:
            ssn.cycle_state(task.uid)[SIM_STATE_KEY] = ProportionSimState(attrs)
            return None

        def sim_attr(state: dict[str, Any], task: TaskInfo) -> QueueAttr | None:
            st = state.get(SIM_STATE_KEY)
            job = ssn.jobs.get(task.job)
            if not isinstance(st, ProportionSimState) or job is None:
                return None
            return st.attrs.get(job.queue)

        def simulate_allocatable(queue: QueueInfo, task: TaskInfo, state: dict[str, Any]) -> bool:
            st = state.get(SIM_STATE_KEY)
            attr = st.attrs.get(queue.uid) if isinstance(st, ProportionSimState) else None
            if attr is None:
                return False
            ok, _ = (
                attr.allocated.clone().add(task.resreq).less_equal_with_dimension(attr.deserved, task.resreq)
            )
            return ok

        def simulate_add(state: dict[str, Any], task: TaskInfo, other: TaskInfo, node: Any) -> None:
            attr = sim_attr(state, other)
            if attr is not None:
                attr.allocated.add(other.resreq)
                attr.update_share()

        def simulate_remove(state: dict[str, Any], task: TaskInfo, other: TaskInfo, node: Any) -> None:
            attr = sim_attr(state, other)
            if attr is not None:
                attr.allocated.sub(other.resreq)
                attr.update_share()

        ssn.register(cb.PRE_PREDICATE, NAME, pre_predicate)
        ssn.register(cb.SIMULATE_ALLOCATABLE, NAME, simulate_allocatable)
        ssn.register(cb.SIMULATE_ADD_TASK, NAME, simulate_add)
        ssn.register(cb.SIMULATE_REMOVE_TASK, NAME, simulate_remove)

    def on_session_close(self, ssn: Session) -> None:
        return None


SIM_STATE_KEY = "proportion"


class ProportionSimState:
    """Proportion's entry in a task's cycle state: the queue figures as of its PrePredicate.

    PrePredicate stores a reference to the live figures; `clone()` (taken by every dry run before
    it simulates anything) copies them, so a dry run never touches the session's figures.
    """

    __slots__ = ("attrs",)

    def __init__(self, attrs: dict[str, QueueAttr]) -> None:
        self.attrs = attrs

    def clone(self) -> ProportionSimState:
        return ProportionSimState(
            {
                k: replace(a, allocated=a.allocated.clone(), deserved=a.deserved.clone())
                for k, a in self.attrs.items()
            }
        )


def _empty_list(r: Resource) -> bool:
    """Whether the manifest's ResourceList was empty (no dimension given at all)."""
    return r.cpu == 0 and r.memory == 0 and not r.scalars


def new(arguments: dict[str, Any]) -> ProportionPlugin:
    return ProportionPlugin(arguments)
