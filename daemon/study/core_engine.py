"""The core engine of the studies: trace pods placed by Fumarole's real scheduler sessions
(`fumarole.daemon.scheduler`, Volcano's actions and plugins) under a Volcano scheduler configuration.

`CoreCluster` holds a ClusterSnapshot built from the study's node and pod manifests (the
importer's mapping, `fumarole.daemon.study.manifests`); `run(pods, now_s)` adds pods, runs one session and
folds its binds back as Running pods, returning each bound pod's node row and card indices (from
deviceshare's `volcano.sh/vgpu-ids-new`); `finish(pod)` removes a pod that ran its course.

Inflation (`arrival_order=True`) runs every sampled pod through ONE session. The paper's method
is one pod at a time, each placed at once or failing for good; one session visits the pods in the
same order and decides the same because (docs/studies.md, "The core engine"):
  * every pod is its own job in one queue (`inflation`), with job priority 0 and creation time its
    arrival: the job order (priority, gang readiness, drf share: all equal for pending one-pod
    jobs) falls through to creation time, i.e. arrival order; one queue makes the queue order moot;
  * the PodGroups start Inqueue: enqueue would hold back jobs once the summed requests of the
    waiting ones pass the cluster's capacity, which one-at-a-time arrival never sees; admitting a
    pod on arrival changes nothing else, since a pod enqueue would refuse (allocated + request
    above capacity in some resource) fits no node either;
  * proportion's overused check cannot stop the queue while a pod waits: its deserved share is
    its request capped by the cluster (allocated < request as long as some pod failed);
  * a pod that fits nowhere leaves allocate's loop for this session (its job is not retried),
    exactly as a failed arrival is dropped; nothing is evicted (no preempt/reclaim in the conf).
The one difference is the node search's rotating start (Volcano keeps scanning from where the
previous pod stopped when the cluster has more than 100 nodes): one session keeps it running as a
long-lived Volcano scheduler would, where per-pod sessions would restart it at node 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.apply import apply_podgroups, apply_result, run_bound
from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.daemon.scheduler.framework.placement import SearchOptions
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.study.inflation import shape_of
from fumarole.daemon.study.manifests import NAMESPACE, card_uuid, cluster_objects, node_manifest
from fumarole.daemon.study.placement import Placement
from fumarole.daemon.study.trace import TraceNode, TracePod

__all__ = ["ASSIGNED_IDS", "INFLATION_QUEUE", "CoreCluster", "CoreStep"]

ASSIGNED_IDS = "volcano.sh/vgpu-ids-new"
INFLATION_QUEUE = "inflation"
Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CoreStep:
    """One session's outcome: placements by pod name (bind order) and their bind annotations."""

    placed: dict[str, Placement]
    annotations: dict[str, dict[str, str]]
    queues: dict[str, str]


def _queue_object(name: str) -> Obj:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
    }


def cards_of(node: str, ids: str) -> tuple[int, ...]:
    """Card indices named by a `volcano.sh/vgpu-ids-new` value (`<node>-gpu<i>,TYPE,mem,cores:`)."""
    out: list[int] = []
    prefix = card_uuid(node, 0)[:-1]
    for container in ids.split(";"):
        for dev in container.split(":"):
            uuid = dev.split(",", 1)[0]
            if uuid.startswith(prefix):
                out.append(int(uuid[len(prefix) :]))
    return tuple(out)


