"""Volcano Queue objects: weight, capability/deserved/guarantee, hierarchy, state, node-group affinity."""

from __future__ import annotations

from fumarole.daemon.manifests.fields import Doc, Obj, show
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.queue import QUEUE_OPEN, NodeGroupAffinity, QueueInfo

QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")


def _group_affinity(d: Doc, spec: Obj) -> NodeGroupAffinity | None:
    """Queue spec.affinity: nodeGroupAffinity / nodeGroupAntiAffinity name lists (None when absent)."""
    if spec.get("affinity") is None:
        return None
    aff = d.mapping(spec.get("affinity"), "spec.affinity")
    lists: list[tuple[str, ...]] = []
    for section in ("nodeGroupAffinity", "nodeGroupAntiAffinity"):
        sp = f"spec.affinity.{section}"
        sec = d.mapping(aff.get(section), sp)
        for key in (
            "requiredDuringSchedulingIgnoredDuringExecution",
            "preferredDuringSchedulingIgnoredDuringExecution",
        ):
            kp = f"{sp}.{key}"
            lists.append(tuple(d.string(v, f"{kp}[{i}]") for i, v in enumerate(d.seq(sec.get(key), kp))))
    return NodeGroupAffinity(lists[0], lists[1], lists[2], lists[3])


def decode_queue(e: Entry) -> QueueInfo:
    """A Queue: weight (default 1), capability/deserved/guarantee, parent, priority, state (default Open)."""
    d, o = e.doc, e.obj
    meta = d.mapping(o.get("metadata"), "metadata")
    spec = d.mapping(o.get("spec"), "spec")
    status = d.mapping(o.get("status"), "status")
    guarantee = d.mapping(spec.get("guarantee"), "spec.guarantee")
    state = d.string(status.get("state"), "status.state") or QUEUE_OPEN
    if state not in QUEUE_STATES:
        d.fail("status.state", f"unknown state {show(state)}; expected one of {', '.join(QUEUE_STATES)}")
    return QueueInfo(
        name=e.name,
        weight=d.integer(spec.get("weight"), "spec.weight", 1, 0, 65535),
        capability=d.resource(spec.get("capability"), "spec.capability"),
        deserved=d.resource(spec.get("deserved"), "spec.deserved"),
        guarantee=d.resource(guarantee.get("resource"), "spec.guarantee.resource"),
        reclaimable=d.boolean(spec.get("reclaimable"), "spec.reclaimable"),
        parent=d.string(spec.get("parent"), "spec.parent"),
        priority=d.integer(spec.get("priority"), "spec.priority", 0, 0),
        state=state,
        creation=d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
        affinity=_group_affinity(d, spec),
    )
