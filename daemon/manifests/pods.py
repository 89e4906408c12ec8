"""Pod objects: the parsed pod spec and record, and the TaskInfo the scheduler's cache makes of one.

Requests from pod_requests.py; priority = spec.priority, else the PriorityClass value, else 1,
then the `volcano.sh/task-priority` annotation; role and preemptable from annotation, then label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fumarole.daemon.manifests.fields import INT32_MAX, INT32_MIN, Doc, Obj, join, plain_quantities
from fumarole.daemon.manifests.kinds import DEFAULT_SCHEDULER, TASK_PRIORITY_KEY, TASK_SPEC_KEY, preemptable
from fumarole.daemon.manifests.objects import Claims, Entry
from fumarole.daemon.manifests.pod_requests import (
    Requests,
    container_cpu_requests,
    cpu_mem_limits,
    guaranteed_qos,
    volcano_request,
)
from fumarole.daemon.scheduler.model.devices import ContainerResources, pod_extended_resources
from fumarole.daemon.scheduler.model.queue import PriorityClassInfo
from fumarole.daemon.scheduler.model.task import HostPort, PodFacts, TaskInfo, Toleration, status_from_pod

_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)


@dataclass(slots=True)
class PodSpec:
    """Everything read from a pod spec (shared by the replicas of a Volcano Job task)."""

    requests: Requests
    scheduler_name: str
    node_name: str
    priority: int | None
    priority_class_name: str
    preemption_policy: str
    node_selector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: tuple[Toleration, ...]
    host_ports: tuple[HostPort, ...]
    scheduling_gates: tuple[str, ...]
    images: tuple[str, ...]
    spread: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class Pod:
    """A Pod as parsed: identity, labels, annotations, owner, spec and status fields read."""

    doc: Doc
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation: float
    deleting: bool
    owner_uid: str
    spec: PodSpec
    phase: str = "Pending"
    nominated: str = ""
    scheduled_time: float | None = None
    start_time: float | None = None


def parse_pod_spec(d: Doc, spec: Obj, path: str, scheduler_default: str) -> PodSpec:
    """Everything the scheduler reads from a pod spec at `path`, validated.

    The common shape (containers with requests, limits and an image; the scalar fields as
    strings) is read by `plain_pod_spec` without building field paths; anything else, and every
    error, goes through `checked_pod_spec`, which names the field.
    """
    fast = plain_pod_spec(spec, scheduler_default)
    if fast is not None:
        return fast
    return checked_pod_spec(d, spec, path, scheduler_default)


# Spec fields `plain_pod_spec` leaves to `checked_pod_spec` when they hold anything.
_NOT_PLAIN = (
    "initContainers",
    "resources",
    "overhead",
    "tolerations",
    "schedulingGates",
    "priority",
    "nodeSelector",
    "affinity",
    "topologySpreadConstraints",
)
_PLAIN_STRINGS = ("schedulerName", "nodeName", "priorityClassName", "preemptionPolicy")


def plain_pod_spec(spec: Obj, scheduler_default: str) -> PodSpec | None:
    """`checked_pod_spec`'s result for a spec of the common, valid shape; None for any other.

    No error is raised here: a value this path does not accept as it stands (another type, a bad
    quantity, a field it leaves alone) sends the spec to `checked_pod_spec`, which accepts it or
    names the field in its error.
    """
    for key in _NOT_PLAIN:
        if spec.get(key) is not None:
            return None
    strings = []
    for key in _PLAIN_STRINGS:
        v = spec.get(key)
        if v is None:
            v = ""
        elif type(v) is not str:
            return None
        strings.append(v)
    containers = spec.get("containers")
    reqs = Requests()
    images: list[str] = []
    if containers is not None:
        if type(containers) is not list:
            return None
        for c in containers:
            if type(c) is not dict or c.get("ports") is not None:
                return None
            for k in c:
                if type(k) is not str:
                    return None
            cname = c.get("name", "")
            if type(cname) is not str:
                return None
            reqs.names.append(cname)
            image = c.get("image")
            if image is not None:
                if type(image) is not str:
                    return None
                if image:
                    images.append(image)
            res = c.get("resources")
            if res is None:
                reqs.containers.append(({}, {}))
                continue
            if type(res) is not dict:
                return None
            for k in res:
                if type(k) is not str:
                    return None
            req = plain_quantities(res.get("requests"))
            lim = plain_quantities(res.get("limits"))
            if req is None or lim is None:
                return None
            reqs.containers.append((req, lim))
    return PodSpec(
        requests=reqs,
        scheduler_name=strings[0] or scheduler_default,
        node_name=strings[1],
        priority=None,
        priority_class_name=strings[2],
        preemption_policy=strings[3],
        node_selector={},
        affinity={},
        tolerations=(),
        host_ports=(),
        scheduling_gates=(),
        images=tuple(images),
        spread=(),
    )


def checked_pod_spec(d: Doc, spec: Obj, path: str, scheduler_default: str) -> PodSpec:
    """`parse_pod_spec` field by field, every error naming its field's path."""
    reqs = Requests()
    host_ports: list[HostPort] = []
    images: list[str] = []
    for section, is_init in (("initContainers", True), ("containers", False)):
        for i, c in enumerate(d.seq(spec.get(section), join(path, section))):
            cp = join(join(path, section), i)
            c = d.mapping(c, cp)
            res = d.mapping(c.get("resources"), join(cp, "resources"))
            req = d.quantities(res.get("requests"), join(cp, "resources.requests"))
            lim = d.quantities(res.get("limits"), join(cp, "resources.limits"))
            image = d.string(c.get("image"), join(cp, "image"))
            if image:
                images.append(image)
            if is_init:
                policy = d.string(c.get("restartPolicy"), join(cp, "restartPolicy"))
                reqs.inits.append((req, lim, policy == "Always"))
                continue
            reqs.containers.append((req, lim))
            reqs.names.append(d.string(c.get("name"), join(cp, "name")))
            for j, port in enumerate(d.seq(c.get("ports"), join(cp, "ports"))):
                pp = join(join(cp, "ports"), j)
                port = d.mapping(port, pp)
                hp = d.integer(port.get("hostPort"), join(pp, "hostPort"), 0, 0, 65535)
                if hp > 0:
                    host_ports.append(
                        HostPort(
                            hp,
                            d.string(port.get("protocol"), join(pp, "protocol"), "TCP") or "TCP",
                            d.string(port.get("hostIP"), join(pp, "hostIP"), "0.0.0.0") or "0.0.0.0",
                        )
                    )
    pod_res = d.mapping(spec.get("resources"), join(path, "resources"))
    reqs.pod_level = d.quantities(pod_res.get("requests"), join(path, "resources.requests"))
    d.quantities(pod_res.get("limits"), join(path, "resources.limits"))
    reqs.overhead = d.quantities(spec.get("overhead"), join(path, "overhead"))
    tolerations: list[Toleration] = []
    for i, t in enumerate(d.seq(spec.get("tolerations"), join(path, "tolerations"))):
        tp = join(join(path, "tolerations"), i)
        t = d.mapping(t, tp)
        tolerations.append(
            Toleration(
                d.string(t.get("key"), join(tp, "key")),
                d.string(t.get("operator"), join(tp, "operator"), "Equal") or "Equal",
                d.string(t.get("value"), join(tp, "value")),
                d.string(t.get("effect"), join(tp, "effect")),
            )
        )
    gates: list[str] = []
    for i, g in enumerate(d.seq(spec.get("schedulingGates"), join(path, "schedulingGates"))):
        g = d.mapping(g, join(join(path, "schedulingGates"), i))
        gates.append(d.string(g.get("name"), join(join(path, "schedulingGates"), i) + ".name"))
    prio = spec.get("priority")
    return PodSpec(
        requests=reqs,
        scheduler_name=d.string(spec.get("schedulerName"), join(path, "schedulerName")) or scheduler_default,
        node_name=d.string(spec.get("nodeName"), join(path, "nodeName")),
        priority=None if prio is None else d.integer(prio, join(path, "priority"), 0),
        priority_class_name=d.string(spec.get("priorityClassName"), join(path, "priorityClassName")),
        preemption_policy=d.string(spec.get("preemptionPolicy"), join(path, "preemptionPolicy")),
        node_selector=d.str_map(spec.get("nodeSelector"), join(path, "nodeSelector")),
        affinity=d.mapping(spec.get("affinity"), join(path, "affinity")),
        tolerations=tuple(tolerations),
        host_ports=tuple(host_ports),
        scheduling_gates=tuple(gates),
        images=tuple(images),
        spread=tuple(
            d.mapping(c, join(join(path, "topologySpreadConstraints"), i))
            for i, c in enumerate(
                d.seq(spec.get("topologySpreadConstraints"), join(path, "topologySpreadConstraints"))
            )
        ),
    )


