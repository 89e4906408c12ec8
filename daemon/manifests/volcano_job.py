"""batch.volcano.sh Job expansion: the PodGroup and pods its webhook and job controller create.

Task names default `default<i>`, task minAvailable default replicas (or
minPartitions*partitionSize), job minAvailable default = sum of task minAvailable, queue default =
the default queue, schedulerName default = first scheduler name; the PodGroup
`<job>-<metadata.uid>` (the plain job name when the manifest has no uid) with minResources from
calcPGMinResources; pods `<job>-<task>-<index>` (uid `<ns>-<pod>`), Pending and unbound.
`spec.networkTopology` is copied to the PodGroup (highestTierAllowed, else highestTierName).
`expand_job` returns the same expansion as manifests (for the simulator's workloads).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from fumarole.daemon.manifests.fields import Doc, Obj, show, to_resource
from fumarole.daemon.manifests.hypernodes import decode_network_topology, network_topology_manifest
from fumarole.daemon.manifests.kinds import (
    COOLDOWN_KEY,
    GROUP_NAME_KEY,
    JDB_MAX_UNAVAILABLE,
    JDB_MIN_AVAILABLE,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_QUEUE_KEY,
    PREEMPTABLE_KEY,
    REVOCABLE_ZONE_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
)
from fumarole.daemon.manifests.objects import Claims, Entry, classify, classify_object
from fumarole.daemon.manifests.pod_requests import add_list, quota_usage, times
from fumarole.daemon.manifests.podgroups import Group
from fumarole.daemon.manifests.pods import Pod, PodSpec, parse_pod_spec
from fumarole.daemon.manifests.priority_classes import decode_priority_class
from fumarole.daemon.scheduler.model.hypernode import NetworkTopology
from fumarole.daemon.scheduler.model.queue import DEFAULT_QUEUE, PriorityClassInfo


@dataclass(slots=True)
class _JobTask:
    """One task of a batch.volcano.sh Job after the webhook's defaulting."""

    index: int
    name: str
    replicas: int
    min_available: int
    spec_path: str
    template_meta: Obj
    template_spec: Obj
    priority: int = 0


