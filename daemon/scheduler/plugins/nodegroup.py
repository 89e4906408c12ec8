"""The nodegroup plugin (plugins/nodegroup): queues bound to node groups (node label), per-group limits."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_bool
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.quantity import QuantityError, parse_quantity
from fumarole.daemon.scheduler.model.queue import ROOT_QUEUE, NodeGroupAffinity, QueueInfo
from fumarole.daemon.scheduler.model.resources import CPU, MEMORY, MIN_RESOURCE, Resource
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskInfo

NAME = "nodegroup"
GROUP_LABEL = "volcano.sh/nodegroup-name"
RESOURCE_LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
STRICT_ARG = "strict"
PREFERRED_ORDER_ARG = "enablePreferredOrder"
BASE_SCORE = 100.0

ERR_AFFINITY_NOT_FOUND = "node group affinity not specified"
ERR_LABEL_NOT_FOUND = "node group label not found"
ERR_UNSATISFIED = "node does not satisfy the node group affinity"
ERR_LIMIT_INVALID = "node group resource limit annotation invalid"
ERR_LIMIT_EXCEEDED = "node group resource limit exceeded"


def affinity_allows(a: NodeGroupAffinity, group: str) -> bool:
    """queueGroupAffinity.predicate: in required or preferred, not in required anti-affinity.

    A group in preferred anti-affinity passes even when it is also in required anti-affinity.
    """
    ok = group in a.required or group in a.preferred
    if group in a.anti_required:
        ok = False
    if group in a.anti_preferred:
        ok = True
    return ok


def affinity_score(a: NodeGroupAffinity, group: str, preferred_order: bool) -> float:
    """queueGroupAffinity.score: required +100, preferred +50 (or ordered), preferred anti-affinity -1."""
    score = 0.0
    if group in a.required:
        score += BASE_SCORE
    if preferred_order:
        indexes: dict[str, int] = {}
        for i, g in enumerate(a.preferred):
            indexes[g] = i  # a repeated name keeps its last position, as Volcano's map does
        if group in indexes:
            n = len(indexes)
            score += 0.5 * BASE_SCORE * float(n - indexes[group]) / float(n)
    elif group in a.preferred:
        score += 0.5 * BASE_SCORE
    if group in a.anti_preferred:
        score = -1.0
    return score


def affinity_unset(a: NodeGroupAffinity | None) -> bool:
    return a is None or not (a.required or a.preferred or a.anti_required or a.anti_preferred)


@dataclass(slots=True)
class GroupLimit:
    resource: Resource
    names: frozenset[str]


class LimitsError(ValueError):
    """A `volcano.sh/nodegroup-resource-limits` annotation that does not decode."""


def _reject_constant(name: str) -> Any:
    raise LimitsError(f"invalid JSON value {name}")


def parse_resource_limits(queue: QueueInfo) -> dict[str, GroupLimit]:
    """The queue's per-group limits (JSON object: group -> ResourceList); raises LimitsError."""
    raw = queue.annotations.get(RESOURCE_LIMITS_ANNOTATION, "")
    if not raw:
        return {}
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise LimitsError(f"parse annotation {RESOURCE_LIMITS_ANNOTATION}: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise LimitsError(f"parse annotation {RESOURCE_LIMITS_ANNOTATION}: not a JSON object")
    limits: dict[str, GroupLimit] = {}
    for group in sorted(data):
        rl = data[group]
        if rl is None:
            rl = {}
        if not isinstance(rl, dict):
            raise LimitsError(
                f"parse annotation {RESOURCE_LIMITS_ANNOTATION}: group {group!r} is not an object"
            )
        values: dict[str, str | int | float] = {}
        for name in sorted(rl):
            q = rl[name]
            if q is None:
                q = "0"
            if isinstance(q, bool) or not isinstance(q, str | int | float):
                raise LimitsError(
                    f"parse annotation {RESOURCE_LIMITS_ANNOTATION}: {group}.{name}: bad quantity"
                )
            try:
                parse_quantity(q.strip() if isinstance(q, str) else q)
            except QuantityError as e:
                raise LimitsError(
                    f"parse annotation {RESOURCE_LIMITS_ANNOTATION}: {group}.{name}: {e}"
                ) from e
            values[name] = q.strip() if isinstance(q, str) else q
        limits[group] = GroupLimit(Resource.from_resource_list(values), frozenset(values))
    return limits


def _exceeds(used: float, limit: float) -> bool:
    return used > limit and used - limit >= MIN_RESOURCE


def exceeded_names(used: Resource, limit: GroupLimit) -> list[str]:
    """limitedResourceExceededNames: cpu, memory, then the other limited names (sorted)."""
    if not limit.names:
        return []
    out: list[str] = []
    if CPU in limit.names and _exceeds(used.cpu, limit.resource.cpu):
        out.append(CPU)
    if MEMORY in limit.names and _exceeds(used.memory, limit.resource.memory):
        out.append(MEMORY)
    for name in sorted(limit.names):
        if name in (CPU, MEMORY):
            continue
        if _exceeds(used.get(name), limit.resource.get(name)):
            out.append(name)
    return out


@dataclass(slots=True)
class QueueAttr:
    name: str
    affinity: NodeGroupAffinity | None
    limits: dict[str, GroupLimit] = field(default_factory=dict)
    limit_error: str = ""
    allocated: dict[str, Resource] = field(default_factory=dict)


def ancestors(queues: dict[str, QueueInfo], name: str) -> list[str]:
    """Parent, grandparent, ... up to root (empty parent = root); stops at a missing parent or a cycle."""
    out: list[str] = []
    seen = {name}
    cur = name
    while cur != ROOT_QUEUE:
        parent = queues[cur].parent or ROOT_QUEUE
        if parent not in queues or parent in seen:
            break
        out.append(parent)
        seen.add(parent)
        cur = parent
    return out


def build_queue_attrs(
    queues: dict[str, QueueInfo], hierarchy: bool, warnings: list[str]
) -> dict[str, QueueAttr]:
    attrs: dict[str, QueueAttr] = {}
    for name in sorted(queues):
        q = queues[name]
        attr = QueueAttr(name, q.affinity)
        try:
            attr.limits = parse_resource_limits(q)
        except LimitsError as e:
            attr.limit_error = str(e)
            warnings.append(f"nodegroup: queue {name}: {e}; its tasks fit no node")
        attrs[name] = attr
    if hierarchy:
        for name in sorted(queues):
            if queues[name].affinity is not None:
                continue
            for anc in ancestors(queues, name):
                if queues[anc].affinity is not None:
                    attrs[name].affinity = queues[anc].affinity
                    break
    return attrs


class NodeGroupPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.strict = arg_bool(arguments, STRICT_ARG, True)
        self.preferred_order = arg_bool(arguments, PREFERRED_ORDER_ARG, False)
        self.attrs: dict[str, QueueAttr] = {}

    def task_group(self, ssn: Session, task: TaskInfo) -> str | None:
        if not task.node_name:
            return None
        node = ssn.nodes.get(task.node_name)
        if node is None:
            return None
        return node.facts.labels.get(GROUP_LABEL)

    def add_allocated(self, ssn: Session, attr: QueueAttr, task: TaskInfo) -> None:
        group = self.task_group(ssn, task)
        if group is None:
            return
        attr.allocated.setdefault(group, Resource()).add(task.resreq)

    def sub_allocated(self, ssn: Session, attr: QueueAttr, task: TaskInfo) -> None:
        group = self.task_group(ssn, task)
        if group is None or group not in attr.allocated:
            return
        attr.allocated[group].sub(task.resreq)

    def limit_exceeded(self, task: TaskInfo, group: str, attr: QueueAttr) -> bool:
        limit = attr.limits.get(group)
        if limit is None:
            return False
        future = attr.allocated.get(group, Resource()).clone().add(task.resreq)
        return bool(exceeded_names(future, limit))

    def on_session_open(self, ssn: Session) -> None:
        opt = ssn.plugin_option(NAME)
        hierarchy = bool(opt is not None and opt.flags.get("hierarchy"))
        self.attrs = build_queue_attrs(ssn.queues, hierarchy, ssn.warnings)
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            for status in sorted(ALLOCATED_STATUSES):
                for task in sorted(job.peek_in(status).values(), key=lambda t: t.uid):
                    self.add_allocated(ssn, attr, task)

        def node_order(task: TaskInfo, node: NodeInfo) -> float:
            group = node.facts.labels.get(GROUP_LABEL)
            if group is None:
                return 0.0
            job = ssn.jobs.get(task.job)
            if job is None:
                return 0.0
            attr = self.attrs.get(job.queue)
            if attr is None or attr.affinity is None:
                return 0.0
            return affinity_score(attr.affinity, group, self.preferred_order)

        def predicate(task: TaskInfo, node: NodeInfo) -> FitError | Exception | None:
            job = ssn.jobs.get(task.job)
            if job is None:
                return Exception(f"job {task.job} not found in session")
            attr = self.attrs.get(job.queue)

            def fail(reason: str) -> FitError:
                return fit_error(
                    task.namespace, task.name, node.name, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason
                )

            if attr is not None and attr.limit_error:
                return fail(ERR_LIMIT_INVALID)
            affinity = attr.affinity if attr is not None else None
            unset = affinity_unset(affinity)
            group = node.facts.labels.get(GROUP_LABEL)
            if group is None:
                if not self.strict and unset:
                    return None
                return fail(ERR_LABEL_NOT_FOUND)
            if unset or affinity is None or attr is None:
                return fail(ERR_AFFINITY_NOT_FOUND)
            if not affinity_allows(affinity, group):
                return fail(ERR_UNSATISFIED)
            if self.limit_exceeded(task, group, attr):
                return fail(ERR_LIMIT_EXCEEDED)
            return None

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is not None:
                self.add_allocated(ssn, attr, task)

        def on_deallocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is not None:
                self.sub_allocated(ssn, attr, task)

        ssn.register(cb.NODE_ORDER, NAME, node_order)
        ssn.register(cb.PREDICATE, NAME, predicate)
        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

    def on_session_close(self, ssn: Session) -> None:
        self.attrs = {}


def new(arguments: dict[str, Any]) -> NodeGroupPlugin:
    return NodeGroupPlugin(arguments)
