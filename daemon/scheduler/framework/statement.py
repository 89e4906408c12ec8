"""Statement: staged allocate / pipeline / evict operations with commit and discard (statement.go)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import Session
    from fumarole.daemon.scheduler.model.node import NodeInfo

EVICT = "evict"
PIPELINE = "pipeline"
ALLOCATE = "allocate"


@dataclass(slots=True)
class Operation:
    name: str
    task: TaskInfo
    reason: str = ""
    # Pipeline: the host and whether an eviction made room (kept for SaveOperations).
    node: str = ""
    eviction_occurred: bool = False


class Statement:
    """Operations take effect in the session at once; Commit sends binds/evictions out."""

    __slots__ = ("operations", "ssn")

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[Operation] = []

    # ----------------------------------------------------------------- staged operations
    def evict(self, task: TaskInfo, reason: str) -> None:
        ssn = self.ssn
        job = ssn.jobs.get(task.job)
        if job is not None:
            job.update_task_status(task, TaskStatus.RELEASING)
        node = ssn.nodes.get(task.node_name)
        if node is not None:
            node.update_task(task)
        ssn._fire_deallocate(task)
        self.operations.append(Operation(EVICT, task, reason))

    def pipeline(self, task: TaskInfo, node_name: str, eviction_occurred: bool = False) -> None:
        ssn = self.ssn
        job = ssn.job_of(task)
        job.update_task_status(task, TaskStatus.PIPELINED)
        task.node_name = node_name
        node = ssn.nodes.get(node_name)
        err: Exception | None = None
        try:
            if node is None:
                raise KeyError(f"failed to find node {node_name}")
            node.add_task(task)
        except Exception as e:  # Volcano still runs the handlers, then rolls back
            err = e
        handler_err = ssn._fire_allocate(task)
        err = err or handler_err
        if err is not None:
            self._unpipeline(task)
            raise err
        self.operations.append(Operation(PIPELINE, task, node=node_name, eviction_occurred=eviction_occurred))

    def allocate(self, task: TaskInfo, node: NodeInfo) -> None:
        ssn = self.ssn
        job = ssn.job_of(task)
        job.update_task_status(task, TaskStatus.ALLOCATED)
        task.node_name = node.name
        err: Exception | None = None
        try:
            node.add_task(task)
        except Exception as e:  # Volcano still runs the handlers, then rolls back
            err = e
        handler_err = ssn._fire_allocate(task)
        err = err or handler_err
        if err is not None:
            self._unallocate(task)
            raise err
        self.operations.append(Operation(ALLOCATE, task))

    # ----------------------------------------------------------------- undo helpers
    def _unevict(self, task: TaskInfo) -> None:
        ssn = self.ssn
        job = ssn.jobs.get(task.job)
        if job is not None:
            job.update_task_status(task, TaskStatus.RUNNING)
        node = ssn.nodes.get(task.node_name)
        if node is not None:
            node.update_task(task)
        ssn._fire_allocate(task)  # Volcano ignores a handler's error here

    def _unpipeline(self, task: TaskInfo) -> None:
        ssn = self.ssn
        job = ssn.jobs.get(task.job)
        if job is not None:
            job.update_task_status(task, TaskStatus.PENDING)
        node = ssn.nodes.get(task.node_name)
        if node is not None and task.uid in node.tasks:
            node.remove_task(task)
        ssn._fire_deallocate(task)
        task.node_name = ""

    _unallocate = _unpipeline

    def unpipeline(self, task: TaskInfo) -> None:
        self._unpipeline(task)

    # ----------------------------------------------------------------- outcome
    def discard(self) -> None:
        for op in reversed(self.operations):
            op.task.last_tx = (op.task.status, op.task.node_name)
            if op.name == EVICT:
                self._unevict(op.task)
            elif op.name == PIPELINE:
                self._unpipeline(op.task)
            else:
                self._unallocate(op.task)
        self.operations = []

    def commit(self) -> None:
        ssn = self.ssn
        for op in self.operations:
            op.task.last_tx = None
            if op.name == EVICT:
                ssn.record_eviction(op.task, op.reason)
            elif op.name == ALLOCATE:
                ssn.dispatch(op.task)
            # Pipelining never leaves the session.
        self.operations = []

    def merge(self, *others: Statement) -> None:
        for s in others:
            self.operations.extend(s.operations)
            s.operations = []

    def has_evictions(self) -> bool:
        return any(op.name == EVICT for op in self.operations)

    def recover_operations(self, plan: list[Operation]) -> None:
        """RecoverOperations: replay a saved plan (see `save_operations`) onto this statement.

        Saved operations name tasks by uid; the session's own task objects are used.  A failing
        pipeline or allocation raises (operations replayed before it stay applied, as in Volcano).
        """
        ssn = self.ssn
        for op in plan:
            job = ssn.jobs.get(op.task.job)
            task = job.tasks.get(op.task.uid) if job is not None else None
            if task is None:
                raise KeyError(f"task {op.task.key} is no longer in the session")
            if op.name == EVICT:
                self.evict(task, op.reason)
            elif op.name == PIPELINE:
                self.pipeline(task, op.node, op.eviction_occurred)
            else:
                node = ssn.nodes.get(op.node)
                if node is None:
                    raise KeyError(f"failed to find node {op.node}")
                self.allocate(task, node)


def save_operations(*stmts: Statement) -> list[Operation]:
    """SaveOperations: a detached copy of the statements' operations (tasks cloned, hosts kept)."""
    out: list[Operation] = []
    for st in stmts:
        for op in st.operations:
            node = op.node or op.task.node_name
            out.append(Operation(op.name, op.task.clone(), op.reason, node, op.eviction_occurred))
    return out