class CoreCluster:
    """The study's cluster as a snapshot that real sessions decide on."""

    def __init__(
        self,
        nodes: Sequence[TraceNode],
        conf: SchedulerConf,
        *,
        arrival_order: bool,
        percentage_nodes_to_find: int = 0,
        tie_seed: int | None = None,
        typical: Sequence[TracePod] | None = None,
    ) -> None:
        self.conf = conf
        # Volcano's --percentage-nodes-to-find (0: its adaptive default, 100: every node); equal
        # scores: the first candidate, or with a tie seed framework/ties.py's seeded draw; `typical`:
        # the pod list whose shapes the fgd plugin judges against (the paper's simulator: the list as
        # read, before the inflation tuning), None: each session's pods.
        shapes = tuple(shape_of(p) for p in typical) if typical else None
        self.search = SearchOptions(
            percentage_nodes_to_find=percentage_nodes_to_find, tie_seed=tie_seed, typical_shapes=shapes
        )
        self.arrival_order = arrival_order
        self.rows = {n.name: i for i, n in enumerate(nodes)}
        objects: list[tuple[str, int, Obj]] = [("nodes", i, node_manifest(n)) for i, n in enumerate(nodes)]
        objects += [("cluster", i, o) for i, o in enumerate(cluster_objects())]
        if arrival_order:
            objects.append(("cluster", len(objects), _queue_object(INFLATION_QUEUE)))
        self.snapshot: ClusterSnapshot = build_snapshot(objects)
        # What sessions derive from each node (node table rows, node mirror, deviceshare's card
        # pools) is kept between sessions and rebuilt only where a node changed.
        self.snapshot.derived = NodeDerived()
        self.row_of = {n.name: i for i, n in enumerate(self.snapshot.nodes)}
        # Pods not yet bound: pod key -> (job uid, task), for folding a session's binds.
        self.waiting: dict[str, tuple[str, TaskInfo]] = {}
        self.bound_jobs: dict[str, str] = {}  # the last session's bound pod keys -> job uid
        self.sessions = 0

    def _add(self, pods: Sequence[tuple[TracePod, int]]) -> None:
        from fumarole.daemon.study.runlog import pod_manifest

        objects: list[tuple[str, int, Obj]] = [("cluster", i, o) for i, o in enumerate(cluster_objects())]
        if self.arrival_order:
            objects.append(("cluster", len(objects), _queue_object(INFLATION_QUEUE)))
        objects += [("pods", i, pod_manifest(p, at_ms)) for i, (p, at_ms) in enumerate(pods)]
        part = build_snapshot(objects)
        for uid, job in part.jobs.items():
            if self.arrival_order:
                job.queue = INFLATION_QUEUE
                job.priority = 0
                job.status.phase = "Inqueue"
            self.snapshot.jobs[uid] = job
            for t in job.tasks.values():
                self.waiting[t.key] = (uid, t)

    def run(self, pods: Sequence[tuple[TracePod, int]], now_s: float) -> CoreStep:
        """Add `pods` (with their arrival times in ms) as pending, run one session at `now_s`,
        and keep its binds: the bound pods run on their nodes from now on."""
        self._add(pods)
        self.sessions += 1
        self.snapshot.now = now_s
        self.snapshot.session_id = f"study-{self.sessions}"
        result = run_session(self.snapshot, self.conf, explain=False, search=self.search)
        self._fold(result)
        return self._step(result)

    def _node(self, name: str) -> NodeInfo | None:
        """The snapshot's node `name`, replaced by a clone first: a node a session saw is never
        changed in place (model/node_derived.py: what sessions derived from it stays valid while
        the snapshot holds the same object)."""
        row = self.row_of.get(name)
        if row is None:
            return None
        node = self.snapshot.nodes[row].clone()
        self.snapshot.nodes[row] = node
        return node

    def _fold(self, result: SessionResult) -> None:
        """The session's decisions folded into the snapshot as `apply_result` folds them (the
        bound pods run on their nodes, PodGroup statuses), changed nodes replaced."""
        self.bound_jobs = {
            key: self.waiting[key][0]
            for key in result.bind_order
            if key in self.waiting and result.binds.get(key) is not None
        }
        if result.evictions:
            # Not with the study presets (no preempt or reclaim): the general fold.
            for ev in result.evictions:
                self._node(ev.node)
            for key in result.bind_order:
                node_name = result.binds.get(key)
                if node_name is not None:
                    self._node(node_name)
            apply_result(self.snapshot, result)
            self.waiting = {
                t.key: (uid, t)
                for uid, job in self.snapshot.jobs.items()
                for t in job.tasks.values()
                if t.status == TaskStatus.PENDING
            }
        else:
            replaced: dict[str, NodeInfo | None] = {}
            for key in result.bind_order:
                node_name = result.binds.get(key)
                hit = self.waiting.pop(key, None) if node_name is not None else None
                if node_name is None or hit is None:
                    continue
                node = replaced.get(node_name) if node_name in replaced else self._node(node_name)
                replaced[node_name] = node
                if node is None:
                    continue
                job_uid, task = hit
                run_bound(self.snapshot.jobs[job_uid], task, node, result.bind_annotations.get(key, {}))
            apply_podgroups(self.snapshot, result)

    def _step(self, result: SessionResult) -> CoreStep:
        placed: dict[str, Placement] = {}
        annotations: dict[str, dict[str, str]] = {}
        queues: dict[str, str] = {}
        prefix = f"{NAMESPACE}/"
        for key in result.bind_order:
            node = result.binds.get(key)
            if node is None or not key.startswith(prefix):
                continue
            name = key[len(prefix) :]
            ann = result.bind_annotations.get(key, {})
            placed[name] = Placement(self.rows[node], cards_of(node, ann.get(ASSIGNED_IDS, "")))
            annotations[name] = ann
            job_uid = self.bound_jobs.get(key)
            if job_uid is not None:
                queues[name] = self.snapshot.jobs[job_uid].queue
        return CoreStep(placed, annotations, queues)

    def drop_pending(self) -> list[str]:
        """Remove every pod still pending (inflation: a pod placed nowhere fails for good)."""
        gone: list[str] = []
        for uid in sorted(self.snapshot.jobs):
            job = self.snapshot.jobs[uid]
            if all(t.status == TaskStatus.PENDING for t in job.tasks.values()):
                gone.extend(t.name for t in job.tasks.values())
                for t in job.tasks.values():
                    self.waiting.pop(t.key, None)
                del self.snapshot.jobs[uid]
        return gone

    def finish(self, pod: TracePod) -> None:
        """The pod ran its course: it leaves its node and the cluster."""
        uid = f"{NAMESPACE}/podgroup-{NAMESPACE}-{pod.name}"
        job = self.snapshot.jobs.pop(uid)
        for t in list(job.tasks.values()):
            self.waiting.pop(t.key, None)
            row = self.row_of.get(t.node_name)
            if row is not None and t.uid in self.snapshot.nodes[row].tasks:
                node = self._node(t.node_name)
                assert node is not None
                node.remove_task(t)
