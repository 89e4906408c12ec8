"""The gang plugin: validity, order, readiness, pipelining, victims and PodGroup conditions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_snapshot,
    mk_task,
    open_session,
    run,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.model.job import Condition, JobInfo
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.gang import (
    job_valid,
    schedulable_task_num,
    should_skip_unschedulable_for_releasing,
)

S = TaskStatus
GANG = mk_conf("allocate", ["gang"])


def session(*jobs: JobInfo, nodes=None):
    return open_session(mk_snapshot(nodes or [mk_node("n1", "64", "128Gi")], list(jobs)), GANG)


# --------------------------------------------------------------------------- JobValid
def test_job_valid_not_enough_tasks_message() -> None:
    j = mk_job("j", min_available=3)
    add_tasks(j, 2)
    mk_task(j, "j-f-0", status=S.FAILED, node="n1")
    vr = job_valid(j)
    assert vr is not None and not vr.passed
    assert vr.reason == "NotEnoughTasks"
    assert vr.message == "Not enough valid tasks for gang-scheduling, valid: 2, min: 3"


def test_job_valid_not_enough_pods_of_task() -> None:
    j = mk_job("j", min_available=2, task_min={"ps": 1, "worker": 1})
    mk_task(j, "j-ps-0", role="ps")
    mk_task(j, "j-ps-1", role="ps")
    vr = job_valid(j)
    assert vr is not None
    assert (vr.reason, vr.message) == (
        "NotEnoughPodsOfTask",
        "Not enough valid pods of each task for gang-scheduling",
    )
    mk_task(j, "j-worker-0", role="worker")
    assert job_valid(j) is None


def test_job_valid_through_session_has_no_flag() -> None:
    j = mk_job("j", min_available=2)
    add_tasks(j, 1)
    conf = mk_conf("allocate", [{"name": "gang", "enableJobOrder": False, "enableJobReady": False}])
    ssn = open_session(mk_snapshot([mk_node("n1")], [j]), conf)
    vr = ssn.job_valid(ssn.jobs[j.uid])
    assert vr is not None and vr.reason == "NotEnoughTasks"


# --------------------------------------------------------------------------- order / ready / pipelined
def test_job_order_not_ready_before_ready() -> None:
    ready = mk_job("a", min_available=1)
    mk_task(ready, "a-0", status=S.RUNNING, node="n1")
    mk_task(ready, "a-1")
    waiting = mk_job("b", min_available=1)
    mk_task(waiting, "b-0")
    ssn = session(ready, waiting)
    a, b = ssn.jobs[ready.uid], ssn.jobs[waiting.uid]
    assert ssn.job_order_compare(a, b) == 1
    assert ssn.job_order_compare(b, a) == -1
    assert ssn.job_order_fn(b, a)
    other_waiting = mk_job("c", min_available=1)
    mk_task(other_waiting, "c-0")
    ssn = session(waiting, other_waiting)
    assert ssn.job_order_compare(ssn.jobs[waiting.uid], ssn.jobs[other_waiting.uid]) == 0


def test_job_ready_and_pipelined_with_roles() -> None:
    j = mk_job("j", min_available=2, task_min={"ps": 1, "worker": 1})
    ps0 = mk_task(j, "j-ps-0", role="ps")
    mk_task(j, "j-ps-1", role="ps")
    w0 = mk_task(j, "j-worker-0", role="worker")
    ssn = session(j)
    job = ssn.jobs[j.uid]
    ps0, ps1, w0 = (task_of(ssn, j.uid, n) for n in ("j-ps-0", "j-ps-1", "j-worker-0"))
    job.update_task_status(ps0, S.ALLOCATED)
    job.update_task_status(ps1, S.ALLOCATED)
    # 2 ready >= minMember, but the worker role has none
    assert job.is_ready()
    assert not ssn.job_ready(job)
    assert not ssn.job_pipelined(job)
    job.update_task_status(w0, S.PIPELINED)
    assert not ssn.job_ready(job)
    assert ssn.job_pipelined(job)
    job.update_task_status(w0, S.ALLOCATED)
    assert ssn.job_ready(job)


def test_job_pipelined_vote_values() -> None:
    j = mk_job("j", min_available=2)
    add_tasks(j, 2)
    ssn = session(j)
    fn = ssn.fns[cb.JOB_PIPELINED]["gang"]
    job = ssn.jobs[j.uid]
    assert fn(job) == cb.REJECT
    t0, t1 = job.tasks.values()
    job.update_task_status(t0, S.PIPELINED)
    job.update_task_status(t1, S.ALLOCATED)
    assert fn(job) == cb.PERMIT


def test_job_starving_is_gang_starving() -> None:
    j = mk_job("j", min_available=2)
    mk_task(j, "j-0", status=S.RUNNING, node="n1")
    mk_task(j, "j-1")
    mk_task(j, "j-2")
    ssn = session(j)
    job = ssn.jobs[j.uid]
    assert ssn.job_starving(job) is True
    job.update_task_status(task_of(ssn, j.uid, "j-1"), S.PIPELINED)
    assert ssn.job_starving(job) is False


# --------------------------------------------------------------------------- victims
def test_victims_capped_so_ready_stays_at_min_member() -> None:
    a = mk_job("a", min_available=2)
    add_tasks(a, 4, status=S.RUNNING, node="n1")
    b = mk_job("b", min_available=1)
    add_tasks(b, 2, status=S.RUNNING, node="n1")
    c = mk_job("c", min_available=1)
    add_tasks(c, 1, status=S.RUNNING, node="n1")
    p = mk_job("p", min_available=1)
    mk_task(p, "p-0")
    ssn = session(a, b, c, p)
    cands = [task_of(ssn, a.uid, f"a-{i}") for i in range(4)]
    cands += [task_of(ssn, b.uid, f"b-{i}") for i in range(2)]
    cands += [task_of(ssn, c.uid, "c-0")]
    preemptor = task_of(ssn, p.uid, "p-0")
    expected = ["a-0", "a-1", "b-0"]
    assert [t.name for t in ssn.preemptable(preemptor, cands)] == expected
    assert [t.name for t in ssn.reclaimable(preemptor, cands)] == expected
    # unified evictable permits everything
    assert len(ssn.unified_evictable(preemptor, cands)) == len(cands)


# --------------------------------------------------------------------------- session close
def test_close_unschedulable_condition_text() -> None:
    j = mk_job("j", min_available=3)
    add_tasks(j, 4, "4", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], [j]), GANG)
    (cond,) = res.podgroups[j.uid].conditions
    assert cond.type == "Unschedulable" and cond.status == "True"
    assert cond.reason == "NotEnoughResources"
    # two tasks were placed then discarded: schedulable = 2 => 3 - 2 = 1 unschedulable of 4 tasks
    assert cond.message.startswith(
        "1/4 tasks in gang unschedulable: pod group is not ready, 3 minAvailable, 4 Pending"
    )
    assert cond.transition_id == "session-0"


def test_close_condition_counts_ready_tasks_and_last_allocations() -> None:
    j = mk_job("j", min_available=4)
    mk_task(j, "j-r-0", status=S.RUNNING, node="n1")
    a, b, _c = add_tasks(j, 3)
    ssn = session(j)
    a2, b2 = task_of(ssn, j.uid, a.name), task_of(ssn, j.uid, b.name)
    a2.last_tx = (S.ALLOCATED, "n1")
    b2.last_tx = (S.PIPELINED, "n1")
    job = ssn.jobs[j.uid]
    assert schedulable_task_num(job) == 2  # 1 running + 1 discarded allocation
    ssn.plugins["gang"].on_session_close(ssn)
    (cond,) = job.status.conditions
    assert cond.message == f"2/4 tasks in gang unschedulable: {job.fit_error()}"


def test_close_scheduled_condition_and_replacement_by_type() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", status=S.RUNNING, node="n1")
    j.status.conditions.append(Condition("Scheduled", "True", "old", "old", "session-old"))
    j.status.conditions.append(Condition("Unschedulable", "True", "NotEnoughResources", "old", "session-old"))
    ssn = session(j)
    ssn.plugins["gang"].on_session_close(ssn)
    conds = ssn.jobs[j.uid].status.conditions
    assert [(c.type, c.reason, c.message, c.transition_id) for c in conds] == [
        ("Scheduled", "tasks in gang are ready to be scheduled", "", "session-0"),
        ("Unschedulable", "NotEnoughResources", "old", "session-old"),
    ]


def test_close_skips_jobs_without_tasks() -> None:
    j = mk_job("j", min_available=1)
    ssn = session(j)
    ssn.plugins["gang"].on_session_close(ssn)
    assert ssn.jobs[j.uid].status.conditions == []


@pytest.mark.parametrize(
    ("min_available", "tasks", "expected"),
    [
        (2, [(S.RUNNING, "node-1"), (S.RELEASING, "node-2")], True),
        (2, [(S.RUNNING, "node-1"), (S.RELEASING, "node-2"), (S.PENDING, "")], False),
        (2, [(S.RUNNING, "node-1"), (S.RELEASING, "node-2"), (S.PIPELINED, "node-3")], False),
        (1, [(S.RELEASING, "")], False),
        (3, [(S.RUNNING, "node-1"), (S.RELEASING, "node-2")], False),
    ],
)
def test_should_skip_unschedulable_for_releasing(min_available: int, tasks: list, expected: bool) -> None:
    j = mk_job("job-1", min_available=min_available)
    for i, (st, node) in enumerate(tasks):
        mk_task(j, f"t-{i}", status=st, node=node)
    assert should_skip_unschedulable_for_releasing(j) is expected


def test_close_leaves_releasing_covered_job_without_condition() -> None:
    j = mk_job("j", min_available=2, phase="Running")
    mk_task(j, "j-0", status=S.RUNNING, node="n1")
    mk_task(j, "j-1", status=S.RELEASING, node="n1")
    res = run(mk_snapshot([mk_node("n1")], [j]), GANG)
    assert res.podgroups[j.uid].conditions == []
    assert res.podgroups[j.uid].phase == "Running"


def test_unknown_phase_when_running_and_unschedulable_this_session() -> None:
    j = mk_job("j", min_available=3, phase="Running")
    mk_task(j, "j-0", "1", "1Gi", status=S.RUNNING, node="n1")
    add_tasks(j, 2, "100", "1Gi", start=1)
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi")], [j]), GANG)
    assert res.podgroups[j.uid].phase == "Unknown"
