"""Vectorised node search and choice shared by allocate and backfill.

Volcano's PredicateNodes walks nodes from a rotating start index in parallel and stops once
enough feasible nodes are found (CalculateNumOfFeasibleNodesToFind); we evaluate every node's
fit with array operations and then take the same window sequentially, so the result does not
depend on goroutine timing: the candidates are the first `k` feasible nodes in rotated order,
and the start index advances past the nodes that a sequential scan would have examined.

Where Volcano picks at random among nodes with the best score, we take the first of them in
candidate order (node-list order from the search start).  With fewer than 100 nodes the start
index never moves, so ties go to the earliest node in the node list. With `tie_seed` set (the
studies' paper policies) the tied node is instead drawn by the seeded, order-free rule of
`fumarole.daemon.scheduler.framework.ties`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fumarole.daemon.scheduler.framework.combinators import PREDICATE, ScoringError
from fumarole.daemon.scheduler.framework.nodetable import RowMemo
from fumarole.daemon.scheduler.framework.ties import least_key, node_keys, task_key
from fumarole.daemon.scheduler.model.fit import FitErrors

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.nodetable import BoolArray, IntArray
    from fumarole.daemon.scheduler.framework.session import Session
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.task import TaskInfo


@dataclass(slots=True)
class SearchOptions:
    """Scheduler flags that shape the node search (cmd/scheduler/app/options)."""

    minimum_feasible_nodes: int = 100
    minimum_percentage_nodes_to_find: int = 5
    percentage_nodes_to_find: int = 0
    # Not a Volcano flag: None keeps the first of the best-scored candidates; an int breaks ties by
    # the seeded rule of framework/ties.py (independent of node order).
    tie_seed: int | None = None
    # Not a Volcano flag: the typical workload of the fgd plugin (fgd_fragmentation.PodShape values;
    # a study gives its pod list's shapes, as the paper's simulator derives them from the list before
    # the inflation tuning); None: the session's tasks.
    typical_shapes: tuple[Any, ...] | None = None


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

    `rows` None means every node, searched from the session's rotating start index.  When every
    predicate is row-local for the task (see `row_local_key`), the search over all nodes reads a
    per-signature feasibility memo refreshed only on the rows changed since (`memo_search`); the
    result is the same as the full evaluation's.
    """
    if rows is None and len(ssn.table.nodes):
        found = memo_search(ssn, task, cache, opts, check_resources)
        if found is not None:
            return found, FitErrors()
    return full_search(ssn, task, rows, cache, opts, check_resources=check_resources)


def full_search(
    ssn: Session,
    task: TaskInfo,
    rows: IntArray | None,
    cache: ErrorCache | None,
    opts: SearchOptions,
    *,
    check_resources: bool = True,
    rotate: bool = False,
) -> tuple[IntArray, FitErrors]:
    """`predicate_nodes` evaluating every (given) node now; also the memo's failure path.

    `rotate`: the given rows are searched from the session's start index too, and move it
    (Volcano's PredicateNodes on a HyperNode's node list: the global index modulo its length).
    """
    table = ssn.table
    all_rows = rows is None or rotate
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
    live = ok.nonzero()[0]
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

    feasible = ok.nonzero()[0]
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

    failed = examined_failures(ok, start, processed)
    if cache is not None and task.role and failed.any():
        prev = cache.failed.get(task.role)
        mark = np.zeros(len(table.nodes), dtype=np.bool_) if prev is None else prev.copy()
        mark[failed.nonzero()[0] if base is None else base[failed]] = True
        cache.failed[task.role] = mark

    order = np.arange(n, dtype=np.int64) if base is None else base
    if chosen.size == 0:
        _fill_fit_errors(ssn, task, fe, order, failed, ~res_ok, reasons, unresolvable, cols, vals, cached)
    return (chosen if base is None else base[chosen]), fe


def examined_failures(ok: BoolArray, start: int, processed: int) -> BoolArray:
    """Rows a sequential scan from `start` reached (the first `processed`, cyclically) that failed."""
    n = len(ok)
    if processed >= n:
        out: BoolArray = ~ok
        return out
    failed = np.zeros(n, dtype=np.bool_)
    end = start + processed
    if end <= n:
        np.logical_not(ok[start:end], out=failed[start:end])
    else:
        np.logical_not(ok[start:], out=failed[start:])
        np.logical_not(ok[: end - n], out=failed[: end - n])
    return failed


def rotated_feasible(ok: BoolArray, start: int, k: int) -> IntArray:
    """Feasible rows in scan order from `start`: the first k + 1 of them at least, or all.

    The scan first looks at a stretch of a few times k rows, which holds k + 1 feasible rows
    when most nodes fit, before falling back to the whole ring.
    """
    n = len(ok)
    span = 4 * (k + 1)
    if start + span < n:
        head = ok[start : start + span].nonzero()[0]
        if head.size > k:
            head += start
            return head
    head = ok[start:].nonzero()[0]
    head += start
    if head.size > k or not start:
        return head
    return np.concatenate((head, ok[:start].nonzero()[0]))


