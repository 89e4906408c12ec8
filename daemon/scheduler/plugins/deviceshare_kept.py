"""Deviceshare's vGPU pools and FilterNode answers kept from one session to the next.

With vGPU the one device kind configured, every node's pools (its registered cards, counting the
pods its accounted tasks name) are a pure function of the node, and FilterNode's answer (`fit`)
is a pure function of a pool's cards and the request's `filter_key`.  `KeptPools` holds, per
node row of the session's node list, the pools built from the snapshot's node, a change stamp,
and per request key the answers (fits, score) with the stamp they were computed on, so that a
session over unchanged nodes neither re-parses cards nor re-asks FilterNode node by node.

It lives in the session's `NodeDerived` view (`model/node_derived.py`, one whole-table entry):
rows whose node changed since the previous session, and rows whose pools that session changed
(an allocation, a release: `touch`), are rebuilt at open; every other row's pools are the same
objects with the same content.  A stamp is never reused (one counter), so an answer computed on a
pool is used only while that very pool is unchanged.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fumarole.daemon.scheduler.framework.nodetable import BoolArray, FloatArray, IntArray
from fumarole.daemon.scheduler.model.task import TaskStatus

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.node_derived import DerivedView

KEY = "deviceshare"
MEMO_LIMIT = 64


@dataclass(slots=True)
class Answers:
    """FilterNode's answers for one request key, per row, each valid while its stamp holds."""

    stamp: IntArray
    fits: BoolArray
    score: FloatArray


@dataclass(slots=True)
class KeptPools:
    args: Any
    pools: list[Any]  # per row: the node's NodeDevices (None: no registered device)
    uids: list[tuple[str, ...]]  # per row: the tasks its pools account
    nodes: dict[str, Any]  # node name -> NodeDevices (nodes with pools only)
    on_node: dict[str, str]  # task uid -> node name (tasks accounted by a node's pools)
    row_of: dict[str, int]
    stamp: IntArray
    has_pool: BoolArray
    counter: int = 0
    touched: set[int] = field(default_factory=set)
    answers: OrderedDict[Hashable, Answers] = field(default_factory=OrderedDict)

    def touch(self, node_name: str) -> None:
        """A session changed this node's pools: new stamp now, rebuilt at the next open."""
        row = self.row_of.get(node_name)
        if row is None:
            return
        self.touched.add(row)
        self.counter += 1
        self.stamp[row] = self.counter

    def answers_for(self, key: Hashable) -> Answers:
        a = self.answers.get(key)
        if a is not None:
            self.answers.move_to_end(key)
            return a
        n = len(self.pools)
        a = Answers(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.bool_), np.zeros(n))
        self.answers[key] = a
        if len(self.answers) > MEMO_LIMIT:
            self.answers.popitem(last=False)
        return a


def kept_pools(
    view: DerivedView, nodes: list[NodeInfo], args: Any, build: Callable[[NodeInfo], Any]
) -> KeptPools:
    """The pools for the session's `nodes`: the previous session's, rebuilt where a node or a
    pool changed, when that session kept them under the same arguments; else built whole."""
    kept: KeptPools | None = view.current(KEY)
    if kept is None or kept.args != args:
        n = len(nodes)
        kept = KeptPools(
            args,
            [None] * n,
            [()] * n,
            {},
            {},
            {nd.name: i for i, nd in enumerate(nodes)},
            np.zeros(n, dtype=np.int64),
            np.zeros(n, dtype=np.bool_),
        )
        redo: list[int] = list(range(n))
    else:
        assert view.changed is not None
        redo = sorted(kept.touched.union(view.changed))
        kept.touched = set()
    # Drop what the rows to rebuild held first (a task may have moved between two of them).
    for row in redo:
        for uid in kept.uids[row]:
            kept.on_node.pop(uid, None)
        if kept.pools[row] is not None:
            kept.nodes.pop(nodes[row].name, None)
            kept.pools[row] = None
    for row in redo:
        node = nodes[row]
        kept.counter += 1
        kept.stamp[row] = kept.counter
        nd = build(node)
        kept.has_pool[row] = bool(nd.pools)
        if not nd.pools:
            kept.uids[row] = ()
            continue
        uids: list[str] = []
        for t in node.tasks.values():
            if t.status in (TaskStatus.PIPELINED, TaskStatus.RELEASING):
                continue
            # The cache's pod carries what earlier bindings wrote.
            annotations = {**t.pod.annotations, **t.bind_annotations}
            for p in nd.pools:
                p.add_resource(t, annotations)
            uids.append(t.uid)
            kept.on_node[t.uid] = node.name
        kept.pools[row] = nd
        kept.uids[row] = tuple(uids)
        kept.nodes[node.name] = nd
    view.keep(KEY, kept)
    return kept
