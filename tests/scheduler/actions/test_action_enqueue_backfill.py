"""The enqueue and backfill actions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_queue,
    mk_snapshot,
    mk_task,
    open_session,
    rl,
    run,
    run_actions,
    statuses,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import TaskStatus

S = TaskStatus
ENQ = mk_conf("enqueue", ["priority", "gang"], ["overcommit"])


def fake(ssn: Session, point: str, plugin: str, fn: Any) -> None:
    ssn.register(point, plugin, fn)
    ssn.compile_chains()


def pending_job(name: str, queue: str = "default", cpu: str | None = "1", creation: float = 0.0, **kw: Any):
    j = mk_job(
        name,
        queue,
        phase="Pending",
        min_resources=rl(cpu=cpu) if cpu is not None else None,
        creation=creation,
        **kw,
    )
    mk_task(j, f"{name}-0", cpu or "1", "1Gi")
    return j


# --------------------------------------------------------------------------- enqueue
def test_job_without_min_resources_is_admitted_without_asking_plugins() -> None:
    j = pending_job("j", cpu=None)
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, ENQ)
    asked: list[str] = []
    enqueued: list[str] = []

    def vote(job):
        asked.append(job.uid)
        return cb.REJECT

    fake(ssn, cb.JOB_ENQUEUEABLE, "gang", vote)
    fake(ssn, cb.JOB_ENQUEUED, "gang", lambda job: enqueued.append(job.uid))
    run_actions(ssn, "enqueue")
    assert ssn.jobs[j.uid].status.phase == "Inqueue"
    assert asked == []
    assert enqueued == [j.uid]  # JobEnqueued is still notified


def test_rejected_job_does_not_block_later_jobs_of_its_queue() -> None:
    big = pending_job("big", cpu="100", creation=1)
    small = pending_job("small", cpu="1", creation=2)
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [big, small])
    ssn = open_session(snap, ENQ)
    run_actions(ssn, "enqueue")
    assert ssn.jobs[big.uid].status.phase == "Pending"
    assert ssn.jobs[small.uid].status.phase == "Inqueue"
    assert ssn.enqueue_rejections[big.uid] == "overcommit: resource in cluster is overused: overused cpu"


def test_each_job_is_considered_once_and_queues_alternate() -> None:
    jobs = [pending_job(f"a{i}", "qa", creation=i) for i in range(3)] + [
        pending_job(f"b{i}", "qb", creation=i) for i in range(2)
    ]
    snap = mk_snapshot([mk_node("n1", "64", "64Gi")], jobs, [mk_queue("qa"), mk_queue("qb")])
    ssn = open_session(snap, ENQ)
    asked: list[str] = []

    def vote(job):
        asked.append(job.name)
        return cb.PERMIT

    fake(ssn, cb.JOB_ENQUEUEABLE, "gang", vote)
    run_actions(ssn, "enqueue")
    # queue order is name order here (no queue-order plugin) and the queue is pushed back after
    # each job: qa keeps winning until it is empty, then qb
    assert asked == ["a0", "a1", "a2", "b0", "b1"]
    assert {j.status.phase for j in ssn.jobs.values()} == {"Inqueue"}


def test_queue_order_decides_who_is_admitted_first() -> None:
    conf = mk_conf("enqueue", ["priority", "gang"], ["overcommit", "proportion"])
    low = pending_job("low", "qa", cpu="3")
    high = pending_job("high", "qb", cpu="3")
    queues = [mk_queue("qa", priority=1), mk_queue("qb", priority=5)]
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [low, high], queues)
    # overcommit factor 1.2 => idle 4.8 cpu: only one of the two 3-cpu jobs fits
    ssn = open_session(snap, conf)
    run_actions(ssn, "enqueue")
    assert ssn.jobs[high.uid].status.phase == "Inqueue"
    assert ssn.jobs[low.uid].status.phase == "Pending"


def test_non_pending_jobs_are_not_touched_and_schedule_start_is_stamped() -> None:
    running = mk_job("r", phase="Running", min_resources=rl(cpu="1"))
    mk_task(running, "r-0", status=S.RUNNING, node="n1")
    p = pending_job("p")
    snap = mk_snapshot([mk_node("n1")], [running, p])
    snap.now = 42.0
    ssn = open_session(snap, ENQ)
    run_actions(ssn, "enqueue")
    assert ssn.jobs[running.uid].status.phase == "Running"
    assert ssn.jobs[p.uid].status.phase == "Inqueue"
    assert ssn.jobs[p.uid].schedule_start == 42.0


def test_enqueue_then_allocate_in_one_session() -> None:
    j = pending_job("j", cpu="1")
    res = run(
        mk_snapshot([mk_node("n1")], [j]), mk_conf("enqueue, allocate", ["priority", "gang"], ["overcommit"])
    )
    assert res.binds == {"default/j-0": "n1"}
    assert res.podgroups[j.uid].phase == "Inqueue"


def test_rejected_job_stays_pending_with_reason() -> None:
    j = pending_job("j", cpu="100")
    res = run(
        mk_snapshot([mk_node("n1")], [j]), mk_conf("enqueue, allocate", ["priority", "gang"], ["overcommit"])
    )
    assert res.binds == {}
    assert res.podgroups[j.uid].phase == "Pending"
    assert "resource in cluster is overused: overused cpu" in res.pending["default/j-0"]


# --------------------------------------------------------------------------- backfill
BF = mk_conf("backfill", ["priority", "gang"])


def test_best_effort_pods_are_placed_without_resource_check() -> None:
    full = mk_job("full", phase="Running")
    mk_task(full, "full-0", "4", "8Gi", status=S.RUNNING, node="n1")
    j = mk_job("j", min_available=1)
    add_tasks(j, 2, None, None)
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [full, j])
    res = run(snap, BF)
    assert res.binds == {"default/j-0": "n1", "default/j-1": "n1"}


def test_backfill_skips_pending_jobs() -> None:
    j = mk_job("j", min_available=1, phase="Pending")
    mk_task(j, "j-0", None, None)
    res = run(mk_snapshot([mk_node("n1")], [j]), BF)
    assert res.binds == {}
    j2 = mk_job("j", min_available=1, phase="Inqueue")
    mk_task(j2, "j-0", None, None)
    res = run(mk_snapshot([mk_node("n1")], [j2]), BF)
    assert res.binds == {"default/j-0": "n1"}


def test_backfill_leaves_non_best_effort_tasks_alone() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "1", "1Gi")
    mk_task(j, "j-1", None, None)
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, BF)
    run_actions(ssn, "backfill")
    assert statuses(ssn, j.uid) == {"j-0": S.PENDING, "j-1": S.BINDING}


def test_backfill_skips_invalid_jobs() -> None:
    j = mk_job("j", min_available=3)
    add_tasks(j, 2, None, None)
    res = run(mk_snapshot([mk_node("n1")], [j]), BF)
    assert res.binds == {}


def test_backfill_unpipelines_best_effort_pipelined_tasks() -> None:
    j = mk_job("j", min_available=1)
    t = mk_task(j, "j-0", None, None, status=S.PIPELINED, node="n2")
    snap = mk_snapshot([mk_node("n1"), mk_node("n2")], [j])
    ssn = open_session(snap, BF)
    assert ssn.nodes["n2"].tasks
    run_actions(ssn, "backfill")
    task = task_of(ssn, j.uid, t.name)
    assert task.status is S.BINDING
    assert ssn.binds == {"default/j-0": task.node_name}
    # it was removed from its pipelined node before being placed again
    assert ssn.nodes["n2"].pipelined.scalars.get("pods", 0) == 0


def test_backfill_waits_for_gang_readiness_before_binding() -> None:
    """ssn.Allocate dispatches only once JobReady: a job whose other member cannot run stays unbound."""
    j = mk_job("j", min_available=2)
    mk_task(j, "j-0", None, None)
    mk_task(j, "j-1", "100", "1Gi")
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, mk_conf("allocate, backfill", ["priority", "gang"]))
    run_actions(ssn, "allocate", "backfill")
    assert ssn.binds == {}
    assert task_of(ssn, j.uid, "j-0").status is S.ALLOCATED


def test_backfill_pre_predicate_error_recorded() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", None, None)
    snap = mk_snapshot([mk_node("n1"), mk_node("n2")], [j])
    ssn = open_session(snap, BF)
    fake(ssn, cb.PRE_PREDICATE, "gang", lambda t: ValueError("blocked"))
    run_actions(ssn, "backfill")
    assert ssn.binds == {}
    fe = ssn.jobs[j.uid].nodes_fit_errors[task_of(ssn, j.uid, "j-0").uid]
    assert fe.message() == "0/2 nodes are unavailable: 2 blocked."