# ============================================================================ incremental search
#
# Between two tasks with the same request and the same pod facts, a node's fit can only change
# if the node changed.  When every configured predicate is row-local for a task (its verdict on
# a node reads only that node's state and static facts; plugins say so through
# `NodeTable.row_local`), the fit of every node is kept per signature in a `RowMemo`; rows whose
# stamp (`NodeTable.version`) moved are re-evaluated only when the sequential scan reaches one of
# them, and then all together (the window is computed, and if its examined range holds a stale
# row, every stale row is re-evaluated and the window computed again; a few of them row by row
# in plain Python).  Rows outside the examined range do not affect the result, so the window,
# start index and error-cache bookkeeping are exactly those of `full_search`.  When no node
# fits, the full search runs for the fit errors.

MEMO_SIZE = 64


def row_local_key(ssn: Session, task: TaskInfo, check_resources: bool) -> Hashable | None:
    """The task's feasibility signature, or None when some predicate is not row-local for it.

    A signature, once given, holds for the task for the rest of the session (the contract of
    `NodeTable.row_local`), so it is kept per task object.
    """
    table = ssn.table
    held = table.row_keys.get(id(task))
    if held is not None and held[0] is task and held[1] == check_resources:
        return held[2]
    key = compute_row_local_key(ssn, task, check_resources)
    if key is not None:
        table.row_keys[id(task)] = (task, check_resources, key)
    return key


def compute_row_local_key(ssn: Session, task: TaskInfo, check_resources: bool) -> Hashable | None:
    table = ssn.table
    parts: list[tuple[str, Hashable]] = []
    for name, _ in ssn.callbacks(PREDICATE):
        fn = table.row_local.get(name)
        if fn is None:
            return None
        part = fn(task)
        if part is None:
            return None
        parts.append((name, part))
    if not check_resources:
        return (False, tuple(parts))
    cols, vals = table.request_columns(task)
    return (True, tuple(cols), tuple(vals), tuple(parts))


def memo_for(ssn: Session, key: Hashable) -> RowMemo:
    """The signature's memo (least recently used ones are dropped beyond `MEMO_SIZE`)."""
    memos = ssn.table.feasible_memo
    memo = memos.get(key)
    if memo is None:
        memo = memos[key] = RowMemo(len(ssn.table.nodes))
        if len(memos) > MEMO_SIZE:
            memos.popitem(last=False)
    else:
        memos.move_to_end(key)
    return memo


def evaluate_rows(ssn: Session, task: TaskInfo, memo: RowMemo, rows: IntArray, check_resources: bool) -> None:
    """Fit of `rows` now (FutureIdle, then the plugin predicates on the rows that fit), stamped."""
    table = ssn.table
    if len(rows) <= FEW_ROWS:
        evaluate_few_rows(ssn, task, memo, rows, check_resources)
        return
    if check_resources:
        cols, vals = table.request_columns(task)
        fit = table.fits(table.future_idle, cols, vals, rows)
        memo.idle[rows] = table.fits(table.idle, cols, vals, rows)
    else:
        fit = np.ones(rows.size, dtype=np.bool_)
    live = fit.nonzero()[0]
    if live.size and ssn.has(PREDICATE):
        p_ok, _, _ = ssn.predicate_batch(task, rows[live])
        fit[live[~p_ok]] = False
    memo.ok[rows] = fit
    memo.stamp[rows] = table.version[rows]


# Stale rows up to this many are evaluated row by row in plain Python (`evaluate_few_rows`).
FEW_ROWS = 4


def evaluate_few_rows(
    ssn: Session, task: TaskInfo, memo: RowMemo, rows: IntArray, check_resources: bool
) -> None:
    """`evaluate_rows` for a few rows: the same comparisons one row at a time.

    The resource fit compares every column against `NodeTable.thresholds` (request - 0.1 on
    the compared columns, -inf elsewhere) as `NodeTable.fits` does for few rows; the plugin
    predicates are each node's PredicateFn, whose verdicts are their batch's (the predicate
    plugins' tests compare them).
    """
    table = ssn.table
    has_predicates = ssn.has(PREDICATE)
    nodes = table.nodes
    if check_resources:
        cols, vals = table.request_columns(task)
        thr = table.thresholds(cols, vals).tolist()
        future_idle, idle = table.future_idle.item, table.idle.item
    for row in rows.tolist():
        fit = True
        if check_resources:
            fit = all(future_idle(row, c) > t for c, t in enumerate(thr))
            memo.idle[row] = all(idle(row, c) > t for c, t in enumerate(thr))
        if fit and has_predicates:
            fit = ssn.predicate_fn(task, nodes[row]) is None
        memo.ok[row] = fit
        memo.stamp[row] = table.version[row]


