"""Per-node structures derived from a snapshot's nodes, kept from one session to the next.

At session open several components derive something from every node: the node table's rows
(`framework/nodetable.py`), the predicates' Kubernetes node mirror (`plugins/k8s/node_mirror.py`),
deviceshare's card pools (`plugins/deviceshare.py`).  A `NodeDerived` travels on the
`ClusterSnapshot` (`derived`) from session to session (the daemon's cycle runner and the study's
core engine hand the same one on); each session's `open` answers a `DerivedView`: per node row a
slot dict that holds what earlier sessions derived from that node while it is unchanged, and the
rows whose node changed since the last open (when the node list has the same names in the same
order), so that whole-table structures can patch those rows only.

A node counts as unchanged while it is the same object and its inputs pass a cheap check: the same
allocatable, capability and facts objects and the same task objects, in order (adding, removing
or updating a task always puts a new TaskInfo in `NodeInfo.tasks`).  The daemon's freeze shares
unchanged NodeInfo objects between snapshots and builds a new one for a changed node; the study
engine changes its nodes through NodeInfo's methods, which the check sees.  A session never
changes snapshot objects (it works on clones).

The cache is outside the decision inputs: what a slot holds must be exactly what a cold build
would derive (components that keep objects a session mutates check them before reuse, as
deviceshare does with its pools' change counters).  Memory is bounded: every open keeps only
the entries of the nodes it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.scheduler.model.node import NodeInfo
    from daemon.scheduler.model.task import TaskInfo

__all__ = ["DerivedView", "NodeDerived"]


class _Entry:
    """One node object, the inputs it was checked against, and what was derived from it."""

    __slots__ = ("allocatable", "capability", "facts", "node", "slots", "tasks")

    def __init__(self, node: NodeInfo, tasks: tuple[TaskInfo, ...]) -> None:
        self.node = node
        self.allocatable = node.allocatable
        self.capability = node.capability
        self.facts = node.facts
        self.tasks = tasks
        self.slots: dict[str, Any] = {}

    def holds(self, node: NodeInfo, tasks: tuple[TaskInfo, ...]) -> bool:
        return (
            self.node is node
            and self.allocatable is node.allocatable
            and self.capability is node.capability
            and self.facts is node.facts
            and self.tasks == tasks  # TaskInfo has no __eq__: compared by identity
        )


class DerivedView:
    """One session's look at the cache.

    `slots[row]`: what earlier sessions derived from the node at `row` (empty if it changed);
    `changed`: the rows whose node changed since the last open, or None when the node list's names
    or order differ (then `whole` starts empty); `whole`: structures over all rows that earlier
    sessions with the same node list left.  A whole structure is current for the open numbered
    `epoch - 1` only: `stale(key)` says whether it must be rebuilt (it was last brought up to date
    at an older open) or may be patched at the `changed` rows; `keep(key, value)` stores it.
    """

    __slots__ = ("changed", "epoch", "slots", "whole")

    def __init__(
        self, slots: list[dict[str, Any]], changed: list[int] | None, whole: dict[str, Any], epoch: int
    ) -> None:
        self.slots = slots
        self.changed = changed
        self.whole = whole
        self.epoch = epoch

    def current(self, key: str) -> Any | None:
        """The whole structure `key` if it was kept at the previous open (patch `changed` rows),
        else None (build it afresh)."""
        hit = self.whole.get(key)
        if hit is None or self.changed is None or hit[0] != self.epoch - 1:
            return None
        return hit[1]

    def keep(self, key: str, value: Any) -> None:
        """Store the whole structure `key` as up to date at this open."""
        self.whole[key] = (self.epoch, value)


class NodeDerived:
    """The cache: an entry per node name, and the whole-table structures of the last node list."""

    __slots__ = ("_entries", "_names", "epoch", "whole")

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._names: list[str] | None = None
        self.whole: dict[str, tuple[int, Any]] = {}
        self.epoch = 0

    def __len__(self) -> int:
        return len(self._entries)

    def open(self, nodes: Sequence[NodeInfo]) -> DerivedView:
        """The view for a session over `nodes` (the snapshot's own node objects, in session order)."""
        old = self._entries
        entries: dict[str, _Entry] = {}
        slots: list[dict[str, Any]] = []
        changed: list[int] = []
        names: list[str] = []
        for row, node in enumerate(nodes):
            tasks = tuple(node.tasks.values())
            e = old.get(node.name)
            if e is None or not e.holds(node, tasks):
                e = _Entry(node, tasks)
                changed.append(row)
            entries[node.name] = e
            slots.append(e.slots)
            names.append(node.name)
        self.epoch += 1
        if len(entries) != len(names):
            # Two nodes of one name: keep nothing (each open derives afresh).
            self._entries, self._names, self.whole = {}, None, {}
            return DerivedView([{} for _ in nodes], None, {}, self.epoch)
        same = names == self._names
        self._entries = entries
        self._names = names
        if not same:
            self.whole = {}
        return DerivedView(slots, changed if same else None, self.whole, self.epoch)
