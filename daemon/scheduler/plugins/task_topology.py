"""The task-topology plugin (plugins/task-topology): affinity between a job's tasks via buckets.

A job's PodGroup annotations name its task roles (pod annotation `volcano.sh/task-spec`):
`volcano.sh/task-topology-affinity` and `volcano.sh/task-topology-anti-affinity` hold groups
("ps,worker;chief" -- a one-role group is self-(anti-)affinity) and
`volcano.sh/task-topology-task-order` a role order ("ps,worker").  At session open the tasks of
every job with pending tasks and such annotations are packed into buckets of tasks that want to
run together; task order puts bucketed tasks first, bigger buckets first, then older buckets,
and inside a bucket the user order, then the affinity kind; node order favours the node where
the task's bucket already runs.  Volcano's random choices are made deterministic: tasks are
visited by uid before the (stable) ordering, and when a bucket must shed tasks to fit a node
the tasks are shed in the order they joined the bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_int
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import Default, Resource
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "task-topology"
WEIGHT = "task-topology.weight"
AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
TASK_SPEC = "volcano.sh/task-spec"
MAX_NODE_SCORE = 100
OUT_OF_BUCKET = -1

# Affinity kinds and their priority inside a bucket (larger first).
SELF_ANTI_AFFINITY = 4
INTER_AFFINITY = 3
SELF_AFFINITY = 2
INTER_ANTI_AFFINITY = 1


class TopologyError(ValueError):
    """A topology annotation names an unknown or duplicated task."""


@dataclass(slots=True)
class TaskTopology:
    affinity: list[list[str]] | None = None
    anti_affinity: list[list[str]] | None = None
    task_order: list[str] | None = None


def task_name(task: TaskInfo) -> str:
    """getTaskName: the pod annotation only (the role also falls back to the label)."""
    return task.pod.annotations.get(TASK_SPEC, "")


def affinity_check(job: JobInfo, groups: list[list[str]]) -> None:
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                raise TopologyError(f"task {name} do not exist in job <{job.namespace}/{job.name}>")
            if name in seen:
                raise TopologyError(f"task {name} is duplicate in job <{job.namespace}/{job.name}>")
            seen.add(name)


def _split(job: JobInfo, text: str) -> list[list[str]]:
    groups = [part.split(",") for part in text.split(";")]
    affinity_check(job, groups)
    return groups


def read_topology(job: JobInfo) -> TaskTopology | None:
    """readTopologyFromPgAnnotations; raises TopologyError for an invalid annotation."""
    ann = job.annotations
    if AFFINITY not in ann and ANTI_AFFINITY not in ann and TASK_ORDER not in ann:
        return None
    topo = TaskTopology()
    if AFFINITY in ann:
        topo.affinity = _split(job, ann[AFFINITY])
    if ANTI_AFFINITY in ann:
        topo.anti_affinity = _split(job, ann[ANTI_AFFINITY])
    if TASK_ORDER in ann:
        topo.task_order = ann[TASK_ORDER].split(",")
        affinity_check(job, [topo.task_order])
    return topo


def _bucket_score_of(req: Resource) -> float:
    """1 milli-cpu, 1 MiB of memory and 1 milli-unit of any scalar weigh the same."""
    return float(req.cpu + req.memory / 1024 / 1024 + sum(req.scalars.values()))


@dataclass(slots=True)
class Bucket:
    index: int
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    task_name_set: dict[str, int] = field(default_factory=dict)
    req_score: float = 0.0
    request: Resource = field(default_factory=Resource)
    bound_task: int = 0
    node: dict[str, int] = field(default_factory=dict)

    def add_task(self, name: str, task: TaskInfo) -> None:
        self.task_name_set[name] = self.task_name_set.get(name, 0) + 1
        if task.node_name:
            self.node[task.node_name] = self.node.get(task.node_name, 0) + 1
            self.bound_task += 1
            return
        self.tasks[task.uid] = task
        self.req_score += _bucket_score_of(task.resreq)
        self.request.add(task.resreq)

    def task_bound(self, task: TaskInfo) -> None:
        self.node[task.node_name] = self.node.get(task.node_name, 0) + 1
        self.bound_task += 1
        self.tasks.pop(task.uid, None)
        self.req_score -= _bucket_score_of(task.resreq)
        self.request.sub(task.resreq)


class JobManager:
    """Affinity matrices and buckets of one job."""

    def __init__(self, job_uid: str) -> None:
        self.job_uid = job_uid
        self.buckets: list[Bucket] = []
        self.pod_in_bucket: dict[str, int] = {}
        self.pod_in_task: dict[str, str] = {}
        self.task_affinity_priority: dict[str, int] = {}
        self.task_exist_order: dict[str, int] = {}
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti_affinity: dict[str, set[str]] = {}
        self.self_anti_affinity: set[str] = set()
        self.bucket_max_size = 0
        self.node_task_set: dict[str, dict[str, int]] = {}

    def _mark(self, name: str, priority: int) -> None:
        if priority > self.task_affinity_priority.get(name, 0):
            self.task_affinity_priority[name] = priority

    def _apply_groups(
        self, groups: list[list[str]], selfs: set[str], inter: dict[str, set[str]], self_p: int, inter_p: int
    ) -> None:
        for group in groups:
            if len(group) == 1:
                selfs.add(group[0])
                self._mark(group[0], self_p)
                continue
            for i, src in enumerate(group):
                for dst in group[:i]:
                    inter.setdefault(src, set()).add(dst)
                    inter.setdefault(dst, set()).add(src)
                self._mark(src, inter_p)

    def apply(self, topo: TaskTopology) -> None:
        self._apply_groups(
            topo.affinity or [], self.self_affinity, self.inter_affinity, SELF_AFFINITY, INTER_AFFINITY
        )
        self._apply_groups(
            topo.anti_affinity or [],
            self.self_anti_affinity,
            self.inter_anti_affinity,
            SELF_ANTI_AFFINITY,
            INTER_ANTI_AFFINITY,
        )
        order = topo.task_order or []
        for i, name in enumerate(order):
            self.task_exist_order[name] = len(order) - i

    def affinity_order(self, l: TaskInfo, r: TaskInfo) -> int:
        """taskAffinityOrder: 1 when l comes first by user order, then by affinity priority."""
        ln = self.pod_in_task.get(l.uid, "")
        rn = self.pod_in_task.get(r.uid, "")
        if ln == rn:
            return 0
        lo, ro = self.task_exist_order.get(ln, 0), self.task_exist_order.get(rn, 0)
        if lo != ro:
            return 1 if lo > ro else -1
        lp, rp = self.task_affinity_priority.get(ln, 0), self.task_affinity_priority.get(rn, 0)
        if lp != rp:
            return 1 if lp > rp else -1
        return 0

    def task_set_affinity(self, name: str, name_set: dict[str, int], only_anti: bool) -> int:
        """checkTaskSetAffinity: +count per affine task in the set, -count per anti-affine one."""
        score = 0
        if not name:
            return score
        for other, count in name_set.items():
            same = other == name
            if not only_anti:
                aff = name in self.self_affinity if same else other in self.inter_affinity.get(name, ())
                if aff:
                    score += count
            anti = (
                name in self.self_anti_affinity if same else other in self.inter_anti_affinity.get(name, ())
            )
            if anti:
                score -= count
        return score

    def _less(self, l: TaskInfo, r: TaskInfo) -> bool:
        """TaskOrder.Less of the bucket construction (sorted in reverse)."""
        if l.node_name or r.node_name:
            if bool(l.node_name) != bool(r.node_name):
                return not l.node_name
            return l.node_name > r.node_name
        res = self.affinity_order(l, r)
        if res == 0:
            return l.name > r.name
        return res < 0

    def construct(self, tasks: list[TaskInfo]) -> None:
        """ConstructBucket: tasks with a role in the topology are ordered, then packed."""
        with_topology = []
        for t in sorted(tasks, key=lambda t: t.uid):
            name = task_name(t)
            if not name or name not in self.task_affinity_priority:
                self.pod_in_bucket[t.uid] = OUT_OF_BUCKET
                continue
            self.pod_in_task[t.uid] = name
            with_topology.append(t)

        def cmp(a: TaskInfo, b: TaskInfo) -> int:
            if self._less(b, a):
                return -1
            if self._less(a, b):
                return 1
            return 0

        with_topology.sort(key=cmp_to_key(cmp))
        by_node: dict[str, Bucket] = {}
        for t in with_topology:
            name = task_name(t)
            selected: Bucket | None = None
            if t.node_name:
                best = 0
                selected = by_node.get(t.node_name)
            else:
                best = -(1 << 31)
                for b in self.buckets:
                    aff = self.task_set_affinity(name, b.task_name_set, False)
                    if aff > best:
                        best, selected = aff, b
                    elif aff == best and selected is not None and b.req_score < selected.req_score:
                        selected = b
            if best < 0 or selected is None:
                selected = Bucket(len(self.buckets))
                self.buckets.append(selected)
                if t.node_name:
                    by_node[t.node_name] = selected
            self.pod_in_bucket[t.uid] = selected.index
            selected.add_task(name, t)
            size = len(selected.tasks) + selected.bound_task
            self.bucket_max_size = max(self.bucket_max_size, size)

    def bucket_of(self, task: TaskInfo) -> Bucket | None:
        i = self.pod_in_bucket.get(task.uid, OUT_OF_BUCKET)
        return None if i == OUT_OF_BUCKET else self.buckets[i]

    def task_bound(self, task: TaskInfo) -> None:
        name = task_name(task)
        if name:
            s = self.node_task_set.setdefault(task.node_name, {})
            s[name] = s.get(name, 0) + 1
        b = self.bucket_of(task)
        if b is not None:
            b.task_bound(task)


class TaskTopologyPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight = arg_int(arguments, WEIGHT, 1)
        self.managers: dict[str, JobManager] = {}

    def init_buckets(self, ssn: Session) -> None:
        for uid, job in ssn.jobs.items():
            if job.count(TaskStatus.PENDING) == 0:
                continue
            try:
                topo = read_topology(job)
            except TopologyError:
                continue
            if topo is None:
                continue
            m = JobManager(uid)
            m.apply(topo)
            m.construct(list(job.tasks.values()))
            self.managers[uid] = m

    def task_order(self, l: TaskInfo, r: TaskInfo) -> int:
        lm, rm = self.managers.get(l.job), self.managers.get(r.job)
        if lm is None or rm is None:
            return 0
        lb, rb = lm.bucket_of(l), rm.bucket_of(r)
        if (lb is None) != (rb is None):
            return -1 if lb is not None else 1
        if l.job != r.job or lb is None or rb is None:
            return 0
        if len(lb.tasks) != len(rb.tasks):
            return -1 if len(lb.tasks) > len(rb.tasks) else 1
        if lb.index == rb.index:
            return -lm.affinity_order(l, r)
        return -1 if lb.index < rb.index else 1

    def bucket_score(self, task: TaskInfo, node: NodeInfo) -> tuple[int, JobManager | None]:
        """calcBucketScore."""
        max_res = node.idle.clone().add(node.releasing)
        if max_res.less_partly(task.resreq, Default.ZERO):
            return 0, None
        m = self.managers.get(task.job)
        if m is None:
            return 0, None
        b = m.bucket_of(task)
        if b is None:
            return 0, m
        score = b.node.get(node.name, 0)
        on_node = m.node_task_set.get(node.name)
        if on_node is not None:
            aff = m.task_set_affinity(task_name(task), on_node, True)
            if aff < 0:
                score += aff
        score += len(b.tasks)
        if b.request.less_equal(max_res, Default.ZERO):
            return score, m
        remains = b.request.clone()
        for uid, other in b.tasks.items():
            if uid == task.uid:
                continue
            remains.sub(other.resreq)
            score -= 1
            if remains.less_equal(max_res, Default.ZERO):
                break
        return score, m

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        score, m = self.bucket_score(task, node)
        f = float(score * self.weight)
        if m is not None and m.bucket_max_size != 0:
            f = f * MAX_NODE_SCORE / m.bucket_max_size
        return f

    def on_allocate(self, task: TaskInfo) -> None:
        m = self.managers.get(task.job)
        if m is not None:
            m.task_bound(task)

    def on_session_open(self, ssn: Session) -> None:
        self.managers = {}
        self.init_buckets(ssn)
        ssn.register(cb.TASK_ORDER, NAME, self.task_order)
        ssn.register(cb.NODE_ORDER, NAME, self.node_order)
        ssn.add_event_handler(EventHandler(allocate=self.on_allocate))

    def on_session_close(self, ssn: Session) -> None:
        self.managers = {}


def new(arguments: dict[str, Any]) -> TaskTopologyPlugin:
    return TaskTopologyPlugin(arguments)
