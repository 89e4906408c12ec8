"""Nodes: allocatable, idle/used/releasing/pipelined accounting and the tasks placed on them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fumarole.daemon.scheduler.model.resources import PODS, Resource
from fumarole.daemon.scheduler.model.task import Taint, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class NodeError(Exception):
    """A task cannot be added to or removed from a node."""


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """Node manifest facts read by predicates and scores."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    images: dict[str, int] = field(default_factory=dict)


class NodeInfo:
    """Volcano's NodeInfo: FutureIdle = Idle + Releasing - Pipelined.

    Copy-on-write (`cow_clone`, what a session opens with): the copy shares the original's task
    dict (`_src`) until `add_task` / `remove_task` gives it its own (a shallow copy: the
    original's task objects stay shared, the added ones are the copy's own), and the original's
    task objects until the first access to `tasks` (which hands them out) clones those still
    shared (`__getattr__`); `_tasks` always names the current dict (read by `pod_count` and
    `peek_tasks`).  The accounting vectors (idle, used, releasing, pipelined) are shared until
    the first `add_task` / `remove_task`, the only writers, copies them (`_owns_accounting`).
    """

    __slots__ = (
        "_owns_accounting",
        "_src",
        "_tasks",
        "allocatable",
        "capability",
        "facts",
        "idle",
        "index",
        "max_task_num",
        "name",
        "on_change",
        "pipelined",
        "releasing",
        "tasks",
        "used",
    )

    def __init__(
        self,
        name: str,
        allocatable: Resource,
        capability: Resource | None = None,
        facts: NodeFacts | None = None,
    ) -> None:
        self.name = name
        self.allocatable = allocatable
        self.capability = capability if capability is not None else allocatable.clone()
        self.facts = facts if facts is not None else NodeFacts()
        self.idle = allocatable.clone()
        self.used = Resource()
        self.releasing = Resource()
        self.pipelined = Resource()
        self.max_task_num = int(allocatable.scalars.get(PODS, 0))
        self.tasks: dict[str, TaskInfo] = {}
        self._tasks = self.tasks
        # The original's task dict while this copy-on-write copy may still share task objects.
        self._src: dict[str, TaskInfo] | None = None
        self._owns_accounting = True
        self.index = -1
        # Set by the session's node table to mirror accounting into its arrays.
        self.on_change: Callable[[NodeInfo], None] | None = None

    # ----------------------------------------------------------------- copy-on-write
    if not TYPE_CHECKING:  # (hidden from mypy, which would let any attribute name pass)

        def __getattr__(self, name: str) -> Any:
            """Only reached for `tasks` of an unmaterialised clone (an unset slot): materialise."""
            if name == "tasks":
                src = self._src if self._src is not None else {}
                tasks = {uid: t.clone() if src.get(uid) is t else t for uid, t in self._tasks.items()}
                self.tasks = self._tasks = tasks
                self._src = None
                return tasks
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def peek_tasks(self) -> Mapping[str, TaskInfo]:
        """The tasks on the node by uid, read-only: neither change them nor keep them past the
        session's use of the node (an unmaterialised clone hands out the original's, equal in value)."""
        return self._tasks

    def frozen_tasks(self) -> Mapping[str, TaskInfo] | None:
        """The task dict while this copy-on-write copy still shares the original's (which nothing
        changes while the copy is in use: a reader may keep it for the session), else None."""
        tasks = self._tasks
        return tasks if tasks is self._src else None

    def _own_dict(self) -> dict[str, TaskInfo]:
        """The task dict to change: a shallow copy of the original's while it is still shared."""
        tasks = self._tasks
        if tasks is self._src:
            tasks = self._tasks = dict(tasks)
        return tasks

    def _own_accounting(self) -> None:
        self.idle = self.idle.clone()
        self.used = self.used.clone()
        self.releasing = self.releasing.clone()
        self.pipelined = self.pipelined.clone()
        self._owns_accounting = True

    def future_idle(self) -> Resource:
        return self.idle.clone().add(self.releasing).sub(self.pipelined)

    # Accounting follows api/node_info.go addResource / subResource.
    def _add_resource(self, status: TaskStatus, req: Resource) -> None:
        if status is TaskStatus.RELEASING:
            self.releasing.add(req)
            self.idle.sub(req)
            self.used.add(req)
        elif status is TaskStatus.PIPELINED:
            self.pipelined.add(req)
        else:
            self.idle.sub(req)
            self.used.add(req)

    def _sub_resource(self, status: TaskStatus, req: Resource) -> None:
        if status is TaskStatus.RELEASING:
            self.releasing.sub(req)
            self.idle.add(req)
            self.used.sub(req)
        elif status is TaskStatus.PIPELINED:
            self.pipelined.sub(req)
        else:
            self.idle.add(req)
            self.used.sub(req)

    def add_task(self, task: TaskInfo) -> None:
        if task.node_name and task.node_name != self.name:
            raise NodeError(f"task <{task.key}> already on another node <{task.node_name}>")
        tasks = self._own_dict()
        if task.uid in tasks:
            raise NodeError(f"task <{task.key}> already on node <{self.name}>")
        if task.status is TaskStatus.BINDING and not task.resreq.less_equal(self.idle):
            raise NodeError(f"task <{task.key}> binding on node <{self.name}> without idle resources")
        ti = task.clone()
        if not self._owns_accounting:
            self._own_accounting()
        self._add_resource(ti.status, ti.resreq)
        task.node_name = self.name
        ti.node_name = self.name
        tasks[task.uid] = ti
        if self.on_change is not None:
            self.on_change(self)

    def remove_task(self, task: TaskInfo) -> None:
        ti = self._own_dict().pop(task.uid, None)
        if ti is None:
            raise NodeError(f"task <{task.key}> not on node <{self.name}>")
        if not self._owns_accounting:
            self._own_accounting()
        self._sub_resource(ti.status, ti.resreq)
        if self.on_change is not None:
            self.on_change(self)

    def update_task(self, task: TaskInfo) -> None:
        self.remove_task(task)
        self.add_task(task)

    def pod_count(self) -> int:
        return len(self._tasks)

    def cow_clone(self) -> NodeInfo:
        """A copy for a session: shares the task copies and accounting until first use (see the
        class docstring).  The original must not change while the copy is in use (a frozen
        snapshot's nodes never do)."""
        n = object.__new__(NodeInfo)
        n.name = self.name
        n.allocatable = self.allocatable
        n.capability = self.capability
        n.facts = self.facts
        n.idle = self.idle
        n.used = self.used
        n.releasing = self.releasing
        n.pipelined = self.pipelined
        n._owns_accounting = False
        n.max_task_num = int(self.allocatable.scalars.get(PODS, 0))
        n._tasks = n._src = self._tasks
        n.index = -1
        n.on_change = None
        return n

    def is_untouched_copy_of(self, node: NodeInfo) -> bool:
        """Whether this is a `cow_clone` of `node` that nothing changed since (it still shares the
        node's tasks and accounting, and no session hook is set): then it is as good as a new
        `cow_clone` (with `index` reset), and a later session may use it again."""
        return (
            self._tasks is node._tasks
            and self._src is node._tasks
            and not self._owns_accounting
            and self.on_change is None
            and self.idle is node.idle
            and self.used is node.used
            and self.releasing is node.releasing
            and self.pipelined is node.pipelined
            and self.allocatable is node.allocatable
            and self.capability is node.capability
            and self.facts is node.facts
            and self.name == node.name
        )

    def clone(self) -> NodeInfo:
        """A whole, independent copy (every task cloned now)."""
        n = object.__new__(NodeInfo)
        n.name = self.name
        n.allocatable = self.allocatable
        n.capability = self.capability
        n.facts = self.facts
        n.idle = self.idle.clone()
        n.used = self.used.clone()
        n.releasing = self.releasing.clone()
        n.pipelined = self.pipelined.clone()
        n.max_task_num = int(self.allocatable.scalars.get(PODS, 0))
        n.tasks = n._tasks = {uid: t.clone() for uid, t in self._tasks.items()}
        n._src = None
        n._owns_accounting = True
        n.index = -1
        n.on_change = None
        return n

    def __repr__(self) -> str:
        return f"Node({self.name} idle={self.idle} used={self.used})"
