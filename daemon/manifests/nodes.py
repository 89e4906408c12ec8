"""Node objects: allocatable/capacity, labels, annotations, taints, unschedulable, images."""

from __future__ import annotations

from fumarole.daemon.manifests.fields import to_resource
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.node import NodeFacts, NodeInfo
from fumarole.daemon.scheduler.model.task import Taint


def decode_node(e: Entry) -> NodeInfo:
    """A Node: allocatable (else capacity), capacity, labels, annotations, taints, images."""
    d, o = e.doc, e.obj
    meta = d.mapping(o.get("metadata"), "metadata")
    spec = d.mapping(o.get("spec"), "spec")
    status = d.mapping(o.get("status"), "status")
    capacity = d.quantities(status.get("capacity"), "status.capacity")
    allocatable = (
        d.quantities(status.get("allocatable"), "status.allocatable")
        if status.get("allocatable") is not None
        else capacity
    )
    taints: list[Taint] = []
    for i, t in enumerate(d.seq(spec.get("taints"), "spec.taints")):
        tp = f"spec.taints[{i}]"
        t = d.mapping(t, tp)
        key = d.string(t.get("key"), tp + ".key")
        if not key:
            d.fail(tp + ".key", "required")
        taints.append(
            Taint(key, d.string(t.get("value"), tp + ".value"), d.string(t.get("effect"), tp + ".effect"))
        )
    images: dict[str, int] = {}
    for i, im in enumerate(d.seq(status.get("images"), "status.images")):
        ip = f"status.images[{i}]"
        im = d.mapping(im, ip)
        size = d.integer(im.get("sizeBytes"), ip + ".sizeBytes", 0, 0, 1 << 63)
        for j, n in enumerate(d.seq(im.get("names"), ip + ".names")):
            images[d.string(n, f"{ip}.names[{j}]")] = size
    facts = NodeFacts(
        labels=d.str_map(meta.get("labels"), "metadata.labels"),
        annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
        taints=tuple(taints),
        unschedulable=bool(d.boolean(spec.get("unschedulable"), "spec.unschedulable")),
        images=images,
    )
    alloc = to_resource(allocatable)
    cap = to_resource(capacity) if capacity else alloc.clone()
    return NodeInfo(e.name, alloc, cap, facts)
