"""The binpack plugin: score nodes higher the fuller they would be after placing the task."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_int
from fumarole.daemon.scheduler.framework.nodetable import FloatArray, IntArray, NodeTable
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import CPU, MEMORY, Resource
from fumarole.daemon.scheduler.model.task import TaskInfo

NAME = "binpack"
MAX_NODE_SCORE = 100


def weights_from(arguments: dict[str, Any]) -> tuple[int, dict[str, int]]:
    weight = arg_int(arguments, "binpack.weight", 1)
    cpu = arg_int(arguments, "binpack.cpu", 1)
    if cpu < 0:
        cpu = 1
    mem = arg_int(arguments, "binpack.memory", 1)
    if mem < 0:
        mem = 1
    per: dict[str, int] = {}
    raw = arguments.get("binpack.resources")
    text = raw if isinstance(raw, str) else ""
    for name in text.split(","):
        name = name.strip()
        if not name:
            continue
        w = arg_int(arguments, "binpack.resources." + name, 1)
        per[name] = 1 if w < 0 else w
    per[CPU] = cpu
    per[MEMORY] = mem
    return weight, per


def binpack_score(task: TaskInfo, node: NodeInfo, weight: int, per: dict[str, int]) -> float:
    score = 0.0
    wsum = 0
    req = task.resreq
    for rn in req.resource_names():
        request = req.get(rn)
        if request == 0:
            continue
        w = per.get(rn)
        if w is None:
            continue
        cap = node.allocatable.get(rn)
        if cap == 0 or w == 0:
            wsum += w
            continue
        used_after = request + node.used.get(rn)
        if used_after > cap:
            return 0.0
        score += used_after * w / cap
        wsum += w
    if wsum > 0:
        score /= wsum
    return score * float(MAX_NODE_SCORE * weight)


# Stale rows up to this many are scored in plain Python (`LocalBinpack.few_rows`).
SCALAR_ROWS = 4


class LocalBinpack:
    """Binpack as a node-local scorer (framework/score_memo.py): a node's score reads only its
    own allocatable and used figures, so the signature is the request's scored dimensions.

    A few rows are scored in plain Python with the same float64 steps as the batch (request +
    used, times the weight, over the allocatable, summed in the request's dimension order, over
    the weight sum, times 100 × weight; 0 on overflow), so the floats are the same.
    """

    __slots__ = ("_batch", "_cap_lists", "_held", "_multiplier", "_per", "_used", "col")

    def __init__(
        self,
        table: NodeTable,
        per: dict[str, int],
        weight: int,
        nonzero_caps: dict[str, FloatArray],
        batch: Callable[[TaskInfo, IntArray], FloatArray],
    ) -> None:
        self.col = table.col
        self._used = table.used
        self._per = per
        self._multiplier = float(MAX_NODE_SCORE * weight)
        self._cap_lists = {rn: caps.tolist() for rn, caps in nonzero_caps.items()}
        self._batch = batch
        # Per request object: (request, signature, plain-Python terms or None, weight sum).
        self._held: dict[
            int, tuple[Resource, Hashable, list[tuple[int, float, int, list[float]]] | None, int]
        ] = {}

    def _terms(self, req: Resource) -> tuple[Hashable, list[tuple[int, float, int, list[float]]] | None, int]:
        held = self._held.get(id(req))
        if held is not None and held[0] is req:
            return held[1], held[2], held[3]
        parts: list[tuple[str, float]] = []
        terms: list[tuple[int, float, int, list[float]]] | None = []
        wsum = 0
        for rn in req.resource_names():
            request = req.get(rn)
            w = self._per.get(rn)
            if request == 0 or w is None:
                continue
            parts.append((rn, request))
            wsum += w
            caps = self._cap_lists.get(rn) if w != 0 else None
            if terms is not None:
                terms = None if caps is None else [*terms, (self.col[rn], request, w, caps)]
        signature = tuple(parts)
        self._held[id(req)] = (req, signature, terms, wsum)
        return signature, terms, wsum

    def key(self, task: TaskInfo) -> Hashable:
        return self._terms(task.resreq)[0]

    def scores(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        _, terms, wsum = self._terms(task.resreq)
        if terms is None or len(rows) > SCALAR_ROWS:
            return self._batch(task, rows)
        return self.few_rows(terms, wsum, rows)

    def few_rows(
        self, terms: list[tuple[int, float, int, list[float]]], wsum: int, rows: IntArray
    ) -> FloatArray:
        item = self._used.item
        out: list[float] = []
        for row in rows.tolist():
            score = 0.0
            overflow = False
            for c, request, w, caps in terms:
                cap = caps[row]
                used_after = item(row, c) + request
                if used_after > cap:
                    overflow = True
                score += used_after * w / cap
            if wsum > 0:
                score /= wsum
            out.append(0.0 if overflow else score * self._multiplier)
        return np.array(out, dtype=np.float64)


class BinpackPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight, self.per = weights_from(arguments)
        self.local: LocalBinpack | None = None

    def on_session_open(self, ssn: Session) -> None:
        if self.weight == 0:
            return
        weight, per = self.weight, self.per
        table = ssn.table
        # Per resource column: its allocatable over all nodes, when no node has 0 there (then
        # every node is "valid" below and the masks fall away; same values, fewer array passes).
        nonzero_caps: dict[str, FloatArray] = {}
        for rn, c in table.col.items():
            cap_col = np.ascontiguousarray(table.allocatable[:, c])
            if (cap_col != 0).all():
                nonzero_caps[rn] = cap_col

        def node_order(task: TaskInfo, node: NodeInfo) -> float:
            return binpack_score(task, node, weight, per)

        def batch(task: TaskInfo, rows: IntArray) -> FloatArray:
            score = np.zeros(len(rows))
            wsum = 0
            overflow = np.zeros(len(rows), dtype=np.bool_)
            req = task.resreq
            for rn in req.resource_names():
                request = req.get(rn)
                w = per.get(rn)
                if request == 0 or w is None:
                    continue
                caps = nonzero_caps.get(rn) if w != 0 else None
                if caps is not None:
                    cap = caps[rows]
                    used_after = table.used[rows, table.col[rn]]
                    used_after += request
                    overflow |= used_after > cap
                    used_after *= w
                    used_after /= cap
                    score += used_after
                    wsum += w
                    continue
                c = table.col.get(rn)
                cap = table.allocatable[rows, c] if c is not None else np.zeros(len(rows))
                used = table.used[rows, c] if c is not None else np.zeros(len(rows))
                used_after = request + used
                valid = (cap != 0) & (w != 0)
                overflow |= valid & (used_after > cap)
                with np.errstate(divide="ignore", invalid="ignore"):
                    part = np.where(valid, used_after * w / np.where(cap == 0, 1, cap), 0.0)
                score += part
                wsum += w
            if wsum > 0:
                score /= wsum
            score *= float(MAX_NODE_SCORE * weight)
            score[overflow] = 0.0
            return score

        ssn.register(cb.NODE_ORDER, NAME, node_order, batch)
        self.local = LocalBinpack(table, per, weight, nonzero_caps, batch)
        ssn.register_local_score(cb.NODE_ORDER, NAME, self.local.key, self.local.scores)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> BinpackPlugin:
    return BinpackPlugin(arguments)
