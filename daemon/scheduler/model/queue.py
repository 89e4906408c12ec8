"""Queues and namespaces as the scheduler sees them (scheduling.volcano.sh/v1beta1 Queue)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fumarole.daemon.scheduler.model.resources import Resource

QUEUE_OPEN = "Open"
ROOT_QUEUE = "root"
DEFAULT_QUEUE = "default"


@dataclass(frozen=True, slots=True)
class NodeGroupAffinity:
    """Queue `spec.affinity` (node-group affinity and anti-affinity lists, in written order)."""

    required: tuple[str, ...] = ()
    preferred: tuple[str, ...] = ()
    anti_required: tuple[str, ...] = ()
    anti_preferred: tuple[str, ...] = ()


@dataclass(slots=True)
class QueueInfo:
    name: str
    weight: int = 1
    capability: Resource | None = None
    deserved: Resource | None = None
    guarantee: Resource | None = None
    reclaimable: bool | None = None
    parent: str = ""
    priority: int = 0
    state: str = QUEUE_OPEN
    creation: float = 0.0
    annotations: dict[str, str] = field(default_factory=dict)
    # `spec.affinity` (read by the nodegroup plugin); None when the queue has none.
    affinity: NodeGroupAffinity | None = None
    # Written at session close: sum of allocated-status task requests.
    allocated: Resource = field(default_factory=Resource)

    @property
    def uid(self) -> str:
        return self.name

    def is_reclaimable(self) -> bool:
        return True if self.reclaimable is None else self.reclaimable

    def is_open(self) -> bool:
        return self.state == QUEUE_OPEN


@dataclass(slots=True)
class ResourceQuotaInfo:
    name: str
    namespace: str
    hard: dict[str, str] = field(default_factory=dict)
    used: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudgetInfo:
    """policy/v1 PodDisruptionBudget as the pdb plugin reads it.

    `selector` is the raw `spec.selector` (None when absent); `disrupted_pods` the pod names
    of `status.disruptedPods`.
    """

    name: str
    namespace: str
    selector: dict[str, Any] | None = None
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()


@dataclass(slots=True)
class NamespaceInfo:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    quotas: list[ResourceQuotaInfo] = field(default_factory=list)
    pdbs: list[PodDisruptionBudgetInfo] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = ""
