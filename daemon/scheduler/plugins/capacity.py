"""The capacity plugin: queues limited by configured capability/deserved/guarantee, flat or hierarchical.

Volcano's plugins/capacity.  Deserved is configured on each queue (spec.deserved), not computed.
Flat mode covers the queues that have jobs; with `enableHierarchy: true` every queue is placed in
a tree under `root` (spec.parent) and allocation, admission and reclaim checks hold at every level.
Queue figures are built in `capacity_tree`; this module registers the session callbacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_bool, arg_int
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import ROOT_QUEUE, QueueInfo
from fumarole.daemon.scheduler.model.resources import Default, Resource
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.capacity_tree import (
    BuildResult,
    QueueAttr,
    ancestor_at_depth,
    ancestors_within,
    build_flat,
    build_hierarchical,
    common_level,
    compare_share_with_deserved,
    greater_partly_relevant,
    intersection,
    intersection_without_pods,
    less_equal_partly_zero_filtered,
)
from fumarole.daemon.scheduler.plugins.util import deduct_sch_gated, format_resource_names

NAME = "capacity"
ANCESTOR_RECLAIM_LEVEL = "ancestorReclaimLevel"
DRA_ENABLE = "capacity.DynamicResourceAllocationEnable"
DRA_CONSUMABLE_CAPACITY_ENABLE = "capacity.DRAConsumableCapacityEnable"
# Kubernetes feature-gate defaults Volcano falls back to (DynamicResourceAllocation is GA and on;
# DRAConsumableCapacity is alpha and off).  Fumarole has no ResourceClaims: both are inert.
DRA_ENABLE_DEFAULT = True
DRA_CONSUMABLE_CAPACITY_DEFAULT = False


@dataclass(slots=True)
class CapacityState:
    """Capacity's entry in a task's cycle state: every queue's allocation as of PrePredicate.

    Only allocations move during a session (real capabilities, deserved and the tree are fixed
    once the session is open), so the dry-run copy holds just those and reads the rest from the
    live figures.
    """

    attrs: dict[str, QueueAttr]
    allocated: dict[str, Resource] = field(default_factory=dict)

    def clone(self) -> CapacityState:
        return CapacityState(self.attrs, {k: v.clone() for k, v in self.allocated.items()})


class CapacityPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        level = arg_int(arguments, ANCESTOR_RECLAIM_LEVEL, 0)
        self.ancestor_reclaim_level = max(level, 0)
        self.dra_enable = arg_bool(arguments, DRA_ENABLE, DRA_ENABLE_DEFAULT)
        self.dra_consumable_capacity_enable = arg_bool(
            arguments, DRA_CONSUMABLE_CAPACITY_ENABLE, DRA_CONSUMABLE_CAPACITY_DEFAULT
        )
        self.hierarchy = False
        self.ready = True
        self.problem = ""
        self.attrs: dict[str, QueueAttr] = {}

    # ----------------------------------------------------------------- figures for `schedule`
    def queue_figures(self) -> dict[str, dict[str, Any]]:
        """Per queue: deserved, allocated, capability (real), guarantee, share (hierarchy: every queue)."""
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(self.attrs):
            a = self.attrs[name]
            out[name] = {
                "deserved": a.deserved,
                "allocated": a.allocated,
                "capability": a.real_capability,
                "guarantee": a.guarantee,
                "request": a.request,
                "inqueue": a.inqueue,
                "share": a.share,
                "parent": a.ancestors[-1] if a.ancestors else "",
            }
        return out

    # ----------------------------------------------------------------- session
    def on_session_open(self, ssn: Session) -> None:
        opt = ssn.plugin_option(NAME)
        self.hierarchy = bool(opt is not None and opt.flags.get("hierarchy"))
        total = ssn.total_resource.clone()
        res: BuildResult
        if self.hierarchy:
            res = build_hierarchical(ssn.queues, ssn.jobs, total)
        else:
            res = build_flat(ssn.queues, ssn.jobs, total)
        self.attrs = res.attrs
        self.ready = res.ready
        self.problem = res.problem
        ssn.warnings.extend(res.warnings)
        if not self.ready:
            ssn.warnings.append(f"capacity: hierarchy not usable this session: {self.problem}")
        self._register(ssn)

    def on_session_close(self, ssn: Session) -> None:
        # The figures stay readable for `queue_figures` (Volcano only updates metrics here).
        return None

    # ----------------------------------------------------------------- predicates on queues
    def is_leaf(self, queue: str) -> bool:
        attr = self.attrs.get(queue)
        return attr is not None and attr.is_leaf

    def chain(self, queue: str) -> list[QueueAttr]:
        """The queue then its ancestors up to the root (flat mode: the queue alone)."""
        attr = self.attrs.get(queue)
        if attr is None:
            return []
        out = [attr]
        if self.hierarchy:
            out.extend(self.attrs[a] for a in reversed(attr.ancestors) if a in self.attrs)
        return out

    @staticmethod
    def fits_real_capability(attr: QueueAttr, req: Resource) -> tuple[bool, list[str]]:
        """allocated + request <= real capability on the request's dimensions (strict, pods ignored)."""
        future = attr.allocated.clone().add(req)
        return future.less_equal_with_dimension(attr.real_capability, req)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not queue.is_open() or not self.ready:
            return False
        if self.hierarchy and not self.is_leaf(queue.uid):
            return False
        levels = self.chain(queue.uid)
        if not levels:
            return False
        return all(self.fits_real_capability(a, task.resreq)[0] for a in levels)

    def job_enqueueable(self, ssn: Session, job: JobInfo) -> int:
        if not self.ready:
            ssn.enqueue_rejections[job.uid] = f"capacity: queue hierarchy not usable: {self.problem}"
            return cb.REJECT
        if self.hierarchy and not self.is_leaf(job.queue):
            ssn.enqueue_rejections[job.uid] = f"capacity: queue {job.queue} is not a leaf queue"
            return cb.REJECT
        queue = ssn.queues[job.queue]
        if not queue.is_open():
            ssn.enqueue_rejections[job.uid] = (
                f"capacity: queue {queue.name} is not open (state {queue.state!r})"
            )
            return cb.REJECT
        if job.min_resources is None:
            return cb.PERMIT
        min_req = job.min_resources
        for attr in self.chain(job.queue):
            r = min_req.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
            ok, names = r.less_equal_with_dimension(attr.real_capability, min_req)
            if not ok:
                where = "" if attr.name == job.queue else f" (at ancestor queue {attr.name})"
                ssn.enqueue_rejections[job.uid] = (
                    "capacity: "
                    + format_resource_names("queue resource quota insufficient", "insufficient", names)
                    + where
                )
                return cb.REJECT
        return cb.PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.min_resources is None:
            return
        deducted = deduct_sch_gated(job, job.min_resources)
        for attr in self.chain(job.queue):
            attr.inqueue.add(deducted)

    def preemptive(self, queue: QueueInfo, candidates: TaskInfo | Sequence[TaskInfo]) -> bool:
        """May the queue reclaim for these tasks: within real capability and below deserved somewhere."""
        if not self.ready or not queue.is_open():
            return False
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return False
        tasks = [candidates] if isinstance(candidates, TaskInfo) else list(candidates)
        total_req = Resource()
        for t in tasks:
            total_req.add(t.resreq)
        future = attr.allocated.clone().add(total_req)
        if not future.less_equal_with_dimension(attr.real_capability, total_req)[0]:
            return False
        if less_equal_partly_zero_filtered(future, attr.deserved, total_req)[0]:
            return True
        if self.hierarchy and self.ancestor_reclaim_level > 0:
            for level in range(1, self.ancestor_reclaim_level + 1):
                aid = ancestor_at_depth(attr, level)
                if aid is None or aid == ROOT_QUEUE or aid not in self.attrs:
                    continue
                anc = self.attrs[aid]
                fa = anc.allocated.clone().add(total_req)
                if less_equal_partly_zero_filtered(fa, anc.deserved, total_req)[0]:
                    return True
        return False

    # ----------------------------------------------------------------- reclaim
    def shares_non_root_ancestor(self, a: QueueAttr, b: QueueAttr) -> bool:
        """Whether two queues have a common non-root ancestor within ancestorReclaimLevel levels."""
        if self.ancestor_reclaim_level <= 0:
            return False
        sa = set(ancestors_within(a, self.ancestor_reclaim_level).values())
        sb = set(ancestors_within(b, self.ancestor_reclaim_level).values())
        return any(x != ROOT_QUEUE and x in sb for x in sa)

    def reclaimee_ancestor_to_check(
        self, reclaimer: QueueAttr, reclaimee: QueueAttr, level: int
    ) -> tuple[QueueAttr | None, bool]:
        """The reclaimee's ancestor at `level` to check, unless it is root or shared with the reclaimer."""
        if level <= 0:
            return None, False
        ra = ancestor_at_depth(reclaimee, level)
        if ra is None or ra == ROOT_QUEUE:
            return None, False
        if ancestor_at_depth(reclaimer, level) == ra:
            return None, False
        return self.attrs.get(ra), True

    def victim_order(self, ssn: Session, victims: list[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        """Victims in ssn.BuildVictimsPriorityQueue pop order."""

        def job_then_task(lj: JobInfo, rj: JobInfo, l: TaskInfo, r: TaskInfo) -> bool:
            c = ssn.job_order_compare(lj, rj)
            if c != 0:
                return c > 0
            return not ssn.task_order_fn(l, r)

        def less(l: TaskInfo, r: TaskInfo) -> bool:
            if l.job == r.job:
                return not ssn.task_order_fn(l, r)
            lj, rj = ssn.jobs.get(l.job), ssn.jobs.get(r.job)
            if lj is None or rj is None:
                if lj is None and rj is None:
                    return not ssn.task_order_fn(l, r)
                return lj is None
            pj = ssn.jobs.get(preemptor.job)
            if pj is None or lj.queue == rj.queue:
                return job_then_task(lj, rj, l, r)
            return ssn.victim_queue_order_fn(ssn.queues[lj.queue], ssn.queues[rj.queue], ssn.queues[pj.queue])

        pq: PriorityQueue[TaskInfo] = PriorityQueue(less)
        for v in victims:
            pq.push(v)
        out = []
        while not pq.empty():
            out.append(pq.pop())
        return out

    def reclaimable(
        self, ssn: Session, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        """Victims among `reclaimees`: over-deserved queues only, never below guarantee."""
        if not self.ready:
            return [], cb.REJECT
        rjob = ssn.jobs.get(reclaimer.job)
        rattr = self.attrs.get(rjob.queue) if rjob is not None else None
        if rattr is None:
            return [], cb.REJECT
        hier_levels = self.ancestor_reclaim_level if self.hierarchy else 0
        allocations: dict[str, Resource] = {}
        victims: list[TaskInfo] = []
        for reclaimee in self.victim_order(ssn, reclaimees, reclaimer):
            job = ssn.jobs.get(reclaimee.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if job is None or attr is None:
                continue
            # A reclaimee sharing no dimension (pods aside) with the reclaimer frees nothing useful.
            if not intersection_without_pods(reclaimee.resreq, reclaimer.init_resreq):
                continue
            allocated = allocations.setdefault(job.queue, attr.allocated.clone())
            if not attr.guarantee.less_equal(allocated.clone().sub(reclaimee.resreq), Default.ZERO):
                continue
            if not intersection(reclaimee.resreq, attr.deserved):
                # Immediate victim: its queue deserves nothing of what it uses ...
                if (
                    hier_levels > 0
                    and self.shares_non_root_ancestor(rattr, attr)
                    and not intersection(reclaimer.resreq, rattr.deserved)
                ):
                    # ... unless both sit under a common non-root ancestor and the reclaimer's
                    # own queue deserves nothing of what it asks either (no real contention).
                    continue
            elif not greater_partly_relevant(allocated, attr.deserved, reclaimee.resreq)[0]:
                continue
            eligible = True
            ancestor_allocs: list[Resource] = []
            for level in range(1, hier_levels + 1):
                anc, need = self.reclaimee_ancestor_to_check(rattr, attr, level)
                if not need:
                    continue
                if anc is None:
                    eligible = False
                    break
                aalloc = allocations.setdefault(anc.name, anc.allocated.clone())
                ancestor_allocs.append(aalloc)
                if not intersection(reclaimee.resreq, anc.deserved):
                    continue
                if not greater_partly_relevant(aalloc, anc.deserved, reclaimee.resreq)[0]:
                    eligible = False
                    break
            if not eligible:
                continue
            allocated.sub(reclaimee.resreq)
            for aalloc in ancestor_allocs:
                aalloc.sub(reclaimee.resreq)
            victims.append(reclaimee)
        return victims, cb.PERMIT

    def unified_evictable(
        self, ssn: Session, ctx: cb.EvictionContext, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        """Gang preempt: every candidate.  Gang reclaim: guarantee and deserved checks per victim queue."""
        if ctx.kind == cb.EVICTION_KIND_GANG_PREEMPT:
            return list(candidates), cb.PERMIT
        if not self.ready:
            return [], cb.REJECT
        allocations: dict[str, Resource] = {}
        victims: list[TaskInfo] = []
        for reclaimee in candidates:
            job = ssn.jobs.get(reclaimee.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if job is None or attr is None:
                continue
            allocated = allocations.setdefault(job.queue, attr.allocated.clone())
            if not attr.guarantee.less_equal(allocated.clone().sub(reclaimee.resreq), Default.ZERO):
                continue
            if (
                not intersection(reclaimee.resreq, attr.deserved)
                or greater_partly_relevant(allocated, attr.deserved, reclaimee.resreq)[0]
            ):
                allocated.sub(reclaimee.resreq)
                victims.append(reclaimee)
        return victims, cb.PERMIT

    # ----------------------------------------------------------------- simulation (preempt)
    def pre_predicate(self, ssn: Session, task: TaskInfo) -> Exception | None:
        """Copy every queue's allocation into the task's cycle state (read by Simulate*); never fails."""
        allocated = {k: self.attrs[k].allocated.clone() for k in sorted(self.attrs)}
        ssn.cycle_state(task.uid)[NAME] = CapacityState(self.attrs, allocated)
        return None

    @staticmethod
    def state_of(state: Any) -> CapacityState | None:
        """Capacity's entry of a cycle state, None when its PrePredicate did not run for the task."""
        got = state.get(NAME) if isinstance(state, Mapping) else None
        return got if isinstance(got, CapacityState) else None

    def simulate_move(self, ssn: Session, state: Any, task: TaskInfo, sign: int) -> None:
        """SimulateAddTask (+1) / SimulateRemoveTask (-1): move `task`'s request in the dry-run copy.

        (Volcano also refreshes the leaf's share in its copy; nothing reads it there.)
        """
        st = self.state_of(state)
        job = ssn.jobs.get(task.job)
        if st is None or job is None:
            return
        for attr in self.chain(job.queue):
            alloc = st.allocated.get(attr.name)
            if alloc is None:
                continue
            if sign > 0:
                alloc.add(task.resreq)
            else:
                alloc.sub(task.resreq)

    def simulate_allocatable(self, queue: QueueInfo, task: TaskInfo, state: Any) -> bool:
        """Allocatable against the dry-run allocations (no queue-state check, as Volcano)."""
        st = self.state_of(state)
        if st is None or not self.ready:
            return False
        if self.hierarchy and not self.is_leaf(queue.uid):
            return False
        levels = self.chain(queue.uid)
        if not levels:
            return False
        for a in levels:
            alloc = st.allocated.get(a.name, a.allocated)
            future = alloc.clone().add(task.resreq)
            if not future.less_equal_with_dimension(a.real_capability, task.resreq)[0]:
                return False
        return True

    # ----------------------------------------------------------------- events
    def on_allocate(self, ssn: Session, task: TaskInfo, sign: int) -> None:
        job = ssn.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        if sign > 0:
            attr.allocated.add(task.resreq)
        else:
            attr.allocated.sub(task.resreq)
        attr.update_share()
        if self.hierarchy:
            # Ancestors' allocations follow, but their shares are not recomputed (Volcano).
            for a in attr.ancestors:
                if sign > 0:
                    self.attrs[a].allocated.add(task.resreq)
                else:
                    self.attrs[a].allocated.sub(task.resreq)

    # ----------------------------------------------------------------- orders
    def queue_order_flat(self, l: QueueInfo, r: QueueInfo) -> int:
        if l.priority != r.priority:
            return r.priority - l.priority
        la, ra = self.attrs.get(l.uid), self.attrs.get(r.uid)
        if la is None or ra is None:
            return 0
        return compare_share_with_deserved(la, ra)

    def queue_order_tree(self, l: QueueInfo, r: QueueInfo) -> int:
        """Priority; leaves before inner queues; two leaves compare the subtrees where their paths part."""
        if l.priority != r.priority:
            return r.priority - l.priority
        la, ra = self.attrs.get(l.uid), self.attrs.get(r.uid)
        if la is None or ra is None:
            return 0
        if la.is_leaf != ra.is_leaf:
            return -1 if la.is_leaf else 1
        if not la.is_leaf:
            return compare_share_with_deserved(la, ra)
        level = common_level(la, ra)
        lp = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.name
        rp = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra.name
        return compare_share_with_deserved(self.attrs[lp], self.attrs[rp])

    def victim_queue_order(self, l: QueueInfo, r: QueueInfo, preemptor: QueueInfo | None) -> int:
        """Victims first from the queue whose common ancestor with the preemptor's queue is deeper."""
        if preemptor is None:
            return 0
        la, ra, pa = self.attrs.get(l.uid), self.attrs.get(r.uid), self.attrs.get(preemptor.uid)
        if la is None or ra is None or pa is None:
            return 0
        ll, rl = common_level(la, pa), common_level(ra, pa)
        if ll == rl:
            return 0
        return -1 if ll > rl else 1

    # ----------------------------------------------------------------- registration
    def _register(self, ssn: Session) -> None:
        ssn.register(cb.RECLAIMABLE, NAME, lambda rr, rs: self.reclaimable(ssn, rr, rs))
        ssn.register(cb.UNIFIED_EVICTABLE, NAME, lambda ctx, cs: self.unified_evictable(ssn, ctx, cs))
        ssn.register(cb.PREEMPTIVE, NAME, self.preemptive)
        ssn.register(cb.ALLOCATABLE, NAME, self.allocatable)
        ssn.register(cb.JOB_ENQUEUEABLE, NAME, lambda job: self.job_enqueueable(ssn, job))
        ssn.register(cb.JOB_ENQUEUED, NAME, self.job_enqueued)
        ssn.register(cb.PRE_PREDICATE, NAME, lambda task: self.pre_predicate(ssn, task))
        ssn.register(cb.SIMULATE_ADD_TASK, NAME, lambda st, _p, t, _n: self.simulate_move(ssn, st, t, +1))
        ssn.register(cb.SIMULATE_REMOVE_TASK, NAME, lambda st, _p, t, _n: self.simulate_move(ssn, st, t, -1))
        ssn.register(cb.SIMULATE_ALLOCATABLE, NAME, self.simulate_allocatable)
        ssn.add_event_handler(
            EventHandler(lambda t: self.on_allocate(ssn, t, +1), lambda t: self.on_allocate(ssn, t, -1))
        )
        # Volcano registers the queue orders only when the queue figures could be built.
        if not self.hierarchy:
            ssn.register(cb.QUEUE_ORDER, NAME, self.queue_order_flat)
        elif self.ready:
            ssn.register(cb.QUEUE_ORDER, NAME, self.queue_order_tree)
            ssn.register(cb.VICTIM_QUEUE_ORDER, NAME, self.victim_queue_order)


def new(arguments: dict[str, Any]) -> CapacityPlugin:
    return CapacityPlugin(arguments)
