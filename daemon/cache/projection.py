"""Projection: the folded state plus per-object parse caches, frozen into a ClusterSnapshot per cycle.

Freezing assembles the snapshot exactly as `daemon.manifests.build_snapshot` would for the
objects the projection holds (kinds in build_snapshot's order, each kind in first-arrival
order), then applies the folded decisions (see `state.py`).  Each manifest is parsed once per
version (`ObjectDecoder`); each pod's TaskInfo is built once per version and priority-class
set, and cloned per freeze, so a freeze costs object assembly, not parsing.

A frozen snapshot is independent of the projection: later folds do not change it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from daemon.cache.state import DEFAULT_SCHEDULER_NAMES, Key, ProjectionState
from daemon.manifests import BUILTIN_PRIORITY_CLASSES, ManifestError, ObjectDecoder
from daemon.scheduler.model.job import Condition, JobInfo
from daemon.scheduler.model.node import NodeError, NodeInfo
from daemon.scheduler.model.queue import (
    DEFAULT_QUEUE,
    QUEUE_OPEN,
    ROOT_QUEUE,
    NamespaceInfo,
    PriorityClassInfo,
    QueueInfo,
)
from daemon.scheduler.model.snapshot import ClusterSnapshot
from daemon.scheduler.model.task import COMPLETED_STATUSES, TaskInfo, TaskStatus
from store.events import JobExplained, QueueFigures

__all__ = ["Projection", "session_id"]

_MISSING = object()


def session_id(cycle: int) -> str:
    """The session id of a cycle (the transition id of the PodGroup conditions it writes)."""
    return f"session-{cycle}"


class Projection(ProjectionState):
    """Cluster state folded from the log; `freeze()` gives the ClusterSnapshot a session consumes."""

    def __init__(
        self,
        *,
        scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES,
        default_queue: str = DEFAULT_QUEUE,
    ) -> None:
        super().__init__(scheduler_names=scheduler_names)
        self.default_queue = default_queue
        self.decoder = ObjectDecoder(self.scheduler_names, default_queue)
        self.changed = self._invalidate
        # (kind, key) -> parsed record or ManifestError; dropped when the object changes.
        self._parsed: dict[tuple[str, Key], Any] = {}
        # pod key -> (priority-class version, job id, TaskInfo template); pod key -> implicit group.
        self._templates: dict[Key, tuple[int, str, TaskInfo]] = {}
        self._implicit: dict[Key, Any] = {}
        self._pcs: dict[str, PriorityClassInfo] | None = None
        self._pcs_version = 0
        self.problems: list[str] = []

    # ------------------------------------------------------------------------- reads
    def explanations(self) -> dict[str, JobExplained]:
        """The job explanations folded so far, by job id (pass to runtime.cycle.decide as `previous`)."""
        return dict(self.explained)

    def queue_figures_in_force(self) -> dict[str, QueueFigures]:
        """The queue figures last recorded (pass to runtime.cycle.decide as `previous_queues`)."""
        return dict(self.queue_figures)

    def manifest(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects[kind].get((namespace, name))

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.objects.items()}

    # ------------------------------------------------------------------------- caches
    def _invalidate(self, kind: str, key: Key) -> None:
        self._parsed.pop((kind, key), None)
        if kind == "Pod":
            self._implicit.pop(key, None)
            self._templates.pop(key, None)

    def _parse(self, kind: str, key: Key, manifest: Any) -> Any:
        ck = (kind, key)
        rec = self._parsed.get(ck, _MISSING)
        if rec is not _MISSING:
            return rec
        ns, name = key
        d = self.decoder
        src = "event log"
        try:
            if kind == "Node":
                rec = d.node(name, manifest, source=src)
            elif kind == "Pod":
                rec = d.pod(ns, name, manifest, source=src)
            elif kind == "PodGroup":
                rec = d.pod_group(ns, name, manifest, source=src)
            elif kind == "Queue":
                rec = d.queue(name, manifest, source=src)
            elif kind == "PriorityClass":
                rec = d.priority_class(name, manifest, source=src)
            elif kind == "Namespace":
                rec = d.namespace(name, manifest, source=src)
            elif kind == "PodDisruptionBudget":
                rec = d.pod_disruption_budget(ns, name, manifest, source=src)
            else:
                rec = d.resource_quota(ns, name, manifest, source=src)
        except ManifestError as e:
            rec = e
        self._parsed[ck] = rec
        return rec

    def _records(self, kind: str) -> Iterable[tuple[Key, Any]]:
        for key, manifest in self.objects[kind].items():
            rec = self._parse(kind, key, manifest)
            if isinstance(rec, ManifestError):
                self.problems.append(f"{kind} {'/'.join(p for p in key if p)}: {rec}")
                continue
            yield key, rec

    # ------------------------------------------------------------------------- freezing
    def freeze(self, *, cycle: int | None = None) -> ClusterSnapshot:
        """The ClusterSnapshot of the current state (session id from `cycle`, now from the clock)."""
        self.problems = []
        d = self.decoder
        snap = ClusterSnapshot()
        snap.now = self.now_ms / 1000.0
        snap.session_id = session_id(cycle if cycle is not None else self.last_cycle + 1)

        pcs: dict[str, PriorityClassInfo] = {}
        default_priority = 0
        for _key, pc in self._records("PriorityClass"):
            pcs[pc.name] = pc
            if pc.global_default:
                default_priority = pc.value
        for pc in BUILTIN_PRIORITY_CLASSES:
            pcs.setdefault(pc.name, pc)
        if pcs != self._pcs:
            self._pcs = pcs
            self._pcs_version += 1
        version = self._pcs_version
        d.use_priority_classes(pcs, default_priority)
        snap.priority_classes = pcs

        for _key, ns in self._records("Namespace"):
            snap.namespaces[ns.name] = NamespaceInfo(ns.name, ns.labels)
        for (ns_name, _), quota in self._records("ResourceQuota"):
            snap.namespaces.setdefault(ns_name, NamespaceInfo(ns_name)).quotas.append(quota)
        for (ns_name, _), pdb in self._records("PodDisruptionBudget"):
            snap.namespaces.setdefault(ns_name, NamespaceInfo(ns_name)).pdbs.append(pdb)
        for _key, q in self._records("Queue"):
            snap.queues[q.name] = replace(q)
        if ROOT_QUEUE not in snap.queues:
            snap.queues[ROOT_QUEUE] = QueueInfo(ROOT_QUEUE, weight=1, reclaimable=False, state=QUEUE_OPEN)
        if self.default_queue not in snap.queues:
            snap.queues[self.default_queue] = QueueInfo(
                self.default_queue, weight=1, reclaimable=True, state=QUEUE_OPEN
            )
        nodes: dict[str, NodeInfo] = {}
        for _key, n in self._records("Node"):
            node = NodeInfo(n.name, n.allocatable, n.capability, n.facts)
            snap.nodes.append(node)
            nodes[n.name] = node

        groups: dict[str, Any] = {}
        for (ns_name, name), g in self._records("PodGroup"):
            groups[f"{ns_name}/{name}"] = g
        pods: list[tuple[Key, Any, str]] = []
        for key, p in self._records("Pod"):
            job_id = d.group_of(p)
            if job_id and job_id not in groups:
                implicit = self._implicit.get(key)
                if implicit is None:
                    implicit = d.implicit_group(p)
                    if implicit is not None:
                        self._implicit[key] = implicit
                if implicit is not None:
                    groups[job_id] = implicit
            pods.append((key, p, job_id))
        for job_id, g in groups.items():
            job = d.job_info(g)
            ns_name, _, name = job_id.partition("/")
            st = self.pg_status.get((ns_name, name))
            if st is not None:
                job.status.phase = st.phase
                job.status.conditions = [
                    Condition(c.type, c.status, c.reason, c.message, c.transition_id) for c in st.conditions
                ]
                job.status.running = st.running
                job.status.succeeded = st.succeeded
                job.status.failed = st.failed
            snap.jobs[job_id] = job

        seen_uids: dict[str, Key] = {}
        for key, p, job_id in pods:
            mine = d.is_ours(p)
            template = self._template(key, p, job_id, version)
            if not mine and not template.node_name:
                continue
            first = seen_uids.setdefault(template.uid, key)
            if first != key:
                self.problems.append(
                    f"Pod {key[0]}/{key[1]}: duplicate pod uid {template.uid!r} "
                    f"(also Pod {first[0]}/{first[1]}); left out"
                )
                continue
            task = template.clone()
            self._overlay(key, task)
            if task.node_name and task.status not in COMPLETED_STATUSES:
                host = nodes.get(task.node_name)
                if host is not None:
                    try:
                        host.add_task(task)
                    except NodeError as e:
                        if task.status is not TaskStatus.BINDING:
                            self.problems.append(f"Pod {key[0]}/{key[1]}: {e}")
                        else:
                            # The node has no room left for a bind in flight: count it as Bound.
                            task.status = TaskStatus.BOUND
                            host.add_task(task)
                            self.problems.append(f"Pod {key[0]}/{key[1]}: {e}; counted as Bound")
            if not mine:
                snap.other_tasks.append(task)
                continue
            owner = snap.jobs.get(job_id)
            if owner is None:
                ns_name, _, name = job_id.partition("/")
                owner = JobInfo(uid=job_id, name=name, namespace=ns_name, queue="", has_pod_group=False)
                snap.jobs[job_id] = owner
            owner.add_task(task)
        return snap

    def _template(self, key: Key, pod: Any, job_id: str, version: int) -> TaskInfo:
        cached = self._templates.get(key)
        if cached is not None and cached[0] == version and cached[1] == job_id:
            return cached[2]
        t = self.decoder.task(pod, job_id)
        self._templates[key] = (version, job_id, t)
        return t

    def _overlay(self, key: Key, task: TaskInfo) -> None:
        bind = self.binds.get(key)
        if bind is not None and not task.node_name and task.uid == bind.uid:
            task.status = TaskStatus.BINDING
            task.node_name = bind.node
        ev = self.evictions.get(key)
        if (
            ev is not None
            and ev[1] == task.uid
            and task.node_name
            and task.status not in COMPLETED_STATUSES
            and task.status is not TaskStatus.PENDING
        ):
            task.status = TaskStatus.RELEASING
