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

from fumarole.daemon.scheduler.model.resources import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.node_derived import DerivedView
    from fumarole.daemon.scheduler.model.task import TaskInfo

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Int8Array = npt.NDArray[np.int8]

FEW_ROWS = 64
TABLE_KEY = "nodetable"

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


class _Rows:
    """The table's columns as a session opens, derived from the snapshot's nodes (kept across
    sessions in `NodeDerived`: rows of unchanged nodes are not rebuilt)."""

    __slots__ = (
        "allocatable",
        "dims",
        "extra",
        "idle",
        "max_pods",
        "pipelined",
        "pod_count",
        "releasing",
        "row_keys",
        "union",
        "used",
    )

    def __init__(self, extra: frozenset[str], row_keys: list[frozenset[str]], union: frozenset[str]) -> None:
        self.extra = extra
        self.row_keys = row_keys
        self.union = union
        self.dims: list[str] = [CPU, MEMORY, *sorted(union | extra)]
        self.allocatable: FloatArray
        self.idle: FloatArray
        self.used: FloatArray
        self.releasing: FloatArray
        self.pipelined: FloatArray
        self.pod_count: IntArray
        self.max_pods: IntArray

    def fill(self, nodes: list[NodeInfo], values: Callable[[Resource], list[Any]]) -> None:
        """Every row at once (what `NodeTable.refresh` writes one row at a time; the same float
        conversions and the same element-wise sums)."""
        size = (len(nodes), len(self.dims))
        self.allocatable = np.zeros(size)
        self.idle = np.zeros(size)
        self.used = np.zeros(size)
        self.releasing = np.zeros(size)
        self.pipelined = np.zeros(size)
        self.pod_count = np.zeros(len(nodes), dtype=np.int64)
        self.max_pods = np.zeros(len(nodes), dtype=np.int64)
        if nodes:
            self.allocatable[:] = np.array([values(n.allocatable) for n in nodes], dtype=np.float64)
            self.idle[:] = np.array([values(n.idle) for n in nodes], dtype=np.float64)
            self.used[:] = np.array([values(n.used) for n in nodes], dtype=np.float64)
            self.releasing[:] = np.array([values(n.releasing) for n in nodes], dtype=np.float64)
            self.pipelined[:] = np.array([values(n.pipelined) for n in nodes], dtype=np.float64)
            self.pod_count[:] = [n.pod_count() for n in nodes]
            self.max_pods[:] = [n.max_task_num for n in nodes]

    def patch(self, nodes: list[NodeInfo], rows: list[int], values: Callable[[Resource], list[Any]]) -> None:
        """Rewrite the rows of changed nodes (the same values `fill` would write there)."""
        for i in rows:
            n = nodes[i]
            self.allocatable[i] = values(n.allocatable)
            self.idle[i] = values(n.idle)
            self.used[i] = values(n.used)
            self.releasing[i] = values(n.releasing)
            self.pipelined[i] = values(n.pipelined)
            self.pod_count[i] = n.pod_count()
            self.max_pods[i] = n.max_task_num


def _rows_at_open(nodes: list[NodeInfo], extra: frozenset[str], derived: DerivedView | None) -> _Rows:
    """The table's columns for `nodes`: the rows kept at the previous session's open, patched where
    a node changed, when the columns are the same; else built whole (and kept)."""
    prev: _Rows | None = derived.current(TABLE_KEY) if derived is not None else None
    if prev is not None and prev.extra == extra:
        assert derived is not None and derived.changed is not None
        keys = prev.row_keys
        union = prev.union
        for i in derived.changed:
            k = frozenset(nodes[i].allocatable.scalars)
            if k != keys[i]:
                keys[i] = k
                union = frozenset().union(*keys)
        if union == prev.union:
            prev.patch(nodes, derived.changed, _row_values(prev.dims))
            derived.keep(TABLE_KEY, prev)
            return prev
        rows = _Rows(extra, keys, union)
    else:
        keys = [frozenset(n.allocatable.scalars) for n in nodes]
        rows = _Rows(extra, keys, frozenset().union(*keys))
    rows.fill(nodes, _row_values(rows.dims))
    if derived is not None:
        derived.keep(TABLE_KEY, rows)
    return rows


def _row_values(dims: list[str]) -> Callable[[Resource], list[Any]]:
    col = {d: i for i, d in enumerate(dims)}
    zeros: list[float] = [0.0] * (len(dims) - 2)

    def values(r: Resource) -> list[Any]:
        v: list[Any] = [r.cpu, r.memory, *zeros]
        if r.scalars:
            for name, value in r.scalars.items():
                c = col.get(name)
                if c is not None:
                    v[c] = value
        return v

    return values


class NodeTable:
    def __init__(
        self, nodes: list[NodeInfo], extra_dims: set[str], derived: DerivedView | None = None
    ) -> None:
        rows = _rows_at_open(nodes, frozenset(extra_dims), derived)
        self.dims: list[str] = list(rows.dims)
        self.col: dict[str, int] = {d: i for i, d in enumerate(self.dims)}
        self.nodes = nodes
        self._zeros: list[float] = [0.0] * (len(self.dims) - 2)
        self._req_cache: dict[int, tuple[Resource, list[int], list[float]]] = {}
        self._thr_cache: dict[tuple[int, int], tuple[list[int], list[float], FloatArray]] = {}
        self.names: list[str] = [n.name for n in nodes]
        # The session's own copies (it changes them; the kept rows stay as the snapshot's nodes are).
        self.allocatable: FloatArray = rows.allocatable.copy()
        self.idle: FloatArray = rows.idle.copy()
        self.used: FloatArray = rows.used.copy()
        self.releasing: FloatArray = rows.releasing.copy()
        self.pipelined: FloatArray = rows.pipelined.copy()
        self.future_idle: FloatArray = self.idle + self.releasing - self.pipelined
        self.pod_count: IntArray = rows.pod_count.copy()
        self.max_pods: IntArray = rows.max_pods.copy()
        # Bumped on every change to a row; consumers may cache per-row results by version.
        self.version: IntArray = np.ones(len(nodes), dtype=np.int64)
        # Predicate plugins whose verdicts can be row-local, by name (last registration wins,
        # as for callbacks), and the placement search's feasibility memos by signature.
        self.row_local: dict[str, RowLocalKey] = {}
        self.feasible_memo: OrderedDict[Hashable, RowMemo] = OrderedDict()
        # Feasibility signatures given so far, per task object: (task, check_resources, key).
        self.row_keys: dict[int, tuple[TaskInfo, bool, Hashable]] = {}
        # (candidate rows, their Idle fit) left by the last memoised search for choose_node.
        self.search_hint: tuple[IntArray, BoolArray] | None = None
        refresh = self.refresh
        for i, n in enumerate(nodes):
            n.index = i
            n.on_change = refresh

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
