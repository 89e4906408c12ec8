"""Column arrays of node accounting, kept in step with NodeInfo, for vectorised fit and score.

Rows follow the session's node list order; columns are `dims` (cpu, memory, then scalar names
sorted).  Values are float64 (exact for integers below 2**53: milli-cpu and bytes fit).

`version` holds one stamp per row, bumped whenever the row's accounting changes here and by
other per-node state that registers itself (the predicates plugin's pod mirror): a result
computed from a row's state stays valid while the row's stamp is unchanged (`RowMemo`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from daemon.scheduler.model.resources import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

if TYPE_CHECKING:
    from daemon.scheduler.model.node import NodeInfo
    from daemon.scheduler.model.task import TaskInfo

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Int8Array = npt.NDArray[np.int8]

FEW_ROWS = 64

# A predicate plugin's row-locality test: the part of a task's feasibility signature the plugin
# reads, or None when its verdict on a node may depend on other nodes (or on call history).
# Once a plugin gives a task a signature, its verdicts for that task must stay row-local with
# that signature for the rest of the session (the search keeps the signature per task).
RowLocalKey = Callable[["TaskInfo"], Hashable | None]


class RowMemo:
    """Per-row results of one evaluation signature, each valid while its row's stamp is unchanged."""

    __slots__ = ("idle", "ok", "stamp")

    def __init__(self, n: int) -> None:
        self.stamp: IntArray = np.full(n, -1, dtype=np.int64)
        self.ok: BoolArray = np.zeros(n, dtype=np.bool_)
        self.idle: BoolArray = np.zeros(n, dtype=np.bool_)


