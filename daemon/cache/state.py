"""The projection's state: per-object manifests and folded decisions, and the folding rules.

`Projection.fold(seq, event)` applies one event of the log.  State is plain data (manifests
keyed by kind and namespace/name in first-arrival order, decision overlays, the clock), so it
serialises as is (`snapshot_codec`) and two projections that folded the same events are equal.
Manifests are parsed lazily, once per version, when a snapshot is frozen (`freeze.py`).

Folding rules (observed facts):
* `*Upserted` stores the manifest under (kind, namespace, name); a new object goes last in its
  kind's order, an update keeps its place.  `*Deleted` drops it (and every overlay below).
* `now_ms` is the largest `at_ms` seen on any event.
* `ResyncStarted(source, kinds)` starts recording which objects of `kinds` (Kubernetes kind
  names or the event family names, any case, plural accepted; empty = every kind) are
  upserted; `ResyncCompleted(source)` deletes the objects of those kinds that were not.  A
  completion without a start is ignored.
* An upsert whose manifest cannot be decoded is kept as data; the frozen snapshot leaves the
  object out and reports the error (`Projection.problems` after a freeze).

Folding rules (decisions and outcomes, what Volcano's cache does on its own writes):
* `BindDecided` on a pod that exists (same uid) and has no `spec.nodeName` makes it Binding on
  the decided node (it counts on the node and as allocated for its job) until the cluster
  answers: a `PodUpserted` carrying `spec.nodeName` (or another uid), a `PodDeleted`, or a
  `BindFailed` naming that decision's seq, which reverts it.  `BindSucceeded` changes nothing
  (the pod update is the answer).  A pod update without a node keeps the bind in flight, so
  the next cycle does not bind the pod twice.
* `EvictDecided` on an existing pod (same uid) makes it Releasing (when it is on a node and not
  finished) until it is deleted, replaced by another uid, or `EvictFailed` names that
  decision's seq.
* `PodGroupStatusChanged` replaces the PodGroup's status (phase, conditions, counts), as
  Volcano's cache keeps what its scheduler wrote.  A later `PodGroupUpserted` whose manifest
  has a `status` with `conditions` replaces it (the API server's copy wins); one with a status
  but no `conditions` (a source that does not report them, like the simulator marking a group
  Completed) takes its phase and counts and keeps the conditions the scheduler wrote, so a
  relisting after a restart changes nothing; one without `status` keeps it.  The
  status of a PodGroup made for a pod without group name (`podgroup-<uid>`) is dropped once
  no pod of that group is left and no PodGroup object of that name exists.
* `JobExplained` records the job's explanation (an empty one removes it); `explanations()`
  hands them to the next cycle so that only changed explanations are written.
* `QueueFiguresRecorded` replaces `queue_figures` (the queues' deserved/allocated/share… as
  of the last cycle that changed them); the next cycle compares against them.
* `CycleOpened` advances `last_cycle`; `ConfigurationRecorded` sets `conf_hash`.  Other
  decisions (pipelines, cycle closed, rejected configurations) change nothing: pipelining
  lives only inside a session, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from fumarole.daemon.scheduler.model.node_usage import NodeUsage
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    ClockAdvanced,
    ConfigurationRecorded,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    HyperNodeDeleted,
    HyperNodeUpserted,
    JobExplained,
    NamespaceDeleted,
    NamespaceUpserted,
    NodeDeleted,
    NodeUpserted,
    NodeUsageObserved,
    NumatopologyDeleted,
    NumatopologyUpserted,
    PodDeleted,
    PodDisruptionBudgetDeleted,
    PodDisruptionBudgetUpserted,
    PodGroupDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    PriorityClassDeleted,
    PriorityClassUpserted,
    QueueDeleted,
    QueueFigures,
    QueueFiguresRecorded,
    QueueUpserted,
    ResourceQuotaDeleted,
    ResourceQuotaUpserted,
    ResyncCompleted,
    ResyncStarted,
)

__all__ = [
    "DEFAULT_SCHEDULER_NAMES",
    "KINDS",
    "BindOverlay",
    "Key",
    "ProjectionState",
    "kind_of",
    "raw_group_of",
    "raw_has_node",
    "raw_uid",
]

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds
Manifest = dict[str, Any]

# Order matters only for iteration of the state image (kinds are independent).
KINDS: tuple[str, ...] = (
    "PriorityClass",
    "Namespace",
    "ResourceQuota",
    "PodDisruptionBudget",
    "Queue",
    "Node",
    "HyperNode",
    "Numatopology",
    "PodGroup",
    "Pod",
)
DEFAULT_SCHEDULER_NAMES: tuple[str, ...] = ("volcano",)
GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
DEFAULT_POD_SCHEDULER = "default-scheduler"

_KIND_ALIASES: dict[str, str] = {}
for _k in KINDS:
    _KIND_ALIASES[_k.lower()] = _k
    _KIND_ALIASES[_k.lower() + "s"] = _k
_KIND_ALIASES["priorityclasses"] = "PriorityClass"
_KIND_ALIASES["resourcequotas"] = "ResourceQuota"
_KIND_ALIASES["pdb"] = _KIND_ALIASES["pdbs"] = "PodDisruptionBudget"


def kind_of(name: str) -> str | None:
    """The kind a resync marker names ("Node", "nodes", "podgroup", ...), None when unknown."""
    return _KIND_ALIASES.get(name.lower().replace("-", "").replace("_", ""))


class BindOverlay(tuple[int, str, str]):
    """(decision seq, node, pod uid) of a bind in flight."""

    __slots__ = ()

    def __new__(cls, seq: int, node: str, uid: str) -> BindOverlay:
        return super().__new__(cls, (seq, node, uid))

    @property
    def seq(self) -> int:
        return self[0]

    @property
    def node(self) -> str:
        return self[1]

    @property
    def uid(self) -> str:
        return self[2]


# ---------------------------------------------------------------------------------------------
# tolerant reads of raw manifests (identity facts the folding rules need before any parsing)


def _meta(manifest: Any) -> Mapping[str, Any]:
    if isinstance(manifest, dict):
        m = manifest.get("metadata")
        if isinstance(m, dict):
            return m
    return {}


def raw_uid(namespace: str, name: str, manifest: Any) -> str:
    """metadata.uid, else "<ns>-<name>" (build_snapshot's default for a pod without uid)."""
    uid = _meta(manifest).get("uid")
    if isinstance(uid, str) and uid:
        return uid
    if isinstance(uid, int) and not isinstance(uid, bool):
        return str(uid)
    return f"{namespace}-{name}"


def raw_has_node(manifest: Any) -> bool:
    if not isinstance(manifest, dict):
        return False
    spec = manifest.get("spec")
    return isinstance(spec, dict) and bool(spec.get("nodeName"))


def raw_group_of(namespace: str, name: str, manifest: Any, scheduler_names: tuple[str, ...]) -> str:
    """The job id a pod belongs to ("" for none), read without validation (mirrors ObjectDecoder.group_of)."""
    meta = _meta(manifest)
    ann = meta.get("annotations")
    gname = ann.get(GROUP_NAME_KEY, "") if isinstance(ann, dict) else ""
    if not isinstance(gname, str):
        gname = ""
    if not gname:
        spec = manifest.get("spec") if isinstance(manifest, dict) else None
        sched = spec.get("schedulerName") if isinstance(spec, dict) else None
        if not isinstance(sched, str) or not sched:
            sched = DEFAULT_POD_SCHEDULER
        if sched not in scheduler_names:
            return ""
        owner = ""
        refs = meta.get("ownerReferences")
        if isinstance(refs, list):
            for ref in refs:
                if isinstance(ref, dict) and ref.get("controller") in (True, "true", "True"):
                    u = ref.get("uid")
                    owner = u if isinstance(u, str) else ""
                    break
        gname = "podgroup-" + (owner or raw_uid(namespace, name, manifest))
    return f"{namespace}/{gname}"


# ---------------------------------------------------------------------------------------------


class ProjectionState:
    """The folded state (see the module notes); `Projection` adds freezing and caches on top."""

    def __init__(self, *, scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES) -> None:
        self.scheduler_names: tuple[str, ...] = tuple(scheduler_names)
        self.seq = 0
        self.now_ms = 0
        self.last_cycle = 0
        # The clock of the last CycleOpened (ms; None before the first): the previous session's now.
        self.last_cycle_now_ms: int | None = None
        # Node usage from a metrics source (NodeUsageObserved), by node; model/node_usage.py.
        self.node_usage: dict[str, NodeUsage] = {}
        self.conf_hash = ""
        self.objects: dict[str, dict[Key, Manifest]] = {k: {} for k in KINDS}
        self.binds: dict[Key, BindOverlay] = {}
        self.evictions: dict[Key, tuple[int, str]] = {}  # (decision seq, pod uid)
        self.pg_status: dict[Key, PodGroupStatusChanged] = {}
        self.explained: dict[str, JobExplained] = {}
        self.queue_figures: dict[str, QueueFigures] = {}  # the last recorded QueueFiguresRecorded.queues
        self.members: dict[str, int] = {}  # job id -> pods in it
        self.pod_ident: dict[Key, tuple[str, str]] = {}  # pod -> (uid, job id) of its stored manifest
        self.resyncs: dict[str, tuple[tuple[str, ...], set[tuple[str, Key]]]] = {}
        # Called with (kind, key) when an object is upserted or deleted (subclasses drop caches).
        self.changed: Callable[[str, Key], None] | None = None
        self._handlers: dict[type, Callable[[int, Any], None]] = {
            NodeUpserted: lambda s, e: self._upsert("Node", ("", e.name), e.manifest),
            NodeDeleted: lambda s, e: self._delete("Node", ("", e.name)),
            PodUpserted: lambda s, e: self._upsert("Pod", (e.namespace, e.name), e.manifest),
            PodDeleted: lambda s, e: self._delete("Pod", (e.namespace, e.name)),
            PodGroupUpserted: lambda s, e: self._upsert("PodGroup", (e.namespace, e.name), e.manifest),
            PodGroupDeleted: lambda s, e: self._delete("PodGroup", (e.namespace, e.name)),
            QueueUpserted: lambda s, e: self._upsert("Queue", ("", e.name), e.manifest),
            QueueDeleted: lambda s, e: self._delete("Queue", ("", e.name)),
            PriorityClassUpserted: lambda s, e: self._upsert("PriorityClass", ("", e.name), e.manifest),
            PriorityClassDeleted: lambda s, e: self._delete("PriorityClass", ("", e.name)),
            ResourceQuotaUpserted: lambda s, e: self._upsert(
                "ResourceQuota", (e.namespace, e.name), e.manifest
            ),
            ResourceQuotaDeleted: lambda s, e: self._delete("ResourceQuota", (e.namespace, e.name)),
            PodDisruptionBudgetUpserted: lambda s, e: self._upsert(
                "PodDisruptionBudget", (e.namespace, e.name), e.manifest
            ),
            PodDisruptionBudgetDeleted: lambda s, e: self._delete(
                "PodDisruptionBudget", (e.namespace, e.name)
            ),
            NamespaceUpserted: lambda s, e: self._upsert("Namespace", ("", e.name), e.manifest),
            NamespaceDeleted: lambda s, e: self._delete("Namespace", ("", e.name)),
            HyperNodeUpserted: lambda s, e: self._upsert("HyperNode", ("", e.name), e.manifest),
            HyperNodeDeleted: lambda s, e: self._delete("HyperNode", ("", e.name)),
            NodeUsageObserved: self._node_usage,
            NumatopologyUpserted: lambda s, e: self._upsert("Numatopology", ("", e.name), e.manifest),
            NumatopologyDeleted: lambda s, e: self._delete("Numatopology", ("", e.name)),
            ResyncStarted: self._resync_started,
            ResyncCompleted: self._resync_completed,
            ClockAdvanced: lambda s, e: None,
            BindDecided: self._bind,
            BindFailed: self._bind_failed,
            EvictDecided: self._evict,
            EvictFailed: self._evict_failed,
            PodGroupStatusChanged: self._pg_status,
            JobExplained: self._explained,
            CycleOpened: self._cycle_opened,
            QueueFiguresRecorded: self._queue_figures,
            ConfigurationRecorded: self._conf_recorded,
        }

    # ------------------------------------------------------------------------- folding
    def fold(self, seq: int, event: Any) -> None:
        """Apply the event stored at `seq` (events must come in log order)."""
        at = getattr(event, "at_ms", 0)
        if at > self.now_ms:
            self.now_ms = at
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(seq, event)
        self.seq = seq

    def _touch(self, kind: str, key: Key) -> None:
        if self.changed is not None:
            self.changed(kind, key)

    def _upsert(self, kind: str, key: Key, manifest: Manifest) -> None:
        objs = self.objects[kind]
        old = objs.get(key)
        objs[key] = manifest
        if self.resyncs:
            for _source, (kinds, seen) in self.resyncs.items():
                if kind in kinds:
                    seen.add((kind, key))
        if kind == "Pod":
            ns, name = key
            uid = raw_uid(ns, name, manifest)
            group = raw_group_of(ns, name, manifest, self.scheduler_names)
            if old is not None:
                old_uid, old_group = self.pod_ident.get(key) or ("", "")
                if old_group != group:
                    self._leave_group(old_group)
                    self._join_group(group)
                if old_uid != uid:
                    self.binds.pop(key, None)
                    self.evictions.pop(key, None)
            else:
                self._join_group(group)
            self.pod_ident[key] = (uid, group)
            if self.binds and raw_has_node(manifest):
                self.binds.pop(key, None)
        elif kind == "PodGroup" and isinstance(manifest, dict) and "status" in manifest:
            self._pg_status_from_manifest(key, manifest["status"])
        self._touch(kind, key)

    def _pg_status_from_manifest(self, key: Key, status: Any) -> None:
        written = self.pg_status.get(key)
        if written is None or not isinstance(status, dict) or "conditions" in status:
            self.pg_status.pop(key, None)
            return
        counts = {k: status[k] for k in ("running", "succeeded", "failed") if isinstance(status.get(k), int)}
        phase = status.get("phase") if isinstance(status.get("phase"), str) else written.phase
        self.pg_status[key] = msgspec.structs.replace(written, phase=phase, **counts)

    def _delete(self, kind: str, key: Key) -> None:
        old = self.objects[kind].pop(key, None)
        if old is None:
            return
        if kind == "Pod":
            self.binds.pop(key, None)
            self.evictions.pop(key, None)
            ident = self.pod_ident.pop(key, None)
            self._leave_group(ident[1] if ident is not None else "")
        elif kind == "PodGroup":
            self.pg_status.pop(key, None)
        elif kind == "Node":
            self.node_usage.pop(key[1], None)  # a node added again starts unsampled, as in Volcano
        self._touch(kind, key)

    def _join_group(self, group: str) -> None:
        if group:
            self.members[group] = self.members.get(group, 0) + 1

    def _leave_group(self, group: str) -> None:
        if not group:
            return
        n = self.members.get(group, 0) - 1
        if n > 0:
            self.members[group] = n
            return
        self.members.pop(group, None)
        ns, _, name = group.partition("/")
        key = (ns, name)
        if key not in self.objects["PodGroup"]:
            self.pg_status.pop(key, None)

    def _resync_started(self, seq: int, e: ResyncStarted) -> None:
        kinds: list[str] = []
        for k in e.kinds:
            kk = kind_of(k)
            if kk is not None and kk not in kinds:
                kinds.append(kk)
        if not e.kinds:
            kinds = list(KINDS)
        self.resyncs[e.source] = (tuple(sorted(kinds)), set())

    def _resync_completed(self, seq: int, e: ResyncCompleted) -> None:
        started = self.resyncs.pop(e.source, None)
        if started is None:
            return
        kinds, seen = started
        for kind in kinds:
            for key in [k for k in self.objects[kind] if (kind, k) not in seen]:
                self._delete(kind, key)

    def _bind(self, seq: int, e: BindDecided) -> None:
        key = (e.namespace, e.name)
        m = self.objects["Pod"].get(key)
        if m is None or raw_has_node(m):
            return
        uid = raw_uid(e.namespace, e.name, m)
        if e.uid and e.uid != uid:
            return
        self.binds[key] = BindOverlay(seq, e.node, uid)

    def _bind_failed(self, seq: int, e: BindFailed) -> None:
        key = (e.namespace, e.name)
        b = self.binds.get(key)
        if b is not None and b.seq == e.decision_seq:
            del self.binds[key]

    def _evict(self, seq: int, e: EvictDecided) -> None:
        key = (e.namespace, e.name)
        m = self.objects["Pod"].get(key)
        if m is None:
            return
        uid = raw_uid(e.namespace, e.name, m)
        if e.uid and e.uid != uid:
            return
        self.evictions[key] = (seq, uid)

    def _evict_failed(self, seq: int, e: EvictFailed) -> None:
        key = (e.namespace, e.name)
        ev = self.evictions.get(key)
        if ev is not None and ev[0] == e.decision_seq:
            del self.evictions[key]

    def _pg_status(self, seq: int, e: PodGroupStatusChanged) -> None:
        key = (e.namespace, e.name)
        if key in self.objects["PodGroup"] or f"{e.namespace}/{e.name}" in self.members:
            self.pg_status[key] = e

    def _explained(self, seq: int, e: JobExplained) -> None:
        uid = f"{e.namespace}/{e.name}"
        if not e.message and not e.reasons:
            self.explained.pop(uid, None)
        else:
            self.explained[uid] = e

    def _queue_figures(self, seq: int, e: QueueFiguresRecorded) -> None:
        self.queue_figures = dict(e.queues)

    def _cycle_opened(self, seq: int, e: CycleOpened) -> None:
        self.last_cycle = max(self.last_cycle, e.cycle)
        self.last_cycle_now_ms = e.now_ms

    def _node_usage(self, seq: int, e: NodeUsageObserved) -> None:
        self.node_usage[e.node] = NodeUsage(
            cpu={e.period: e.cpu}, memory={e.period: e.memory}, metrics_time=e.metrics_ms / 1000.0
        )

    def _conf_recorded(self, seq: int, e: ConfigurationRecorded) -> None:
        self.conf_hash = e.conf_hash
