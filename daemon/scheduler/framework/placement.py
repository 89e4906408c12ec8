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
    """Feasible node rows for `task` (allocate's predicate: FutureIdle fit, then plugin predicates).

    `rows` None means every node, searched from the session's rotating start index.
    """
    table = ssn.table
    all_rows = rows is None
    if rows is None:
        n = len(table.nodes)
        base = None
    else:
        n = len(rows)
        base = rows
    fe = FitErrors()
    if n == 0:
        return np.zeros(0, dtype=np.int64), fe
    k = num_feasible_nodes_to_find(n, opts)
    start = ssn.last_processed_node_index % n if all_rows else 0
    cached = cache.failed.get(task.role) if (cache is not None and task.role) else None

    cols, vals = table.request_columns(task)
    if check_resources:
        res_ok = table.fits(table.future_idle, cols, vals, base)
        ok = res_ok.copy()
    else:
        res_ok = np.ones(n, dtype=np.bool_)
        ok = np.ones(n, dtype=np.bool_)
    if cached is not None:
        ok &= ~(cached if base is None else cached[base])
    live = np.flatnonzero(ok)
    reasons: list[tuple[str, BoolArray]] = []
    unresolvable = np.zeros(n, dtype=np.bool_)
    if live.size and ssn.has("predicate"):
        live_rows = live if base is None else base[live]
        p_ok, p_reasons, p_unres = ssn.predicate_batch(task, live_rows)
        if not p_ok.all():
            ok[live[~p_ok]] = False
            for text, mask in p_reasons:
                full = np.zeros(n, dtype=np.bool_)
                full[live[mask]] = True
                reasons.append((text, full))
            unresolvable[live[p_unres]] = True

    feasible = np.flatnonzero(ok)
    if start:
        feasible = np.concatenate((feasible[feasible >= start], feasible[feasible < start]))
    if feasible.size > k:
        # The (k+1)-th feasible node is examined, then the search stops.
        processed = int((feasible[k] - start) % n) + 1
        chosen = feasible[:k]
    else:
        processed = n
        chosen = feasible
    if all_rows:
        ssn.last_processed_node_index = (start + processed) % n

    failed = ~ok
    if processed < n:
        # Only nodes a sequential scan from `start` reached count as examined.
        pos = (np.arange(n) - start) % n
        failed &= pos < processed
    if cache is not None and task.role and failed.any():
        prev = cache.failed.get(task.role)
        mark = np.zeros(len(table.nodes), dtype=np.bool_) if prev is None else prev.copy()
        mark[np.flatnonzero(failed) if base is None else base[failed]] = True
        cache.failed[task.role] = mark

    order = np.arange(n, dtype=np.int64) if base is None else base
    if chosen.size == 0:
        _fill_fit_errors(ssn, task, fe, order, failed, ~res_ok, reasons, unresolvable, cols, vals, cached)
    return (chosen if base is None else base[chosen]), fe


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
    cols: list[int],
    vals: list[float],
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
            p_ok, p_reasons, p_unres = ssn.predicate_batch(task, order[skipped])
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
