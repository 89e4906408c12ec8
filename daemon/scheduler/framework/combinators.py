"""How callbacks of plugins across tiers are combined (framework/session_plugins.go semantics).

Extension points are named by the constants below.  After every plugin's session open the
session compiles, per point, the tiers of enabled, registered callbacks; each combinator then
walks that list with Volcano's rule (first non-zero, AND, OR, vote, tiered intersection, sum).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fumarole.daemon.scheduler.framework.job_memo import JobMemo
from fumarole.daemon.scheduler.framework.score_memo import LocalScoreKey, LocalScores, LocalScoring
from fumarole.daemon.scheduler.model.fit import FitError

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.conf import Tier
    from fumarole.daemon.scheduler.framework.nodetable import BoolArray, FloatArray, IntArray, NodeTable
    from fumarole.daemon.scheduler.model.job import JobInfo
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.queue import QueueInfo
    from fumarole.daemon.scheduler.model.task import TaskInfo

# Extension point -> the enable flag (conf attribute) that gates it; None = no flag.
JOB_ORDER = "jobOrder"
QUEUE_ORDER = "queueOrder"
VICTIM_QUEUE_ORDER = "victimQueueOrder"
TASK_ORDER = "taskOrder"
PREDICATE = "predicate"
PRE_PREDICATE = "prePredicate"
NODE_ORDER = "nodeOrder"
BATCH_NODE_ORDER = "batchNodeOrder"
BEST_NODE = "bestNode"
PREEMPTABLE = "preemptable"
RECLAIMABLE = "reclaimable"
UNIFIED_EVICTABLE = "unifiedEvictable"
OVERUSED = "overused"
ALLOCATABLE = "allocatable"
PREEMPTIVE = "preemptive"
JOB_READY = "jobReady"
JOB_PIPELINED = "jobPipelined"
JOB_VALID = "jobValid"
JOB_STARVING = "jobStarving"
JOB_ENQUEUEABLE = "jobEnqueueable"
JOB_ENQUEUED = "jobEnqueued"
VICTIM_TASKS = "victimTasks"
SIMULATE_ALLOCATABLE = "simulateAllocatable"
SIMULATE_PREDICATE = "simulatePredicate"
SIMULATE_ADD_TASK = "simulateAddTask"
SIMULATE_REMOVE_TASK = "simulateRemoveTask"
HYPERNODE_ORDER = "hyperNodeOrder"
HYPERNODE_GRADIENT_JOB = "hyperNodeGradientForJob"
HYPERNODE_GRADIENT_SUBJOB = "hyperNodeGradientForSubJob"

POINT_FLAGS: dict[str, str | None] = {
    JOB_ORDER: "job_order",
    QUEUE_ORDER: "queue_order",
    VICTIM_QUEUE_ORDER: None,
    TASK_ORDER: "task_order",
    PREDICATE: "predicate",
    PRE_PREDICATE: "predicate",
    NODE_ORDER: "node_order",
    BATCH_NODE_ORDER: "node_order",
    BEST_NODE: "best_node",
    PREEMPTABLE: "preemptable",
    RECLAIMABLE: "reclaimable",
    UNIFIED_EVICTABLE: None,
    OVERUSED: "overused",
    ALLOCATABLE: "allocatable",
    PREEMPTIVE: "preemptive",
    JOB_READY: "job_ready",
    JOB_PIPELINED: "job_pipelined",
    JOB_VALID: None,
    JOB_STARVING: "job_starving",
    JOB_ENQUEUEABLE: "job_enqueued",
    JOB_ENQUEUED: "job_enqueued",
    VICTIM_TASKS: "victim",
    SIMULATE_ALLOCATABLE: "allocatable",
    SIMULATE_PREDICATE: "predicate",
    SIMULATE_ADD_TASK: "preemptable|allocatable",
    SIMULATE_REMOVE_TASK: "preemptable|allocatable",
    HYPERNODE_ORDER: "hyper_node_order",
    HYPERNODE_GRADIENT_JOB: "hyper_node_gradient",
    HYPERNODE_GRADIENT_SUBJOB: "hyper_node_gradient",
}

PERMIT = 1
ABSTAIN = 0
REJECT = -1

# api.EvictionKind: why UnifiedEvictable is asked (gang-aware preempt or reclaim).
EVICTION_KIND_GANG_PREEMPT = "GangPreempt"
EVICTION_KIND_GANG_RECLAIM = "GangReclaim"


class ScoringError(Exception):
    """A BatchNodeOrderFn's error (the extender's prioritize): Volcano's PrioritizeNodes then
    returns no scores at all, so the node group being scored yields no node (allocate and the
    simulate helper try their next group, preempt has no node to try)."""


@dataclass(frozen=True, slots=True)
class EvictionContext:
    """api.EvictionContext handed to UnifiedEvictable callbacks: kind, evicting job, domain."""

    kind: str
    job: JobInfo
    hyper_node: str = ""


Chain = list[list[tuple[str, Any]]]
_INDEX_RE = re.compile(r"^[+-]?\d+$")


def _enabled(flags: dict[str, bool | None], flag: str | None) -> bool:
    if flag is None:
        return True
    return any(bool(flags.get(f)) for f in flag.split("|"))


@functools.lru_cache(maxsize=1 << 18)
def pod_name_index(name: str) -> int | None:
    """The numeric index CompareTask reads from a pod name (its last `-` part), None without one."""
    parts = name.split("-")
    last = parts[-1] if len(parts) >= 3 else ""
    return int(last) if _INDEX_RE.match(last) else None


def compare_task_default(l: TaskInfo, r: TaskInfo) -> bool:
    """helpers.CompareTask: numeric pod-name index, then creation time, then uid."""
    lv = pod_name_index(l.name)
    if lv is not None:
        rv = pod_name_index(r.name)
        if rv is not None and lv != rv:
            return lv < rv
    if l.creation == r.creation:
        return l.uid < r.uid
    return l.creation < r.creation


class Combinators:
    """Mixin of the Session: combination rules for every extension point."""

    tiers: list[Tier]
    fns: dict[str, dict[str, Any]]
    batch_fns: dict[str, dict[str, Any]]
    _chains: dict[str, Chain]
    _flat: dict[str, list[tuple[str, Any]]]
    _batch_flat: dict[str, list[tuple[str, Any]]]
    table: NodeTable
    measure_callbacks: bool
    # Node-local scorers by (point, plugin), registered at plugin open (lazily created), and the
    # memoised scoring compiled from them when every scorer in force has one.
    # JobStarving's answers kept across sessions (job_memo.py); None: ask the plugins every time.
    starving_memo: JobMemo | None = None
    _local_score_fns: dict[tuple[str, str], tuple[LocalScoreKey, LocalScores]] | None = None
    local_scoring: LocalScoring | None = None

    def register_local_score(self, point: str, plugin: str, key: LocalScoreKey, scores: LocalScores) -> None:
        """Declare `plugin`'s scorer at `point` (NodeOrder or BatchNodeOrder) node-local where `key`
        gives a task a signature: `scores(task, rows)` then equals its batch scores of `rows`,
        row by row, whatever the other rows (see score_memo.py)."""
        if self.measure_callbacks:
            scores = self._measured(plugin, point, scores)
        if self._local_score_fns is None:
            self._local_score_fns = {}
        self._local_score_fns[(point, plugin)] = (key, scores)

    def compile_chains(self) -> None:
        """Freeze, per point, the tiers of enabled and registered callbacks (after session open)."""
        self._chains = {}
        self._flat = {}
        self._batch_flat = {}
        for point, flag in POINT_FLAGS.items():
            registered = self.fns.get(point, {})
            batch = self.batch_fns.get(point, {})
            chain: Chain = []
            flat: list[tuple[str, Any]] = []
            bflat: list[tuple[str, Any]] = []
            for tier in self.tiers:
                row = []
                for p in tier.plugins:
                    if p.name in registered and _enabled(p.flags, flag):
                        row.append((p.name, registered[p.name]))
                        flat.append((p.name, registered[p.name]))
                        bflat.append((p.name, batch.get(p.name)))
                chain.append(row)
            self._chains[point] = chain
            self._flat[point] = flat
            self._batch_flat[point] = bflat
        self.local_scoring = self._compile_local_scoring()

    def _compile_local_scoring(self) -> LocalScoring | None:
        """Memoised scores when every NodeOrder and BatchNodeOrder scorer in force is node-local
        for some tasks (in `node_score_batch`'s order) and no BestNode callback reads the scores."""
        local = self._local_score_fns
        if local is None or self._flat[BEST_NODE]:
            return None
        scorers = []
        for point in (NODE_ORDER, BATCH_NODE_ORDER):
            for name, batch in self._batch_flat[point]:
                found = local.get((point, name))
                if found is None or batch is None:
                    return None
                scorers.append(found)
        if not scorers:
            return None
        return LocalScoring(scorers, self.table.version)

    def has(self, point: str) -> bool:
        return bool(self._flat.get(point))

    # ----------------------------------------------------------------- orders
    def job_order_compare(self, l: JobInfo, r: JobInfo) -> int:
        for _, fn in self._flat[JOB_ORDER]:
            j = fn(l, r)
            if j != 0:
                return int(j)
        return 0

    def job_order_fn(self, l: JobInfo, r: JobInfo) -> bool:
        for _, fn in self._flat[JOB_ORDER]:
            j = fn(l, r)
            if j != 0:
                return bool(j < 0)
        if l.creation == r.creation:
            return l.uid < r.uid
        return l.creation < r.creation

    def queue_order_fn(self, l: QueueInfo, r: QueueInfo) -> bool:
        for _, fn in self._flat[QUEUE_ORDER]:
            j = fn(l, r)
            if j != 0:
                return bool(j < 0)
        if l.creation == r.creation:
            return l.uid < r.uid
        return l.creation < r.creation

    def victim_queue_order_fn(self, l: QueueInfo, r: QueueInfo, preemptor: QueueInfo | None) -> bool:
        for _, fn in self._flat[VICTIM_QUEUE_ORDER]:
            j = fn(l, r, preemptor)
            if j != 0:
                return bool(j < 0)
        return not self.queue_order_fn(l, r)

    def task_compare(self, l: TaskInfo, r: TaskInfo) -> int:
        for _, fn in self._flat[TASK_ORDER]:
            j = fn(l, r)
            if j != 0:
                return int(j)
        return 0

    def task_order_fn(self, l: TaskInfo, r: TaskInfo) -> bool:
        for _, fn in self._flat[TASK_ORDER]:
            j = fn(l, r)
            if j != 0:
                return bool(j < 0)
        return compare_task_default(l, r)

    # ----------------------------------------------------------------- predicates
    def pre_predicate_fn(self, task: TaskInfo) -> Exception | None:
        for _, fn in self._flat[PRE_PREDICATE]:
            err = fn(task)
            if err is not None:
                return err  # type: ignore[no-any-return]
        return None

    def predicate_fn(self, task: TaskInfo, node: NodeInfo) -> FitError | Exception | None:
        for _, fn in self._flat[PREDICATE]:
            err = fn(task, node)
            if err is not None:
                return err  # type: ignore[no-any-return]
        return None

    def predicate_batch(
        self, task: TaskInfo, rows: IntArray
    ) -> tuple[BoolArray, list[tuple[str, BoolArray]], BoolArray]:
        """Vectorised PredicateFn over node rows, preserving first-error-wins across plugins.

        Returns (ok, reasons, unresolvable) for the rows: `reasons` pairs a reason text with the
        mask of rows whose first failing plugin gave it.
        """
        n = len(rows)
        plugins = self._batch_flat[PREDICATE]
        if len(plugins) == 1 and plugins[0][1] is not None and n:
            # One vectorised plugin: its answer is the combination (every row is live for it).
            only_ok, only_reasons, only_unres = plugins[0][1](task, rows)
            if only_unres is None:
                only_unres = np.zeros(n, dtype=np.bool_)
            return only_ok, list(only_reasons), only_unres
        ok = np.ones(n, dtype=np.bool_)
        unresolvable = np.zeros(n, dtype=np.bool_)
        reasons: list[tuple[str, BoolArray]] = []
        nodes = self.node_list_ref()
        for name, batch in plugins:
            live = ok.nonzero()[0]
            if live.size == 0:
                break
            if batch is not None:
                res = batch(task, rows[live])
                sub_ok, sub_reasons, sub_unres = res
                failed_local = live[~sub_ok]
                ok[failed_local] = False
                for text, mask in sub_reasons:
                    full = np.zeros(n, dtype=np.bool_)
                    full[live[mask]] = True
                    reasons.append((text, full))
                if sub_unres is not None:
                    unresolvable[live[sub_unres]] = True
            else:
                fn = self.fns[PREDICATE][name]
                for k in live:
                    err = fn(task, nodes[int(rows[k])])
                    if err is None:
                        continue
                    ok[k] = False
                    if isinstance(err, FitError):
                        for text in err.reasons():
                            m = np.zeros(n, dtype=np.bool_)
                            m[k] = True
                            reasons.append((text, m))
                        if err.unresolvable:
                            unresolvable[k] = True
                    else:
                        m = np.zeros(n, dtype=np.bool_)
                        m[k] = True
                        reasons.append((str(err), m))
        return ok, reasons, unresolvable

    def node_list_ref(self) -> list[NodeInfo]:
        raise NotImplementedError

    def _measured(self, plugin: str, point: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        raise NotImplementedError

    # ----------------------------------------------------------------- scores
    def node_score_batch(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """Sum of NodeOrderFn and BatchNodeOrderFn scores of every enabled plugin for the rows.

        A BatchNodeOrderFn may raise ScoringError (Volcano's error return): it propagates."""
        total = np.zeros(len(rows))
        nodes = self.node_list_ref()
        for point in (NODE_ORDER, BATCH_NODE_ORDER):
            for name, batch in self._batch_flat[point]:
                if batch is not None:
                    scores = batch(task, rows)
                    if scores is not None:  # None: the plugin scores 0 on every row
                        total += scores
                    continue
                fn = self.fns[point][name]
                if point == NODE_ORDER:
                    total += np.fromiter(
                        (fn(task, nodes[int(i)]) for i in rows), dtype=np.float64, count=len(rows)
                    )
                else:
                    scores = fn(task, [nodes[int(i)] for i in rows])
                    total += np.fromiter(
                        (scores.get(nodes[int(i)].name, 0.0) for i in rows), dtype=np.float64, count=len(rows)
                    )
        return total

    # ----------------------------------------------------------------- hypernodes
    def hypernode_gradient(self, point: str, job: JobInfo, hypernode: str, purpose: str) -> list[list[str]]:
        """HyperNodeGradientFor{Job,SubJob}Fn: the first enabled registered plugin decides; none:
        the given HyperNode alone."""
        for _, fn in self._flat[point]:
            return fn(job, hypernode, purpose)  # type: ignore[no-any-return]
        return [[hypernode]]

    def hypernode_order_scores(self, job: JobInfo, candidates: dict[str, list[NodeInfo]]) -> dict[str, float]:
        """HyperNodeOrderMapFn summed per HyperNode (util.PrioritizeHyperNodes); 0 where none scores."""
        total = dict.fromkeys(candidates, 0.0)
        for _, fn in self._flat[HYPERNODE_ORDER]:
            for name, score in fn(job, candidates).items():
                if name in total:
                    total[name] += score
        return total

    def has_node_scores(self) -> bool:
        return bool(self._flat[NODE_ORDER] or self._flat[BATCH_NODE_ORDER])

    def best_node_fn(self, task: TaskInfo, scores: dict[float, list[NodeInfo]]) -> NodeInfo | None:
        for _, fn in self._flat[BEST_NODE]:
            node = fn(task, scores)
            if node is not None:
                return node  # type: ignore[no-any-return]
        return None

    # ----------------------------------------------------------------- victims
    # The plugins whose votes produced the last victim list (tier order), for eviction reasons.
    last_victim_deciders: tuple[str, ...] = ()

    def _tiered_victims(
        self, point: str, preemptor: Any, preemptees: list[TaskInfo]
    ) -> list[TaskInfo] | None:
        """Preemptable/Reclaimable/UnifiedEvictable: per-tier intersection (session_plugins.go).

        Also remembers, in `last_victim_deciders`, the plugins that voted for the returned list:
        those of the deciding tier since the list last restarted (an empty answer or an empty
        intersection restarts it); empty when no tier decided.
        """
        victims: list[TaskInfo] | None = None
        deciders: list[str] = []
        for row in self._chains[point]:
            for name, fn in row:
                candidates, abstain = fn(preemptor, preemptees)
                if abstain == 0:
                    continue
                if not candidates:
                    victims = None
                    deciders = []
                    break
                if victims is None:
                    victims = list(candidates)
                    deciders = [name]
                else:
                    cand_uids = {c.uid for c in candidates}
                    inter = [v for v in victims if v.uid in cand_uids]
                    victims = inter or None
                    deciders = [*deciders, name] if inter else []
            if victims is not None:
                self.last_victim_deciders = tuple(deciders)
                return victims
        self.last_victim_deciders = ()
        return victims

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        return self._tiered_victims(PREEMPTABLE, preemptor, preemptees) or []

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        return self._tiered_victims(RECLAIMABLE, reclaimer, reclaimees) or []

    def unified_evictable(self, ctx: EvictionContext, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """UnifiedEvictable (gangpreempt/gangreclaim): callbacks take (EvictionContext, candidates)."""
        return self._tiered_victims(UNIFIED_EVICTABLE, ctx, candidates) or []

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        for row in self._chains[VICTIM_TASKS]:
            seen: dict[str, TaskInfo] = {}
            for _, fn in row:
                for v in fn(tasks):
                    seen.setdefault(v.uid, v)
            if seen:
                return [seen[k] for k in sorted(seen)]
        return []

    # ----------------------------------------------------------------- queue and job predicates
    def overused(self, queue: QueueInfo) -> bool:
        for _, fn in self._flat[OVERUSED]:  # noqa: SIM110 - a plain loop is faster on this hot path
            if fn(queue):
                return True
        return False

    def allocatable_fn(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for _, fn in self._flat[ALLOCATABLE]:  # noqa: SIM110 - a plain loop is faster on this hot path
            if not fn(queue, task):
                return False
        return True

    def preemptive(self, queue: QueueInfo, task: TaskInfo | Sequence[TaskInfo]) -> bool:
        """PreemptiveFn (AND): reclaim passes one task, gangreclaim a job's pending tasks."""
        return all(fn(queue, task) for _, fn in self._flat[PREEMPTIVE])

    def job_ready(self, job: JobInfo) -> bool:
        for _, fn in self._flat[JOB_READY]:  # noqa: SIM110 - a plain loop is faster on this hot path
            if not fn(job):
                return False
        return True

    def _vote(self, point: str, job: JobInfo) -> bool:
        for row in self._chains[point]:
            permitted = False
            for _, fn in row:
                res = fn(job)
                if res < 0:
                    return False
                if res > 0:
                    permitted = True
            if permitted:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote(JOB_PIPELINED, job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote(JOB_ENQUEUEABLE, job)

    def job_enqueued(self, job: JobInfo) -> None:
        for _, fn in self._flat[JOB_ENQUEUED]:
            fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        """JobStarving: the first tier with a callback decides (all must say starving).

        Answered from the session before for a job this session has not touched (job_memo.py).
        """
        memo = self.starving_memo
        if memo is not None:
            return memo.answer(job, self._job_starving)
        return self._job_starving(job)

    def _job_starving(self, job: JobInfo) -> bool:
        for row in self._chains[JOB_STARVING]:
            if not row:
                continue
            return all(fn(job) for _, fn in row)
        return False

    def job_valid(self, job: JobInfo) -> Any:
        for _, fn in self._flat[JOB_VALID]:
            vr = fn(job)
            if vr is not None and not vr.passed:
                return vr
        return None

    def simulate_allocatable(self, queue: QueueInfo, task: TaskInfo, state: Any) -> bool:
        return all(fn(queue, task, state) for _, fn in self._flat[SIMULATE_ALLOCATABLE])

    # Simulate* (topology-aware preemption dry runs).  `state` is the preemptor's CycleState clone
    # for one node (see session.CycleState); callbacks keep their simulated figures in it.
    def simulate_predicate(self, state: Any, task: TaskInfo, node: NodeInfo) -> Exception | None:
        """SimulatePredicateFn: first error wins (flag enablePredicate)."""
        for _, fn in self._flat[SIMULATE_PREDICATE]:
            err = fn(state, task, node)
            if err is not None:
                return err  # type: ignore[no-any-return]
        return None

    def simulate_remove_task(self, state: Any, preemptor: TaskInfo, victim: TaskInfo, node: NodeInfo) -> None:
        """SimulateRemoveTaskFn on every enabled plugin (enablePreemptable or enabledAllocatable)."""
        for _, fn in self._flat[SIMULATE_REMOVE_TASK]:
            fn(state, preemptor, victim, node)

    def simulate_add_task(self, state: Any, preemptor: TaskInfo, task: TaskInfo, node: NodeInfo) -> None:
        """SimulateAddTaskFn on every enabled plugin (enablePreemptable or enabledAllocatable)."""
        for _, fn in self._flat[SIMULATE_ADD_TASK]:
            fn(state, preemptor, task, node)

    def callbacks(self, point: str) -> list[tuple[str, Callable[..., Any]]]:
        return list(self._flat.get(point, []))
