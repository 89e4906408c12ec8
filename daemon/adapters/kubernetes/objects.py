"""The kinds the Kubernetes adapter watches, which objects it keeps, and what it strips before logging.

Kept: every Node, Namespace, ResourceQuota, PriorityClass, PodDisruptionBudget, PodGroup, Queue
and HyperNode (topology.volcano.sh/v1alpha1, an optional kind: its CRD may not be installed, see
source.py);
of the Pods, ours (`spec.schedulerName` in the configured list, default ["volcano"]) and every pod
bound to a node (`spec.nodeName` set), whichever scheduler placed it, since it uses that node's
resources — what Volcano's scheduler cache keeps.

Stripped before an object is logged (the scheduler never reads them): `metadata.managedFields`,
the annotation `kubectl.kubernetes.io/last-applied-configuration`, and any annotation whose value
is longer than `MAX_ANNOTATION_BYTES`; of a Pod, what may carry its secrets (containers' env
values, args, command, probes, lifecycle: daemon/manifests/redaction.py).  Everything else is
logged as the API server sent it, with `kind` and `apiVersion` set (list items of built-in kinds
come without them).

Idempotency keys: an upsert is `k8s:<Kind>:<uid>:<resourceVersion>`, a deletion
`k8s:<Kind>:<uid>:deleted`, so the same change seen twice (a watch replayed after a reconnect, a
relisting after a restart) is logged once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fumarole.daemon.manifests.redaction import redact_pod
from fumarole.store.events import (
    HyperNodeDeleted,
    NamespaceDeleted,
    NodeDeleted,
    NumatopologyDeleted,
    ObservedEvent,
    PodDeleted,
    PodDisruptionBudgetDeleted,
    PodGroupDeleted,
    PriorityClassDeleted,
    QueueDeleted,
    ResourceQuotaDeleted,
    upserted,
)

MAX_ANNOTATION_BYTES = 4096
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    api_version: str
    plural: str
    namespaced: bool
    # A kind whose CRD may be missing: a 404 answer means "none of these" (source.py).
    optional: bool = False

    @property
    def path(self) -> str:
        """The collection path across namespaces (what the adapter lists and watches)."""
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{prefix}/{self.plural}"


KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "v1", "namespaces", False),
    Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False),
    Kind("Queue", "scheduling.volcano.sh/v1beta1", "queues", False),
    Kind("Node", "v1", "nodes", False),
    Kind("HyperNode", "topology.volcano.sh/v1alpha1", "hypernodes", False, optional=True),
    Kind("Numatopology", "nodeinfo.volcano.sh/v1alpha1", "numatopologies", False, optional=True),
    Kind("ResourceQuota", "v1", "resourcequotas", True),
    Kind("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True),
    Kind("PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups", True),
    Kind("Pod", "v1", "pods", True),
)
"""Listed in this order (a pod's group, queue and priority class are known before the pod, the
nodes before the HyperNodes naming them)."""

_DELETED = {
    "Namespace": NamespaceDeleted,
    "PriorityClass": PriorityClassDeleted,
    "Queue": QueueDeleted,
    "Node": NodeDeleted,
    "HyperNode": HyperNodeDeleted,
    "Numatopology": NumatopologyDeleted,
    "ResourceQuota": ResourceQuotaDeleted,
    "PodDisruptionBudget": PodDisruptionBudgetDeleted,
    "PodGroup": PodGroupDeleted,
    "Pod": PodDeleted,
}

ObjectKey = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
Version = tuple[str, str]  # uid, resourceVersion


def object_key(kind: Kind, obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (
        kind.name,
        str(meta.get("namespace") or "") if kind.namespaced else "",
        str(meta.get("name") or ""),
    )


def version_of(obj: dict[str, Any]) -> Version:
    meta = obj.get("metadata") or {}
    return (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))


def keeps(kind: Kind, obj: dict[str, Any], scheduler_names: Iterable[str]) -> bool:
    """Whether the adapter logs this object (see the module notes: which pods)."""
    if kind.name != "Pod":
        return True
    spec = obj.get("spec") or {}
    return bool(spec.get("nodeName")) or spec.get("schedulerName") in set(scheduler_names)


def trimmed(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as logged (see the module notes); `obj` is changed in place and returned."""
    obj["kind"] = kind.name
    obj["apiVersion"] = kind.api_version
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        ann = meta.get("annotations")
        if isinstance(ann, dict):
            for k in [
                k
                for k, v in ann.items()
                if k == LAST_APPLIED or (isinstance(v, str) and len(v.encode()) > MAX_ANNOTATION_BYTES)
            ]:
                del ann[k]
    if kind.name == "Pod":  # no secrets in the log (daemon/manifests/redaction.py)
        obj = redact_pod(obj)
    # Move kind/apiVersion first, as manifests read by people have them.
    return {"apiVersion": obj.pop("apiVersion"), "kind": obj.pop("kind"), **obj}


def upsert_event(kind: Kind, obj: dict[str, Any], at_ms: int) -> tuple[ObservedEvent, str]:
    """The upsert event of an object (trimmed) and its idempotency key."""
    uid, rv = version_of(obj)
    return upserted(trimmed(kind, obj), at_ms), f"k8s:{kind.name}:{uid}:{rv}"


def delete_event(key: ObjectKey, uid: str, at_ms: int) -> tuple[ObservedEvent, str]:
    kind, ns, name = key
    cls = _DELETED[kind]
    if ns or kind in ("ResourceQuota", "PodDisruptionBudget", "PodGroup", "Pod"):
        ev = cls(namespace=ns, name=name, at_ms=at_ms)
    else:
        ev = cls(name=name, at_ms=at_ms)
    return ev, f"k8s:{kind}:{uid}:deleted"
