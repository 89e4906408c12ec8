"""PodGroup objects, the PodGroup the controller makes for a pod without one, and their JobInfo."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fumarole.daemon.manifests.fields import Doc, Obj, show, to_resource
from fumarole.daemon.manifests.hypernodes import decode_network_topology
from fumarole.daemon.manifests.kinds import (
    COOLDOWN_KEY,
    JDB_MAX_UNAVAILABLE,
    JDB_MIN_AVAILABLE,
    PREEMPTABLE_KEY,
    QUEUE_NAME_ANNOTATION,
    REVOCABLE_ZONE_KEY,
    preemptable,
)
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.manifests.pod_requests import quota_usage
from fumarole.daemon.manifests.pods import Pod
from fumarole.daemon.scheduler.model.hypernode import NetworkTopology
from fumarole.daemon.scheduler.model.job import Condition, JobInfo
from fumarole.daemon.scheduler.model.queue import PriorityClassInfo
from fumarole.daemon.scheduler.model.resources import Resource

PODGROUP_PHASES = ("Pending", "Running", "Unknown", "Inqueue", "Completed")


@dataclass(slots=True)
class Group:
    """A PodGroup as parsed (from a manifest, a Volcano Job, or made by the PodGroup controller)."""

    doc: Doc
    name: str
    namespace: str
    queue: str
    min_member: int
    min_task_member: dict[str, int]
    priority_class_name: str
    min_resources: Resource | None
    phase: str
    creation: float
    annotations: dict[str, str]
    labels: dict[str, str]
    status: Obj = field(default_factory=dict)
    network_topology: NetworkTopology | None = None


def decode_podgroup(e: Entry) -> Group:
    """A PodGroup as a record: queue, minMember, minTaskMember, priority class, minResources, phase."""
    d, o = e.doc, e.obj
    meta = d.mapping(o.get("metadata"), "metadata")
    spec = d.mapping(o.get("spec"), "spec")
    status = d.mapping(o.get("status"), "status")
    mtm = d.mapping(spec.get("minTaskMember"), "spec.minTaskMember")
    phase = d.string(status.get("phase"), "status.phase")
    if phase and phase not in PODGROUP_PHASES:
        d.fail("status.phase", f"unknown phase {show(phase)}; expected one of {', '.join(PODGROUP_PHASES)}")
    return Group(
        doc=d,
        name=e.name,
        namespace=e.namespace,
        queue=d.string(spec.get("queue"), "spec.queue"),
        min_member=d.integer(spec.get("minMember"), "spec.minMember", 0, 0),
        min_task_member={k: d.integer(mtm[k], f"spec.minTaskMember.{k}", 0, 0) for k in sorted(mtm)},
        priority_class_name=d.string(spec.get("priorityClassName"), "spec.priorityClassName"),
        min_resources=(
            None
            if spec.get("minResources") is None
            else to_resource(d.quantities(spec.get("minResources"), "spec.minResources"))
        ),
        phase=phase,
        creation=d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
        labels=d.str_map(meta.get("labels"), "metadata.labels"),
        status=status,
        network_topology=decode_network_topology(d, spec.get("networkTopology"), "spec.networkTopology"),
    )


def job_info(
    g: Group, pcs: Mapping[str, PriorityClassInfo], default_priority: int, default_queue: str
) -> JobInfo:
    """The JobInfo of a PodGroup: priority from its class, else the globalDefault value."""
    pc = pcs.get(g.priority_class_name)
    job = JobInfo(
        uid=f"{g.namespace}/{g.name}",
        name=g.name,
        namespace=g.namespace,
        queue=g.queue or default_queue,
        min_available=g.min_member,
        task_min_available=g.min_task_member,
        priority=pc.value if pc is not None else default_priority,
        priority_class_name=g.priority_class_name,
        min_resources=g.min_resources,
        phase=g.phase,
        creation=g.creation,
        annotations=g.annotations,
        preemptable=preemptable(g.annotations, g.labels, False),
        network_topology=g.network_topology,
    )
    d, st = g.doc, g.status
    for i, c in enumerate(d.seq(st.get("conditions"), "status.conditions")):
        cp = f"status.conditions[{i}]"
        c = d.mapping(c, cp)
        job.status.conditions.append(
            Condition(
                type=d.string(c.get("type"), cp + ".type"),
                status=d.string(c.get("status"), cp + ".status", "True"),
                reason=d.string(c.get("reason"), cp + ".reason"),
                message=d.string(c.get("message"), cp + ".message"),
                transition_id=d.string(c.get("transitionID"), cp + ".transitionID"),
            )
        )
    for key in ("running", "succeeded", "failed"):
        setattr(job.status, key, d.integer(st.get(key), f"status.{key}", 0, 0))
    return job


def normal_pod_group(p: Pod, name: str) -> Group:
    """What the PodGroup controller (buildPodGroupFromPod) creates for a pod without a group."""
    annotations = {
        k: p.annotations[k] for k in (PREEMPTABLE_KEY, COOLDOWN_KEY, REVOCABLE_ZONE_KEY) if k in p.annotations
    }
    for k in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE):
        if k in p.annotations:
            annotations[k] = p.annotations[k]
            break
    labels = {k: p.labels[k] for k in (PREEMPTABLE_KEY, COOLDOWN_KEY) if k in p.labels}
    return Group(
        doc=p.doc,
        name=name,
        namespace=p.namespace,
        queue=p.annotations.get(QUEUE_NAME_ANNOTATION, ""),
        min_member=1,
        min_task_member={},
        priority_class_name=p.spec.priority_class_name,
        min_resources=to_resource(quota_usage(p.spec.requests, True)),
        phase="Pending",
        creation=p.creation,
        annotations=annotations,
        labels=labels,
    )
