"""Victim selection and eviction dry runs shared by preempt, reclaim, gangpreempt and gangreclaim.

Everything here is a small function over a Session; nothing keeps state between calls except
the objects a caller passes in (an error cache, a cycle-state clone).  Volcano sources:
`actions/preempt/preempt.go` (victims on a node, topology-aware dry run, node choice),
`framework/session_plugins.go` (BuildVictimsPriorityQueue), `framework/session.go`
(FilterOutUnschedulableAndUnresolvableNodesForTask, PredicateForPreemptAction),
`util/scheduler_helper.go` (ValidateVictims, SortNodes), `util/predicate_helper.go`
(PredicateNodes with its per job/role error cache) and `actions/utils/{bundle,simulate,util}.go`
(the gang-aware victim bundles and the nomination dry run of gangpreempt / gangreclaim).

Victims are always the session's own TaskInfo objects (a node keeps clones of its tasks; Volcano
evicts clones and lets the job index swap them in, we look the originals up instead).

Where Volcano is random we are deterministic: predicate search runs sequentially from the
session's rotating start index; nodes with equal scores keep their predicate order; the
topology-aware dry run starts at offset 0 instead of a random one; the last tie between
candidate nodes goes to the first candidate in node order; a victim's start time is unknown to
the model, so the "latest start time" criterion never separates nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import TYPE_CHECKING

import numpy as np

from fumarole.daemon.scheduler.framework.combinators import ScoringError
from fumarole.daemon.scheduler.framework.placement import SearchOptions, num_feasible_nodes_to_find
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.statement import Operation, Statement, save_operations
from fumarole.daemon.scheduler.model.fit import Code, FitError
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import (
    ALLOCATED_STATUSES,
    PREEMPTABLE_STATUSES,
    TaskInfo,
    TaskStatus,
)

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import CycleState, Session
    from fumarole.daemon.scheduler.model.job import JobInfo
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.queue import QueueInfo

TaskFilter = Callable[[TaskInfo], bool]
NodePredicate = Callable[[TaskInfo, "NodeInfo"], "Exception | None"]
PREEMPTABLE_LABEL = "volcano.sh/preemptable"


# =============================================================================================
# eviction reasons


def eviction_reason(verb: str, evictor: str, job: JobInfo, deciders: Sequence[str]) -> str:
    """`<verb> by <evictor> of job <ns>/<pg> (priority P); victims chosen by <plugins>`.

    `evictor` names the preempting pod (`ns/name`) or is empty for job-level (gang) evictions.
    """
    who = f"{evictor} of job {job.uid}" if evictor else f"job {job.uid}"
    text = f"{verb} by {who} (priority {job.priority})"
    if deciders:
        text += "; victims chosen by " + ", ".join(deciders)
    return text


# =============================================================================================
# candidate nodes


def nodes_without_unresolvable(ssn: Session, task: TaskInfo) -> list[NodeInfo]:
    """FilterOutUnschedulableAndUnresolvableNodesForTask: drop nodes an earlier action found
    UnschedulableAndUnresolvable for this task (node-list order kept; Volcano's map order is random)."""
    job = ssn.jobs.get(task.job)
    fe = job.nodes_fit_errors.get(task.uid) if job is not None else None
    if fe is None:
        return list(ssn.node_list)
    skip = fe.unresolvable_nodes()
    if not skip:
        return list(ssn.node_list)
    return [n for n in ssn.node_list if n.name not in skip]


def predicate_for_preempt(ssn: Session, task: TaskInfo, node: NodeInfo) -> Exception | None:
    """PredicateForPreemptAction: only UnschedulableAndUnresolvable, Error, Skip or Wait fail
    (a plain Unschedulable node may be fixed by evicting someone)."""
    err = ssn.predicate_fn(task, node)
    if err is None:
        return None
    if not isinstance(err, FitError):
        return FitError(task.namespace, task.name, node.name, [(Code.ERROR, str(err))])
    blocking = {Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.ERROR, Code.SKIP, Code.WAIT}
    return err if err.codes() & blocking else None


def fits_future_idle_then_preempt_predicate(ssn: Session, task: TaskInfo, node: NodeInfo) -> Exception | None:
    """actions/utils simulatePredicate: the request must fit FutureIdle, then PredicateForPreemptAction."""
    if not task.init_resreq.less_equal(node.future_idle()):
        return FitError(
            task.namespace, task.name, node.name, [(Code.UNSCHEDULABLE, "Insufficient resources")]
        )
    return predicate_for_preempt(ssn, task, node)


@dataclass(slots=True)
class PredicateErrorCache:
    """util.predicateHelper: nodes that failed for a task of the same job and role are not retried."""

    enabled: bool = True
    failed: dict[str, dict[str, Exception]] = field(default_factory=dict)


def predicate_nodes(
    ssn: Session,
    task: TaskInfo,
    nodes: list[NodeInfo],
    fn: NodePredicate,
    cache: PredicateErrorCache | None,
    opts: SearchOptions | None = None,
) -> list[NodeInfo]:
    """PredicateNodes, sequentially: from the session's rotating start index, keep feasible nodes
    until `numFeasibleNodesToFind` are found, and advance the start index past those examined."""
    n = len(nodes)
    if n == 0:
        return []
    want = num_feasible_nodes_to_find(n, opts or SearchOptions())
    use_cache = cache is not None and cache.enabled and bool(task.role)
    group = f"{task.job}/{task.role}"
    failed_before = cache.failed.get(group) if (use_cache and cache is not None) else None
    start = ssn.last_processed_node_index % n
    found: list[NodeInfo] = []
    processed = 0
    for i in range(n):
        node = nodes[(start + i) % n]
        processed += 1
        if failed_before is not None and node.name in failed_before:
            continue
        err = fn(task, node)
        if err is not None:
            if use_cache and cache is not None:
                cache.failed.setdefault(group, {})[node.name] = err
            continue
        if len(found) == want:
            break
        found.append(node)
    ssn.last_processed_node_index = (start + processed) % n
    return found


def sort_nodes_by_score(ssn: Session, task: TaskInfo, nodes: list[NodeInfo]) -> list[NodeInfo]:
    """PrioritizeNodes + SortNodes: highest score first; equal scores keep their input order."""
    if len(nodes) <= 1 or not ssn.has_node_scores():
        return list(nodes)
    try:
        scores = ssn.node_score_batch(task, ssn.table_rows(nodes))
    except ScoringError:
        return []  # Volcano's PrioritizeNodes gave no scores: SortNodes has no node
    order = sorted(range(len(nodes)), key=lambda i: -float(scores[i]))
    return [nodes[i] for i in order]


def best_node_for_simulate(ssn: Session, task: TaskInfo, nodes: list[NodeInfo]) -> NodeInfo | None:
    """prioritizeNodesForSimulate: nodes where the task fits Idle first, else FutureIdle; the best
    score wins (BestNodeFn first), ties to the first node."""
    idle = [n for n in nodes if task.init_resreq.less_equal(n.idle)]
    future = [n for n in nodes if n not in idle and task.init_resreq.less_equal(n.future_idle())]
    for group in (idle, future):
        if not group:
            continue
        if len(group) == 1:
            return group[0]
        if not ssn.has_node_scores() and not ssn.has("bestNode"):
            return group[0]
        try:
            scores = ssn.node_score_batch(task, ssn.table_rows(group))
        except ScoringError:
            continue  # no scores for this group: the next one is tried
        if ssn.has("bestNode"):
            by_score: dict[float, list[NodeInfo]] = {}
            for node, s in zip(group, scores, strict=True):
                by_score.setdefault(float(s), []).append(node)
            picked = ssn.best_node_fn(task, by_score)
            if picked is not None:
                return picked
        return group[int(np.argmax(scores))]
    return None


# =============================================================================================
# victims on one node


def session_task(ssn: Session, t: TaskInfo) -> TaskInfo | None:
    """The session's own object for a task seen through a node (nodes hold clones)."""
    job = ssn.jobs.get(t.job)
    return job.tasks.get(t.uid) if job is not None else None


def tasks_on_node(ssn: Session, node: NodeInfo, keep: TaskFilter | None) -> list[TaskInfo]:
    """The node's tasks that pass `keep`, as session objects, in the node's task order."""
    out = []
    for t in node.tasks.values():
        st = session_task(ssn, t)
        if st is None:
            continue
        if keep is None or keep(st):
            out.append(st)
    return out


def validate_victims(preemptor: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """util.ValidateVictims: FutureIdle plus every victim's request must cover the preemptor.

    An empty victim list is fine when the node already has room."""
    future = node.future_idle()
    for v in victims:
        future.add(v.resreq)
    return preemptor.init_resreq.less_equal(future)


def victims_queue(ssn: Session, victims: list[TaskInfo], preemptor: TaskInfo) -> PriorityQueue[TaskInfo]:
    """BuildVictimsPriorityQueue: the order in which victims are evicted (first popped first).

    Same job: lowest-priority task first (reverse TaskOrderFn).  A victim whose job is gone goes
    first.  Different queues: VictimQueueOrderFn.  Otherwise the job that would be scheduled last
    goes first (reverse JobOrder compare), ties by reverse TaskOrderFn.
    """
    jobs = ssn.jobs
    pjob = jobs.get(preemptor.job)

    def job_then_task(lj: JobInfo, rj: JobInfo, l: TaskInfo, r: TaskInfo) -> bool:
        c = ssn.job_order_compare(lj, rj)
        if c != 0:
            return c > 0
        return not ssn.task_order_fn(l, r)

    def less(l: TaskInfo, r: TaskInfo) -> bool:
        if l.job == r.job:
            return not ssn.task_order_fn(l, r)
        lj, rj = jobs.get(l.job), jobs.get(r.job)
        if lj is None or rj is None:
            if lj is None and rj is None:
                return not ssn.task_order_fn(l, r)
            return lj is None
        if pjob is None:
            return job_then_task(lj, rj, l, r)
        if lj.queue != rj.queue:
            return ssn.victim_queue_order_fn(
                ssn.queues[lj.queue], ssn.queues[rj.queue], ssn.queues.get(pjob.queue)
            )
        return job_then_task(lj, rj, l, r)

    q: PriorityQueue[TaskInfo] = PriorityQueue(less)
    for v in victims:
        q.push(v)
    return q


def preemptor_fits_on_node(ssn: Session, queue: QueueInfo, preemptor: TaskInfo, node: NodeInfo) -> bool:
    """preemptorFitsOnNode: the queue allows it, FutureIdle covers it and every predicate passes."""
    return (
        ssn.allocatable_fn(queue, preemptor)
        and preemptor.init_resreq.less_equal(node.future_idle())
        and ssn.predicate_fn(preemptor, node) is None
    )


# =============================================================================================
# topology-aware dry run (SelectVictimsOnNode, SelectCandidate)


@dataclass(slots=True)
class Candidate:
    """A node on which evicting `victims` (highest priority first) lets the preemptor fit."""

    node: str
    victims: list[TaskInfo]
    deciders: tuple[str, ...] = ()


def select_victims_on_node(
    ssn: Session,
    state: CycleState,
    preemptor: TaskInfo,
    queue: QueueInfo,
    node: NodeInfo,
    keep: TaskFilter,
) -> tuple[Candidate | None, str]:
    """SelectVictimsOnNode on `node` (a clone: tasks are removed and re-added on it).

    Victims are removed in BuildVictimsPriorityQueue order until the preemptor fits under
    SimulateAllocatable, FutureIdle and SimulatePredicate; then, highest priority first, each is
    put back if the preemptor still fits without evicting it.  Returns the minimal victims (None
    with the reason when the node is not a candidate).
    """
    preemptees = tasks_on_node(ssn, node, keep)
    if not validate_victims(preemptor, node, preemptees):  # victims are a subset: shortcut
        return None, f"no validated victims on node {node.name}"
    all_victims = ssn.preemptable(preemptor, preemptees) if preemptees else []
    deciders = ssn.last_victim_deciders
    if not validate_victims(preemptor, node, all_victims):
        return None, f"no validated victims on node {node.name}"

    def fits() -> bool:
        return (
            ssn.simulate_allocatable(queue, preemptor, state)
            and preemptor.init_resreq.less_equal(node.future_idle())
            and ssn.simulate_predicate(state, preemptor, node) is None
        )

    potential: list[TaskInfo] = []
    q = victims_queue(ssn, all_victims, preemptor)
    while not q.empty():
        v = q.pop()
        potential.append(v)
        ssn.simulate_remove_task(state, preemptor, v, node)
        node.remove_task(v)
        if fits():
            break
    if not potential:
        return None, "no preemption victims found for incoming pod"
    if ssn.simulate_predicate(state, preemptor, node) is not None:
        return None, f"failed to predicate pod {preemptor.key} on node {node.name}"
    victims: list[TaskInfo] = []
    for v in reversed(potential):
        ssn.simulate_add_task(state, preemptor, v, node)
        node.add_task(v)
        if not fits():
            ssn.simulate_remove_task(state, preemptor, v, node)
            node.remove_task(v)
            victims.append(v)
    if not victims:
        return None, f"expected at least one victim pod on node {node.name}"
    return Candidate(node.name, victims, deciders), ""


def num_candidates(num_nodes: int, min_percentage: int, min_absolute: int, max_absolute: int) -> int:
    """calculateNumCandidates: a percentage of the nodes, within [min, max], at most all nodes."""
    n = num_nodes * min_percentage // 100
    n = max(n, min_absolute)
    n = min(n, max_absolute)
    return min(n, num_nodes)


def pick_candidate(candidates: list[Candidate]) -> Candidate | None:
    """SelectCandidate / pickOneNodeForPreemption: lowest first-victim priority, lowest priority
    sum, fewest victims; then the first candidate (start times are unknown to the model)."""
    if not candidates:
        return None
    offset = 1 << 31  # MaxInt32 + 1, so negative priorities still sum sensibly
    rules: list[Callable[[Candidate], int]] = [
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + offset for v in c.victims),
        lambda c: -len(c.victims),
    ]
    pool = list(candidates)
    for rule in rules:
        best = max(rule(c) for c in pool)
        pool = [c for c in pool if rule(c) == best]
        if len(pool) == 1:
            break
    return pool[0]


# =============================================================================================
# gang-aware bundles (actions/utils/bundle.go)

BUNDLE_SAFE = 0
BUNDLE_WHOLE = 1


@dataclass(slots=True)
class Bundle:
    """Victim tasks of one job: `safe` ones keep the job gang-ready, `whole` ones break it."""

    kind: int
    job: JobInfo
    tasks: list[TaskInfo]
    local: Resource
    global_res: Resource


def sum_resreq(tasks: Sequence[TaskInfo]) -> Resource:
    total = Resource()
    for t in tasks:
        total.add(t.resreq)
    return total


def sum_idle_and_releasing(nodes: Sequence[NodeInfo]) -> Resource:
    total = Resource()
    for n in nodes:
        total.add(n.idle).add(n.releasing)
    return total


def create_job_bundles(job: JobInfo, tasks: list[TaskInfo]) -> list[Bundle]:
    """CreateJobBundles: lowest priority first; a task is safe while the job stays above
    minAvailable (and its role above its minTaskMember when roles are enforced)."""
    if not tasks:
        return []
    local = sorted(tasks, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:
        return [Bundle(BUNDLE_SAFE, job, local, sum_resreq(local), Resource())]
    enforce_roles = job.min_available >= job.task_min_total
    role_surplus: dict[str, int] = {}
    if enforce_roles:
        ready: dict[str, int] = {}
        for t in job.tasks.values():
            done = t.status in ALLOCATED_STATUSES or t.status is TaskStatus.SUCCEEDED
            if done or (t.status is TaskStatus.PENDING and t.init_resreq.is_empty()):
                ready[t.role] = ready.get(t.role, 0) + 1
        for role, mn in job.task_min_available.items():
            role_surplus[role] = ready.get(role, 0) - mn
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for t in local:
        has_min = enforce_roles and t.role in job.task_min_available
        role_safe = role_surplus.get(t.role, 0) > 0 if has_min else True
        if surplus > 0 and role_safe:
            safe.append(t)
            surplus -= 1
            if has_min:
                role_surplus[t.role] -= 1
        else:
            whole.append(t)
    out = []
    if safe:
        out.append(Bundle(BUNDLE_SAFE, job, safe, sum_resreq(safe), Resource()))
    if whole:
        out.append(Bundle(BUNDLE_WHOLE, job, whole, sum_resreq(whole), sum_resreq(list(job.tasks.values()))))
    return out


def flatten_bundles(bundles: Sequence[Bundle]) -> list[TaskInfo]:
    return [t for b in bundles for t in b.tasks]


def apply_allowed_tasks(bundles: Sequence[Bundle], allowed: set[str]) -> list[Bundle]:
    """ApplyAllowedTasks: a whole bundle survives only if every task is allowed; a safe bundle
    keeps its allowed tasks."""
    out = []
    for b in bundles:
        if not b.tasks:
            continue
        approved = [t for t in b.tasks if t.uid in allowed]
        if b.kind == BUNDLE_WHOLE:
            if len(approved) == len(b.tasks):
                out.append(b)
            continue
        if approved:
            out.append(Bundle(b.kind, b.job, approved, sum_resreq(approved), b.global_res))
    return out


def select_bundles(bundles: Sequence[Bundle], need: Resource, allow_whole: bool) -> list[Bundle]:
    """SelectBundles: take bundles in order until their local resources cover `need`."""
    out = []
    freed = Resource()
    for b in bundles:
        if b.kind == BUNDLE_WHOLE and not allow_whole:
            continue
        out.append(b)
        freed.add(b.local)
        if need.less_equal(freed):
            break
    return out


def _score_against_need(res: Resource, need: Resource, cap: bool) -> float:
    score = 0.0
    for name in need.resource_names():
        n = need.get(name)
        if n <= 0:
            continue
        v = res.get(name)
        if cap and v > n:
            v = n
        score += v / n
    return score


def bundle_roi(b: Bundle, need: Resource) -> float:
    """Useful local resources over the job's whole footprint (infinite for safe bundles)."""
    glob = _score_against_need(b.global_res, need, False)
    if glob == 0:
        return math.inf
    return _score_against_need(b.local, need, True) / glob


def _stable_less(l: Bundle, r: Bundle) -> bool:
    if l.job.uid != r.job.uid:
        return l.job.uid < r.job.uid
    lf = l.tasks[0].uid if l.tasks else ""
    rf = r.tasks[0].uid if r.tasks else ""
    if lf != rf:
        return lf < rf
    return len(l.tasks) < len(r.tasks)


def _sort_bundles(
    bundles: list[Bundle], need: Resource, group_less: Callable[[Bundle, Bundle], bool | None]
) -> None:
    def less(a: Bundle, b: Bundle) -> bool:
        if a.kind != b.kind:
            return a.kind < b.kind
        g = group_less(a, b)
        if g is not None:
            return g
        ra, rb = bundle_roi(a, need), bundle_roi(b, need)
        if ra != rb:
            return ra > rb
        return _stable_less(a, b)

    def cmp(a: Bundle, b: Bundle) -> int:
        return -1 if less(a, b) else (1 if less(b, a) else 0)

    bundles.sort(key=cmp_to_key(cmp))


def sort_bundles_for_preempt(
    bundles: list[Bundle], need: Resource, less_victim_job: Callable[[JobInfo, JobInfo], bool] | None
) -> None:
    """SortBundlesForPreempt: safe before whole, then victim-job order, then ROI, then stable keys."""

    def group(a: Bundle, b: Bundle) -> bool | None:
        if less_victim_job is None or a.job.uid == b.job.uid:
            return None
        ab, ba = less_victim_job(a.job, b.job), less_victim_job(b.job, a.job)
        return ab if ab != ba else None

    _sort_bundles(bundles, need, group)


def sort_bundles_for_reclaim(
    bundles: list[Bundle],
    need: Resource,
    less_queue: Callable[[QueueInfo, QueueInfo], bool] | None,
    queues: dict[str, QueueInfo],
) -> None:
    """SortBundlesForReclaim: safe before whole, then victim-queue order, then ROI, then stable keys."""

    def group(a: Bundle, b: Bundle) -> bool | None:
        if less_queue is None:
            return None
        lq, rq = queues.get(a.job.queue), queues.get(b.job.queue)
        if lq is None or rq is None or lq.uid == rq.uid:
            return None
        ab, ba = less_queue(lq, rq), less_queue(rq, lq)
        return ab if ab != ba else None

    _sort_bundles(bundles, need, group)


def is_job_preemptable_for_gang_eviction(job: JobInfo) -> bool:
    """IsJobPreemptableForGangEviction: a PodGroup without the `volcano.sh/preemptable` key may be
    evicted; with it, the parsed value decides.  The model keeps PodGroup annotations but not its
    labels, so a label-only `volcano.sh/preemptable: "false"` is not seen (the job counts as unset)."""
    if PREEMPTABLE_LABEL in job.annotations:
        return job.preemptable
    return True


def gang_candidate_status(t: TaskInfo) -> bool:
    """Victims of gang-aware actions: Bound or Running and preemptable."""
    return t.status in PREEMPTABLE_STATUSES and t.preemptable


# =============================================================================================
# gang-aware nomination dry run (actions/utils/simulate.go)


def eviction_worksheet(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """organizeEvictionWorksheet for a job without sub-groups: its Pending, non-gated tasks with a
    request, in TaskOrderFn order (sub-group policies are not modelled: one sub-job per job)."""
    q: PriorityQueue[TaskInfo] = PriorityQueue(ssn.task_order_fn)
    for t in job.tasks_in(TaskStatus.PENDING):
        if t.sch_gated or t.resreq.is_empty():
            continue
        q.push(t)
    out = []
    while not q.empty():
        out.append(q.pop())
    return out


def collect_pending_tasks_for_gang_eviction(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """CollectPendingTasksForGangEviction: the tasks the job still needs placed (one sub-job)."""
    return eviction_worksheet(ssn, job)


def _simulate_trial(
    ssn: Session,
    queue: QueueInfo | None,
    tasks: list[TaskInfo],
    candidates: list[NodeInfo],
    victims_present: bool,
    cache_enabled: bool,
) -> Statement | None:
    """runSimulateTrialAtHyperNode: pipeline every task onto the domain; None (undone) on failure."""
    trial = Statement(ssn)
    cache = PredicateErrorCache(cache_enabled)
    ok = False
    try:
        for task in tasks:
            if queue is not None and not ssn.allocatable_fn(queue, task):
                return None
            schedulable = nodes_without_unresolvable(ssn, task)
            allow = {n.name for n in schedulable}
            nodes = [n for n in candidates if n.name in allow] if allow else list(candidates)
            if not nodes:
                return None
            if ssn.pre_predicate_fn(task) is not None:
                return None
            found = predicate_nodes(
                ssn, task, nodes, lambda t, n: fits_future_idle_then_preempt_predicate(ssn, t, n), cache
            )
            if not found:
                return None
            best = best_node_for_simulate(ssn, task, found)
            if best is None:
                return None
            if not task.init_resreq.less_equal(best.future_idle()):
                return None
            trial.pipeline(task, best.name, victims_present)
        if not trial.operations:
            return None
        ok = True
        return trial
    except Exception:
        return None
    finally:
        if not ok:
            trial.discard()


def build_nomination_plan(
    ssn: Session,
    queue: QueueInfo | None,
    job: JobInfo,
    nodes: list[NodeInfo],
    victims: list[TaskInfo],
    reason: str,
    cache_enabled: bool,
) -> list[Operation] | None:
    """BuildNominationPlanInDomain: evict `victims`, pipeline the job's pending tasks onto `nodes`,
    and if the job is then JobPipelined return the saved operations; the session is left as it
    was either way (replay the plan with `Statement.recover_operations`)."""
    if not nodes:
        return None
    tasks = eviction_worksheet(ssn, job)
    if not tasks:
        return None
    chain: list[Statement] = []
    try:
        if victims:
            vs = Statement(ssn)
            for v in victims:
                vs.evict(v, reason)
            chain.append(vs)
        trial = _simulate_trial(ssn, queue, tasks, nodes, bool(victims), cache_enabled)
        if trial is None:
            return None
        chain.append(trial)
        # One sub-job: the trial must leave it ready or pipelined, and the job pipelined.
        if not ssn.job_ready(job) and not ssn.job_pipelined(job):
            return None
        if not ssn.job_pipelined(job):
            return None
        return save_operations(*chain)
    finally:
        for st in reversed(chain):
            st.discard()
