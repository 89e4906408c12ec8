"""Observed facts: cluster objects upserted or deleted, resync markers and virtual time.

An upsert carries the object's manifest (a Kubernetes/Volcano object as a JSON-like map,
the same shape `fumarole.daemon.manifests` reads), trimmed to what the scheduler needs; a delete
names the object.  `at_ms` is the event time on the source's clock (virtual time for the
simulator), in integer milliseconds; the projection's `now` is the largest `at_ms` seen.

Resync: a source that relists (a watch restarted after 410 Gone, an adapter restart) sends
`ResyncStarted`, upserts everything it has, then `ResyncCompleted`; objects of the kinds
named in `kinds` that were not upserted between the two markers are deleted by the projection.
"""

from __future__ import annotations

from typing import Any

from fumarole.store.events.base import EventBase

Manifest = dict[str, Any]


class NodeUpserted(EventBase, frozen=True, tag="node.upserted"):
    name: str
    manifest: Manifest
    at_ms: int = 0


class NodeDeleted(EventBase, frozen=True, tag="node.deleted"):
    name: str
    at_ms: int = 0


class PodUpserted(EventBase, frozen=True, tag="pod.upserted"):
    namespace: str
    name: str
    manifest: Manifest
    at_ms: int = 0


class PodDeleted(EventBase, frozen=True, tag="pod.deleted"):
    namespace: str
    name: str
    at_ms: int = 0


class PodGroupUpserted(EventBase, frozen=True, tag="podgroup.upserted"):
    namespace: str
    name: str
    manifest: Manifest
    at_ms: int = 0


class PodGroupDeleted(EventBase, frozen=True, tag="podgroup.deleted"):
    namespace: str
    name: str
    at_ms: int = 0


class QueueUpserted(EventBase, frozen=True, tag="queue.upserted"):
    name: str
    manifest: Manifest
    at_ms: int = 0


class QueueDeleted(EventBase, frozen=True, tag="queue.deleted"):
    name: str
    at_ms: int = 0


class PriorityClassUpserted(EventBase, frozen=True, tag="priorityclass.upserted"):
    name: str
    manifest: Manifest
    at_ms: int = 0


class PriorityClassDeleted(EventBase, frozen=True, tag="priorityclass.deleted"):
    name: str
    at_ms: int = 0


class ResourceQuotaUpserted(EventBase, frozen=True, tag="resourcequota.upserted"):
    namespace: str
    name: str
    manifest: Manifest
    at_ms: int = 0


class ResourceQuotaDeleted(EventBase, frozen=True, tag="resourcequota.deleted"):
    namespace: str
    name: str
    at_ms: int = 0


class PodDisruptionBudgetUpserted(EventBase, frozen=True, tag="poddisruptionbudget.upserted"):
    namespace: str
    name: str
    manifest: Manifest
    at_ms: int = 0


class PodDisruptionBudgetDeleted(EventBase, frozen=True, tag="poddisruptionbudget.deleted"):
    namespace: str
    name: str
    at_ms: int = 0


class NamespaceUpserted(EventBase, frozen=True, tag="namespace.upserted"):
    name: str
    manifest: Manifest
    at_ms: int = 0


class NamespaceDeleted(EventBase, frozen=True, tag="namespace.deleted"):
    name: str
    at_ms: int = 0


class HyperNodeUpserted(EventBase, frozen=True, tag="hypernode.upserted"):
    """A topology.volcano.sh/v1alpha1 HyperNode (cluster-scoped)."""

    name: str
    manifest: Manifest
    at_ms: int = 0


class HyperNodeDeleted(EventBase, frozen=True, tag="hypernode.deleted"):
    name: str
    at_ms: int = 0


class NodeUsageObserved(EventBase, frozen=True, tag="node.usage"):
    """A node's resource usage from a metrics source (Volcano's NodeInfo.ResourceUsage).

    `cpu` and `memory` are average utilisation percentages (0-100) over `period` (Volcano's
    cache keys them "10m"); `metrics_ms` is when the source sampled them, on the source's
    clock (the usage plugin ignores samples older than 5 minutes of event time).
    """

    node: str
    cpu: float
    memory: float
    metrics_ms: int
    period: str = "10m"
    source: str = ""
    at_ms: int = 0


