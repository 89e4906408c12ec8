"""Allocate's HyperNode search for a job with a hard network topology (allocate.go allocateForJob).

A job with a hard network topology (after the session's adjustment: soft is hard up to the
cluster top's tier) and no sub-group policy is one sub-job holding all its tasks:

1. The job's gradients (HyperNodeGradientForJob from the cluster top): HyperNodes grouped by
   tier, lowest first.  For each HyperNode H of a gradient, on a fresh copy of the job's task
   heap and fit errors, the sub-job is placed in H (step 2); a placement that makes the job ready
   or pipelined is kept as a plan with its score, and every placement is undone (a dry run).
   The first gradient with a plan wins: its best-scored HyperNode's plan is replayed.
2. Placing the sub-job in H: its gradients (HyperNodeGradientForSubJob from H), lowest tier
   first; for each HyperNode h of a gradient, the tasks are placed on h's nodes as the plain
   path does (allocate.py `allocate_for_tasks` with h); the first gradient with a placement
   wins, its best HyperNode by HyperNodeOrder (its plan replayed), and the sub-job's allocated
   HyperNode becomes the LCA of it and the best one.
3. A committed job's allocated HyperNode becomes the LCA of it and the chosen H.

Determinism: Volcano picks the best HyperNode of a gradient by iterating a Go map (the job
level: the first with the highest score in map order) or at random among the best (the sub-job
level); here the first of the best in gradient order (breadth first from the search root,
children by name).  Not modelled: sub-group policies (such jobs take the plain path, with a
warning) and the gangpreempt/gangreclaim nominated-HyperNode fast path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import EventError
from fumarole.daemon.scheduler.framework.statement import Operation, Statement, save_operations
from fumarole.daemon.scheduler.framework.topology import session_topology
from fumarole.daemon.scheduler.model.hypernode import CLUSTER_TOP
from fumarole.daemon.scheduler.model.node import NodeError
from fumarole.daemon.scheduler.model.task import TaskInfo

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import Session
    from fumarole.daemon.scheduler.model.job import JobInfo
    from fumarole.daemon.scheduler.model.queue import QueueInfo


class Allocate(Protocol):
    """What this module uses of the allocate action (allocate.py)."""

    pending_subjob: dict[str, str]
    replay_failures: dict[str, str]

    def allocate_for_tasks(
        self,
        ssn: Session,
        job: JobInfo,
        queue: QueueInfo,
        tasks: PriorityQueue[TaskInfo],
        *,
        hypernode: str | None = None,
    ) -> Statement | None: ...


PURPOSE_ALLOCATE = "allocate"


@dataclass(slots=True)
class _Plan:
    ops: list[Operation]
    tasks: PriorityQueue[TaskInfo]
    score: float
    subjob_hypernode: str


def allocate_for_job(
    alloc: Allocate, ssn: Session, job: JobInfo, queue: QueueInfo, tasks: PriorityQueue[TaskInfo]
) -> tuple[Statement | None, PriorityQueue[TaskInfo], str]:
    """allocateForJob: the statement (None: no HyperNode holds the job), the task heap left, and
    the job-level HyperNode chosen ("" when none)."""
    topo = session_topology(ssn)
    if tasks.empty():
        return None, tasks, ""
    gradients = ssn.hypernode_gradient(cb.HYPERNODE_GRADIENT_JOB, job, CLUSTER_TOP, PURPOSE_ALLOCATE)
    tried: list[tuple[int, list[str]]] = []
    saved_subjob = job.subjob_allocated_hypernode
    alloc.replay_failures.pop(job.uid, None)
    for gradient in gradients:
        plans: dict[str, _Plan] = {}
        for hn in gradient:
            job.nodes_fit_errors = {}
            job.job_fit_errors = ""
            copy = tasks.clone()
            stmts: list[Statement] = []
            score = 0.0
            # One sub-job: placed once, again while it has tasks left and the job is not ready.
            while not copy.empty():
                stmt, s = allocate_for_subjob(alloc, ssn, job, queue, copy, hn)
                if stmt is None or not stmt.operations:
                    break
                stmts.append(stmt)
                score += s
                if ssn.job_ready(job):
                    break
            subjob_hn = job.subjob_allocated_hypernode
            job.subjob_allocated_hypernode = saved_subjob
            ops = save_operations(*stmts)
            if ops and (ssn.job_ready(job) or ssn.job_pipelined(job)):
                plans[hn] = _Plan(ops, copy, score, subjob_hn)
            for stmt in stmts:
                stmt.discard()
        tried.append((topo.tier_of(gradient[0]) if gradient else 0, list(gradient)))
        if not plans:
            continue
        best = max(plans, key=lambda h: plans[h].score)  # the first of the best, in gradient order
        plan = plans[best]
        final = Statement(ssn)
        failed = _replay(final, plan.ops)
        if failed is not None:
            nt = job.network_topology
            ssn.topology_reasons[job.uid] = (
                f"network topology ({nt.describe() if nt is not None else 'hard'}): the placement found "
                f"in HyperNode {best} failed when replayed: {failed}"
            )
            return None, tasks, ""
        alloc.pending_subjob[job.uid] = plan.subjob_hypernode
        ssn.topology_reasons.pop(job.uid, None)  # (an earlier turn's reason no longer holds)
        alloc.replay_failures.pop(job.uid, None)
        return final, plan.tasks, best
    reason = _no_place_reason(ssn, job, tried)
    replay = alloc.replay_failures.pop(job.uid, None)
    ssn.topology_reasons[job.uid] = f"{reason} ({replay})" if replay else reason
    return None, tasks, ""


def allocate_for_subjob(
    alloc: Allocate,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    tasks: PriorityQueue[TaskInfo],
    hypernode: str,
) -> tuple[Statement | None, float]:
    """allocateForSubJob: the sub-job placed in the best HyperNode under `hypernode`; `tasks` is
    left with the tasks that placement did not take."""
    if tasks.empty():
        return None, 0.0
    topo = session_topology(ssn)
    gradients = ssn.hypernode_gradient(cb.HYPERNODE_GRADIENT_SUBJOB, job, hypernode, PURPOSE_ALLOCATE)
    for gradient in gradients:
        found: dict[str, tuple[list[Operation], PriorityQueue[TaskInfo]]] = {}
        for hn in gradient:
            # ResetSubJobFitErr: the one sub-job holds every task of the job.
            job.nodes_fit_errors = {}
            copy = tasks.clone()
            stmt = alloc.allocate_for_tasks(ssn, job, queue, copy, hypernode=hn)
            if stmt is not None and stmt.operations:
                found[hn] = (save_operations(stmt), copy)
                stmt.discard()
        if not found:
            continue
        candidates = {hn: [ssn.nodes[n] for n in topo.real_nodes.get(hn, ())] for hn in found}
        scores = ssn.hypernode_order_scores(job, candidates)
        best = max(found, key=lambda h: scores.get(h, 0.0))  # the first of the best, in gradient order
        final = Statement(ssn)
        failed = _replay(final, found[best][0])
        if failed is not None:
            alloc.replay_failures[job.uid] = (
                f"the placement found in HyperNode {best} failed when replayed: {failed}"
            )
            return None, 0.0
        job.subjob_allocated_hypernode = topo.lca(job.subjob_allocated_hypernode, best)
        left = found[best][1]
        # ShallowCopyFrom: the caller's heap becomes the one left by the best placement.
        tasks.adopt(left)
        return final, scores.get(best, 0.0)
    return None, 0.0


def _replay(final: Statement, ops: list[Operation]) -> str | None:
    """RecoverOperations of the best dry run; the error when one fails (Volcano logs it and gives
    up on the job, or sub-job, for this turn; the operations replayed before it stay applied, as
    in Volcano).  It can fail where the dry run did not: a discarded vGPU allocation keeps its
    card's counters raised (deviceshare), so the replay may find no card (EventError)."""
    try:
        final.recover_operations(ops)
    except (EventError, NodeError, KeyError) as e:
        return str(e)
    return None


