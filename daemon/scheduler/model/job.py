"""Jobs (PodGroups with their tasks): status index, gang counters and Volcano's job-level helpers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from daemon.scheduler.model.fit import FitErrors
from daemon.scheduler.model.resources import Resource
from daemon.scheduler.model.task import (
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

    def comparable(self) -> tuple[object, ...]:
        """What decides whether the PodGroup must be written (transition ids/times ignored)."""
        conds = tuple((c.type, c.status, c.reason, c.message) for c in self.conditions)
        return (self.phase, conds, self.running, self.succeeded, self.failed)


class JobInfo:
    """A PodGroup and its tasks, indexed by status, as Volcano's JobInfo."""

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
        self.tasks: dict[str, TaskInfo] = {}
        self.index: dict[TaskStatus, dict[str, TaskInfo]] = {}
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

    # ----------------------------------------------------------------- membership
    def add_task(self, task: TaskInfo) -> None:
        if task.uid in self.tasks:
            self.only_added = False
        self.tasks[task.uid] = task
        self._index_add(task)
        self.total_request.add(task.resreq)

    def delete_task(self, task: TaskInfo) -> None:
        t = self.tasks.pop(task.uid, None)
        if t is None:
            return
        self.total_request.sub(t.resreq)
        self._index_del(t)

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
        b = self.index.get(status)
        return len(b) if b else 0

    def tasks_in(self, status: TaskStatus) -> list[TaskInfo]:
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
        c = self.count
        return self.ready_task_num() + c(TaskStatus.PIPELINED) + c(TaskStatus.PENDING)

    def allocated_task_num(self) -> int:
        return sum(self.count(s) for s in ALLOCATED_STATUSES)

    def scheduled_task_num(self) -> int:
        return sum(self.count(s) for s in SCHEDULED_STATUSES)

    def releasing_scheduled_task_num(self) -> int:
        return sum(1 for t in self.tasks_in(TaskStatus.RELEASING) if t.node_name)

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
            for t in self.index.get(st, {}).values():
                occupied[t.role] += 1
        if pending_best_effort:
            for t in self.index.get(TaskStatus.PENDING, {}).values():
                if t.best_effort:
                    occupied[t.role] += 1
        return occupied

    def _role_check_skipped(self) -> bool:
        return self.min_available < self.task_min_total

    def check_task_valid(self) -> bool:
        if self._role_check_skipped() or not self.task_min_available:
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
        for tid in self.nodes_fit_errors:
            t = self.tasks.get(tid)
            if t is not None:
                roles.add(t.role)
        return roles

    def task_has_fit_errors(self, task: TaskInfo) -> bool:
        if not task.role:
            return False
        return task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        if self.min_available == len(self.tasks):
            return False
        failed = self.fit_failed_roles()
        pending: Counter[str] = Counter(t.role for t in self.tasks_in(TaskStatus.PENDING))
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
        for status, bucket in self.index.items():
            reasons[status.label] += len(bucket)
        reasons["minAvailable"] = self.min_available
        head = "pod group is ready" if self.is_ready() else "pod group is not ready"
        parts = sorted(f"{v} {k}" for k, v in reasons.items())
        msg = f"{head}, {', '.join(parts)}"
        pend: Counter[str] = Counter()
        for t in self.tasks_in(TaskStatus.PENDING):
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
            for t in sorted(self.tasks.values(), key=lambda t: t.uid):
                fe = self.nodes_fit_errors.get(t.uid)
                if fe is not None:
                    msg += f". Origin reason is {t.name}: {fe.message()}"
                    break
        return msg

    # ----------------------------------------------------------------- copies
    def clone(self) -> JobInfo:
        j = JobInfo.__new__(JobInfo)
        j.__dict__.update(self.__dict__)
        j.task_min_available = dict(self.task_min_available)
        j.status = self.status.clone()
        j.annotations = dict(self.annotations)
        j.tasks = {}
        j.index = {}
        j.allocated = Resource()
        j.total_request = Resource()
        j.pending_best_effort = 0
        j.ready_count = 0
        j.nodes_fit_errors = {}
        j.job_fit_errors = ""
        j.only_added = True
        if not self.only_added:
            for t in self.tasks.values():
                j.add_task(t.clone())
            return j
        # Same state as adding the clones in order (see `only_added`), without the arithmetic.
        tasks = j.tasks
        index = j.index
        for uid, t in self.tasks.items():
            c = t.clone()
            tasks[uid] = c
            bucket = index.get(c.status)
            if bucket is None:
                index[c.status] = bucket = {}
            bucket[c.uid] = c
        j.allocated = self.allocated.clone()
        j.total_request = self.total_request.clone()
        j.pending_best_effort = self.pending_best_effort
        j.ready_count = self.ready_count
        return j

    def __repr__(self) -> str:
        return f"Job({self.uid} queue={self.queue} phase={self.status.phase} min={self.min_available})"