class NumatopologyUpserted(EventBase, frozen=True, tag="numatopology.upserted"):
    """A nodeinfo.volcano.sh/v1alpha1 Numatopology (cluster-scoped, named after its node)."""

    name: str
    manifest: Manifest
    at_ms: int = 0


class NumatopologyDeleted(EventBase, frozen=True, tag="numatopology.deleted"):
    name: str
    at_ms: int = 0


class ResyncStarted(EventBase, frozen=True, tag="resync.started"):
    source: str
    kinds: tuple[str, ...] = ()
    at_ms: int = 0


class ResyncCompleted(EventBase, frozen=True, tag="resync.completed"):
    source: str
    kinds: tuple[str, ...] = ()
    at_ms: int = 0


class ClockAdvanced(EventBase, frozen=True, kw_only=True, tag="clock.advanced"):
    """The source's clock moved (the simulator's virtual time jumped).

    `facts`: how many other facts the source reported with this move (the events logged just
    before it, in the same batch: completions, submissions).  The simulator lockstep reads it
    on a restart (`fumarole.daemon.runtime.lockstep`).  v2 added it; v1 rows read as 0.
    """

    at_ms: int
    v: int = 2
    facts: int = 0


ObservedEvent = (
    NodeUpserted
    | NodeDeleted
    | PodUpserted
    | PodDeleted
    | PodGroupUpserted
    | PodGroupDeleted
    | QueueUpserted
    | QueueDeleted
    | PriorityClassUpserted
    | PriorityClassDeleted
    | ResourceQuotaUpserted
    | ResourceQuotaDeleted
    | PodDisruptionBudgetUpserted
    | PodDisruptionBudgetDeleted
    | NamespaceUpserted
    | NamespaceDeleted
    | HyperNodeUpserted
    | HyperNodeDeleted
    | NodeUsageObserved
    | NumatopologyUpserted
    | NumatopologyDeleted
    | ResyncStarted
    | ResyncCompleted
    | ClockAdvanced
)


_CLUSTER_SCOPED: dict[str, type[EventBase]] = {
    "Node": NodeUpserted,
    "Queue": QueueUpserted,
    "PriorityClass": PriorityClassUpserted,
    "Namespace": NamespaceUpserted,
    "HyperNode": HyperNodeUpserted,
    "Numatopology": NumatopologyUpserted,
}
_NAMESPACED: dict[str, type[EventBase]] = {
    "Pod": PodUpserted,
    "PodGroup": PodGroupUpserted,
    "ResourceQuota": ResourceQuotaUpserted,
    "PodDisruptionBudget": PodDisruptionBudgetUpserted,
}
UPSERT_KINDS: tuple[str, ...] = tuple(sorted((*_CLUSTER_SCOPED, *_NAMESPACED)))


def upserted(manifest: Manifest, at_ms: int = 0) -> ObservedEvent:
    """The upsert event of a manifest, by its `kind` (namespaced kinds default to "default").

    Raises ValueError naming the kind when no observed event carries it.
    """
    kind = manifest.get("kind")
    meta = manifest.get("metadata") or {}
    name = str(meta.get("name", ""))
    if kind in _CLUSTER_SCOPED:
        ev = _CLUSTER_SCOPED[kind](name=name, manifest=manifest, at_ms=at_ms)  # type: ignore[call-arg]
    elif kind in _NAMESPACED:
        ns = str(meta.get("namespace") or "default")
        ev = _NAMESPACED[kind](namespace=ns, name=name, manifest=manifest, at_ms=at_ms)  # type: ignore[call-arg]
    else:
        raise ValueError(f"no observed event for kind {kind!r} (known: {', '.join(UPSERT_KINDS)})")
    return ev  # type: ignore[return-value]
