"""Node scores kept per row between tasks, for tasks whose every scorer is node-local.

`Combinators.node_score_batch` sums, in tier order, the NodeOrderFn and BatchNodeOrderFn scores
of the enabled plugins over the candidate rows.  Most scorers give a node a score that depends
only on that node's state and on the task (binpack, nodeorder's resource scores); others
normalise over the candidates they are given (nodeorder's node affinity, taint toleration with
PreferNoSchedule taints, inter-pod affinity, topology spread) and are not.

A plugin declares, per extension point, a *node-local scorer* (`Combinators.register_local_score`):
a key function giving the part of a task's score signature it reads, or None when its score for
that task is not node-local, and a function scoring given rows now.  When every scorer in force
gives the task a key, `LocalScoring.scores` keeps the summed score of every row per signature
(`ScoreMemo`), each row valid while its `NodeTable.version` stamp is unchanged, and re-scores
the rows whose stamp moved when one of the candidates is among them (all of them at once, in one
call per scorer).  The sum is the
same float64 additions in the same order as `node_score_batch`, row by row, so the scores, and
the node chosen, are the same; tests/scheduler/framework/test_score_memo.py checks it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.nodetable import FloatArray, IntArray
    from fumarole.daemon.scheduler.model.task import TaskInfo

# The part of a task's score signature a scorer reads; None: not node-local for this task.
LocalScoreKey = Callable[["TaskInfo"], Hashable | None]
# The scorer's scores of the given rows, computed now (None: 0 on every row).
LocalScores = Callable[["TaskInfo", "IntArray"], Any]

MEMO_SIZE = 64


class ScoreMemo:
    """Summed scores of one signature per row, each valid while its row's stamp is unchanged."""

    __slots__ = ("stamp", "value")

    def __init__(self, n: int) -> None:
        self.stamp: IntArray = np.full(n, -1, dtype=np.int64)
        self.value: FloatArray = np.zeros(n)


class LocalScoring:
    """The node-local scorers in `node_score_batch`'s order, and the memos by signature."""

    __slots__ = ("keys", "memos", "scorers", "version")

    def __init__(self, scorers: list[tuple[LocalScoreKey, LocalScores]], version: IntArray) -> None:
        self.keys = tuple(k for k, _ in scorers)
        self.scorers = tuple(s for _, s in scorers)
        self.version = version
        self.memos: OrderedDict[Hashable, ScoreMemo] = OrderedDict()

    def signature(self, task: TaskInfo) -> Hashable | None:
        parts = []
        for key in self.keys:
            part = key(task)
            if part is None:
                return None
            parts.append(part)
        return tuple(parts)

    def memo(self, signature: Hashable) -> ScoreMemo:
        memos = self.memos
        memo = memos.get(signature)
        if memo is None:
            memo = memos[signature] = ScoreMemo(len(self.version))
            if len(memos) > MEMO_SIZE:
                memos.popitem(last=False)
        elif len(memos) > 1:
            memos.move_to_end(signature)
        return memo

    def scores(self, task: TaskInfo, rows: IntArray) -> FloatArray | None:
        """The summed scores of `rows` (None: some scorer is not node-local for the task)."""
        signature = self.signature(task)
        if signature is None:
            return None
        memo = self.memo(signature)
        version = self.version
        if (memo.stamp[rows] != version[rows]).any():
            # Every stale row is re-scored at once, in the window or not (one batch now rather
            # than one per later call).
            stale = (memo.stamp != version).nonzero()[0]
            memo.value[stale] = self.score_now(task, stale)
            memo.stamp[stale] = version[stale]
        out: FloatArray = memo.value[rows]
        return out

    def score_now(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """`node_score_batch`'s sum over `rows`: the same additions in the same order."""
        total: FloatArray = np.zeros(len(rows))
        for scorer in self.scorers:
            part = scorer(task, rows)
            if part is not None:
                total += part
        return total
