"""Dirty-set freezing: a freeze that visits only the pods, PodGroups, nodes and jobs changed since
the last one, sharing every other frozen object with the previous snapshot.

`Membership` is what the last whole build (`Projection._build`) left: each pod's task, job and
node, the pods of every node and job, the uid of every task, the node and PodGroup records and
their places.  `freeze_dirty` applies the pods, PodGroups and PodGroup statuses folded since
(`Projection` marks them dirty as it folds) and rebuilds only the nodes and jobs they touch;
each node's and job's tasks are put in pod order by the pods' ordinals (a pod keeps its ordinal
while it exists; a new one goes last), so the snapshot's orders are exactly a whole build's.

It covers the common case only and answers None (rebuild whole) otherwise: the last build had a
problem about a pod, a task of another scheduler, a node its tasks did not fit, or a job without
a PodGroup object; or a dirty pod is not ours, names a job without a PodGroup object, does not
parse or repeats another pod's uid; or a dirty PodGroup does not parse, or a node does not fit
its tasks now.  Every other change (nodes, queues, priority classes, namespaces, deletions of
PodGroups, resyncs) marks the projection wide and rebuilds whole.  Nothing is changed before the
answer is known: an abandoned attempt leaves only the parse caches warmer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fumarole.daemon.cache.state import BindOverlay, Key, Manifest
from fumarole.daemon.manifests import ManifestError, ObjectDecoder
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeError, NodeInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import COMPLETED_STATUSES, TaskInfo
from fumarole.store.events import PodGroupStatusChanged

__all__ = ["DirtySource", "Membership", "freeze_dirty"]


JobEntry = tuple[Any, Any, int, tuple[TaskInfo, ...], JobInfo]


def job_unchanged(entry: JobEntry, group: Any, status: Any, version: int, held: tuple[TaskInfo, ...]) -> bool:
    """Whether a cached job was built from this PodGroup record, folded status, model version and
    tasks (compared by identity: TaskInfo has no __eq__), so that its JobInfo can be shared."""
    return entry[0] is group and entry[1] is status and entry[2] == version and entry[3] == held


class DirtySource(Protocol):
    """What a dirty freeze reads and writes of the projection (`fumarole.daemon.cache.projection.Projection`
    is one; named structurally so that this module need not import the projection, which imports it)."""

    objects: dict[str, dict[Key, Manifest]]
    binds: dict[Key, BindOverlay]
    evictions: dict[Key, tuple[int, str]]
    pg_status: dict[Key, PodGroupStatusChanged]
    decoder: ObjectDecoder
    problems: list[str]
    _idents: dict[Key, tuple[str, bool]]
    _task_cache: dict[Key, tuple[TaskInfo, Any, Any, TaskInfo]]
    _node_cache: dict[str, tuple[Any, tuple[TaskInfo, ...], NodeInfo]]
    _job_cache: dict[str, JobEntry]
    _ordinal: dict[Key, int]
    _dirty_pods: dict[Key, None]
    _dirty_groups: dict[Key, None]
    _dirty_jobs: set[str]

    def _parse(self, kind: str, key: Key, manifest: Any) -> Any: ...
    def _template(self, key: Key, job_id: str, version: int) -> TaskInfo: ...
    def _overlay(self, key: Key, task: TaskInfo) -> None: ...
    def make_job(self, job_id: str, g: Any, st: Any, held: tuple[TaskInfo, ...]) -> JobInfo: ...


_MISSING: Any = object()

# A pod's row: its task, its job id, and the node it counts on ("" none); None: a pod that is
# neither ours nor on a node (no task).
Row = tuple[TaskInfo, str, str]


@dataclass(slots=True)
class Membership:
    """Who belongs where as of the last freeze (see the module notes)."""

    version: int
    groups: dict[str, Any]  # job id -> PodGroup record, in PodGroup order (every job has one)
    problems: list[str]  # the problems of that freeze (none is about a pod)
    node_recs: dict[str, Any]  # node name -> record
    node_index: dict[str, int]  # node name -> place in the snapshot's nodes
    rows: dict[Key, Row | None]
    uid_owner: dict[str, Key]
    node_keys: dict[str, set[Key]]
    job_keys: dict[str, set[Key]]

    @classmethod
    def of(
        cls,
        *,
        version: int,
        groups: dict[str, Any],
        problems: list[str],
        nodes: list[Any],
        rows: list[tuple[Key, TaskInfo, str]],
        held_by: dict[str, list[Key]],
        skipped: list[Key],
    ) -> Membership:
        node_of: dict[Key, str] = {}
        node_keys: dict[str, set[Key]] = {}
        for name, keys in held_by.items():
            node_keys[name] = set(keys)
            for key in keys:
                node_of[key] = name
        table: dict[Key, Row | None] = dict.fromkeys(skipped)
        job_keys: dict[str, set[Key]] = {}
        uid_owner: dict[str, Key] = {}
        for key, task, job_id in rows:
            table[key] = (task, job_id, node_of.get(key, ""))
            uid_owner[task.uid] = key
            members = job_keys.get(job_id)
            if members is None:
                job_keys[job_id] = {key}
            else:
                members.add(key)
        return cls(
            version=version,
            groups=groups,
            problems=list(problems),
            node_recs={n.name: n for n in nodes},
            node_index={n.name: i for i, n in enumerate(nodes)},
            rows=table,
            uid_owner=uid_owner,
            node_keys=node_keys,
            job_keys=job_keys,
        )


def freeze_dirty(
    proj: DirtySource, m: Membership, prev: ClusterSnapshot, now: float, sid: str
) -> ClusterSnapshot | None:
    """The snapshot after the dirty pods, PodGroups and statuses, or None: rebuild whole."""
    pods = proj.objects["Pod"]
    if len(proj._dirty_pods) * 4 > len(pods) + 64:
        return None
    # PodGroups: changed ones in place, new ones (PodGroups are never deleted here) last, in order.
    group_objs = proj.objects["PodGroup"]
    groups = m.groups
    new_groups: dict[str, Any] = {}
    dirty_jobs = set(proj._dirty_jobs)
    for key in proj._dirty_groups:
        manifest = group_objs.get(key)
        if manifest is None:
            return None
        g = proj._parse("PodGroup", key, manifest)
        if isinstance(g, ManifestError):
            return None
        job_id = f"{key[0]}/{key[1]}"
        new_groups[job_id] = g
        dirty_jobs.add(job_id)
    added = len(group_objs) - len(groups)
    if added < 0 or sum(1 for j in new_groups if j not in groups) != added:
        return None
    if added:
        tail: list[str] = []
        for key in reversed(group_objs):
            if len(tail) == added:
                break
            tail.append(f"{key[0]}/{key[1]}")
        if any(j not in new_groups or j in groups for j in tail):
            return None
        appended = list(reversed(tail))
    else:
        appended = []
    for job_id in dirty_jobs:
        if job_id not in groups and job_id not in new_groups:
            return None

    # Pods: each dirty pod's row as a whole build would make it.
    d = proj.decoder
    version = m.version
    idents = proj._idents
    task_cache = proj._task_cache
    rows = m.rows
    new_rows: dict[Key, tuple[Row, Any] | None] = {}
    for key in proj._dirty_pods:
        old = rows.get(key, _MISSING)
        if old is None or (old is not _MISSING and old[1] not in groups):
            return None
        manifest = pods.get(key)
        if manifest is None:
            new_rows[key] = None
            continue
        ident = idents.get(key)
        if ident is None:
            p = proj._parse("Pod", key, manifest)
            if isinstance(p, ManifestError):
                return None
            ident = idents[key] = (d.group_of(p), d.is_ours(p))
        job_id, mine = ident
        if not mine or (job_id not in groups and job_id not in new_groups):
            return None
        template = proj._template(key, job_id, version)
        bind = proj.binds.get(key)
        ev = proj.evictions.get(key)
        entry = task_cache.get(key)
        if entry is None or entry[0] is not template or entry[1] is not bind or entry[2] is not ev:
            task = template.clone()
            proj._overlay(key, task)
            entry = (template, bind, ev, task)
        task = entry[3]
        node_name = task.node_name
        held = (
            node_name
            if node_name and task.status not in COMPLETED_STATUSES and node_name in m.node_recs
            else ""
        )
        new_rows[key] = ((task, job_id, held), entry)

    # Uids stay unique (a whole build would report a duplicate).
    claimed: set[str] = set()
    for key, new in new_rows.items():
        if new is None:
            continue
        uid = new[0][0].uid
        if uid in claimed:
            return None
        claimed.add(uid)
        owner = m.uid_owner.get(uid)
        if owner is not None and owner != key and owner not in new_rows:
            return None

    # Membership of the touched nodes and jobs (copies until committed).
    node_sets: dict[str, set[Key]] = {}
    job_sets: dict[str, set[Key]] = {}

    def node_set(name: str) -> set[Key]:
        s = node_sets.get(name)
        if s is None:
            s = node_sets[name] = set(m.node_keys.get(name, ()))
        return s

    def job_set(job_id: str) -> set[Key]:
        s = job_sets.get(job_id)
        if s is None:
            s = job_sets[job_id] = set(m.job_keys.get(job_id, ()))
        return s

    for key, new in new_rows.items():
        old = rows.get(key)
        if old is not None:
            if old[2]:
                node_set(old[2]).discard(key)
            job_set(old[1]).discard(key)
        if new is not None:
            row = new[0]
            if row[2]:
                node_set(row[2]).add(key)
            job_set(row[1]).add(key)
    for job_id in dirty_jobs:
        job_set(job_id)

    ordinal = proj._ordinal.__getitem__

    def task_of(key: Key) -> TaskInfo:
        new = new_rows.get(key, _MISSING)
        if new is not _MISSING:
            return new[0][0]  # type: ignore[no-any-return]
        return rows[key][0]  # type: ignore[index]

    nodes = list(prev.nodes)
    node_entries: dict[str, tuple[Any, tuple[TaskInfo, ...], NodeInfo]] = {}
    for name, keys in node_sets.items():
        held_tasks = tuple(task_of(k) for k in sorted(keys, key=ordinal))
        rec = m.node_recs[name]
        cached = proj._node_cache.get(name)
        if cached is not None and cached[0] is rec and cached[1] == held_tasks:
            node_entries[name] = cached
            nodes[m.node_index[name]] = cached[2]
            continue
        node = NodeInfo(rec.name, rec.allocatable, rec.capability, rec.facts)
        for t in held_tasks:
            try:
                node.add_task(t)
            except NodeError:
                return None
        node_entries[name] = (rec, held_tasks, node)
        nodes[m.node_index[name]] = node

    jobs = dict(prev.jobs)
    for job_id in appended:
        jobs[job_id] = None  # type: ignore[assignment]  # placed now, filled below
    job_entries: dict[str, tuple[Any, Any, int, tuple[TaskInfo, ...], Any]] = {}
    for job_id, keys in job_sets.items():
        g = new_groups.get(job_id) or groups[job_id]
        ns_name, _, name = job_id.partition("/")
        st = proj.pg_status.get((ns_name, name))
        held_tasks = tuple(task_of(k) for k in sorted(keys, key=ordinal))
        cached_job = proj._job_cache.get(job_id)
        if cached_job is not None and job_unchanged(cached_job, g, st, version, held_tasks):
            job_entries[job_id] = cached_job
            jobs[job_id] = cached_job[4]
            continue
        job = proj.make_job(job_id, g, st, held_tasks)
        job_entries[job_id] = (g, st, version, held_tasks, job)
        jobs[job_id] = job

    # Commit.
    for key in new_rows:
        old = rows.get(key)
        if old is not None and m.uid_owner.get(old[0].uid) == key:
            del m.uid_owner[old[0].uid]
    for key, new in new_rows.items():
        if new is None:
            rows.pop(key, None)
            task_cache.pop(key, None)
        else:
            rows[key] = new[0]
            task_cache[key] = new[1]
            m.uid_owner[new[0][0].uid] = key
    m.node_keys.update(node_sets)
    m.job_keys.update(job_sets)
    for job_id, g in new_groups.items():
        if job_id in groups:
            groups[job_id] = g
    for job_id in appended:
        groups[job_id] = new_groups[job_id]
    proj._node_cache.update(node_entries)
    proj._job_cache.update(job_entries)
    proj.problems = list(m.problems)
    return ClusterSnapshot(
        nodes=nodes,
        jobs=jobs,
        queues=prev.queues,
        namespaces=prev.namespaces,
        priority_classes=prev.priority_classes,
        other_tasks=[],
        hypernodes=prev.hypernodes,
        numatopologies=prev.numatopologies,
        now=now,
        session_id=sid,
    )
