"""The Simulator: an in-process cluster on a virtual clock (ClusterSource, ClusterSink and lockstep clock).

State is a projection of the events the simulator itself emits: every change goes through
`_fold`, and `resume(events)` folds the log's copy of them, so a restarted simulator is in
exactly the state the uninterrupted one was in.  See docs/simulator.md.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from fumarole.daemon.adapters.simulator.workload import (
    DURATION_KEY,
    GROUP_NAME_KEY,
    INCARNATION_KEY,
    SUBMISSION_KEY,
    Source,
    Submission,
    iso_time,
    load_workload,
    parse_duration,
    validate_cluster,
)
from fumarole.daemon.manifests import build_snapshot, load_objects
from fumarole.daemon.manifests.node_usage import source_usage_script
from fumarole.daemon.scheduler.model.resources import PODS, Resource
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    ClockAdvanced,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    NodeUsageObserved,
    ObservedEvent,
    OutcomeEvent,
    PodDeleted,
    PodGroupDeleted,
    PodGroupUpserted,
    PodUpserted,
    ResyncCompleted,
    ResyncStarted,
    upserted,
)
from fumarole.store.events.base import EventBase

__all__ = ["SOURCE_NAME", "SimStats", "Simulator"]

Obj = dict[str, Any]
SOURCE_NAME = "simulator"
RESYNC_KINDS = (
    "HyperNode",
    "Namespace",
    "Node",
    "Numatopology",
    "Pod",
    "PodGroup",
    "PriorityClass",
    "Queue",
    "ResourceQuota",
)
_TERMINATED = ("Succeeded", "Failed")
_EPS = 1e-6


@dataclass(slots=True)
class SimStats:
    """Counters of a run (all derived from folded events, so a resumed run counts the same)."""

    now_ms: int = 0
    submissions: int = 0
    submitted: int = 0
    pods: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    binds: int = 0
    bind_failures: int = 0
    evictions: int = 0
    recreated: int = 0
    podgroups_completed: int = 0


def _key(ns: str, name: str) -> str:
    return f"{ns}/{name}"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    a = _meta(obj).get("annotations")
    return a if isinstance(a, Mapping) else {}


def _phase(obj: Mapping[str, Any]) -> str:
    st = obj.get("status")
    phase = st.get("phase") if isinstance(st, Mapping) else None
    return phase if isinstance(phase, str) and phase else "Pending"


def _node_name(obj: Mapping[str, Any]) -> str:
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) else ""


def _uid(obj: Mapping[str, Any]) -> str:
    uid = _meta(obj).get("uid")
    return uid if isinstance(uid, str) else ""


def _owned_by_job(obj: Mapping[str, Any]) -> bool:
    refs = _meta(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return False
    return any(
        isinstance(r, Mapping) and r.get("controller") is True and r.get("kind") == "Job" for r in refs
    )


class Simulator:
    """An in-process cluster on a virtual clock; implements `fumarole.daemon.adapters.base.SimulatedCluster`.

    `cluster_objects`: Node/Queue/PriorityClass/Namespace/ResourceQuota manifests;
    `workload`: Job/PodGroup/Pod manifests with `fumarole.io/submit-at` and
    `fumarole.io/duration` annotations.  Either as (file, document, object) triples (what
    `fumarole.daemon.manifests.load_objects` returns; errors then name the file) or as plain objects.
    `period_ms`: the schedule period a non-idle `advance` moves by.  `horizon_ms`: optional
    virtual time after which `drained()` is true whatever is left (a guard against
    schedulers that never settle).
    """

    def __init__(
        self,
        cluster_objects: Sequence[Source] | Sequence[Mapping[str, Any]],
        workload: Sequence[Source] | Sequence[Mapping[str, Any]],
        *,
        period_ms: int = 1000,
        horizon_ms: int | None = None,
        scheduler_names: Sequence[str] = ("volcano",),
    ) -> None:
        if period_ms <= 0:
            raise ValueError(f"period_ms must be positive, got {period_ms}")
        self._period_ms = period_ms
        self.horizon_ms = horizon_ms
        self._cluster = validate_cluster(_sources(cluster_objects, "<cluster>"))
        self._subs: list[Submission] = load_workload(
            self._cluster, _sources(workload, "<workload>"), scheduler_names=scheduler_names
        )
        snap = build_snapshot(self._cluster)
        self._alloc: dict[str, Resource] = {n.name: n.allocatable.clone() for n in snap.nodes}
        # Which submissions bring pods of each PodGroup (a group completes once all were created).
        self._group_subs: dict[str, set[int]] = {}
        for s in self._subs:
            for o in s.objects:
                if o["kind"] == "PodGroup":
                    self._group_subs.setdefault(
                        _key(o["metadata"]["namespace"], o["metadata"]["name"]), set()
                    )
            for o in s.objects:
                g = _annotations(o).get(GROUP_NAME_KEY) if o["kind"] == "Pod" else None
                if g:
                    self._group_subs.setdefault(_key(o["metadata"]["namespace"], g), set()).add(s.index)
        # Scripted node usage (usage.fumarole.io/script on cluster Nodes): (at ms, node, cpu, mem)
        # by time, then cluster order; observed as NodeUsageObserved sampled at that time.
        script: list[tuple[int, int, str, float, float]] = []
        for pos, (f, i, obj) in enumerate(self._cluster):
            for at, cpu, mem in source_usage_script(f, i, obj):
                script.append((at, pos, obj["metadata"]["name"], cpu, mem))
        script.sort(key=lambda x: (x[0], x[1]))
        self._usage_script = [(at, node, cpu, mem) for at, _pos, node, cpu, mem in script]
        self._request_cache: dict[str, Resource] = {}
        self._spec_cache: dict[bytes, Resource] = {}
        self._duration_cache: dict[str, int] = {}
        self._reset()

    # ------------------------------------------------------------------------- constructors
    @classmethod
    def from_files(cls, cluster_path: str | Path, workload_path: str | Path, **kwargs: Any) -> Simulator:
        """A simulator from a cluster file/directory and a workload file/directory."""
        return cls(load_objects(cluster_path), load_objects(workload_path), **kwargs)

    @classmethod
    def bundled(cls, **kwargs: Any) -> Simulator:
        """The bundled sample cluster and workload (what `fumarole run` uses with no arguments)."""
        data = resources.files("fumarole.daemon.adapters.simulator") / "data"
        with (
            resources.as_file(data / "cluster.yaml") as cluster,
            resources.as_file(data / "workload.yaml") as workload,
        ):
            return cls.from_files(cluster, workload, **kwargs)

    # ------------------------------------------------------------------------- state
    def _reset(self) -> None:
        self._now = 0
        self._pods: dict[str, Obj] = {}
        self._groups: dict[str, Obj] = {}
        self._started: dict[str, int] = {}
        # When each running pod completes (start + duration), and the same as a heap of
        # (time, pod) with stale entries skipped (an entry is live while `_due` agrees with it):
        # the next completion without sorting every running pod at each advance.
        self._due: dict[str, int] = {}
        self._due_heap: list[tuple[int, str]] = []
        self._on_node: dict[str, set[str]] = {n: set() for n in self._alloc}
        self._group_pods: dict[str, set[str]] = {}
        self._submitted: set[int] = set()
        self._cursor = 0
        self._usage_cursor = 0  # scripted usage samples observed so far
        self._outcomes: dict[int, OutcomeEvent] = {}
        self._stuck = False
        self._stats = SimStats(submissions=len(self._subs))

    @property
    def now_ms(self) -> int:
        return self._now

    @property
    def period_ms(self) -> int:
        return self._period_ms

    @property
    def submissions(self) -> tuple[Submission, ...]:
        return tuple(self._subs)

    def pods(self) -> dict[str, Obj]:
        """The pods that exist now, "<ns>/<name>" -> manifest (copies)."""
        return {k: copy.deepcopy(v) for k, v in self._pods.items()}

    def podgroups(self) -> dict[str, Obj]:
        return {k: copy.deepcopy(v) for k, v in self._groups.items()}

    def objects(self) -> list[tuple[str, int, Obj]]:
        """Everything the cluster holds now, for `fumarole.daemon.manifests.build_snapshot`."""
        out: list[tuple[str, int, Obj]] = [(f, i, dict(o)) for f, i, o in self._cluster]
        out.extend((SOURCE_NAME, 0, o) for o in self._groups.values())
        out.extend((SOURCE_NAME, 0, o) for o in self._pods.values())
        return out

    def stats(self) -> SimStats:
        s = copy.copy(self._stats)
        s.now_ms = self._now
        s.submitted = len(self._submitted)
        s.pods = len(self._pods)
        s.pending = sum(1 for p in self._pods.values() if _phase(p) == "Pending")
        s.running = len(self._started)
        s.succeeded = sum(1 for p in self._pods.values() if _phase(p) == "Succeeded")
        return s

    def pending_pods(self) -> list[str]:
        return sorted(k for k, p in self._pods.items() if _phase(p) == "Pending" and not _node_name(p))

    def stuck_pods(self) -> list[str]:
        """Pods left pending for good (only once `drained()` decided so)."""
        return self.pending_pods() if self.drained() else []

    def drained(self) -> bool:
        """The workload is over.

        True when virtual time reached `horizon_ms` (if set), or when every submission has
        been created, no pod is running, and either no pod is pending or the last
        `advance(idle=True)` found nothing left that could ever happen (no submission, no
        completion): the remaining pending pods are then unschedulable for good, since the
        scheduler just decided nothing on a cluster that will not change any more.
        """
        if self.horizon_ms is not None and self._now >= self.horizon_ms:
            return True
        if len(self._submitted) < len(self._subs) or self._started:
            return False
        return self._stuck or not self.pending_pods()

    # ------------------------------------------------------------------------- folding
    def _fold(self, ev: EventBase) -> None:
        at = getattr(ev, "at_ms", None)
        if isinstance(at, int) and at > self._now:
            self._now = at
        if isinstance(ev, PodUpserted):
            key = _key(ev.namespace, ev.name)
            old = self._pods.get(key)
            if old is not None and _node_name(old):
                self._on_node.get(_node_name(old), set()).discard(key)
            self._pods[key] = ev.manifest
            if old is None and INCARNATION_KEY in _annotations(ev.manifest):
                self._stats.recreated += 1
            node = _node_name(ev.manifest)
            running = bool(node) and _phase(ev.manifest) not in _TERMINATED
            if running:
                self._on_node.setdefault(node, set()).add(key)
                if key not in self._started or old is None or _uid(old) != _uid(ev.manifest):
                    self._started[key] = ev.at_ms
                self._set_due(key, self._started[key] + self._duration(ev.manifest))
            else:
                self._started.pop(key, None)
                self._due.pop(key, None)
            group = _annotations(ev.manifest).get(GROUP_NAME_KEY)
            if group:
                self._group_pods.setdefault(_key(ev.namespace, group), set()).add(key)
            self._mark_submitted(ev.manifest)
        elif isinstance(ev, PodDeleted):
            key = _key(ev.namespace, ev.name)
            old = self._pods.pop(key, None)
            self._started.pop(key, None)
            self._due.pop(key, None)
            if old is not None:
                self._stats.evictions += 1
                if _node_name(old):
                    self._on_node.get(_node_name(old), set()).discard(key)
                group = _annotations(old).get(GROUP_NAME_KEY)
                if group:
                    self._group_pods.get(_key(ev.namespace, group), set()).discard(key)
        elif isinstance(ev, PodGroupUpserted):
            gkey = _key(ev.namespace, ev.name)
            prev = self._groups.get(gkey)
            if _phase(ev.manifest) == "Completed" and (prev is None or _phase(prev) != "Completed"):
                self._stats.podgroups_completed += 1
            self._groups[gkey] = ev.manifest
            self._mark_submitted(ev.manifest)
        elif isinstance(ev, PodGroupDeleted):
            self._groups.pop(_key(ev.namespace, ev.name), None)
        elif isinstance(ev, NodeUsageObserved):
            if ev.source == SOURCE_NAME:
                self._usage_cursor += 1
        elif isinstance(ev, BindSucceeded | BindFailed | EvictSucceeded | EvictFailed):
            self._outcomes[ev.decision_seq] = ev
            if isinstance(ev, BindSucceeded):
                self._stats.binds += 1
            elif isinstance(ev, BindFailed):
                self._stats.bind_failures += 1

    def _set_due(self, key: str, at: int) -> None:
        if self._due.get(key) != at:
            self._due[key] = at
            heapq.heappush(self._due_heap, (at, key))

    def _mark_submitted(self, manifest: Mapping[str, Any]) -> None:
        text = _annotations(manifest).get(SUBMISSION_KEY)
        if isinstance(text, str) and text.isdigit():
            self._submitted.add(int(text))
        while self._cursor < len(self._subs) and self._subs[self._cursor].index in self._submitted:
            self._cursor += 1

    def _emit(self, out: list[ObservedEvent], ev: ObservedEvent) -> None:
        self._fold(ev)
        out.append(ev)

    def resume(self, events: Sequence[EventBase]) -> None:
        """Rebuild the state from the log's observed and outcome events, in log order.

        Assumes every batch the simulator returned was logged whole or not at all.  Events
        of other kinds (decisions, other sources' objects) are ignored.
        """
        self._reset()
        for ev in events:
            self._fold(ev)

    # ------------------------------------------------------------------------- source
    def initial_events_sync(self) -> list[ObservedEvent]:
        """A full listing of the cluster now (creating the submissions due at the current time first)."""
        scratch: list[ObservedEvent] = []
        self._run_until(self._now, scratch)
        at = self._now
        out: list[ObservedEvent] = [ResyncStarted(source=SOURCE_NAME, kinds=RESYNC_KINDS, at_ms=at)]
        for _f, _i, o in self._cluster:
            out.append(_upsert(o, at))
        for k, g in self._groups.items():
            ns, name = k.split("/", 1)
            out.append(PodGroupUpserted(namespace=ns, name=name, manifest=copy.deepcopy(g), at_ms=at))
        for k, p in self._pods.items():
            ns, name = k.split("/", 1)
            out.append(PodUpserted(namespace=ns, name=name, manifest=copy.deepcopy(p), at_ms=at))
        out.append(ResyncCompleted(source=SOURCE_NAME, kinds=RESYNC_KINDS, at_ms=at))
        for ev in out:
            self._fold(ev)
        # Usage samples due by now were folded when `_run_until` emitted them: list them once.
        out.extend(ev for ev in scratch if isinstance(ev, NodeUsageObserved))
        return out

    async def initial_events(self) -> list[ObservedEvent]:
        return self.initial_events_sync()

    # ------------------------------------------------------------------------- clock
    def _completions(self) -> list[tuple[int, str]]:
        """Every running pod's completion, (time, pod) sorted (what `_due_heap` keeps in order)."""
        return sorted((t, k) for k, t in self._due.items())

    def _next_completion(self) -> tuple[int, str] | None:
        """The first of `_completions()`, from the heap (dropping the stale entries on top)."""
        heap, due = self._due_heap, self._due
        while heap:
            at, key = heap[0]
            if due.get(key) == at:
                return at, key
            heapq.heappop(heap)
        return None

    def _completions_until(self, target: int) -> list[tuple[int, str]]:
        """`[c for c in self._completions() if c[0] <= target]`, popped from the heap.

        The caller completes every one of them (which drops them from `_due`).
        """
        out: list[tuple[int, str]] = []
        heap, due = self._due_heap, self._due
        while heap and heap[0][0] <= target:
            at, key = heapq.heappop(heap)
            if due.get(key) == at and (not out or out[-1] != (at, key)):
                out.append((at, key))
        return out

    def next_due_ms(self) -> int | None:
        """The time of the next submission or pod completion (None: nothing will ever happen)."""
        first = self._next_completion()
        due = [first[0]] if first is not None else []
        if self._cursor < len(self._subs):
            due.append(self._subs[self._cursor].at_ms)
        if self._usage_cursor < len(self._usage_script):
            due.append(self._usage_script[self._usage_cursor][0])
        return min(due) if due else None

    def advance(self, idle: bool) -> list[ObservedEvent]:
        """Move virtual time (see `fumarole.daemon.adapters.base.SimulatedCluster.advance`)."""
        out: list[ObservedEvent] = []
        target = self._now + self._period_ms
        if idle:
            nxt = self.next_due_ms()
            if nxt is None:
                self._stuck = True
                return out
            target = max(target, nxt)
        self._run_until(target, out)
        self._emit(out, ClockAdvanced(at_ms=target, facts=len(out)))
        self._stuck = False
        return out

    def _run_until(self, target: int, out: list[ObservedEvent]) -> None:
        """Emit, in time order, the completions and submissions due at or before `target`.

        At equal times completions come first (sorted by pod), then submissions (in workload order).
        """
        items: list[tuple[int, int, str, int]] = [(t, 0, k, 0) for t, k in self._completions_until(target)]
        for pos in range(self._cursor, len(self._subs)):
            s = self._subs[pos]
            if s.at_ms > target:
                break
            if s.index not in self._submitted:
                items.append((s.at_ms, 1, "", pos))
        for pos in range(self._usage_cursor, len(self._usage_script)):
            if self._usage_script[pos][0] > target:
                break
            items.append((self._usage_script[pos][0], 2, "", pos))
        items.sort()
        for at, kind, key, pos in items:
            if kind == 0:
                self._complete(key, at, out)
            elif kind == 1:
                self._submit(self._subs[pos], out)
            else:
                _at, node, cpu, mem = self._usage_script[pos]
                self._emit(
                    out,
                    NodeUsageObserved(
                        node=node, cpu=cpu, memory=mem, metrics_ms=at, source=SOURCE_NAME, at_ms=at
                    ),
                )

    def _submit(self, s: Submission, out: list[ObservedEvent]) -> None:
        for o in s.objects:
            meta = o["metadata"]
            ns, name = meta["namespace"], meta["name"]
            if o["kind"] == "PodGroup":
                self._emit(
                    out, PodGroupUpserted(namespace=ns, name=name, manifest=copy.deepcopy(o), at_ms=s.at_ms)
                )
            else:
                self._emit(
                    out, PodUpserted(namespace=ns, name=name, manifest=copy.deepcopy(o), at_ms=s.at_ms)
                )

    def _complete(self, key: str, at: int, out: list[ObservedEvent]) -> None:
        # A new top-level mapping sharing the unchanged parts: manifests are never changed in
        # place (the emitted event, the log and the daemon's projection hold the same objects).
        pod = dict(self._pods[key])
        pod["status"] = {**(pod.get("status") or {}), "phase": "Succeeded"}
        ns, name = key.split("/", 1)
        self._emit(out, PodUpserted(namespace=ns, name=name, manifest=pod, at_ms=at))
        group = _annotations(pod).get(GROUP_NAME_KEY)
        if not group:
            return
        gkey = _key(ns, group)
        g = self._groups.get(gkey)
        if g is None or _phase(g) == "Completed":
            return
        if not self._group_subs.get(gkey, set()) <= self._submitted:
            return
        members = self._group_pods.get(gkey, set())
        if not members or any(_phase(self._pods[m]) != "Succeeded" for m in members if m in self._pods):
            return
        done = copy.deepcopy(g)
        done["status"] = {"phase": "Completed", "succeeded": sum(1 for m in members if m in self._pods)}
        self._emit(out, PodGroupUpserted(namespace=ns, name=group, manifest=done, at_ms=at))

    def _duration(self, pod: Mapping[str, Any]) -> int:
        uid = _uid(pod)
        d = self._duration_cache.get(uid)
        if d is None:
            d = parse_duration(_annotations(pod).get(DURATION_KEY, "0"))
            self._duration_cache[uid] = d
        return d

    # ------------------------------------------------------------------------- sink
    def apply_sync(
        self, seq: int, decision: BindDecided | EvictDecided
    ) -> tuple[OutcomeEvent, list[ObservedEvent]]:
        """Act on one decision now (see `fumarole.daemon.adapters.base.ClusterSink.apply`)."""
        known = self._outcomes.get(seq)
        if known is not None:
            return known, []
        facts: list[ObservedEvent] = []
        outcome = self._bind(seq, decision, facts) if isinstance(decision, BindDecided) else None
        if isinstance(decision, EvictDecided):
            outcome = self._evict(seq, decision, facts)
        assert outcome is not None
        self._fold(outcome)
        if facts:
            self._stuck = False
        return outcome, facts

    async def apply(
        self, seq: int, decision: BindDecided | EvictDecided
    ) -> tuple[OutcomeEvent, list[ObservedEvent]]:
        return self.apply_sync(seq, decision)

    def _bind(self, seq: int, d: BindDecided, facts: list[ObservedEvent]) -> OutcomeEvent:
        key = _key(d.namespace, d.name)
        pod = self._pods.get(key)

        def failed(reason: str) -> BindFailed:
            return BindFailed(
                decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node, reason=reason
            )

        if pod is None or (d.uid and _uid(pod) != d.uid):
            return failed(f"pod {key} (uid {d.uid}) not found")
        if _phase(pod) in _TERMINATED:
            return failed(f"pod {key} has terminated ({_phase(pod)})")
        bound = _node_name(pod)
        if bound:
            if bound == d.node:
                return BindSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node)
            return failed(f"pod {key} is already bound to node {bound}")
        if d.node not in self._alloc:
            return failed(f"node {d.node} not found")
        short = self._shortage(d.node, pod)
        if short:
            return failed(f"node {d.node} rejected the pod: OutOf{short}")
        new = dict(pod)  # unchanged parts shared (see _complete)
        if d.annotations:  # what the binder writes on the pod with the bind (e.g. GPU card index)
            meta = new["metadata"] = dict(new.get("metadata") or {})
            meta["annotations"] = {**(meta.get("annotations") or {}), **d.annotations}
        new["spec"] = {**(new.get("spec") or {}), "nodeName": d.node}
        new["status"] = {**(new.get("status") or {}), "phase": "Running", "startTime": iso_time(self._now)}
        self._emit(facts, PodUpserted(namespace=d.namespace, name=d.name, manifest=new, at_ms=self._now))
        return BindSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node)

    def _shortage(self, node: str, pod: Mapping[str, Any]) -> str:
        """The first resource the node lacks for the pod (kubelet admission), "" when it fits."""
        alloc = self._alloc[node]
        used = Resource()
        for k in sorted(self._on_node.get(node, set())):
            used.add(self._request(self._pods[k]))
        req = self._request(pod)
        for name in req.resource_names():
            if name == PODS and alloc.get(PODS) == 0:
                continue
            if used.get(name) + req.get(name) > alloc.get(name) + _EPS:
                return name
        return ""

    def _request(self, pod: Mapping[str, Any]) -> Resource:
        uid = _uid(pod)
        r = self._request_cache.get(uid)
        if r is None:
            r = self._request_cache[uid] = self._spec_request(pod["spec"])
        return r

    def _spec_request(self, spec: Any) -> Resource:
        """What a pod with this spec requests (the scheduler's own parse), computed once per spec:
        the replicas of a Volcano Job task have equal specs.  Read-only (shared between pods)."""
        try:
            text = msgspec.json.encode(spec)
        except (TypeError, msgspec.EncodeError):
            text = None
        r = self._spec_cache.get(text) if text is not None else None
        if r is None:
            bare = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "uid": "p"},
                "spec": spec,
            }
            snap = build_snapshot([(SOURCE_NAME, 0, bare)])
            tasks = [t for j in snap.jobs.values() for t in j.tasks.values()]
            r = tasks[0].resreq.clone() if tasks else Resource()
            if text is not None:
                self._spec_cache[text] = r
        return r

    def _evict(self, seq: int, d: EvictDecided, facts: list[ObservedEvent]) -> OutcomeEvent:
        key = _key(d.namespace, d.name)
        ok = EvictSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name)
        pod = self._pods.get(key)
        if pod is None or (d.uid and _uid(pod) != d.uid) or _phase(pod) in _TERMINATED:
            return ok  # already gone: nothing to do
        self._emit(facts, PodDeleted(namespace=d.namespace, name=d.name, at_ms=self._now))
        if _owned_by_job(pod):
            self._emit(
                facts,
                PodUpserted(
                    namespace=d.namespace, name=d.name, manifest=self._recreated(pod), at_ms=self._now
                ),
            )
        return ok

    def _recreated(self, pod: Mapping[str, Any]) -> Obj:
        """The pod the Volcano Job controller creates again after one was deleted: same name, new uid."""
        new = copy.deepcopy(dict(pod))
        meta = new["metadata"]
        ann = dict(meta.get("annotations") or {})
        n = int(ann.get(INCARNATION_KEY, "0")) + 1
        ann[INCARNATION_KEY] = str(n)
        meta["annotations"] = dict(sorted(ann.items()))
        base = _uid(pod).rsplit("~", 1)[0]
        meta["uid"] = f"{base}~{n}"
        meta["creationTimestamp"] = iso_time(self._now)
        new.get("spec", {}).pop("nodeName", None)
        new["status"] = {"phase": "Pending"}
        return new


def _sources(objs: Sequence[Source] | Sequence[Mapping[str, Any]], file: str) -> list[Source]:
    out: list[Source] = []
    for i, o in enumerate(objs):
        if isinstance(o, tuple):
            f, index, obj = o
            assert isinstance(obj, Mapping)
            out.append((str(f), int(index), obj))
        elif isinstance(o, Mapping):
            out.append((file, i, o))
        else:
            raise TypeError(
                f"{file}: item {i}: expected a manifest mapping or a (file, index, object) triple"
            )
    return out


def _upsert(o: Mapping[str, Any], at: int) -> ObservedEvent:
    return upserted(copy.deepcopy(dict(o)), at)
