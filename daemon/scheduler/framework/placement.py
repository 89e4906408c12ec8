"""Vectorised node search and choice shared by allocate and backfill.

Volcano's PredicateNodes walks nodes from a rotating start index in parallel and stops once
enough feasible nodes are found (CalculateNumOfFeasibleNodesToFind); we evaluate every node's
fit with array operations and then take the same window sequentially, so the result does not
depend on goroutine timing: the candidates are the first `k` feasible nodes in rotated order,
and the start index advances past the nodes that a sequential scan would have examined.

Where Volcano picks at random among nodes with the best score, we take the first of them in
candidate order (node-list order from the search start).  With fewer than 100 nodes the start
index never moves, so ties go to the earliest node in the node list.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from daemon.scheduler.model.fit import FitErrors

if TYPE_CHECKING:
    from daemon.scheduler.framework.nodetable import BoolArray, IntArray
    from daemon.scheduler.framework.session import Session
    from daemon.scheduler.model.node import NodeInfo
    from daemon.scheduler.model.task import TaskInfo


@dataclass(slots=True)
class SearchOptions:
    """Scheduler flags that shape the node search (cmd/scheduler/app/options)."""

    minimum_feasible_nodes: int = 100
    minimum_percentage_nodes_to_find: int = 5
    percentage_nodes_to_find: int = 0


BASELINE_PERCENTAGE = 50


def num_feasible_nodes_to_find(n: int, opts: SearchOptions) -> int:
    if n <= opts.minimum_feasible_nodes or opts.percentage_nodes_to_find >= 100:
        return n
    pct = opts.percentage_nodes_to_find
    if pct <= 0:
        pct = BASELINE_PERCENTAGE - n // 125
        if pct < opts.minimum_percentage_nodes_to_find:
            pct = opts.minimum_percentage_nodes_to_find
    k = n * pct // 100
    return max(k, opts.minimum_feasible_nodes)


@dataclass(slots=True)
class ErrorCache:
    """Per job-turn predicate error cache keyed by task role (util.predicateHelper)."""

    failed: dict[str, BoolArray] = field(default_factory=dict)


def insufficient_reason(dim: str) -> str:
    return f"Insufficient {dim}"


def predicate_nodes(
    ssn: Session,
    task: TaskInfo,
    rows: IntArray | None,
    cache: ErrorCache | None,
    opts: SearchOptions,
    *,
    check_resources: bool = True,
) -> tuple[IntArray, FitErrors]:
    """Feasible node rows for `task` (allocate's predicate: FutureIdle fit, then plugin predicates)."""
    table = ssn.table
    all_rows = rows is None
    if rows is None:
        n_total = len(table.nodes)
        rows = np.arange(n_total, dtype=np.int64)
    n = len(rows)
    fe = FitErrors()
    if n == 0:
        return rows, fe
    k = num_feasible_nodes_to_find(n, opts)
    start = ssn.last_processed_node_index % n if all_rows else 0
    order = rows if start == 0 else np.concatenate((rows[start:], rows[:start]))

    use_cache = cache is not None and bool(task.role)
    cached = cache.failed.get(task.role) if (cache is not None and use_cache) else None

    ok = np.ones(n, dtype=np.bool_)
    res_fail = np.zeros(n, dtype=np.bool_)
    cols, vals = table.request_columns(task)
    if check_resources:
        res_ok = table.fits(table.future_idle, cols, vals, order)
        res_fail = ~res_ok
        ok &= res_ok
    if cached is not None:
        cached_here = cached[order]
        ok &= ~cached_here
    live = np.flatnonzero(ok)
    plugin_fail = np.zeros(n, dtype=np.bool_)
    reasons: list[tuple[str, BoolArray]] = []
    unresolvable = np.zeros(n, dtype=np.bool_)
    if live.size:
        p_ok, p_reasons, p_unres, _ = ssn.predicate_batch(task, order[live])
        plugin_fail[live[~p_ok]] = True
        ok[live[~p_ok]] = False
        for text, mask in p_reasons:
            full = np.zeros(n, dtype=np.bool_)
            full[live[mask]] = True
            reasons.append((text, full))
        unresolvable[live[p_unres]] = True

    feasible_pos = np.flatnonzero(ok)
    if feasible_pos.size > k:
        processed = int(feasible_pos[k]) + 1  # the (k+1)-th is examined, then the search stops
        chosen = feasible_pos[:k]
    else:
        processed = n
        chosen = feasible_pos
    if all_rows:
        ssn.last_processed_node_index = (start + processed) % n

    failed_processed = ~ok
    failed_processed[processed:] = False
    if cache is not None and use_cache and failed_processed.any():
        prev = cache.failed.get(task.role)
        mark = np.zeros(len(table.nodes), dtype=np.bool_) if prev is None else prev.copy()
        mark[order[failed_processed]] = True
        cache.failed[task.role] = mark

    if chosen.size == 0:
        _fill_fit_errors(
            ssn, task, fe, order, failed_processed, res_fail, reasons, unresolvable, cols, vals, cached
        )
    return order[chosen], fe


CACHED_FAILURE = "node(s) failed the predicates for an earlier task of the same role"


def _fill_fit_errors(
    ssn: Session,
    task: TaskInfo,
    fe: FitErrors,
    order: IntArray,
    failed: BoolArray,
    res_fail: BoolArray,
    reasons: list[tuple[str, BoolArray]],
    unresolvable: BoolArray,
    cols: IntArray,
    vals: np.ndarray,
    cached: BoolArray | None,
) -> None:
    table = ssn.table
    counts: Counter[str] = Counter()
    res_rows = np.flatnonzero(res_fail & failed)
    if res_rows.size:
        # Which resource is first insufficient: FutureIdle, cpu, memory, then scalars sorted.
        for dim, c in Counter(
            table.first_insufficient(table.future_idle, cols, vals, order[res_rows])
        ).items():
            counts[insufficient_reason(dim)] += c
    for text, mask in reasons:
        c = int(np.count_nonzero(mask & failed))
        if c:
            counts[text] += c
    if cached is not None:
        # Nodes skipped through the error cache failed for an earlier task of this role; Volcano
        # reports that earlier error.  Re-evaluate them (only on this failure path) for the reason.
        evaluated = np.zeros(len(order), dtype=np.bool_)
        for _, mask in reasons:
            evaluated |= mask
        skipped = np.flatnonzero(failed & ~res_fail & cached[order] & ~evaluated)
        if skipped.size:
            p_ok, p_reasons, p_unres, _ = ssn.predicate_batch(task, order[skipped])
            for text, mask in p_reasons:
                counts[text] += int(np.count_nonzero(mask))
            unresolvable[skipped[p_unres]] = True
            still = int(np.count_nonzero(p_ok))
            if still:
                counts[CACHED_FAILURE] += still
    names = {table.names[int(order[i])] for i in np.flatnonzero(unresolvable & failed)}
    fe.add_counts(dict(counts), int(np.count_nonzero(failed)), names)


def choose_node(ssn: Session, task: TaskInfo, candidates: IntArray) -> NodeInfo | None:
    """Allocate's prioritizeNodes: idle-fit group first, then future-idle-fit; best score wins."""
    if candidates.size == 0:
        return None
    table = ssn.table
    cols, vals = table.request_columns(task)
    idle_ok = table.fits(table.idle, cols, vals, candidates)
    groups = [candidates[idle_ok]]
    rest = candidates[~idle_ok]
    if rest.size:
        fut_ok = table.fits(table.future_idle, cols, vals, rest)
        groups.append(rest[fut_ok])
    for group in groups:
        if group.size == 0:
            continue
        if group.size == 1:
            return table.nodes[int(group[0])]
        return best_scored(ssn, task, group)
    return None


def best_scored(ssn: Session, task: TaskInfo, group: IntArray) -> NodeInfo:
    table = ssn.table
    if not ssn.has_node_scores() and not ssn.has("bestNode"):
        return table.nodes[int(group[0])]
    scores = ssn.node_score_batch(task, group)
    if ssn.has("bestNode"):
        by_score: dict[float, list[NodeInfo]] = {}
        for row, s in zip(group, scores, strict=True):
            by_score.setdefault(float(s), []).append(table.nodes[int(row)])
        picked = ssn.best_node_fn(task, by_score)
        if picked is not None:
            return picked
    return table.nodes[int(group[int(np.argmax(scores))])]