def stale_in_scan(stamp: IntArray, version: IntArray, start: int, processed: int) -> bool:
    """Whether a row among the first `processed` of a cyclic scan from `start` has a moved stamp."""
    n = len(stamp)
    end = start + processed
    if processed >= n:
        return bool((stamp != version).any())
    if end <= n:
        return bool((stamp[start:end] != version[start:end]).any())
    return bool((stamp[start:] != version[start:]).any() or (stamp[: end - n] != version[: end - n]).any())


def scan_window(feasible: IntArray, start: int, k: int, n: int) -> tuple[IntArray, int]:
    """The first k feasible rows and how many rows the sequential scan examined."""
    if feasible.size > k:
        # The (k+1)-th feasible node is examined, then the search stops.
        return feasible[:k], int((feasible[k] - start) % n) + 1
    return feasible, n


def memo_search(
    ssn: Session, task: TaskInfo, cache: ErrorCache | None, opts: SearchOptions, check_resources: bool
) -> IntArray | None:
    """`full_search` over all nodes through the feasibility memo; None: not applicable or no fit."""
    key = row_local_key(ssn, task, check_resources)
    if key is None:
        return None
    memo = memo_for(ssn, key)
    role = task.role if cache is not None else ""
    cached = cache.failed.get(role) if (cache is not None and role) else None
    n = len(memo.ok)
    k = num_feasible_nodes_to_find(n, opts)
    start = ssn.last_processed_node_index % n
    version = ssn.table.version
    ok = memo.ok if cached is None else (memo.ok & ~cached)
    feasible = rotated_feasible(ok, start, k)
    chosen, processed = scan_window(feasible, start, k, n)
    if stale_in_scan(memo.stamp, version, start, processed):
        # Bring every stale row up to date at once (one batch instead of one row per task), then
        # take the window again: no row is stale any more.
        evaluate_rows(ssn, task, memo, (memo.stamp != version).nonzero()[0], check_resources)
        ok = memo.ok if cached is None else (memo.ok & ~cached)
        feasible = rotated_feasible(ok, start, k)
        chosen, processed = scan_window(feasible, start, k, n)
    if feasible.size == 0:
        return None
    ssn.last_processed_node_index = (start + processed) % n
    if cache is not None and role:
        failed = examined_failures(ok, start, processed)
        if failed.any():
            cache.failed[role] = failed if cached is None else (cached | failed)
    if check_resources:
        # Every candidate row is current now: choose_node may read their Idle fit from here.
        ssn.table.search_hint = (chosen, memo.idle[chosen])
    return chosen


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


def choose_node(
    ssn: Session, task: TaskInfo, candidates: IntArray, tie_seed: int | None = None
) -> NodeInfo | None:
    """Allocate's prioritizeNodes: idle-fit group first, then future-idle-fit; best score wins."""
    if candidates.size == 0:
        return None
    table = ssn.table
    cols, vals = table.request_columns(task)
    hint = table.search_hint
    table.search_hint = None
    if hint is not None and hint[0] is candidates:
        idle_ok = hint[1]  # computed by memo_search on these very rows, nothing changed since
    else:
        idle_ok = table.fits(table.idle, cols, vals, candidates)
    if idle_ok.all():
        try:
            return candidates_best(ssn, task, candidates, tie_seed)
        except ScoringError:
            return None  # no scores for the idle group, and no future-idle group
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
        try:
            return best_scored(ssn, task, group, tie_seed)
        except ScoringError:
            continue  # Volcano's PrioritizeNodes gave no scores: the next group is tried
    return None


def candidates_best(ssn: Session, task: TaskInfo, group: IntArray, tie_seed: int | None = None) -> NodeInfo:
    if group.size == 1:
        return ssn.table.nodes[int(group[0])]
    return best_scored(ssn, task, group, tie_seed)


def _tie_break(ssn: Session, task: TaskInfo, tied: IntArray, seed: int | None) -> NodeInfo:
    """The first tied row, or with a seed the one framework/ties.py draws."""
    table = ssn.table
    if seed is None or tied.size == 1:
        return table.nodes[int(tied[0])]
    keys = node_keys([table.names[int(r)] for r in tied])
    return table.nodes[int(tied[least_key(keys, task_key(seed, task.key))])]


def best_scored(ssn: Session, task: TaskInfo, group: IntArray, tie_seed: int | None = None) -> NodeInfo:
    table = ssn.table
    if not ssn.has_node_scores() and not ssn.has("bestNode"):
        return _tie_break(ssn, task, group, tie_seed)
    local = ssn.local_scoring
    scores = local.scores(task, group) if local is not None else None
    if scores is None:
        scores = ssn.node_score_batch(task, group)
    if ssn.has("bestNode"):
        by_score: dict[float, list[NodeInfo]] = {}
        for row, s in zip(group, scores, strict=True):
            by_score.setdefault(float(s), []).append(table.nodes[int(row)])
        picked = ssn.best_node_fn(task, by_score)
        if picked is not None:
            return picked
    if tie_seed is None:
        return table.nodes[int(group[int(np.argmax(scores))])]
    scores = np.asarray(scores)
    return _tie_break(ssn, task, group[scores == scores.max()], tie_seed)