def commit_decision(ssn: Session, alloc: Allocate, job: JobInfo, hypernode: str) -> None:
    """recorder.UpdateDecisionToJob: the job's (and sub-job's) allocated HyperNode after a commit."""
    topo = session_topology(ssn)
    job.allocated_hypernode = topo.lca(job.allocated_hypernode, hypernode)
    sub = alloc.pending_subjob.pop(job.uid, "")
    if sub:
        job.subjob_allocated_hypernode = topo.lca(job.subjob_allocated_hypernode, sub)


def tier_label(names: dict[str, int], tier: int | None) -> str:
    """`tier 1`, or `tier 1 (rack)` when HyperNodes of that tier carry a tierName."""
    if tier is None:
        return "tier ?"
    named = sorted(n for n, t in names.items() if t == tier)
    return f"tier {tier} ({', '.join(named)})" if named else f"tier {tier}"


def _no_place_reason(ssn: Session, job: JobInfo, tried: list[tuple[int, list[str]]]) -> str:
    """Why-pending for a job no HyperNode could hold: the tiers tried (by number and tierName), or
    why none was eligible.  explain.py appends the task's own fit error when it has one: Volcano's
    text for the last HyperNode tried (`In hyperNode <name>: 0/2 nodes are unavailable: ...`)."""
    nt = job.network_topology
    topo = session_topology(ssn)
    spec = nt.describe() if nt is not None else "hard"
    tier = nt.hard_tier() if nt is not None else None
    names = topo.tier_names
    if not tried:
        need = job.min_resources
        detail = (
            f"with idle or releasing resources for its minResources {need.to_quantities()}"
            if need is not None and job.allocated_hypernode == ""
            else "under its allocated HyperNode " + job.allocated_hypernode
            if job.allocated_hypernode
            else ""
        )
        return (
            f"network topology ({spec}): no HyperNode of {tier_label(names, tier)} or lower {detail}".rstrip()
        )
    parts = [f"{tier_label(names, t)}: {', '.join(hns)}" for t, hns in tried]
    last = tried[-1][0]
    return (
        f"network topology ({spec}): the gang fits in no HyperNode up to {tier_label(names, last)}; "
        f"tried {'; '.join(parts)}; the cluster top is tier {topo.top.tier}"
    )
