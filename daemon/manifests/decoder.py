"""One object at a time with build_snapshot's rules (the incremental projection in daemon/cache)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fumarole.daemon.manifests.fields import Doc, type_name
from fumarole.daemon.manifests.hypernodes import decode_hypernode
from fumarole.daemon.manifests.kinds import GROUP_NAME_KEY, KIND_GROUPS, SUPPORTED_KINDS
from fumarole.daemon.manifests.namespaces import decode_namespace, decode_pdb, decode_resource_quota
from fumarole.daemon.manifests.nodes import decode_node
from fumarole.daemon.manifests.numatopologies import decode_numatopology
from fumarole.daemon.manifests.objects import Claims, Entry
from fumarole.daemon.manifests.podgroups import decode_podgroup, job_info, normal_pod_group
from fumarole.daemon.manifests.pods import Pod, decode_pod, pod_task
from fumarole.daemon.manifests.priority_classes import decode_priority_class
from fumarole.daemon.manifests.queues import decode_queue
from fumarole.daemon.scheduler.model.hypernode import HyperNodeSpec
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.numa import NumaTopology
from fumarole.daemon.scheduler.model.queue import (
    DEFAULT_QUEUE,
    NamespaceInfo,
    PodDisruptionBudgetInfo,
    PriorityClassInfo,
    QueueInfo,
    ResourceQuotaInfo,
)
from fumarole.daemon.scheduler.model.task import TaskInfo


class ObjectDecoder:
    """One manifest at a time with build_snapshot's rules, plus the assembly steps that read other objects.

    `pod`/`pod_group` return opaque parsed records (parse once, keep); `task`, `job_info`,
    `group_of` and `implicit_group` assemble them the way build_snapshot does, given the
    priority classes in force.  Errors are ManifestError naming `source` as the file.
    """

    __slots__ = ("_default_priority", "_default_queue", "_pcs", "_scheduler_names")

    def __init__(self, scheduler_names: Sequence[str] = ("volcano",), default_queue: str = DEFAULT_QUEUE):
        self._scheduler_names = tuple(scheduler_names)
        self._default_queue = default_queue
        self._pcs: dict[str, PriorityClassInfo] = {}
        self._default_priority = 0

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        return self._scheduler_names

    @property
    def default_queue(self) -> str:
        return self._default_queue

    def _entry(self, kind: str, namespace: str, name: str, obj: Any, source: str) -> Entry:
        group = KIND_GROUPS[kind]
        ns_label = f"{kind} {namespace}/{name}" if SUPPORTED_KINDS[(group, kind)][1] else f"{kind} {name}"
        d = Doc(source, 0, ns_label)
        if not isinstance(obj, dict):
            d.fail("", f"expected a mapping (an object), got {type_name(obj)}")
        d.mapping(obj.get("metadata"), "metadata")
        return Entry(d, group, kind, name, namespace, obj)

    def node(self, name: str, obj: Any, *, source: str = "") -> NodeInfo:
        return decode_node(self._entry("Node", "", name, obj, source))

    def queue(self, name: str, obj: Any, *, source: str = "") -> QueueInfo:
        return decode_queue(self._entry("Queue", "", name, obj, source))

    def priority_class(self, name: str, obj: Any, *, source: str = "") -> PriorityClassInfo:
        return decode_priority_class(self._entry("PriorityClass", "", name, obj, source))

    def hypernode(self, name: str, obj: Any, *, source: str = "") -> HyperNodeSpec:
        return decode_hypernode(self._entry("HyperNode", "", name, obj, source))

    def numatopology(self, name: str, obj: Any, *, source: str = "") -> NumaTopology:
        return decode_numatopology(self._entry("Numatopology", "", name, obj, source))

    def namespace(self, name: str, obj: Any, *, source: str = "") -> NamespaceInfo:
        return decode_namespace(self._entry("Namespace", "", name, obj, source))

    def resource_quota(self, namespace: str, name: str, obj: Any, *, source: str = "") -> ResourceQuotaInfo:
        return decode_resource_quota(self._entry("ResourceQuota", namespace, name, obj, source))

    def pod_disruption_budget(
        self, namespace: str, name: str, obj: Any, *, source: str = ""
    ) -> PodDisruptionBudgetInfo:
        return decode_pdb(self._entry("PodDisruptionBudget", namespace, name, obj, source))

    def pod_group(self, namespace: str, name: str, obj: Any, *, source: str = "") -> Any:
        return decode_podgroup(self._entry("PodGroup", namespace, name, obj, source))

    def pod(self, namespace: str, name: str, obj: Any, *, source: str = "") -> Any:
        return decode_pod(self._entry("Pod", namespace, name, obj, source), Claims())

    # ------------------------------------------------------------------------- assembly
    def pod_uid(self, pod: Any) -> str:
        return str(pod.uid)

    def group_of(self, pod: Any) -> str:
        """The job id ("<ns>/<podgroup>") of a parsed pod; "" for another scheduler's pod without a group."""
        p: Pod = pod
        gname = p.annotations.get(GROUP_NAME_KEY, "")
        if not gname and p.spec.scheduler_name in self._scheduler_names:
            gname = "podgroup-" + (p.owner_uid or p.uid)
        return f"{p.namespace}/{gname}" if gname else ""

    def is_ours(self, pod: Any) -> bool:
        return bool(pod.spec.scheduler_name in self._scheduler_names)

    def implicit_group(self, pod: Any) -> Any | None:
        """The PodGroup the controller creates for a pod of ours without a group name, else None."""
        p: Pod = pod
        if p.annotations.get(GROUP_NAME_KEY, "") or p.spec.scheduler_name not in self._scheduler_names:
            return None
        return normal_pod_group(p, "podgroup-" + (p.owner_uid or p.uid))

    def use_priority_classes(
        self, priority_classes: Mapping[str, PriorityClassInfo], default_priority: int
    ) -> None:
        """The priority classes (and the globalDefault value) `job_info` and `task` read from now on."""
        self._pcs = dict(priority_classes)
        self._default_priority = default_priority

    def job_info(self, group: Any) -> JobInfo:
        return job_info(group, self._pcs, self._default_priority, self._default_queue)

    def task(self, pod: Any, job: str) -> TaskInfo:
        return pod_task(pod, job, self._pcs)
