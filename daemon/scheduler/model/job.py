"""Jobs (PodGroups with their tasks): status index, gang counters and Volcano's job-level helpers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fumarole.daemon.scheduler.model.fit import FitErrors
from fumarole.daemon.scheduler.model.hypernode import NetworkTopology
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import (
    ALLOCATED_STATUSES,
    SCHEDULED_STATUSES,
    TaskInfo,
    TaskStatus,
)

PHASE_PENDING = "Pending"
PHASE_INQUEUE = "Inqueue"
PHASE_RUNNING = "Running"
PHASE_UNKNOWN = "Unknown"
PHASE_COMPLETED = "Completed"

_EMPTY: Mapping[str, TaskInfo] = {}

_READY_SET = frozenset(
    {TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.SUCCEEDED}
)


@dataclass(slots=True)
class Condition:
    type: str
    status: str = "True"
    reason: str = ""
    message: str = ""
    transition_id: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}


@dataclass(slots=True)
class PodGroupStatus:
    phase: str = ""
    conditions: list[Condition] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    def clone(self) -> PodGroupStatus:
        return PodGroupStatus(
            self.phase,
            [Condition(c.type, c.status, c.reason, c.message, c.transition_id) for c in self.conditions],
            self.running,
            self.succeeded,
            self.failed,
        )

    def shared_copy(self) -> PodGroupStatus:
        """A copy whose condition list is its own but whose Condition objects are shared (they are
        never changed in place: a new condition replaces the old one in the list)."""
        return PodGroupStatus(self.phase, list(self.conditions), self.running, self.succeeded, self.failed)

    def same_as(self, other: PodGroupStatus) -> bool:
        """`comparable() == other.comparable()`, without building the tuples."""
        if (
            self.phase != other.phase
            or self.running != other.running
            or self.succeeded != other.succeeded
            or self.failed != other.failed
            or len(self.conditions) != len(other.conditions)
        ):
            return False
        for a, b in zip(self.conditions, other.conditions, strict=True):
            if a is not b and (
                a.type != b.type or a.status != b.status or a.reason != b.reason or a.message != b.message
            ):
                return False
        return True

    def comparable(self) -> tuple[object, ...]:
        """What decides whether the PodGroup must be written (transition ids/times ignored)."""
        conds = tuple((c.type, c.status, c.reason, c.message) for c in self.conditions)
        return (self.phase, conds, self.running, self.succeeded, self.failed)


class JobInfo:
    """A PodGroup and its tasks, indexed by status, as Volcano's JobInfo.

    Copy-on-write (`cow_clone`, what a session opens with): the copy shares the original's task
    dict, status index and sums until the first access to `tasks` or `index` (which hands out
    tasks or changes them), which gives it its own clones (`_materialise`).  `_tasks` and
    `_index` always name the current ones (shared or own): the read-only helpers read them, so
    counting never copies.  `peek_tasks` / `peek_in` hand them out read-only.
    """

    def __init__(
        self,
        *,
        uid: str,
        name: str,
        namespace: str,
        queue: str,
        min_available: int = 0,
        task_min_available: dict[str, int] | None = None,
        priority: int = 0,
        priority_class_name: str = "",
        min_resources: Resource | None = None,
        phase: str = "",
        creation: float = 0.0,
        annotations: dict[str, str] | None = None,
        preemptable: bool = False,
        has_pod_group: bool = True,
        network_topology: NetworkTopology | None = None,
    ) -> None:
        self.uid = uid
        self.name = name
        self.namespace = namespace
        self.queue = queue
        self.min_available = min_available
        self.task_min_available: dict[str, int] = dict(task_min_available or {})
        self.task_min_total = sum(self.task_min_available.values())
        self.priority = priority
        self.priority_class_name = priority_class_name
        self.min_resources = min_resources
        self.status = PodGroupStatus(phase=phase)
        self.creation = creation
        self.annotations: dict[str, str] = dict(annotations or {})
        self.preemptable = preemptable
        self.has_pod_group = has_pod_group
        # spec.networkTopology (None: none); a session adjusts its own copy's (tier names, soft).
        self.network_topology = network_topology
        # The HyperNode the job's placed tasks are in (a session's: recovered at open).
        self.allocated_hypernode = ""
        # The same for the job's one sub-job (all its tasks); allocate moves it during a turn.
        self.subjob_allocated_hypernode = ""
        self.tasks: dict[str, TaskInfo] = {}
        self.index: dict[TaskStatus, dict[str, TaskInfo]] = {}
        # The current task dict and status index: the same objects as `tasks` / `index`, or (in an
        # unmaterialised copy-on-write clone, which has neither) the original's, read-only.
        self._tasks = self.tasks
        self._index = self.index
        # Scalar resource names of the tasks' requests (None: recompute from `_tasks`).
        self._scalar_dims: frozenset[str] | None = frozenset()
        self.allocated = Resource()
        self.total_request = Resource()
        self.pending_best_effort = 0
        # Tasks in the ready statuses (Bound, Binding, Running, Allocated, Succeeded), kept by
        # _index_add/_index_del: gang's job order and readiness read it for every comparison.
        self.ready_count = 0
        self.nodes_fit_errors: dict[str, FitErrors] = {}
        self.job_fit_errors = ""
        self.schedule_start: float | None = None
        # True while tasks were only ever added (never removed nor moved between statuses): then
        # `allocated`, `total_request` and `index` are exactly what adding the tasks again in
        # order gives, and `clone` copies them instead of recomputing.
        self.only_added = True
        # The snapshot JobInfo this unmaterialised copy-on-write clone shares its tasks with (None
        # once materialised, and for any other job): while set, everything derived from the
        # tasks and the fixed fields equals the origin's (framework/job_memo.py relies on it).
        self.cow_origin: JobInfo | None = None

    # ----------------------------------------------------------------- copy-on-write
    if not TYPE_CHECKING:  # (hidden from mypy, which would let any attribute name pass)

        def __getattr__(self, name: str) -> Any:
            """Only reached for `tasks` / `index` of an unmaterialised clone: materialise it."""
            if name == "tasks" or name == "index":
                self._materialise()
                return self.__dict__[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def materialised(self) -> bool:
        """Whether this job has its own tasks (an unmaterialised clone still shares them)."""
        return "tasks" in self.__dict__

    def _materialise(self) -> None:
        """Own clones of the shared tasks, index and sums: what `clone` gives, taken now.

        Only `cow_clone` of an `only_added` job leaves a job unmaterialised, and nothing wrote
        to it since (every writer goes through `tasks` / `index` first), so copying the sums
        and filling the index in task order is exactly `clone`'s fast path.
        """
        d = self.__dict__
        tasks, index = _cloned_in_order(self._tasks)
        d["tasks"] = d["_tasks"] = tasks
        d["index"] = d["_index"] = index
        d["cow_origin"] = None
        d["allocated"] = self.allocated.clone()
        d["total_request"] = self.total_request.clone()

    def peek_tasks(self) -> Mapping[str, TaskInfo]:
        """The tasks by uid, read-only: neither change them nor keep them past the call.

        Never copies (an unmaterialised clone hands out the original's tasks, equal in value).
        """
        return self._tasks

    def peek_in(self, status: TaskStatus) -> Mapping[str, TaskInfo]:
        """The tasks in `status` by uid, in `tasks_in` order, read-only (see `peek_tasks`)."""
        return self._index.get(status) or _EMPTY

    def peek_index(self) -> Mapping[TaskStatus, Mapping[str, TaskInfo]]:
        """The status index, read-only (see `peek_tasks`)."""
        return self._index

    def task_num(self) -> int:
        """len(tasks), without copying."""
        return len(self._tasks)

    def scalar_dims(self) -> frozenset[str]:
        """The scalar resource names the tasks request (the session's node table columns)."""
        dims = self._scalar_dims
        if dims is None:
            found: set[str] = set()
            for t in self._tasks.values():
                if t.resreq.scalars:
                    found.update(t.resreq.scalars)
            dims = self.__dict__["_scalar_dims"] = frozenset(found)
        return dims

    # ----------------------------------------------------------------- membership
    def add_task(self, task: TaskInfo) -> None:
        tasks = self.tasks
        if task.uid in tasks:
            self.only_added = False
            self._scalar_dims = None
        tasks[task.uid] = task
        self._index_add(task)
        self.total_request.add(task.resreq)
        scalars = task.resreq.scalars
        if scalars and self._scalar_dims is not None and not self._scalar_dims.issuperset(scalars):
            self._scalar_dims = self._scalar_dims.union(scalars)

    def delete_task(self, task: TaskInfo) -> None:
        t = self.tasks.pop(task.uid, None)
        if t is None:
            return
        self.total_request.sub(t.resreq)
        self._index_del(t)
        if t.resreq.scalars:
            self._scalar_dims = None

    def _index_add(self, task: TaskInfo) -> None:
        bucket = self.index.setdefault(task.status, {})
        if task.status in _READY_SET and task.uid not in bucket:
            self.ready_count += 1
        bucket[task.uid] = task
        if task.status in ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)
        elif task.status is TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort += 1

    def _index_del(self, task: TaskInfo) -> None:
        self.only_added = False
        bucket = self.index.get(task.status)
        if bucket is not None:
            if bucket.pop(task.uid, None) is not None and task.status in _READY_SET:
                self.ready_count -= 1
            if not bucket:
                del self.index[task.status]
        if task.status in ALLOCATED_STATUSES:
            self.allocated.sub(task.resreq)
        elif task.status is TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort -= 1

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        self._index_del(task)
        task.status = status
        self._index_add(task)

    # ----------------------------------------------------------------- counters
    def count(self, status: TaskStatus) -> int:
        b = self._index.get(status)
        return len(b) if b else 0

    def tasks_in(self, status: TaskStatus) -> list[TaskInfo]:
        """The tasks in `status` (the session's own: materialises the job unless there are none)."""
        if not self._index.get(status):
            return []
        b = self.index.get(status)
        return list(b.values()) if b else []

    def ready_task_num(self) -> int:
        """Tasks Bound, Binding, Running, Allocated or Succeeded."""
        return self.ready_count

    def waiting_task_num(self) -> int:
        return self.count(TaskStatus.PIPELINED)

    def pending_best_effort_task_num(self) -> int:
        return self.pending_best_effort

    def valid_task_num(self) -> int:
        index = self._index
        pipelined = index.get(TaskStatus.PIPELINED)
        pending = index.get(TaskStatus.PENDING)
        return self.ready_count + (len(pipelined) if pipelined else 0) + (len(pending) if pending else 0)

    def allocated_task_num(self) -> int:
        return sum(self.count(s) for s in ALLOCATED_STATUSES)

    def scheduled_task_num(self) -> int:
        return sum(self.count(s) for s in SCHEDULED_STATUSES)

    def releasing_scheduled_task_num(self) -> int:
        return sum(1 for t in self.peek_in(TaskStatus.RELEASING).values() if t.node_name)

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort >= self.min_available

    def is_pipelined(self) -> bool:
        return (
            self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort >= self.min_available
        )

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def is_pending(self) -> bool:
        return not self.has_pod_group or self.status.phase in ("", PHASE_PENDING)

    def has_pending_tasks(self) -> bool:
        return self.count(TaskStatus.PENDING) > 0

    # ----------------------------------------------------------------- per-role checks
    def _roles(
        self, statuses: frozenset[TaskStatus] | set[TaskStatus], pending_best_effort: bool
    ) -> Counter[str]:
        occupied: Counter[str] = Counter()
        for st in statuses:
            for t in self.peek_in(st).values():
                occupied[t.role] += 1
        if pending_best_effort:
            for t in self.peek_in(TaskStatus.PENDING).values():
                if t.best_effort:
                    occupied[t.role] += 1
        return occupied

    def _role_check_skipped(self) -> bool:
        return self.min_available < self.task_min_total

    def check_task_valid(self) -> bool:
        if not self.task_min_available or self.min_available < self.task_min_total:
            return True
        sts = set(ALLOCATED_STATUSES) | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING}
        actual = self._roles(sts, False)
        return all(m == 0 or actual.get(r, 0) >= m for r, m in self.task_min_available.items())

    def job_allocated_roles(self) -> Counter[str]:
        return self._roles(set(ALLOCATED_STATUSES) | {TaskStatus.SUCCEEDED}, True)

    def check_task_ready(self) -> bool:
        if self._role_check_skipped() or not self.task_min_available:
            return True
        occ = self.job_allocated_roles()
        return all(occ.get(r, 0) >= m for r, m in self.task_min_available.items())

    def check_task_pipelined(self) -> bool:
        if self._role_check_skipped() or not self.task_min_available:
            return True
        occ = self._roles(set(ALLOCATED_STATUSES) | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED}, True)
        return all(occ.get(r, 0) >= m for r, m in self.task_min_available.items())

    def check_task_starving(self) -> bool:
        if self._role_check_skipped():
            return True
        if not self.task_min_available:
            return False
        occ = self._roles(set(ALLOCATED_STATUSES) | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED}, False)
        return any(occ.get(r, 0) < m for r, m in self.task_min_available.items())

    # ----------------------------------------------------------------- fit errors
    def fit_failed_roles(self) -> set[str]:
        roles = set()
        tasks = self._tasks
        for tid in self.nodes_fit_errors:
            t = tasks.get(tid)
            if t is not None:
                roles.add(t.role)
        return roles

    def task_has_fit_errors(self, task: TaskInfo) -> bool:
        if not task.role:
            return False
        return task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        if self.min_available == len(self._tasks):
            return False
        failed = self.fit_failed_roles()
        pending: Counter[str] = Counter(t.role for t in self.peek_in(TaskStatus.PENDING).values())
        if self.min_available < self.task_min_total:
            left = sum(cnt for role, cnt in pending.items() if role not in failed)
            return self.ready_task_num() + left >= self.min_available
        allocated = self.job_allocated_roles()
        for role in failed:
            m = self.task_min_available.get(role, 0)
            if m == 0:
                continue
            if allocated.get(role, 0) < m:
                return False
        return True

    def fit_error(self) -> str:
        """Job-level FitError() text (api/job_info.go)."""
        reasons: Counter[str] = Counter()
        for status, bucket in self._index.items():
            reasons[status.label] += len(bucket)
        reasons["minAvailable"] = self.min_available
        head = "pod group is ready" if self.is_ready() else "pod group is not ready"
        parts = sorted(f"{v} {k}" for k, v in reasons.items())
        msg = f"{head}, {', '.join(parts)}"
        pend: Counter[str] = Counter()
        for t in self.peek_in(TaskStatus.PENDING).values():
            st = t.last_tx[0] if t.last_tx is not None else t.status
            if st is TaskStatus.ALLOCATED:
                pend["Schedulable"] += 1
            elif st in (TaskStatus.PENDING, TaskStatus.PIPELINED):
                pend["Unschedulable"] += 1
            else:
                pend[st.label] += 1
        if pend:
            msg += "; Pending: " + ", ".join(sorted(f"{v} {k}" for k, v in pend.items()))
        if self.job_fit_errors:
            msg += f". Origin reason is: {self.job_fit_errors}"
        else:
            for t in sorted(self._tasks.values(), key=lambda t: t.uid):
                fe = self.nodes_fit_errors.get(t.uid)
                if fe is not None:
                    msg += f". Origin reason is {t.name}: {fe.message()}"
                    break
        return msg

    # ----------------------------------------------------------------- copies
    def cow_clone(self) -> JobInfo:
        """A copy for a session: shares the tasks, index and sums until first use (class docstring).

        The original must not change while the copy is in use (a frozen snapshot's jobs never do).
        A job whose tasks were ever removed or moved is cloned whole (`clone`), as it always was.
        """
        if not self.only_added and self.materialised:
            return self.clone()
        j = JobInfo.__new__(JobInfo)
        d = self.__dict__.copy()  # (one dict copy: cheaper than filling the new object's)
        d.pop("tasks", None)
        d.pop("index", None)
        d["status"] = self.status.shared_copy()
        d["nodes_fit_errors"] = {}
        d["job_fit_errors"] = ""
        d["only_added"] = True
        d["cow_origin"] = self
        j.__dict__ = d
        return j

    def clone(self) -> JobInfo:
        """A whole, independent copy (every task cloned now)."""
        j = JobInfo.__new__(JobInfo)
        j.__dict__.update(self.__dict__)
        j.task_min_available = dict(self.task_min_available)
        j.status = self.status.clone()
        j.annotations = dict(self.annotations)
        j.tasks = j._tasks = {}
        j.index = j._index = {}
        j.allocated = Resource()
        j.total_request = Resource()
        j.pending_best_effort = 0
        j.ready_count = 0
        j.nodes_fit_errors = {}
        j.job_fit_errors = ""
        j.only_added = True
        j.cow_origin = None
        j._scalar_dims = frozenset()
        if not self.only_added:
            for t in self._tasks.values():
                j.add_task(t.clone())
            return j
        # Same state as adding the clones in order (see `only_added`), without the arithmetic.
        j.tasks, j.index = _cloned_in_order(self._tasks)
        j._tasks, j._index = j.tasks, j.index
        j.allocated = self.allocated.clone()
        j.total_request = self.total_request.clone()
        j.pending_best_effort = self.pending_best_effort
        j.ready_count = self.ready_count
        j._scalar_dims = self._scalar_dims
        return j

    def __repr__(self) -> str:
        return f"Job({self.uid} queue={self.queue} phase={self.status.phase} min={self.min_available})"


def _cloned_in_order(
    tasks: dict[str, TaskInfo],
) -> tuple[dict[str, TaskInfo], dict[TaskStatus, dict[str, TaskInfo]]]:
    """Clones of `tasks` and their status index, filled in task order (what adding them gives)."""
    out: dict[str, TaskInfo] = {}
    index: dict[TaskStatus, dict[str, TaskInfo]] = {}
    for uid, t in tasks.items():
        c = t.clone()
        out[uid] = c
        bucket = index.get(c.status)
        if bucket is None:
            index[c.status] = bucket = {}
        bucket[uid] = c
    return out, index