def _pod_scheduled_time(d: Doc, status: Obj) -> float | None:
    """lastTransitionTime of the first `PodScheduled` condition whose status is True (else None)."""
    for i, c in enumerate(d.seq(status.get("conditions"), "status.conditions")):
        cp = f"status.conditions[{i}]"
        c = d.mapping(c, cp)
        if d.string(c.get("type"), cp + ".type") == "PodScheduled" and (
            d.string(c.get("status"), cp + ".status") == "True"
        ):
            return d.timestamp(c.get("lastTransitionTime"), cp + ".lastTransitionTime")
    return None


def _controller_uid(d: Doc, meta: Obj) -> str:
    for i, ref in enumerate(d.seq(meta.get("ownerReferences"), "metadata.ownerReferences")):
        rp = f"metadata.ownerReferences[{i}]"
        ref = d.mapping(ref, rp)
        if d.boolean(ref.get("controller"), rp + ".controller"):
            return d.string(ref.get("uid"), rp + ".uid")
    return ""


def decode_pod(e: Entry, claims: Claims) -> Pod:
    """A Pod object as a record (parsed once); its uid is claimed (duplicates refused)."""
    d, o = e.doc, e.obj
    meta = d.mapping(o.get("metadata"), "metadata")
    spec = d.mapping(o.get("spec"), "spec")
    status = d.mapping(o.get("status"), "status")
    uid = d.string(meta.get("uid"), "metadata.uid") or f"{e.namespace}-{e.name}"
    claims.pod_uid(d, uid, e.namespace, e.name)
    return Pod(
        doc=d,
        name=e.name,
        namespace=e.namespace,
        uid=uid,
        labels=d.str_map(meta.get("labels"), "metadata.labels"),
        annotations=d.str_map(meta.get("annotations"), "metadata.annotations"),
        creation=d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        deleting=meta.get("deletionTimestamp") is not None,
        owner_uid=_controller_uid(d, meta),
        spec=parse_pod_spec(d, spec, "spec", DEFAULT_SCHEDULER),
        phase=d.string(status.get("phase"), "status.phase") or "Pending",
        nominated=d.string(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        scheduled_time=_pod_scheduled_time(d, status),
        start_time=d.timestamp(status["startTime"], "status.startTime") if "startTime" in status else None,
    )


def _extended_resources(r: Requests) -> tuple[ContainerResources, ...]:
    """`pod_extended_resources` of the spec; () at once when no resource name has a '/'."""
    for req, lim in r.containers:
        if any("/" in k for k in req) or any("/" in k for k in lim):
            return pod_extended_resources(r.containers, r.inits)
    if r.inits:
        return pod_extended_resources(r.containers, r.inits)
    return ()


def pod_task(p: Pod, job: str, pcs: Mapping[str, PriorityClassInfo]) -> TaskInfo:
    """The TaskInfo of a parsed pod in job `job` (api.NewTaskInfo), given the priority classes."""
    s = p.spec
    pc = pcs.get(s.priority_class_name)
    priority = s.priority if s.priority is not None else (pc.value if pc is not None else 1)
    text = p.annotations.get(TASK_PRIORITY_KEY)
    if text is not None and _INT_RE.fullmatch(text) and INT32_MIN <= int(text) <= INT32_MAX:
        priority = int(text)
    role = p.annotations.get(TASK_SPEC_KEY) or p.labels.get(TASK_SPEC_KEY) or ""
    facts = PodFacts(
        labels=p.labels,
        annotations=p.annotations,
        node_selector=s.node_selector,
        affinity=s.affinity,
        tolerations=s.tolerations,
        host_ports=s.host_ports,
        priority_class_name=s.priority_class_name,
        preemption_policy=s.preemption_policy or (pc.preemption_policy if pc is not None else ""),
        scheduler_name=s.scheduler_name,
        nominated_node_name=p.nominated,
        scheduling_gates=s.scheduling_gates,
        images=s.images,
        topology_spread_constraints=s.spread,
        owner_uid=p.owner_uid,
        phase=p.phase,
        deleting=p.deleting,
        scheduled_time=p.scheduled_time,
        start_time=p.start_time,
        cpu_mem_limits=cpu_mem_limits(s.requests),
        extended_resources=_extended_resources(s.requests),
        guaranteed=guaranteed_qos(s.requests),
        cpu_containers=container_cpu_requests(s.requests),
    )
    return TaskInfo(
        uid=p.uid,
        name=p.name,
        namespace=p.namespace,
        job=job,
        resreq=volcano_request(s.requests),
        status=status_from_pod(p.phase, s.node_name, p.deleting),
        node_name=s.node_name,
        priority=priority,
        role=role,
        preemptable=preemptable(p.annotations, p.labels, True),
        creation=p.creation,
        pod=facts,
        sch_gated=bool(s.scheduling_gates),
    )
