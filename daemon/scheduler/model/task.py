"""Tasks (pods as the scheduler sees them), their statuses and the pod facts predicates read."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from fractions import Fraction
from typing import Any

from fumarole.daemon.scheduler.model.devices import ContainerResources
from fumarole.daemon.scheduler.model.resources import Resource


class TaskStatus(IntEnum):
    """Volcano's task statuses (api/types.go), with the same bit values."""

    PENDING = 1 << 0
    ALLOCATED = 1 << 1
    PIPELINED = 1 << 2
    BINDING = 1 << 3
    BOUND = 1 << 4
    RUNNING = 1 << 5
    RELEASING = 1 << 6
    SUCCEEDED = 1 << 7
    FAILED = 1 << 8
    UNKNOWN = 1 << 9

    @property
    def label(self) -> str:
        return self.name.capitalize()


ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
SCHEDULED_STATUSES = frozenset(
    {TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED}
)
COMPLETED_STATUSES = frozenset({TaskStatus.FAILED, TaskStatus.SUCCEEDED})


def allocated_status(status: TaskStatus) -> bool:
    return status in ALLOCATED_STATUSES


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the scheduler reads from a pod manifest beyond identity and resources."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    # Raw `spec.affinity` (nodeAffinity / podAffinity / podAntiAffinity) as plain data.
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    priority_class_name: str = ""
    preemption_policy: str = ""
    scheduler_name: str = "volcano"
    nominated_node_name: str = ""
    scheduling_gates: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    # Raw `spec.topologySpreadConstraints` entries (read by predicates and nodeorder).
    topology_spread_constraints: tuple[dict[str, Any], ...] = ()
    owner_uid: str = ""
    phase: str = "Pending"
    deleting: bool = False
    # Per-container extended-resource limits/requests (device plugins read them container by container).
    extended_resources: tuple[ContainerResources, ...] = ()
    # lastTransitionTime of the first PodScheduled condition with status True (None: no such
    # condition), read by the cdp plugin.
    scheduled_time: float | None = None
    # status.startTime (None: not started or not given), read by the usage plugin's shadow load.
    start_time: float | None = None
    # GetPodResourceLimit's CPU (milli) and memory (bytes); 0 where no container sets a limit.
    cpu_mem_limits: tuple[float, float] = (0.0, 0.0)
    # Read by numa-aware: QoS class Guaranteed, and each app container's (name, cpu request).
    guaranteed: bool = False
    cpu_containers: tuple[tuple[str, Fraction | None], ...] = ()

    @property
    def has_affinity_terms(self) -> bool:
        return bool(self.affinity.get("podAffinity") or self.affinity.get("podAntiAffinity"))


def status_from_pod(phase: str, node_name: str, deleting: bool) -> TaskStatus:
    """api/helpers.go getTaskStatus."""
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if node_name else TaskStatus.PENDING
    if phase == "Unknown":
        return TaskStatus.UNKNOWN
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


_new_task = object.__new__


class TaskInfo:
    """One pod inside a session; mutable status and node, as Volcano's TaskInfo."""

    __slots__ = (
        "best_effort",
        "bind_annotations",
        "creation",
        "eq_key",
        "job",
        "last_tx",
        "name",
        "namespace",
        "node_name",
        "pod",
        "preemptable",
        "priority",
        "resreq",
        "role",
        "sch_gated",
        "status",
        "uid",
    )

    def __init__(
        self,
        *,
        uid: str,
        name: str,
        namespace: str,
        job: str,
        resreq: Resource,
        status: TaskStatus,
        node_name: str = "",
        priority: int = 1,
        role: str = "",
        preemptable: bool = True,
        creation: float = 0.0,
        pod: PodFacts | None = None,
        sch_gated: bool = False,
    ) -> None:
        self.uid = uid
        self.name = name
        self.namespace = namespace
        self.job = job
        self.resreq = resreq
        self.status = status
        self.node_name = node_name
        self.priority = priority
        self.role = role
        self.preemptable = preemptable
        self.creation = creation
        self.pod = pod if pod is not None else PodFacts()
        self.best_effort = resreq.is_empty()
        self.sch_gated = sch_gated
        # Annotations the scheduler adds to the pod at bind (Volcano's TaskInfo.PodAnnotations beyond
        # the pod's own, e.g. the GPU card chosen by deviceshare).  Replaced, never mutated in place.
        self.bind_annotations: dict[str, str] = {}
        # Last discarded transaction: (status, node) or None (Volcano's LastTransaction).
        self.last_tx: tuple[TaskStatus, str] | None = None
        # Key of the equivalence class used by the vectorised predicate path.
        self.eq_key: Any = None

    @property
    def init_resreq(self) -> Resource:
        return self.resreq

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def clone(self) -> TaskInfo:
        """A shallow copy (every slot; spelled out: a session clones every task of the cluster)."""
        t = _new_task(TaskInfo)
        t.best_effort = self.best_effort
        t.bind_annotations = self.bind_annotations
        t.creation = self.creation
        t.eq_key = self.eq_key
        t.job = self.job
        t.last_tx = self.last_tx
        t.name = self.name
        t.namespace = self.namespace
        t.node_name = self.node_name
        t.pod = self.pod
        t.preemptable = self.preemptable
        t.priority = self.priority
        t.resreq = self.resreq
        t.role = self.role
        t.sch_gated = self.sch_gated
        t.status = self.status
        t.uid = self.uid
        return t

    def __repr__(self) -> str:
        return f"Task({self.namespace}/{self.name} {self.status.label} on {self.node_name or '-'})"