def expand_volcano_job(
    e: Entry,
    groups: dict[str, Group],
    pods: list[Pod],
    *,
    claims: Claims,
    pcs: Mapping[str, PriorityClassInfo],
    scheduler_names: tuple[str, ...],
    default_queue: str,
) -> None:
    """Add the Job's PodGroup to `groups` and its pods to `pods` (names and pod uids claimed)."""
    d, o = e.doc, e.obj
    meta = d.mapping(o.get("metadata"), "metadata")
    spec = d.mapping(o.get("spec"), "spec")
    labels = d.str_map(meta.get("labels"), "metadata.labels")
    annotations = d.str_map(meta.get("annotations"), "metadata.annotations")
    creation = d.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    job_uid = d.string(meta.get("uid"), "metadata.uid")
    queue = d.string(spec.get("queue"), "spec.queue") or default_queue
    scheduler = d.string(spec.get("schedulerName"), "spec.schedulerName") or (
        scheduler_names[0] if scheduler_names else "volcano"
    )
    job_pc = d.string(spec.get("priorityClassName"), "spec.priorityClassName")
    network_topology = job_network_topology(d, spec)
    pg_name = f"{e.name}-{job_uid}" if job_uid else e.name
    tasks = d.seq(spec.get("tasks"), "spec.tasks")
    if not tasks:
        d.fail("spec.tasks", "no task specified in job spec")
    parsed: list[_JobTask] = []
    names: set[str] = set()
    for i, t in enumerate(tasks):
        tp = f"spec.tasks[{i}]"
        t = d.mapping(t, tp)
        name = d.string(t.get("name"), tp + ".name") or f"default{i}"
        if name in names:
            d.fail(tp + ".name", f"duplicated task name {show(name)}")
        names.add(name)
        replicas = d.integer(t.get("replicas"), tp + ".replicas", 0, 0)
        partition = d.mapping(t.get("partitionPolicy"), tp + ".partitionPolicy")
        min_partitions = d.integer(
            partition.get("minPartitions"), tp + ".partitionPolicy.minPartitions", 0, 0
        )
        size = d.integer(partition.get("partitionSize"), tp + ".partitionPolicy.partitionSize", 0, 0)
        default_min = min_partitions * size if partition and min_partitions > 0 else replicas
        min_av = d.integer(t.get("minAvailable"), tp + ".minAvailable", default_min, 0)
        if min_av > replicas:
            d.fail(tp + ".minAvailable", f"'minAvailable' ({min_av}) is greater than 'replicas' ({replicas})")
        template = d.mapping(t.get("template"), tp + ".template")
        parsed.append(
            _JobTask(
                i,
                name,
                replicas,
                min_av,
                tp + ".template.spec",
                d.mapping(template.get("metadata"), tp + ".template.metadata"),
                d.mapping(template.get("spec"), tp + ".template.spec"),
            )
        )
    total_replicas = sum(t.replicas for t in parsed)
    min_available = d.integer(spec.get("minAvailable"), "spec.minAvailable", 0, 0)
    if min_available == 0:
        min_available = sum(t.min_available for t in parsed)
    if min_available > total_replicas:
        d.fail(
            "spec.minAvailable",
            f"job 'minAvailable' ({min_available}) should not be greater than total replicas "
            f"in tasks ({total_replicas})",
        )

    specs: list[PodSpec] = []
    for t in parsed:
        s = parse_pod_spec(d, t.template_spec, t.spec_path, scheduler)
        pc = pcs.get(s.priority_class_name)
        t.priority = pc.value if pc is not None and s.priority_class_name else 0
        if not s.priority_class_name and job_pc:
            s.priority_class_name = job_pc
        specs.append(s)

    # calcPGMinResources (job_controller_actions.go), on the templates as written.
    order = sorted(range(len(parsed)), key=lambda i: -parsed[i].priority)
    usage = {i: quota_usage(specs[i].requests, False) for i in order}
    min_req: dict[str, Fraction] = {}
    total_min = sum(t.min_available for t in parsed)
    if min_available < total_min:
        count = min_available
        for i in order:
            n = min(count, parsed[i].replicas)
            add_list(min_req, times(usage[i], n))
            if count <= parsed[i].replicas:
                break
            count -= parsed[i].replicas
    else:
        pod_cnt = 0
        for i in order:
            valid = min(parsed[i].min_available, min_available - pod_cnt)
            add_list(min_req, times(usage[i], valid))
            pod_cnt += valid
            if pod_cnt >= min_available:
                break
        left_cnt = min_available - pod_cnt
        for i in order if left_cnt > 0 else ():
            left = parsed[i].replicas - parsed[i].min_available
            if left == 0:
                continue
            n = min(left, left_cnt)
            add_list(min_req, times(usage[i], n))
            left_cnt -= n
            if left_cnt <= 0:
                break

    claims.name(d, "metadata.name", "PodGroup", e.namespace, pg_name)
    groups[f"{e.namespace}/{pg_name}"] = Group(
        doc=d,
        name=pg_name,
        namespace=e.namespace,
        queue=queue,
        min_member=min_available,
        min_task_member={t.name: t.min_available for t in sorted(parsed, key=lambda t: t.name)},
        priority_class_name=job_pc,
        min_resources=to_resource(min_req),
        phase="",
        creation=creation,
        annotations=annotations,
        labels=labels,
        network_topology=network_topology,
    )

    owner = job_uid or f"{e.namespace}-{e.name}"
    for t, s in zip(parsed, specs, strict=True):
        tmeta_path = f"spec.tasks[{t.index}].template.metadata"
        t_labels = d.str_map(t.template_meta.get("labels"), tmeta_path + ".labels")
        t_annotations = d.str_map(t.template_meta.get("annotations"), tmeta_path + ".annotations")
        for ix in range(t.replicas):
            pod_name = f"{e.name}-{t.name}-{ix}"
            pa = dict(t_annotations)
            pa.update(
                {
                    TASK_INDEX_KEY: str(ix),
                    TASK_SPEC_KEY: t.name,
                    GROUP_NAME_KEY: pg_name,
                    JOB_NAME_KEY: e.name,
                    JOB_QUEUE_KEY: queue,
                    "volcano.sh/job-version": "0",
                    "volcano.sh/template-uid": f"{e.name}-{t.name}",
                    "volcano.sh/job-retry-count": "0",
                }
            )
            for k in (PREEMPTABLE_KEY, COOLDOWN_KEY, REVOCABLE_ZONE_KEY):
                if k in annotations:
                    pa[k] = annotations[k]
            for k in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE):
                if k in annotations:
                    pa[k] = annotations[k]
                    break
            pl = dict(t_labels)
            pl.update(
                {
                    TASK_INDEX_KEY: str(ix),
                    JOB_NAME_KEY: e.name,
                    TASK_SPEC_KEY: t.name,
                    JOB_NAMESPACE_KEY: e.namespace,
                    JOB_QUEUE_KEY: queue,
                }
            )
            for k in (PREEMPTABLE_KEY, COOLDOWN_KEY):
                if k in labels:
                    pl[k] = labels[k]
            claims.name(d, f"spec.tasks[{t.index}]", "Pod", e.namespace, pod_name)
            uid = f"{e.namespace}-{pod_name}"
            claims.pod_uid(d, uid, e.namespace, pod_name)
            pods.append(
                Pod(
                    doc=d,
                    name=pod_name,
                    namespace=e.namespace,
                    uid=uid,
                    labels=dict(sorted(pl.items())),
                    annotations=dict(sorted(pa.items())),
                    creation=creation,
                    deleting=False,
                    owner_uid=owner,
                    spec=replace(s, node_name=""),
                )
            )


