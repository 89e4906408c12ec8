"""Per-node structures derived from a snapshot's nodes, kept from one session to the next.

At session open several components derive something from every node: the node table's rows
(`framework/nodetable.py`), the predicates' Kubernetes node mirror (`plugins/k8s/node_mirror.py`),
deviceshare's card pools (`plugins/deviceshare.py`).  A `NodeDerived` travels on the
`ClusterSnapshot` (`derived`) from session to session (the daemon's cycle runner and the study's
core engine hand the same one on); each session's `open` answers a `DerivedView`: per node row a
slot dict that holds what earlier sessions derived from that node while it is unchanged, and the
rows whose node changed since the last open (when the node list has the same names in the same
order), so that whole-table structures can patch those rows only.

A node counts as unchanged while the snapshot holds the same NodeInfo object: whoever hands
snapshots with a cache to sessions never changes a NodeInfo in place once a session saw it, but
puts a new one (a clone, changed) in its place.  The daemon's freeze does so already (it shares
unchanged NodeInfo objects between snapshots and builds a new one for a changed node); the study
engine replaces each node it folds a bind or a completion into.  A session never changes snapshot
objects (it works on clones).  The key costs one identity test per node and session.

The cache is outside the decision inputs: what a slot holds must be exactly what a cold build
would derive (components that keep objects a session mutates check them before reuse, as
deviceshare does with its pools' change counters).  Memory is bounded: every open keeps only
the entries of the nodes it was given.

`jobs` is the per-job analogue, owned by the components that use it (by name): each keeps, per
job uid, the snapshot's JobInfo object and what it derived from it, trusted while the snapshot
holds the same object, and keeps only the jobs of the session at hand (proportion's per-job
figures).  It exists only when the owner asks (`keep_jobs=True`): whoever does promises never
to change a JobInfo in place once a session saw it (the daemon's freeze shares unchanged JobInfo
objects and builds a new one for a changed job; the study engine folds binds into its jobs in
place, so it does not ask).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fumarole.daemon.scheduler.model.resources import Resource

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.node import NodeInfo

__all__ = ["DerivedView", "NodeDerived"]

TOTAL_KEY = "total_allocatable"
# A node's slot: the copy-on-write copy the last session used (`NodeDerived.session_copies`).
SESSION_COPY_KEY = "session_copy"


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
    """The cache: per row of the last node list, that node object and its slot dict, and the
    whole-table structures kept at the last open."""

    __slots__ = ("_names", "_nodes", "_slots", "epoch", "jobs", "whole")

    def __init__(self, *, keep_jobs: bool = False) -> None:
        self._names: list[str] = []
        self._nodes: list[NodeInfo] = []
        self._slots: list[dict[str, Any]] = []
        self.whole: dict[str, tuple[int, Any]] = {}
        self.epoch = 0
        self.jobs: dict[str, Any] | None = {} if keep_jobs else None

    def __len__(self) -> int:
        return len(self._nodes)

    def open(self, nodes: Sequence[NodeInfo]) -> DerivedView:
        """The view for a session over `nodes` (the snapshot's own node objects, in session order)."""
        self.epoch += 1
        names = [n.name for n in nodes]
        if names == self._names:
            prev = self._nodes
            changed = [i for i, (a, b) in enumerate(zip(prev, nodes, strict=True)) if a is not b]
            slots = self._slots
            for i in changed:
                slots[i] = {}
        else:
            # Another node list: what was derived is kept by name where the node is the same object.
            by_name = {n.name: (n, s) for n, s in zip(self._nodes, self._slots, strict=True)}
            slots = []
            for n in nodes:
                hit = by_name.get(n.name)
                slots.append(hit[1] if hit is not None and hit[0] is n else {})
            changed = None
            self.whole = {}
        self._names = names
        self._nodes = list(nodes)
        self._slots = slots
        return DerivedView(list(slots), changed, self.whole, self.epoch)

    @staticmethod
    def session_copies(view: DerivedView, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        """Copy-on-write copies of `nodes` for a session: the copy the session before used when
        nothing changed it (`NodeInfo.is_untouched_copy_of`; most nodes of a cycle), else a new
        `cow_clone`, kept for the next session.  A session's copies are its own while it runs:
        sessions over one cache run one at a time (as for every mutable structure kept here)."""
        out = []
        slots = view.slots
        for row, node in enumerate(nodes):
            slot = slots[row]
            copy: NodeInfo | None = slot.get(SESSION_COPY_KEY)
            if copy is not None and copy.is_untouched_copy_of(node):
                copy.index = -1
            else:
                copy = slot[SESSION_COPY_KEY] = node.cow_clone()
            out.append(copy)
        return out

    def kept_copies(self) -> list[NodeInfo | None]:
        """The session copies kept per row of the last node list (None: none kept)."""
        return [slot.get(SESSION_COPY_KEY) for slot in self._slots]

    def total_allocatable(self, view: DerivedView, nodes: Sequence[NodeInfo]) -> Resource:
        """The sum of the nodes' allocatable, added in node order (a fresh object): the last sum
        again while no node changed its allocatable object, else summed afresh."""
        hit = view.current(TOTAL_KEY)
        if hit is not None:
            allocs: list[Resource] = hit[0]
            kept: Resource = hit[1]
            assert view.changed is not None
            if all(nodes[i].allocatable is allocs[i] for i in view.changed):
                view.keep(TOTAL_KEY, hit)
                return kept.clone()
        total = Resource()
        for n in nodes:
            total.add(n.allocatable)
        view.keep(TOTAL_KEY, ([n.allocatable for n in nodes], total.clone()))
        return total
