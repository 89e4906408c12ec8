"""The Session: cluster state for one cycle, plugin registration and Volcano's session operations.

Extension-point combinators (how tiers and plugins vote) live in `combinators.py`; the
Statement (staged operations) in `statement.py`; PodGroup status written at close in
`close.py`.  A session never reads the wall clock: `now` comes from the snapshot.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from fumarole.daemon.scheduler.framework.callout import CalloutPort, NoPort
from fumarole.daemon.scheduler.framework.combinators import Combinators
from fumarole.daemon.scheduler.framework.conf import PluginOption, SchedulerConf, Tier
from fumarole.daemon.scheduler.framework.job_memo import open_job_memo
from fumarole.daemon.scheduler.framework.nodetable import IntArray, NodeTable
from fumarole.daemon.scheduler.framework.topology import open_network_topologies
from fumarole.daemon.scheduler.model.hypernode import Topology
from fumarole.daemon.scheduler.model.job import PHASE_INQUEUE, PHASE_PENDING, JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.queue import NamespaceInfo, PriorityClassInfo, QueueInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

K = TypeVar("K")

# The name under which JobStarving's answers are kept across sessions (`NodeDerived.jobs`).
STARVING_MEMO = "job_starving"


class SessionError(RuntimeError):
    """An operation the session cannot perform (unknown job or node, accounting conflict)."""


class EventError(SessionError):
    """An allocate event handler's failure (Volcano's `Event.Err`), e.g. no card for a vGPU pod."""


@dataclass(slots=True)
class EventHandler:
    """A plugin's AllocateFunc / DeallocateFunc.

    `allocate` may answer an error (Volcano's handler setting `Event.Err`): the Statement's
    Pipeline and Allocate then roll the operation back and fail; the session's own Allocate and
    Pipeline and a Statement's unevict ignore it, as Volcano's do.  Every handler runs either way.
    """

    allocate: Callable[[TaskInfo], Exception | None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None


@dataclass(slots=True)
class Eviction:
    """One eviction that left the session, with its cause."""

    task: str
    node: str
    action: str
    reason: str


class CycleState(dict[str, Any]):
    """A task's cycle state (k8s CycleState): per-plugin data written by PrePredicate callbacks.

    `clone()` copies each entry through its own `clone()` when it has one, so a dry run on a
    clone (topology-aware preemption) never disturbs the original.
    """

    def clone(self) -> CycleState:
        out = CycleState()
        for k, v in self.items():
            c = getattr(v, "clone", None)
            out[k] = c() if callable(c) else v
        return out


@dataclass(slots=True)
class CallbackStats:
    """Per (plugin, extension point) call counts and seconds, for the action span."""

    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    seconds: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))


class Session(Combinators):
    """One scheduling cycle over a private copy of the snapshot."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        conf: SchedulerConf,
        *,
        measure_callbacks: bool = False,
        whole_copy: bool = False,
    ) -> None:
        # What earlier sessions derived from the snapshot's (unchanged) nodes: model/node_derived.py.
        kept = snapshot.derived if snapshot.derived is not None else NodeDerived()
        self.derived = kept.open(snapshot.nodes)
        # Per-job figures earlier sessions derived from the snapshot's JobInfo objects, by
        # component; None: the snapshot's owner did not promise to replace changed jobs.
        self.kept_jobs: dict[str, Any] | None = kept.jobs
        self.starving_memo = open_job_memo(self.kept_jobs, STARVING_MEMO, conf)
        # Copy-on-write (ClusterSnapshot.clone_without_jobs, JobInfo.cow_clone below): opening
        # costs what the session touches; the snapshot is never written to.  Node copies nothing
        # changed are the session before's (NodeDerived.session_copies).  `whole_copy` clones
        # every task now instead (the reference the tests compare against).
        if whole_copy:
            snap = snapshot.deep_clone()
        else:
            snap = snapshot.clone_without_jobs(kept.session_copies(self.derived, snapshot.nodes))
        self.uid = snap.session_id
        self._now = snap.now
        # Whether anything read `now` (a session that never did decides the same at any now).
        self.now_read = False
        self.conf = conf
        self.tiers: list[Tier] = conf.tiers
        self.configured_actions = frozenset(conf.actions)
        self.queues: dict[str, QueueInfo] = snap.queues
        self.namespaces: dict[str, NamespaceInfo] = snap.namespaces
        self.priority_classes: dict[str, PriorityClassInfo] = snap.priority_classes
        self.node_list: list[NodeInfo] = snap.nodes
        self.nodes: dict[str, NodeInfo] = {n.name: n for n in snap.nodes}
        self.total_resource = kept.total_allocatable(self.derived, snapshot.nodes)
        # The session's jobs, in uid order, copy-on-write clones (whole ones with `whole_copy`).
        # Volcano drops jobs without a PodGroup or whose queue does not exist; the scalar
        # resource names the kept jobs request become node table columns.
        jobs: dict[str, JobInfo] = {}
        extra_dims: set[str] = set()
        queues = self.queues
        source = snap.jobs if whole_copy else snapshot.jobs
        job_queues: dict[str, None] = {}
        with_work: list[JobInfo] = []
        topo_jobs: list[JobInfo] = []
        pending_s, pipelined_s = TaskStatus.PENDING, TaskStatus.PIPELINED
        for uid in sorted(source):
            job = source[uid]
            if not job.has_pod_group or job.queue not in queues:
                continue
            if not whole_copy:
                job = job.cow_clone()
            jobs[uid] = job
            job_queues[job.queue] = None
            index = job.peek_index()
            if whole_copy or index.get(pending_s) or index.get(pipelined_s) or job.is_pending():
                with_work.append(job)
            dims = job.scalar_dims()
            if dims:
                extra_dims.update(dims)
            if job.network_topology is not None:
                topo_jobs.append(job)
        self.jobs = jobs
        # The queues of the jobs, in the order of each queue's first job (uid order).
        self.job_queues: list[str] = list(job_queues)
        # The jobs that had, at open, a task Pending or Pipelined, or were pending themselves
        # (phase "" or Pending), in uid order: the only jobs enqueue, allocate and backfill can
        # act on, as no task becomes Pending during a session unless it was Pending (or
        # Pipelined) at open, and no job becomes pending.  Those actions pass over these instead
        # of every job of the cluster.  `whole_copy` (the reference the tests compare against)
        # lists every job.
        self.jobs_with_work: list[JobInfo] = with_work
        # The snapshot's own jobs (read-only): close compares their PodGroup status with the new one.
        self.snapshot_jobs: Mapping[str, JobInfo] = snapshot.jobs
        self.table = NodeTable(self.node_list, extra_dims, self.derived)
        # The plugins opened for this session, by name (run.py fills it).  Their contract,
        # framework/plugin.py, depends on this module; the session needs nothing of it.
        self.plugins: dict[str, object] = {}
        self.fns: dict[str, dict[str, Any]] = defaultdict(dict)
        self.batch_fns: dict[str, dict[str, Any]] = defaultdict(dict)
        self.event_handlers: list[EventHandler] = []
        self.stats = CallbackStats()
        self.measure_callbacks = measure_callbacks
        # Outputs.
        self.binds: dict[str, str] = {}
        self.bind_order: list[str] = []
        self.evictions: list[Eviction] = []
        self.current_action = ""
        # Why enqueue (or a plugin's JobEnqueueable) turned a job away: job uid -> message.
        self.enqueue_rejections: dict[str, str] = {}
        # Why an action passed over a task without trying nodes: task uid -> message.
        self.skip_reasons: dict[str, str] = {}
        self.eviction_cause = ""
        # Per-task cycle states (ssn.GetCycleState), created on first use.
        self.cycle_states: dict[str, CycleState] = {}
        # Shared across actions, as Volcano's package-level lastProcessedNodeIndex.
        self.last_processed_node_index = 0
        self.warnings: list[str] = list(conf.warnings)
        # The search's tie seed (SearchOptions.tie_seed, framework/ties.py), for plugins that draw
        # seeded choices of their own (the paper-random plugin's card); None when not seeded.
        self.tie_seed: int | None = None
        # How plugins ask outside services (framework/callout.py); run_session installs the
        # caller's port (live, recording or replaying); by default every call fails.
        self.callouts: CalloutPort = NoPort()
        # The workload the fgd plugin judges fragmentation against (SearchOptions.typical_shapes,
        # fgd_fragmentation.PodShape values); None: the session's tasks.
        self.typical_shapes: tuple[Any, ...] | None = None
        self._pc_cache: dict[str, PluginOption] = {}
        # HyperNodes (framework/topology.py): the specs, resolved on first use; jobs with a
        # network topology have it adjusted and their allocated HyperNode recovered now.
        self.hypernode_specs = snap.hypernodes
        # Node usage from the metrics source and the previous session's now (usage, rescheduling).
        self.node_usage = snap.node_usage
        self.previous_now = snap.previous_now
        # Numatopology objects by node name (read by numa-aware).
        self.numatopologies = snap.numatopologies
        self.hypernode_topology: Topology | None = None
        # Why allocate's HyperNode search found no place for a job: job uid -> message.
        self.topology_reasons: dict[str, str] = {}
        # task uid -> its job's allocated HyperNode as allocate last saw it (JobAllocatedHyperNode).
        self.task_allocated_hypernode: dict[str, str] = {}
        if topo_jobs:
            open_network_topologies(self, topo_jobs)

    @property
    def now(self) -> float:
        """The snapshot's virtual now (seconds); reading it is recorded in `now_read`."""
        self.now_read = True
        return self._now

    def stamp_now(self) -> float:
        """`now` for a value that is recorded but never decided on (enqueue's schedule_start).

        Not counted in `now_read`: nothing in a session reads JobInfo.schedule_start back.
        """
        return self._now

    # ----------------------------------------------------------------- registration
    def register(self, point: str, plugin: str, fn: Any, batch: Any = None) -> None:
        """Register a callback of `plugin` for extension point `point` (Volcano's AddXxxFn)."""
        if self.measure_callbacks:
            fn = self._measured(plugin, point, fn)
            if batch is not None:
                batch = self._measured(plugin, point, batch)
        self.fns[point][plugin] = fn
        if batch is not None:
            self.batch_fns[point][plugin] = batch

    def _measured(self, plugin: str, point: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        stats = self.stats
        key = (plugin, point)
        perf = time.perf_counter

        def wrapper(*args: Any) -> Any:
            t0 = perf()
            try:
                return fn(*args)
            finally:
                stats.calls[key] += 1
                stats.seconds[key] += perf() - t0

        return wrapper

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)

    # ----------------------------------------------------------------- lookups
    def job_of(self, task: TaskInfo) -> JobInfo:
        job = self.jobs.get(task.job)
        if job is None:
            raise SessionError(f"failed to find job {task.job} of task {task.key}")
        return job

    def cycle_state(self, task_uid: str) -> CycleState:
        """The task's cycle state, created empty on first use (GetCycleState)."""
        state = self.cycle_states.get(task_uid)
        if state is None:
            state = self.cycle_states[task_uid] = CycleState()
        return state

    def kept_state(self, name: str, kind: type[K]) -> K | None:
        """What component `name` keeps across sessions in `kept_jobs` (a new `kind()` the first
        time, or when something else is stored there); None when the snapshot's owner keeps
        nothing.  The component drops it (`forget_kept`) when it cannot be used."""
        store = self.kept_jobs
        if store is None:
            return None
        state = store.get(name)
        if not isinstance(state, kind):
            state = store[name] = kind()
        return state

    def forget_kept(self, name: str) -> None:
        """Drop what component `name` keeps across sessions (the next session starts afresh)."""
        if self.kept_jobs is not None:
            self.kept_jobs.pop(name, None)

    def priority_of_class(self, name: str) -> int | None:
        pc = self.priority_classes.get(name)
        return pc.value if pc is not None else None

    # ----------------------------------------------------------------- immediate operations
    def _fire_allocate(self, task: TaskInfo) -> Exception | None:
        """Run every allocate handler; the first error one answered (None: all succeeded)."""
        first: Exception | None = None
        for eh in self.event_handlers:
            if eh.allocate is not None:
                err = eh.allocate(task)
                if err is not None and first is None:
                    first = err
        return first

    def _fire_deallocate(self, task: TaskInfo) -> None:
        for eh in self.event_handlers:
            if eh.deallocate is not None:
                eh.deallocate(task)

    def allocate(self, task: TaskInfo, node: NodeInfo) -> None:
        """ssn.Allocate (used by backfill): allocate now; dispatch the job's allocated tasks once ready."""
        job = self.job_of(task)
        job.update_task_status(task, TaskStatus.ALLOCATED)
        task.node_name = node.name
        node.add_task(task)
        self._fire_allocate(task)
        if self.job_ready(job):
            for t in job.tasks_in(TaskStatus.ALLOCATED):
                self.dispatch(t)

    def pipeline(self, task: TaskInfo, node_name: str) -> None:
        job = self.job_of(task)
        job.update_task_status(task, TaskStatus.PIPELINED)
        task.node_name = node_name
        node = self.nodes.get(node_name)
        if node is None:
            raise SessionError(f"failed to find node {node_name}")
        node.add_task(task)
        self._fire_allocate(task)

    def dispatch(self, task: TaskInfo) -> None:
        """Hand a task to the binder: record the bind and mark it Binding."""
        job = self.job_of(task)
        self.binds[task.key] = task.node_name
        self.bind_order.append(task.key)
        job.update_task_status(task, TaskStatus.BINDING)

    def evict(self, task: TaskInfo, reason: str) -> None:
        """ssn.Evict (used by shuffle): evict immediately, no statement."""
        self.record_eviction(task, reason)
        job = self.job_of(task)
        job.update_task_status(task, TaskStatus.RELEASING)
        node = self.nodes.get(task.node_name)
        if node is not None:
            node.update_task(task)
        self._fire_deallocate(task)

    def record_eviction(self, task: TaskInfo, reason: str) -> None:
        self.evictions.append(Eviction(task.key, task.node_name, self.current_action, reason))

    # ----------------------------------------------------------------- helpers for actions
    def promote_pending(self, job: JobInfo) -> None:
        if job.status.phase in ("", PHASE_PENDING):
            job.status.phase = PHASE_INQUEUE

    def plugin_option(self, name: str) -> PluginOption | None:
        """The first configured entry of a plugin (tiers in order)."""
        if name in self._pc_cache:
            return self._pc_cache[name]
        for tier in self.tiers:
            for p in tier.plugins:
                if p.name == name:
                    self._pc_cache[name] = p
                    return p
        return None

    def node_list_ref(self) -> list[NodeInfo]:
        return self.node_list

    def table_rows(self, nodes: list[NodeInfo]) -> IntArray:
        return np.asarray([n.index for n in nodes], dtype=np.int64)