def job_network_topology(d: Doc, spec: Obj) -> NetworkTopology | None:
    """The PodGroup's networkTopology the Job controller writes: the mode, and highestTierAllowed
    when set, else highestTierName (createPodGroupIfNotExist)."""
    nt = decode_network_topology(d, spec.get("networkTopology"), "spec.networkTopology")
    if nt is not None and nt.highest_tier_allowed is not None and nt.highest_tier_name:
        nt = NetworkTopology(nt.mode, nt.highest_tier_allowed, "")
    return nt


def expand_job(
    file: str,
    index: int,
    job: Mapping[str, Any],
    *,
    priority_classes: Iterable[tuple[str, int, Mapping[str, Any]]] = (),
    scheduler_names: Sequence[str] = ("volcano",),
    default_queue: str = DEFAULT_QUEUE,
) -> list[Obj]:
    """One batch.volcano.sh Job as the manifests its controllers create: [PodGroup, pods...].

    The same expansion as build_snapshot's (names, defaulting, labels, annotations,
    minMember/minTaskMember/minResources); the pods get their task's template spec with
    schedulerName and priorityClassName filled in and a controller ownerReference to the Job.
    `priority_classes` (PriorityClass objects) order tasks for minResources, as in the cluster.
    """
    claims = Claims()
    entries: list[Entry] = []
    for pc_file, pc_index, pc in priority_classes:
        entries.extend(classify(pc_file, pc_index, pc, claims))
    pcs = {e.name: decode_priority_class(e) for e in entries if e.kind == "PriorityClass"}
    e = classify_object(Doc(file, index), dict(job), claims)
    if e.kind != "Job":
        e.doc.fail("kind", f"expected a batch.volcano.sh Job, got {show(e.kind)}")
    groups: dict[str, Group] = {}
    pods: list[Pod] = []
    expand_volcano_job(
        e,
        groups,
        pods,
        claims=claims,
        pcs=pcs,
        scheduler_names=tuple(scheduler_names),
        default_queue=default_queue,
    )
    meta = e.obj.get("metadata") or {}
    templates: dict[str, Obj] = {}
    for i, t in enumerate(e.obj["spec"]["tasks"]):
        templates[t.get("name") or f"default{i}"] = (t.get("template") or {}).get("spec") or {}
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": e.name,
        "uid": meta.get("uid") or f"{e.namespace}-{e.name}",
        "controller": True,
    }
    created = {"creationTimestamp": meta["creationTimestamp"]} if "creationTimestamp" in meta else {}
    out: list[Obj] = []
    for g in groups.values():
        spec: Obj = {
            "minMember": g.min_member,
            "minTaskMember": dict(g.min_task_member),
            "queue": g.queue,
        }
        if g.priority_class_name:
            spec["priorityClassName"] = g.priority_class_name
        if g.min_resources is not None:
            spec["minResources"] = g.min_resources.to_quantities()
        if g.network_topology is not None:
            spec["networkTopology"] = network_topology_manifest(g.network_topology)
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": g.name,
                    "namespace": g.namespace,
                    "labels": dict(g.labels),
                    "annotations": dict(g.annotations),
                    **created,
                    "ownerReferences": [dict(owner)],
                },
                "spec": spec,
            }
        )
    for p in pods:
        pod_spec = json.loads(json.dumps(templates[p.annotations[TASK_SPEC_KEY]], default=str))
        pod_spec.pop("nodeName", None)
        pod_spec["schedulerName"] = p.spec.scheduler_name
        if p.spec.priority_class_name:
            pod_spec["priorityClassName"] = p.spec.priority_class_name
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": p.name,
                    "namespace": p.namespace,
                    "uid": p.uid,
                    "labels": dict(p.labels),
                    "annotations": dict(p.annotations),
                    **created,
                    "ownerReferences": [dict(owner)],
                },
                "spec": pod_spec,
            }
        )
    return out
