"""Queue attributes of the capacity plugin: flat and hierarchical construction, shares, comparisons.

Pure functions over the session's queues and jobs (plugins/capacity/capacity.go, the parts that
build `queueAttr`s).  The plugin module registers the callbacks that read and update them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fumarole.daemon.scheduler.model.job import PHASE_INQUEUE, PHASE_RUNNING, JobInfo
from fumarole.daemon.scheduler.model.queue import ROOT_QUEUE, QueueInfo
from fumarole.daemon.scheduler.model.resources import (
    MIN_RESOURCE,
    PODS,
    Default,
    Resource,
    exceeded_part,
    share,
)
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskStatus
from fumarole.daemon.scheduler.plugins.util import (
    allocated_task_num,
    deduct_sch_gated,
    elastic_resources,
    inqueue_resource,
    resource_max,
)

INF = float("inf")


@dataclass(slots=True)
class QueueAttr:
    """One queue's figures for a session (Volcano's queueAttr)."""

    name: str
    deserved: Resource = field(default_factory=Resource)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    capability: Resource = field(default_factory=Resource)
    real_capability: Resource = field(default_factory=Resource)
    guarantee: Resource = field(default_factory=Resource)
    share: float = 0.0
    # Hierarchy only: ancestors from the root down to the parent, and the children by name.
    ancestors: list[str] = field(default_factory=list)
    children: dict[str, QueueAttr] = field(default_factory=dict)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def update_share(self) -> None:
        self.share = queue_share(self.deserved, self.allocated)


@dataclass(slots=True)
class BuildResult:
    """Attributes by queue name; `ready` False means the plugin refuses everything this session."""

    attrs: dict[str, QueueAttr]
    ready: bool = True
    problem: str = ""
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- resource helpers
def given(r: Resource | None) -> bool:
    """Whether a manifest ResourceList had any entry (Go's len(list) != 0)."""
    return r is not None and not (r.cpu == 0 and r.memory == 0 and not r.scalars)


def queue_share(deserved: Resource, allocated: Resource) -> float:
    """A queue without deserved is best-effort: share 1; otherwise the dominant allocated/deserved."""
    if deserved.is_empty():
        return 1.0
    res = 0.0
    for rn in deserved.resource_names():
        res = max(res, share(allocated.get(rn), deserved.get(rn)))
    return res


def intersection(r1: Resource, r2: Resource) -> list[str]:
    """Dimensions holding at least MIN_RESOURCE on both sides (api.Intersection; `pods` included)."""
    names2 = set(r2.resource_names())
    return [n for n in r1.resource_names() if n in names2]


def intersection_without_pods(r1: Resource, r2: Resource) -> list[str]:
    return [n for n in intersection(r1, r2) if n != PODS]


def greater_partly_relevant(r: Resource, rr: Resource, req: Resource) -> tuple[bool, list[str]]:
    """GreaterPartlyWithRelevantDimensions: r > rr on a requested dimension that rr has.

    cpu/memory count only when rr holds at least MIN_RESOURCE of them; a scalar counts when it
    is present in rr at all (even as 0).  `pods` is never compared.
    """
    filtered = Resource()
    if req.cpu > 0 and not rr.cpu < MIN_RESOURCE:
        filtered.cpu = req.cpu
    if req.memory > 0 and not rr.memory < MIN_RESOURCE:
        filtered.memory = req.memory
    for n, v in req.scalars.items():
        if v > 0 and n in rr.scalars:
            filtered.scalars[n] = v
    return r.greater_partly_with_dimension(rr, filtered)


def less_equal_partly_zero_filtered(r: Resource, rr: Resource, req: Resource) -> tuple[bool, list[str]]:
    """LessEqualPartlyWithDimensionZeroFiltered: drop requested dims that are zero on both sides first."""
    filtered = Resource()
    if req.cpu > 0 and not (r.cpu < MIN_RESOURCE and rr.cpu < MIN_RESOURCE):
        filtered.cpu = req.cpu
    if req.memory > 0 and not (r.memory < MIN_RESOURCE and rr.memory < MIN_RESOURCE):
        filtered.memory = req.memory
    for n, v in req.scalars.items():
        if v > 0 and not (r.get(n) < MIN_RESOURCE and rr.get(n) < MIN_RESOURCE):
            filtered.scalars[n] = v
    return r.less_equal_partly_with_dimension(rr, filtered)


def exceeding(child: Resource, parent: Resource) -> list[str]:
    """Dimensions where `child` is above `parent` (scalars the parent lacks are unlimited there)."""

    def above(c: float, p: float) -> bool:
        return c > p and not abs(c - p) < MIN_RESOURCE

    out = [n for n in ("cpu", "memory") if above(child.get(n), parent.get(n))]
    out.extend(
        n for n in sorted(child.scalars) if n in parent.scalars and above(child.scalars[n], parent.scalars[n])
    )
    return out


def infinite_like(total: Resource) -> Resource:
    """Unlimited on cpu, memory and every scalar the cluster has (root's default capability)."""
    inf = Resource.infinite()
    for n in sorted(total.scalars):
        inf.scalars[n] = INF
    return inf


# --------------------------------------------------------------------------- job accounting
@dataclass(slots=True)
class JobUsage:
    allocated: Resource
    request: Resource
    inqueue: Resource
    elastic: Resource


def job_usage(job: JobInfo) -> JobUsage:
    """What one job adds to its queue: allocated, request (allocated + pending), inqueue, elastic."""
    allocated, request, inqueue = Resource(), Resource(), Resource()
    index = job.peek_index()
    for st in sorted(index):
        bucket = index[st]
        if st in ALLOCATED_STATUSES:
            for uid in sorted(bucket):
                allocated.add(bucket[uid].resreq)
                request.add(bucket[uid].resreq)
        elif st is TaskStatus.PENDING:
            for uid in sorted(bucket):
                request.add(bucket[uid].resreq)
    if job.min_resources is not None:
        # An admitted job reserves what it has not allocated yet: Inqueue groups, and Running
        # groups whose allocated task count already reaches minMember.
        if job.status.phase == PHASE_INQUEUE:
            inqueue.add(deduct_sch_gated(job, inqueue_resource(job, job.allocated)))
        if job.status.phase == PHASE_RUNNING and allocated_task_num(job) >= job.min_available:
            inqueue.add(deduct_sch_gated(job, inqueue_resource(job, job.allocated)))
    return JobUsage(allocated, request, inqueue, elastic_resources(job))


def add_usage(attr: QueueAttr, u: JobUsage) -> None:
    attr.allocated.add(u.allocated)
    attr.request.add(u.request)
    attr.inqueue.add(u.inqueue)
    attr.elastic.add(u.elastic)


# --------------------------------------------------------------------------- flat mode
def total_guarantee(queues: Mapping[str, QueueInfo]) -> Resource:
    out = Resource()
    for name in sorted(queues):
        g = queues[name].guarantee
        if given(g):
            assert g is not None
            out.add(g)
    return out


def new_flat_attr(queue: QueueInfo, total: Resource, guarantees: Resource) -> QueueAttr:
    """A flat queue: capability cpu/memory <= 0 mean unlimited; real capability from the cluster."""
    attr = QueueAttr(name=queue.name, deserved=(queue.deserved or Resource()).clone())
    cap: Resource | None = None
    if given(queue.capability):
        assert queue.capability is not None
        cap = queue.capability.clone()
        if cap.cpu <= 0:
            cap.cpu = INF
        if cap.memory <= 0:
            cap.memory = INF
    if given(queue.guarantee):
        assert queue.guarantee is not None
        attr.guarantee = queue.guarantee.clone()
    real = exceeded_part(total, guarantees).add(attr.guarantee)
    if cap is not None:
        real.min_dimension_resource(cap, Default.INFINITY)
        attr.capability = cap
    attr.real_capability = real
    return attr


def build_flat(queues: Mapping[str, QueueInfo], jobs: Mapping[str, JobInfo], total: Resource) -> BuildResult:
    """Attributes for the queues that have jobs; deserved = max(min(spec, real capability), guarantee)."""
    guarantees = total_guarantee(queues)
    attrs: dict[str, QueueAttr] = {}
    for uid in sorted(jobs):
        job = jobs[uid]
        queue = queues.get(job.queue)
        if queue is None:
            continue
        if job.queue not in attrs:
            attrs[job.queue] = new_flat_attr(queue, total, guarantees)
        add_usage(attrs[job.queue], job_usage(job))
    for name in sorted(attrs):
        attr = attrs[name]
        attr.deserved.min_dimension_resource(attr.real_capability, Default.INFINITY)
        attr.deserved = resource_max(attr.deserved, attr.guarantee)
        attr.update_share()
    return BuildResult(attrs)


# --------------------------------------------------------------------------- hierarchical mode
def new_tree_attr(queue: QueueInfo) -> QueueAttr:
    attr = QueueAttr(name=queue.name, deserved=(queue.deserved or Resource()).clone())
    if given(queue.capability):
        assert queue.capability is not None
        attr.capability = queue.capability.clone()
    if given(queue.guarantee):
        assert queue.guarantee is not None
        attr.guarantee = queue.guarantee.clone()
    return attr


def link_parents(queues: Mapping[str, QueueInfo], attrs: dict[str, QueueAttr]) -> str:
    """Create an attribute per queue and link each to its parent (spec.parent, default root).

    Returns an error text for a parent that does not exist.  As in Volcano a parent already
    linked is not revisited, so a cycle in spec.parent is not reported: its queues are simply
    never reached from the root (they keep a zero real capability).
    """
    for name in sorted(queues):
        if name in attrs:
            continue
        attrs[name] = new_tree_attr(queues[name])
        err = _link(queues[name], queues, attrs)
        if err:
            return err
    return ""


def _link(queue: QueueInfo, queues: Mapping[str, QueueInfo], attrs: dict[str, QueueAttr]) -> str:
    if queue.name == ROOT_QUEUE:
        return ""
    parent = queue.parent or ROOT_QUEUE
    pq = queues.get(parent)
    if pq is None:
        return f"the queue {queue.name} has invalid parent queue {parent}"
    if parent not in attrs:
        attrs[parent] = new_tree_attr(pq)
        err = _link(pq, queues, attrs)
        if err:
            return err
    attrs[parent].children[queue.name] = attrs[queue.name]
    attrs[queue.name].ancestors = [*attrs[parent].ancestors, parent]
    return ""


def settle_tree(attr: QueueAttr, warnings: list[str]) -> None:
    """Top-down: children inherit missing capability from the parent and get their real capability.

    For each child: deserved := max(deserved, guarantee); cpu/memory capability <= 0 and scalar
    capabilities the child does not name are taken from the parent; real capability = (parent's
    real capability - sum of the children's guarantees, floored at 0) + own guarantee, capped by
    the (inherited) capability.  The root's guarantee and deserved become the sums of its
    children's.  Misconfigurations (child above parent) only draw a warning, as Volcano logs.
    """
    child_names = sorted(attr.children)
    sum_guarantee = Resource()
    sum_deserved = Resource()
    for cn in child_names:
        child = attr.children[cn]
        child.deserved = resource_max(child.deserved, child.guarantee)
        sum_deserved.add(child.deserved)
        sum_guarantee.add(child.guarantee)
        if child.capability.cpu <= 0:
            child.capability.cpu = attr.capability.cpu
        if child.capability.memory <= 0:
            child.capability.memory = attr.capability.memory
        for n in sorted(attr.capability.scalars):
            if n not in child.capability.scalars:
                child.capability.scalars[n] = attr.capability.scalars[n]
        names = exceeding(child.capability, attr.capability)
        if names:
            warnings.append(
                f"capacity: child queue {child.name} capability exceeds parent queue {attr.name} "
                f"capability on {', '.join(names)}; the parent still limits it"
            )
    if attr.name == ROOT_QUEUE:
        attr.guarantee = sum_guarantee
        attr.deserved = sum_deserved
    for cn in child_names:
        child = attr.children[cn]
        real = exceeded_part(attr.real_capability, sum_guarantee).add(child.guarantee)
        real.min_dimension_resource(child.capability, Default.INFINITY)
        child.real_capability = real
    if child_names and attr.deserved.less_partly(sum_deserved, Default.ZERO):
        warnings.append(f"capacity: sum of child queue deserved exceeds queue {attr.name}'s deserved")
    if child_names and attr.guarantee.less_partly(sum_guarantee, Default.ZERO):
        warnings.append(f"capacity: sum of child queue guarantees exceeds queue {attr.name}'s guarantee")
    for cn in child_names:
        settle_tree(attr.children[cn], warnings)


def build_hierarchical(
    queues: Mapping[str, QueueInfo], jobs: Mapping[str, JobInfo], total: Resource
) -> BuildResult:
    """Attributes for every queue linked into a tree under `root`; usage rolls up to all ancestors.

    Not ready (every callback refuses) when a parent does not exist, a job sits in a queue with
    children, or there is no root queue.
    """
    attrs: dict[str, QueueAttr] = {}
    err = link_parents(queues, attrs)
    if err:
        return BuildResult(attrs, ready=False, problem=err)
    warnings: list[str] = []
    for uid in sorted(jobs):
        job = jobs[uid]
        attr = attrs.get(job.queue)
        if attr is None:
            warnings.append(f"capacity: job {uid} references queue {job.queue} which does not exist")
            continue
        if not attr.is_leaf:
            return BuildResult(
                attrs, ready=False, problem=f"the queue {attr.name} of job {uid} is not a leaf queue"
            )
        u = job_usage(job)
        add_usage(attr, u)
        for a in attr.ancestors:
            add_usage(attrs[a], u)
    root = attrs.get(ROOT_QUEUE)
    if root is None:
        return BuildResult(attrs, ready=False, problem=f"root queue {ROOT_QUEUE!r} not found")
    if root.capability.is_empty():
        root.capability = infinite_like(total)
    root.real_capability = root.capability.clone()
    settle_tree(root, warnings)
    for name in sorted(attrs):
        attrs[name].update_share()
    return BuildResult(attrs, warnings=warnings)


# --------------------------------------------------------------------------- orders
def compare_share_with_deserved(l: QueueAttr, r: QueueAttr) -> int:
    """Lower share first; on equal shares a queue with deserved goes before a best-effort one."""
    if l.share == r.share:
        lh = not l.deserved.is_empty()
        rh = not r.deserved.is_empty()
        if lh == rh:
            return 0
        return -1 if lh else 1
    return -1 if l.share < r.share else 1


def common_level(l: QueueAttr, r: QueueAttr) -> int:
    """Index of the deepest common ancestor within the shared prefix of the two ancestor lists.

    0 when the lists differ at once, as Volcano's getQueueLevel (which cannot tell 'root only'
    from 'nothing in common').
    """
    level = 0
    for i in range(min(len(l.ancestors), len(r.ancestors))):
        if l.ancestors[i] != r.ancestors[i]:
            return level
        level = i
    return level


def ancestor_at_depth(attr: QueueAttr, depth: int) -> str | None:
    """The ancestor `depth` levels up (1 = parent), or None."""
    if depth <= 0 or len(attr.ancestors) < depth:
        return None
    return attr.ancestors[len(attr.ancestors) - depth]


def ancestors_within(attr: QueueAttr, max_level: int) -> dict[int, str]:
    out: dict[int, str] = {}
    for level in range(1, max_level + 1):
        a = ancestor_at_depth(attr, level)
        if a is not None:
            out[level] = a
    return out
