"""Building the ClusterSnapshot: every object classified, then decoded kind by kind, then assembled.

Order: PriorityClasses (plus the built-in ones), Namespaces, ResourceQuotas,
PodDisruptionBudgets, Queues (plus `root` and the default queue when missing), Nodes, HyperNodes; then
PodGroups, Pods and Volcano Jobs in object order; pods of ours without a group get the PodGroup
controller's group; bound, not finished tasks occupy their node; other schedulers' pods are kept
only when bound.  See the package docstring for the modelling notes.

`build_loading` overlaps the build with the reading of a split YAML file: as the objects are
read (the first part's while the child process parses the second, then the child's chunks as
they arrive) they are classified, their Nodes, PodGroups and Pods decoded (pure functions of
each object; the Pods' uids are claimed later, in object order, as `decode_pod` does) and the
tasks of Pods without a priority class name made (they read no class).  Any error in that early
work drops it, and the serial `build_snapshot(loading.result())` runs instead, so errors are
the serial path's exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fumarole.daemon.manifests.fields import Doc
from fumarole.daemon.manifests.hypernodes import decode_hypernode
from fumarole.daemon.manifests.kinds import GROUP_NAME_KEY
from fumarole.daemon.manifests.namespaces import decode_namespace, decode_pdb, decode_resource_quota
from fumarole.daemon.manifests.node_usage import node_usage_of
from fumarole.daemon.manifests.nodes import decode_node
from fumarole.daemon.manifests.numatopologies import decode_numatopology
from fumarole.daemon.manifests.objects import Claims, Entry, classify
from fumarole.daemon.manifests.podgroups import Group, decode_podgroup, job_info, normal_pod_group
from fumarole.daemon.manifests.pods import Pod, decode_pod, pod_task
from fumarole.daemon.manifests.priority_classes import BUILTIN_PRIORITY_CLASSES, decode_priority_class
from fumarole.daemon.manifests.queues import decode_queue
from fumarole.daemon.manifests.reading import PendingLoad, load_objects
from fumarole.daemon.manifests.volcano_job import expand_volcano_job
from fumarole.daemon.scheduler.model.hypernode import HyperNodeSpec
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import (
    DEFAULT_QUEUE,
    QUEUE_OPEN,
    ROOT_QUEUE,
    NamespaceInfo,
    PriorityClassInfo,
    QueueInfo,
)
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import COMPLETED_STATUSES, TaskInfo


class _Unclaimed(Claims):
    """Claims that claim nothing: a Pod decoded ahead has its uid claimed by the build, in order."""

    __slots__ = ()

    def pod_uid(self, d: Doc, uid: str, ns: str, name: str) -> None:
        return None


_UNCLAIMED = _Unclaimed()


def _name(spec: HyperNodeSpec) -> str:
    return spec.name


_NO_CLASSES: dict[str, PriorityClassInfo] = {}


def _group_name(p: Pod, mine: bool) -> str:
    """The pod's PodGroup name: its annotation, else (a pod of ours) the PodGroup controller's
    `podgroup-<owner or pod uid>`, else none."""
    gname = p.annotations.get(GROUP_NAME_KEY, "")
    if not gname and mine:
        gname = "podgroup-" + (p.owner_uid or p.uid)
    return str(gname)


class _Builder:
    """The objects classified so far, then the snapshot built from them."""

    def __init__(self, scheduler_names: Sequence[str], default_queue: str) -> None:
        self.scheduler_names = tuple(scheduler_names)
        self.default_queue = default_queue
        self.entries: list[Entry] = []
        self.claims = Claims()
        self.pcs: dict[str, PriorityClassInfo] = {}
        self.default_priority = 0
        self.tasks_ahead: dict[int, TaskInfo] = {}  # id(pod) -> its task, made in `classify_ahead`

    def classify(self, file: str, index: int, obj: Any) -> None:
        self.entries.extend(classify(file, index, obj, self.claims))

    def classify_ahead(self, objects: Iterable[tuple[str, int, Any]]) -> bool:
        """Classify these objects and decode their Nodes, PodGroups and Pods now; False (and the
        builder is spoilt) at any error, which the serial build will then raise in its order."""
        try:
            start = len(self.entries)
            for file, index, obj in objects:
                self.classify(file, index, obj)
            for e in self.entries[start:]:
                kind = e.kind
                if kind == "Pod":
                    e.record = pod = decode_pod(e, _UNCLAIMED)
                    if not pod.spec.priority_class_name:
                        self._task_ahead(pod)
                elif kind == "PodGroup":
                    e.record = decode_podgroup(e)
                elif kind == "Node":
                    e.record = decode_node(e)
        except Exception:
            return False
        return True

    def _task_ahead(self, p: Pod) -> None:
        """The task `_place` makes of a pod without a priority class name: it reads no priority
        class (none has an empty name), so it can be made before the classes are known."""
        mine = p.spec.scheduler_name in self.scheduler_names
        if not mine and not p.spec.node_name:
            return
        gname = _group_name(p, mine)
        self.tasks_ahead[id(p)] = pod_task(p, f"{p.namespace}/{gname}" if gname else "", _NO_CLASSES)

    def build(self) -> ClusterSnapshot:
        snap = ClusterSnapshot()
        by_kind: dict[str, list[Entry]] = {}
        for e in self.entries:
            by_kind.setdefault(e.kind, []).append(e)
        for e in by_kind.get("PriorityClass", []):
            pc = decode_priority_class(e)
            self.pcs[e.name] = pc
            if pc.global_default:
                # cache.addPriorityClass: the last globalDefault class seen wins.
                self.default_priority = pc.value
        for pc in BUILTIN_PRIORITY_CLASSES:
            self.pcs.setdefault(pc.name, pc)
        snap.priority_classes = self.pcs
        for e in by_kind.get("Namespace", []):
            snap.namespaces[e.name] = decode_namespace(e)
        for e in by_kind.get("ResourceQuota", []):
            quota = decode_resource_quota(e)
            snap.namespaces.setdefault(e.namespace, NamespaceInfo(e.namespace)).quotas.append(quota)
        for e in by_kind.get("PodDisruptionBudget", []):
            pdb = decode_pdb(e)
            snap.namespaces.setdefault(e.namespace, NamespaceInfo(e.namespace)).pdbs.append(pdb)
        for e in by_kind.get("Queue", []):
            snap.queues[e.name] = decode_queue(e)
        if ROOT_QUEUE not in snap.queues:
            snap.queues[ROOT_QUEUE] = QueueInfo(ROOT_QUEUE, weight=1, reclaimable=False, state=QUEUE_OPEN)
        if self.default_queue not in snap.queues:
            snap.queues[self.default_queue] = QueueInfo(
                self.default_queue, weight=1, reclaimable=True, state=QUEUE_OPEN
            )
        for e in by_kind.get("Node", []):
            snap.nodes.append(decode_node(e) if e.record is None else e.record)
            usage = node_usage_of(e)
            if usage is not None:
                snap.node_usage[e.name] = usage
        snap.hypernodes = tuple(
            sorted((decode_hypernode(e) for e in by_kind.get("HyperNode", [])), key=_name)
        )
        for e in by_kind.get("Numatopology", []):
            snap.numatopologies[e.name] = decode_numatopology(e)

        groups: dict[str, Group] = {}
        pods: list[Pod] = []
        for e in self.entries:
            if e.kind == "PodGroup":
                groups[f"{e.namespace}/{e.name}"] = decode_podgroup(e) if e.record is None else e.record
            elif e.kind == "Pod":
                pod: Pod | None = e.record
                if pod is None:
                    pod = decode_pod(e, self.claims)
                else:  # decoded ahead: its uid claimed here, in object order, as decode_pod does
                    self.claims.pod_uid(pod.doc, pod.uid, pod.namespace, pod.name)
                pods.append(pod)
            elif e.kind == "Job":
                expand_volcano_job(
                    e,
                    groups,
                    pods,
                    claims=self.claims,
                    pcs=self.pcs,
                    scheduler_names=self.scheduler_names,
                    default_queue=self.default_queue,
                )
        self._place(snap, groups, pods)
        return snap

    def _place(self, snap: ClusterSnapshot, groups: dict[str, Group], pods: list[Pod]) -> None:
        ours = set(self.scheduler_names)
        # Pods of ours without a group get the PodGroup controller's group (unless one exists).
        group_of: list[str] = []
        for p in pods:
            gname = _group_name(p, p.spec.scheduler_name in ours)
            if gname and not p.annotations.get(GROUP_NAME_KEY, ""):
                key = f"{p.namespace}/{gname}"
                if key not in groups:
                    groups[key] = normal_pod_group(p, gname)
            group_of.append(f"{p.namespace}/{gname}" if gname else "")
        for key, g in groups.items():
            snap.jobs[key] = job_info(g, self.pcs, self.default_priority, self.default_queue)
        nodes = {n.name: n for n in snap.nodes}
        for p, job_id in zip(pods, group_of, strict=True):
            mine = p.spec.scheduler_name in ours
            if not mine and not p.spec.node_name:
                continue
            task = self.tasks_ahead.get(id(p))
            if task is None:
                task = pod_task(p, job_id, self.pcs)
            if task.node_name and task.status not in COMPLETED_STATUSES:
                node = nodes.get(task.node_name)
                if node is not None:
                    node.add_task(task)
            if not mine:
                snap.other_tasks.append(task)
                continue
            job = snap.jobs.get(job_id)
            if job is None:
                ns, _, name = job_id.partition("/")
                job = JobInfo(uid=job_id, name=name, namespace=ns, queue="", has_pod_group=False)
                snap.jobs[job_id] = job
            job.add_task(task)


def build_snapshot(
    objects: Iterable[tuple[str, int, Mapping[str, Any]]],
    *,
    scheduler_names: Sequence[str] = ("volcano",),
    default_queue: str = DEFAULT_QUEUE,
) -> ClusterSnapshot:
    """The snapshot Volcano's cache would hold for these objects (see the module notes).

    Iteration is in object order throughout; maps read from manifests are key-sorted.
    Raises ManifestError naming file, document, object and field on bad input.
    """
    b = _Builder(scheduler_names, default_queue)
    for file, index, obj in objects:
        b.classify(file, index, obj)
    return b.build()


def build_loading(
    loading: PendingLoad,
    *,
    scheduler_names: Sequence[str] = ("volcano",),
    default_queue: str = DEFAULT_QUEUE,
    loaded: Callable[[], object] = lambda: None,
) -> ClusterSnapshot:
    """build_snapshot(loading.result()): the same snapshot, or the same error.  A split YAML file's
    objects are classified and decoded as they are read (module notes);
    `loaded` is called once every object has been read (for per-phase timings)."""
    b = _Builder(scheduler_names, default_queue)
    ahead = True
    for objects in loading.read_ahead():
        if not b.classify_ahead(objects):
            ahead = False
            break
    if not (ahead and loading.complete):
        objects = loading.result()
        loaded()
        return build_snapshot(objects, scheduler_names=scheduler_names, default_queue=default_queue)
    loaded()
    return b.build()


def load_snapshot(
    path: str | Path, *, scheduler_names: Sequence[str] = ("volcano",), default_queue: str = DEFAULT_QUEUE
) -> ClusterSnapshot:
    """build_snapshot(load_objects(path))."""
    return build_snapshot(load_objects(path), scheduler_names=scheduler_names, default_queue=default_queue)