class NodeTable:
    def __init__(self, nodes: list[NodeInfo], extra_dims: set[str]) -> None:
        scalar_names: set[str] = set(extra_dims)
        for n in nodes:
            scalar_names.update(n.allocatable.scalars)
        self.dims: list[str] = [CPU, MEMORY, *sorted(scalar_names)]
        self.col: dict[str, int] = {d: i for i, d in enumerate(self.dims)}
        self.nodes = nodes
        self._zeros: list[float] = [0.0] * (len(self.dims) - 2)
        self._req_cache: dict[int, tuple[Resource, list[int], list[float]]] = {}
        self._thr_cache: dict[tuple[int, int], tuple[list[int], list[float], FloatArray]] = {}
        self.names: list[str] = [n.name for n in nodes]
        size = (len(nodes), len(self.dims))
        self.allocatable: FloatArray = np.zeros(size)
        self.idle: FloatArray = np.zeros(size)
        self.used: FloatArray = np.zeros(size)
        self.releasing: FloatArray = np.zeros(size)
        self.pipelined: FloatArray = np.zeros(size)
        self.future_idle: FloatArray = np.zeros(size)
        self.pod_count: IntArray = np.zeros(len(nodes), dtype=np.int64)
        self.max_pods: IntArray = np.zeros(len(nodes), dtype=np.int64)
        # Bumped on every change to a row; consumers may cache per-row results by version.
        self.version: IntArray = np.zeros(len(nodes), dtype=np.int64)
        # Predicate plugins whose verdicts can be row-local, by name (last registration wins,
        # as for callbacks), and the placement search's feasibility memos by signature.
        self.row_local: dict[str, RowLocalKey] = {}
        self.feasible_memo: OrderedDict[Hashable, RowMemo] = OrderedDict()
        # Feasibility signatures given so far, per task object: (task, check_resources, key).
        self.row_keys: dict[int, tuple[TaskInfo, bool, Hashable]] = {}
        # (candidate rows, their Idle fit) left by the last memoised search for choose_node.
        self.search_hint: tuple[IntArray, BoolArray] | None = None
        # The rows of every node at once (what `refresh` writes one row at a time; the same
        # float conversions and the same element-wise sums).
        if nodes:
            values = self.values
            self.allocatable[:] = np.array([values(n.allocatable) for n in nodes], dtype=np.float64)
            self.idle[:] = np.array([values(n.idle) for n in nodes], dtype=np.float64)
            self.used[:] = np.array([values(n.used) for n in nodes], dtype=np.float64)
            self.releasing[:] = np.array([values(n.releasing) for n in nodes], dtype=np.float64)
            self.pipelined[:] = np.array([values(n.pipelined) for n in nodes], dtype=np.float64)
            self.future_idle[:] = self.idle + self.releasing - self.pipelined
            self.pod_count[:] = [n.pod_count() for n in nodes]
            self.max_pods[:] = [n.max_task_num for n in nodes]
            self.version[:] = 1
        for i, n in enumerate(nodes):
            n.index = i
            n.on_change = self.refresh

    def vector(self, r: Resource) -> FloatArray:
        v = np.zeros(len(self.dims))
        v[0] = r.cpu
        v[1] = r.memory
        col = self.col
        for name, value in r.scalars.items():
            c = col.get(name)
            if c is not None:
                v[c] = value
        return v

    def values(self, r: Resource) -> list[Any]:
        """`vector` as a plain list (assigned to a row in one step)."""
        v: list[Any] = [r.cpu, r.memory, *self._zeros]
        if r.scalars:
            col = self.col
            for name, value in r.scalars.items():
                c = col.get(name)
                if c is not None:
                    v[c] = value
        return v

    def refresh(self, node: NodeInfo) -> None:
        i = node.index
        self.idle[i] = self.values(node.idle)
        self.used[i] = self.values(node.used)
        self.releasing[i] = self.values(node.releasing)
        self.pipelined[i] = self.values(node.pipelined)
        self.future_idle[i] = self.idle[i] + self.releasing[i] - self.pipelined[i]
        self.pod_count[i] = node.pod_count()
        self.version[i] += 1

    def request_columns(self, task: TaskInfo) -> tuple[list[int], list[float]]:
        """Columns compared by LessEqual(request, X, Zero): cpu, memory and the request's scalars."""
        req = task.resreq
        hit = self._req_cache.get(id(req))
        if hit is not None:
            return hit[1], hit[2]
        cols = [0, 1]
        vals = [float(req.cpu), float(req.memory)]
        for name in sorted(req.scalars):
            c = self.col.get(name)
            if c is None:
                continue
            cols.append(c)
            vals.append(float(req.scalars[name]))
        self._req_cache[id(req)] = (req, cols, vals)
        return cols, vals

    def fits(
        self, which: FloatArray, cols: list[int], vals: list[float], rows: IntArray | None = None
    ) -> BoolArray:
        """Rows where request <= `which` on every compared column (tolerance 0.1)."""
        if rows is not None and len(rows) <= FEW_ROWS:
            # Few rows: one gather of whole rows against per-column thresholds (-inf where the
            # column is not compared) costs fewer array operations than a gather per column.
            out: BoolArray = np.all(which[rows] > self.thresholds(cols, vals), axis=1)
            return out
        ok: BoolArray | None = None
        for c, v in zip(cols, vals, strict=True):
            col = which[:, c] if rows is None else which[rows, c]
            part = col > v - MIN_RESOURCE
            ok = part if ok is None else (ok & part)
        assert ok is not None
        return ok

    def thresholds(self, cols: list[int], vals: list[float]) -> FloatArray:
        """Per column: value - 0.1 for the compared columns, -inf for the others (cached per request)."""
        key = (id(cols), id(vals))
        hit = self._thr_cache.get(key)
        if hit is not None and hit[0] is cols and hit[1] is vals:
            return hit[2]
        thr = np.full(len(self.dims), -np.inf)
        for c, v in zip(cols, vals, strict=True):
            thr[c] = v - MIN_RESOURCE
        self._thr_cache[key] = (cols, vals, thr)
        return thr

    def first_insufficient(
        self, which: FloatArray, cols: list[int], vals: list[float], rows: IntArray
    ) -> list[str]:
        """For each row, the first dimension (cpu, memory, scalars sorted) the request exceeds."""
        sub = which[np.ix_(rows, np.asarray(cols, dtype=np.int64))]
        bad = (np.asarray(vals) - sub) >= MIN_RESOURCE
        first = np.argmax(bad, axis=1)
        return [self.dims[cols[int(j)]] for j in first]

    def pods_col(self) -> int | None:
        return self.col.get(PODS)
