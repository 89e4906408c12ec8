"""Projection: the folded state plus per-object parse caches, frozen into a ClusterSnapshot per cycle.

Freezing assembles the snapshot exactly as `fumarole.daemon.manifests.build_snapshot` would for the
objects the projection holds (kinds in build_snapshot's order, each kind in first-arrival
order), then applies the folded decisions (see `state.py`).  Each manifest is parsed once per
version (`ObjectDecoder`); each pod's TaskInfo template is built once per version and
priority-class set.

Freezing is incremental (docs/replay.md, "Cost: incremental freezing"): while no event outside
`SNAPSHOT_NEUTRAL` was folded, a freeze hands out the last snapshot again (new containers, new
`now` and session id); after only pod, PodGroup and decision events it visits just the dirty
pods and the nodes and jobs they touch (`dirty_set.py`); otherwise it rebuilds whole, reusing
each task, node and job whose inputs are the same objects as last time.  Snapshots share those
objects, so a snapshot is read-only for its consumers (sessions clone it); later folds and
freezes never change one handed out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from fumarole.daemon.cache.dirty_set import Membership, freeze_dirty, job_unchanged
from fumarole.daemon.cache.state import DEFAULT_SCHEDULER_NAMES, Key, ProjectionState
from fumarole.daemon.manifests import BUILTIN_PRIORITY_CLASSES, ManifestError, ObjectDecoder
from fumarole.daemon.scheduler.model.hypernode import HyperNodeSpec
from fumarole.daemon.scheduler.model.job import Condition, JobInfo
from fumarole.daemon.scheduler.model.node import NodeError, NodeInfo
from fumarole.daemon.scheduler.model.queue import (
    DEFAULT_QUEUE,
    QUEUE_OPEN,
    ROOT_QUEUE,
    NamespaceInfo,
    PriorityClassInfo,
    QueueInfo,
)
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import COMPLETED_STATUSES, TaskInfo, TaskStatus
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    CalloutsRecorded,
    ClockAdvanced,
    ConfigurationRecorded,
    ConfigurationRejected,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    JobExplained,
    NodeUsageObserved,
    PipelineDecided,
    PodDeleted,
    PodGroupDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    QueueFigures,
    QueueFiguresRecorded,
    ResyncStarted,
)

__all__ = ["SNAPSHOT_NEUTRAL", "Projection", "session_id"]

# Events whose folding cannot change a frozen snapshot (the clock's `now` is set on every
# freeze): explanations, queue figures, cycle markers, configuration, pipelines, and outcomes
# that change nothing (the pod update is the answer).  Every other event type, known or not,
# marks the snapshot stale.
SNAPSHOT_NEUTRAL: frozenset[type] = frozenset(
    {
        BindSucceeded,
        CalloutsRecorded,
        ClockAdvanced,
        ConfigurationRecorded,
        ConfigurationRejected,
        CycleClosed,
        CycleOpened,
        EvictSucceeded,
        JobExplained,
        PipelineDecided,
        QueueFiguresRecorded,
    }
)

# Events a dirty-set freeze follows (the pods, PodGroups and PodGroup statuses they name are
# marked dirty); any other event that can change a snapshot makes the next freeze rebuild whole.
_POD_DECISIONS: frozenset[type] = frozenset({BindDecided, BindFailed, EvictDecided, EvictFailed})
# NodeUsageObserved changes only the snapshot's node_usage, which every freeze copies afresh.
_FOLLOWED: frozenset[type] = frozenset(
    {
        PodUpserted,
        PodDeleted,
        PodGroupUpserted,
        PodGroupDeleted,
        PodGroupStatusChanged,
        ResyncStarted,
        NodeUsageObserved,
    }
)

_MISSING = object()


def _spec_name(spec: HyperNodeSpec) -> str:
    return spec.name


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
        # pod key -> (priority-class version, job id, TaskInfo template); pod key -> (job id, ours);
        # pod key -> implicit group (None: none).  Persisted with snapshots (`parse_caches`).
        self._templates: dict[Key, tuple[int, str, TaskInfo]] = {}
        self._idents: dict[Key, tuple[str, bool]] = {}
        self._implicit: dict[Key, Any] = {}
        self._pcs: dict[str, PriorityClassInfo] | None = None
        self._default_priority = 0
        self._pcs_version = 0
        self.problems: list[str] = []
        # Incremental freezing: the generation counts folded events that can change a snapshot;
        # the last snapshot (with its generation and problems) and, per task / node / job, the
        # inputs it was built from (compared by identity) and what was built.
        self._generation = 0
        self._last: tuple[int, ClusterSnapshot, list[str]] | None = None
        self._task_cache: dict[Key, tuple[TaskInfo, Any, Any, TaskInfo]] = {}
        self._node_cache: dict[str, tuple[Any, tuple[TaskInfo, ...], NodeInfo]] = {}
        self._job_cache: dict[str, tuple[Any, Any, int, tuple[TaskInfo, ...], JobInfo]] = {}
        # Dirty-set freezing (daemon/cache/dirty_set.py): each pod's place in pod order, what changed
        # since the last freeze, and the membership the last build left (None: rebuild whole).
        self._ordinal: dict[Key, int] = {}
        self._next_ordinal = 0
        self._dirty_pods: dict[Key, None] = {}
        self._dirty_groups: dict[Key, None] = {}
        self._dirty_jobs: set[str] = set()
        self._wide = True
        self._members: Membership | None = None
        self.dirty_freezes = 0  # freezes that visited only the dirty set (for tests and benches)

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

    @property
    def generation(self) -> int:
        """Counts folded events that can change a snapshot: equal generations freeze the same objects."""
        return self._generation

    # ------------------------------------------------------------------------- caches
    def parse_caches(self) -> dict[str, Any]:
        """What parsing the current objects gave (no errors: those are re-parsed), to persist.

        Every entry corresponds to an object as it is now (entries are dropped when their object
        changes), so a projection restored from the same state may adopt them
        (`adopt_parse_caches`) and freeze without parsing again.
        """
        return {
            "parsed": {
                ck: rec
                for ck, rec in self._parsed.items()
                if ck[0] != "Pod" and not isinstance(rec, ManifestError)
            },
            "templates": self._templates,
            "idents": self._idents,
            "implicit": self._implicit,
            "pcs": self._pcs,
            "default_priority": self._default_priority,
            "pcs_version": self._pcs_version,
        }

    def adopt_parse_caches(self, caches: dict[str, Any]) -> None:
        """Take `parse_caches()` of a projection in the same state as this one (see there)."""
        self._parsed = dict(caches["parsed"])
        self._templates = dict(caches["templates"])
        self._idents = dict(caches["idents"])
        self._implicit = dict(caches["implicit"])
        self._pcs = caches["pcs"]
        self._default_priority = caches["default_priority"]
        self._pcs_version = caches["pcs_version"]

    def _invalidate(self, kind: str, key: Key) -> None:
        self._parsed.pop((kind, key), None)
        if kind == "Pod":
            self._implicit.pop(key, None)
            self._templates.pop(key, None)
            self._idents.pop(key, None)
            if key in self.objects["Pod"]:
                if key not in self._ordinal:
                    self._ordinal[key] = self._next_ordinal
                    self._next_ordinal += 1
            else:
                self._ordinal.pop(key, None)
            self._dirty_pods[key] = None
        elif kind == "PodGroup" and key in self.objects["PodGroup"]:
            self._dirty_groups[key] = None
        else:
            self._wide = True

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
            elif kind == "HyperNode":
                rec = d.hypernode(name, manifest, source=src)
            elif kind == "Numatopology":
                rec = d.numatopology(name, manifest, source=src)
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
    def fold(self, seq: int, event: Any) -> None:
        super().fold(seq, event)
        t = type(event)
        if t in SNAPSHOT_NEUTRAL:
            return
        self._generation += 1
        if t in _POD_DECISIONS:
            self._dirty_pods[(event.namespace, event.name)] = None
        elif t is PodGroupStatusChanged:
            self._dirty_jobs.add(f"{event.namespace}/{event.name}")
        elif t not in _FOLLOWED:
            self._wide = True

    def freeze(self, *, cycle: int | None = None) -> ClusterSnapshot:
        """The ClusterSnapshot of the current state (session id from `cycle`, now from the clock).

        When no event that can change a snapshot was folded since the last freeze, the last
        snapshot is handed out again (new containers over the same objects, new `now` and session
        id); otherwise it is rebuilt, reusing every task, node and job whose inputs are the same
        objects as last time (see the module notes).
        """
        now = self.now_ms / 1000.0
        sid = session_id(cycle if cycle is not None else self.last_cycle + 1)
        last = self._last
        if last is not None and last[0] == self._generation:
            prev, problems = last[1], last[2]
            self.problems = list(problems)
            return ClusterSnapshot(
                nodes=list(prev.nodes),
                jobs=dict(prev.jobs),
                queues=dict(prev.queues),
                namespaces=dict(prev.namespaces),
                priority_classes=dict(prev.priority_classes),
                other_tasks=list(prev.other_tasks),
                hypernodes=prev.hypernodes,
                numatopologies=prev.numatopologies,
                now=now,
                session_id=sid,
                node_usage=dict(self.node_usage),
                previous_now=None if self.last_cycle_now_ms is None else self.last_cycle_now_ms / 1000.0,
            )
        snap = None
        if last is not None and not self._wide and self._members is not None:
            snap = freeze_dirty(self, self._members, last[1], now, sid)
            self.dirty_freezes += snap is not None
        if snap is None:
            snap = self._build(now, sid)
        self._dirty_pods.clear()
        self._dirty_groups.clear()
        self._dirty_jobs.clear()
        self._wide = False
        self._last = (self._generation, snap, list(self.problems))
        return self.freeze(cycle=cycle)

    def _build(self, now: float, sid: str) -> ClusterSnapshot:
        self.problems = []
        d = self.decoder
        snap = ClusterSnapshot()
        snap.now = now
        snap.session_id = sid

        pcs: dict[str, PriorityClassInfo] = {}
        default_priority = 0
        for _key, pc in self._records("PriorityClass"):
            pcs[pc.name] = pc
            if pc.global_default:
                default_priority = pc.value
        for pc in BUILTIN_PRIORITY_CLASSES:
            pcs.setdefault(pc.name, pc)
        if pcs != self._pcs or default_priority != self._default_priority:
            self._pcs = pcs
            self._default_priority = default_priority
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
        snap.hypernodes = tuple(sorted((hn for _key, hn in self._records("HyperNode")), key=_spec_name))
        snap.numatopologies = {
            nt.name: nt for _key, nt in sorted(self._records("Numatopology"), key=lambda kv: kv[0])
        }
        node_recs = list(self._records("Node"))
        node_names = {n.name for _key, n in node_recs}

        groups: dict[str, Any] = {}
        for (ns_name, name), g in self._records("PodGroup"):
            groups[f"{ns_name}/{name}"] = g
        pg_groups = dict(groups)
        nonpod_problems = len(self.problems)
        skipped: list[Key] = []  # pods neither ours nor on a node
        # Tasks, in pod order: each job's and each node's tasks keep that order.  One pass: a pod's
        # ident, implicit group, template and task come from the caches unless it changed.
        idents = self._idents
        implicits = self._implicit
        templates = self._templates
        binds_get = self.binds.get
        evictions_get = self.evictions.get
        late: list[tuple[int, str]] = []  # (pod position, problem) of this phase, reported in pod order
        seen_uids: dict[str, Key] = {}
        task_cache = self._task_cache
        tasks_now: dict[Key, tuple[TaskInfo, Any, Any, TaskInfo]] = {}
        rows: list[tuple[int, Key, TaskInfo, bool, str]] = []  # (pod position, key, task, ours, job id)
        on_node: dict[str, list[int]] = {}  # node -> indexes into rows
        held_by: dict[str, list[TaskInfo]] = {}  # node -> its tasks (rows[i][2] for i in on_node)
        for pos, (key, manifest) in enumerate(self.objects["Pod"].items()):
            ident = idents.get(key)
            if ident is None:
                p = self._parse("Pod", key, manifest)
                if isinstance(p, ManifestError):
                    self.problems.append(f"Pod {'/'.join(x for x in key if x)}: {p}")
                    continue
                ident = idents[key] = (d.group_of(p), d.is_ours(p))
            job_id, mine = ident
            if job_id and job_id not in groups:
                implicit = implicits.get(key, _MISSING)
                if implicit is _MISSING:
                    implicit = implicits[key] = d.implicit_group(self._pod(key))
                if implicit is not None:
                    groups[job_id] = implicit
            known = templates.get(key)
            if known is not None and known[0] == version and known[1] == job_id:
                template = known[2]
            else:
                template = self._template(key, job_id, version)
            if not mine and not template.node_name:
                skipped.append(key)
                continue
            first = seen_uids.setdefault(template.uid, key)
            if first != key:
                late.append(
                    (
                        pos,
                        f"Pod {key[0]}/{key[1]}: duplicate pod uid {template.uid!r} "
                        f"(also Pod {first[0]}/{first[1]}); left out",
                    )
                )
                continue
            bind = binds_get(key)
            ev = evictions_get(key)
            cached = task_cache.get(key)
            if cached is not None and cached[0] is template and cached[1] is bind and cached[2] is ev:
                task = cached[3]
                tasks_now[key] = cached
            else:
                task = template.clone()
                self._overlay(key, task)
                tasks_now[key] = (template, bind, ev, task)
            node_name = task.node_name
            if node_name and task.status not in COMPLETED_STATUSES and node_name in node_names:
                held_rows = on_node.get(node_name)
                if held_rows is None:
                    on_node[node_name] = [len(rows)]
                    held_by[node_name] = [task]
                else:
                    held_rows.append(len(rows))
                    held_by[node_name].append(task)
            rows.append((pos, key, task, mine, job_id))
        self._task_cache = tasks_now

        # A node (job) is reused when its record and its tasks are the same objects as last time:
        # TaskInfo has no __eq__, so tuples of tasks compare element by element by identity (the
        # cache holds the tuple, so no id is reused meanwhile).
        node_cache: dict[str, tuple[Any, tuple[TaskInfo, ...], NodeInfo]] = {}
        no_tasks: list[TaskInfo] = []
        all_clean = True
        for _key, n in node_recs:
            held = tuple(held_by.get(n.name, no_tasks))
            cached_node = self._node_cache.get(n.name)
            if cached_node is not None and cached_node[0] is n and cached_node[1] == held:
                node_cache[n.name] = cached_node
                snap.nodes.append(cached_node[2])
                continue
            node = NodeInfo(n.name, n.allocatable, n.capability, n.facts)
            clean = True
            for i in on_node.get(n.name, ()):
                pos, key, task, mine, job_id = rows[i]
                try:
                    node.add_task(task)
                except NodeError as e:
                    clean = False
                    if task.status is not TaskStatus.BINDING:
                        late.append((pos, f"Pod {key[0]}/{key[1]}: {e}"))
                    else:
                        # The node has no room left for a bind in flight: count it as Bound.  A
                        # copy: the cached task (maybe in a snapshot handed out) stays as it was.
                        task = task.clone()
                        task.status = TaskStatus.BOUND
                        rows[i] = (pos, key, task, mine, job_id)
                        tasks_now.pop(key, None)
                        node.add_task(task)
                        late.append((pos, f"Pod {key[0]}/{key[1]}: {e}; counted as Bound"))
            if clean:
                node_cache[n.name] = (n, held, node)
            else:
                all_clean = False
            snap.nodes.append(node)
        self._node_cache = node_cache
        late.sort(key=lambda pm: pm[0])
        self.problems.extend(m for _pos, m in late)

        of_job: dict[str, list[TaskInfo]] = {}
        orphans: list[str] = []  # jobs of pods without a PodGroup, in first-pod order
        for _pos, _key, task, mine, job_id in rows:
            if not mine:
                snap.other_tasks.append(task)
                continue
            members = of_job.get(job_id)
            if members is None:
                of_job[job_id] = members = []
                if job_id not in groups:
                    orphans.append(job_id)
            members.append(task)

        job_cache: dict[str, tuple[Any, Any, int, tuple[TaskInfo, ...], JobInfo]] = {}
        for job_id in [*groups, *orphans]:
            g = groups.get(job_id)
            ns_name, _, name = job_id.partition("/")
            st = self.pg_status.get((ns_name, name)) if g is not None else None
            held = tuple(of_job.get(job_id, no_tasks))
            cached_job = self._job_cache.get(job_id)
            if cached_job is not None and job_unchanged(cached_job, g, st, version, held):
                job_cache[job_id] = cached_job
                snap.jobs[job_id] = cached_job[4]
                continue
            job = self.make_job(job_id, g, st, held)
            job_cache[job_id] = (g, st, version, held, job)
            snap.jobs[job_id] = job
        self._job_cache = job_cache
        self._ordinal = {key: pos for pos, key in enumerate(self.objects["Pod"])}
        self._next_ordinal = len(self._ordinal)
        self._members = None
        if (
            all_clean
            and not snap.other_tasks
            and len(self.problems) == nonpod_problems
            and len(snap.jobs) == len(pg_groups)
            and len(pg_groups) == len(self.objects["PodGroup"])
        ):
            self._members = Membership.of(
                version=version,
                groups=pg_groups,
                problems=self.problems,
                nodes=[n for _key, n in node_recs],
                rows=[(key, task, job_id) for _pos, key, task, _mine, job_id in rows],
                held_by={name: [rows[i][1] for i in idx] for name, idx in on_node.items()},
                skipped=skipped,
            )
        return snap

    def make_job(self, job_id: str, g: Any, st: Any, held: tuple[TaskInfo, ...]) -> JobInfo:
        """The JobInfo of `job_id` from its PodGroup record `g` (None: none), folded status and tasks."""
        if g is not None:
            job = self.decoder.job_info(g)
            if st is not None:
                job.status.phase = st.phase
                job.status.conditions = [
                    Condition(c.type, c.status, c.reason, c.message, c.transition_id) for c in st.conditions
                ]
                job.status.running = st.running
                job.status.succeeded = st.succeeded
                job.status.failed = st.failed
        else:
            ns_name, _, name = job_id.partition("/")
            job = JobInfo(uid=job_id, name=name, namespace=ns_name, queue="", has_pod_group=False)
        for task in held:
            job.add_task(task)
        return job

    def _pod(self, key: Key) -> Any:
        """The parsed record of a pod known to parse (its ident is cached)."""
        return self._parse("Pod", key, self.objects["Pod"][key])

    def _template(self, key: Key, job_id: str, version: int) -> TaskInfo:
        cached = self._templates.get(key)
        if cached is not None and cached[0] == version and cached[1] == job_id:
            return cached[2]
        t = self.decoder.task(self._pod(key), job_id)
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
