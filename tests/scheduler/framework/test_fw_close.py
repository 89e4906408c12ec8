"""Session close: PodGroup phase (session.go jobStatus) and queue allocated totals."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_conf, mk_job, mk_node, mk_queue, mk_snapshot, mk_task

from fumarole.daemon.scheduler.framework.close import (
    pod_group_phase,
    update_job_statuses,
    update_queue_allocated,
)
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import Condition, JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.task import TaskStatus

S = TaskStatus
SSN = SimpleNamespace(uid="s-1")


def job_with(phase: str, min_available: int, *statuses: TaskStatus, with_node: bool = True) -> JobInfo:
    j = mk_job("j", min_available=min_available, phase=phase)
    for i, st in enumerate(statuses):
        node = "n1" if with_node and st is not S.PENDING else ""
        mk_task(j, f"j-{i}", status=st, node=node)
    return j


def unschedulable(j: JobInfo, tid: str = "s-1", status: str = "True") -> JobInfo:
    j.status.conditions.append(Condition("Unschedulable", status, "NotEnoughResources", "m", tid))
    return j


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        # running + unschedulable in THIS session => Unknown
        (unschedulable(job_with("Running", 3, S.RUNNING, S.PENDING, S.PENDING)), "Unknown"),
        # the condition is from another session: not Unknown; below minMember and not Inqueue => Pending
        (unschedulable(job_with("Running", 3, S.RUNNING, S.PENDING, S.PENDING), tid="s-0"), "Pending"),
        (unschedulable(job_with("Running", 3, S.RUNNING, S.PENDING), status="False"), "Pending"),
        # unschedulable but nothing running: phase rules apply
        (unschedulable(job_with("Inqueue", 2, S.PENDING, S.PENDING)), "Inqueue"),
        (job_with("Inqueue", 2, S.RUNNING, S.BOUND), "Running"),
        (job_with("Running", 2, S.SUCCEEDED, S.SUCCEEDED), "Completed"),
        (job_with("Running", 2, S.SUCCEEDED, S.FAILED), "Completed"),
        (job_with("Running", 2, S.SUCCEEDED, S.RUNNING), "Running"),
        # minMember 0 with nothing scheduled: 0 == 0 => Completed
        (job_with("Inqueue", 0, S.PENDING, S.PENDING), "Completed"),
        # Allocated/Binding are not scheduled: an Inqueue gang just bound stays Inqueue
        (job_with("Inqueue", 2, S.BINDING, S.BINDING), "Inqueue"),
        (job_with("Inqueue", 2, S.ALLOCATED, S.PIPELINED), "Inqueue"),
        (job_with("Pending", 2, S.BINDING, S.BINDING), "Pending"),
        (job_with("", 1, S.PENDING), "Pending"),
        # Running below minMember is demoted to Pending
        (job_with("Running", 3, S.RUNNING, S.RUNNING, S.PENDING), "Pending"),
        # Releasing tasks with a node count as scheduled
        (job_with("Running", 2, S.RUNNING, S.RELEASING), "Running"),
        (job_with("Running", 2, S.RUNNING, S.RELEASING, with_node=False), "Pending"),
    ],
)
def test_pod_group_phase(job: JobInfo, expected: str) -> None:
    assert pod_group_phase(SSN, job) == expected


def session_with(jobs: list[JobInfo], queues: list[QueueInfo] | None = None) -> Session:
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], jobs, queues, session_id="s-1")
    ssn = Session(snap, mk_conf("allocate", ["gang"]))
    ssn.compile_chains()
    return ssn


def test_update_job_statuses_counts_and_changes() -> None:
    same = job_with("Running", 1, S.RUNNING)
    same.status.running = 1
    moved = mk_job("m", min_available=1, phase="Inqueue")
    mk_task(moved, "m-0", status=S.RUNNING, node="n1")
    mk_task(moved, "m-1", status=S.FAILED, node="n1")
    mk_task(moved, "m-2", status=S.SUCCEEDED, node="n1")
    ssn = session_with([same, moved])
    changed = update_job_statuses(ssn)
    assert changed == ["default/m"]
    st = ssn.jobs["default/m"].status
    assert (st.phase, st.running, st.failed, st.succeeded) == ("Running", 1, 1, 1)


def test_condition_transition_id_alone_is_not_a_change() -> None:
    j = job_with("Inqueue", 2, S.PENDING, S.PENDING)
    j.status.conditions.append(Condition("Unschedulable", "True", "NotEnoughResources", "msg", "s-0"))
    ssn = session_with([j])
    ssn.jobs[j.uid].status.conditions[0].transition_id = "s-1"
    assert update_job_statuses(ssn) == []


def test_queue_allocated_sums_allocated_statuses() -> None:
    a = mk_job("a", "qa")
    add_tasks(a, 2, "1", "1Gi", status=S.RUNNING, node="n1")
    mk_task(a, "a-p-0", "5", "1Gi")  # pending: not allocated
    mk_task(a, "a-b-0", "2", "1Gi", status=S.BINDING, node="n1")
    mk_task(a, "a-s-0", "7", "1Gi", status=S.SUCCEEDED, node="n1")
    ssn = session_with([a], [mk_queue("qa"), mk_queue("qb"), mk_queue("default")])
    update_queue_allocated(ssn)
    assert ssn.queues["qa"].allocated.cpu == 4000
    assert ssn.queues["qa"].allocated.scalars["pods"] == 3
    assert ssn.queues["qb"].allocated.cpu == 0


def hierarchy() -> list[QueueInfo]:
    root = mk_queue("root")
    eng = mk_queue("eng")
    eng.parent = "root"
    dev = mk_queue("dev")
    dev.parent = "eng"
    return [root, eng, dev, mk_queue("default"), mk_queue("solo")]


def test_queue_allocated_rolls_up_to_parents_with_root() -> None:
    d = mk_job("d", "dev")
    mk_task(d, "d-0", "1", "1Gi", status=S.RUNNING, node="n1")
    e = mk_job("e", "eng")
    mk_task(e, "e-0", "2", "1Gi", status=S.RUNNING, node="n1")
    ssn = session_with([d, e], hierarchy())
    update_queue_allocated(ssn)
    assert ssn.queues["dev"].allocated.cpu == 1000
    assert ssn.queues["eng"].allocated.cpu == 3000
    assert ssn.queues["root"].allocated.cpu == 3000


def test_queue_without_parent_rolls_up_to_root() -> None:
    s = mk_job("s", "solo")
    mk_task(s, "s-0", "4", "1Gi", status=S.RUNNING, node="n1")
    ssn = session_with([s], hierarchy())
    update_queue_allocated(ssn)
    assert ssn.queues["solo"].allocated.cpu == 4000
    assert ssn.queues["root"].allocated.cpu == 4000


def test_a_job_in_root_counts_twice_in_root_as_volcanos_walk_adds_it() -> None:
    """updateQueueStatus adds a task to its job's queue, then walks to the parent: `root`'s own
    parent defaults to `root`, so a job in `root` is added to it twice (Volcano's quirk, kept)."""
    r = mk_job("r", "root")
    mk_task(r, "r-0", "1", "1Gi", status=S.RUNNING, node="n1")
    s = mk_job("s", "solo")
    mk_task(s, "s-0", "4", "1Gi", status=S.RUNNING, node="n1")
    ssn = session_with([r, s], hierarchy())
    update_queue_allocated(ssn)
    assert ssn.queues["root"].allocated.cpu == 6000
    assert ssn.queues["default"].allocated == ssn.queues["eng"].allocated  # zeros


PHASES = ["", "Pending", "Inqueue", "Running", "Unknown", "Completed"]
task_st = hst.tuples(hst.sampled_from(list(TaskStatus)), hst.booleans())  # (status, on a node)
job_st = hst.tuples(
    hst.sampled_from(PHASES),
    hst.integers(0, 5),  # min_available
    hst.lists(task_st, max_size=7),
    hst.lists(hst.tuples(hst.sampled_from(["s-0", "s-1"]), hst.sampled_from(["True", "False"])), max_size=2),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hst.lists(job_st, min_size=1, max_size=6))
def test_update_job_statuses_equals_pod_group_phase(jobs_spec: list[Any]) -> None:
    """The close's phase (counts read once from the index) is pod_group_phase's, job by job."""
    jobs = []
    for k, (phase, min_available, tasks, conds) in enumerate(jobs_spec):
        j = mk_job(f"j{k}", min_available=min_available, phase=phase)
        for i, (status, on_node) in enumerate(tasks):
            mk_task(j, f"j{k}-{i}", status=status, node="n1" if on_node else "")
        for tid, cst in conds:
            j.status.conditions.append(Condition("Unschedulable", cst, "NotEnoughResources", "m", tid))
        jobs.append(j)
    ssn = session_with(jobs)
    expected = {uid: pod_group_phase(ssn, job) for uid, job in ssn.jobs.items()}
    old = {uid: job.status.comparable() for uid, job in ssn.jobs.items()}
    changed = update_job_statuses(ssn)
    for uid, job in ssn.jobs.items():
        assert job.status.phase == expected[uid], uid
        assert job.status.running == job.count(TaskStatus.RUNNING)
        assert job.status.succeeded == job.count(TaskStatus.SUCCEEDED)
        assert job.status.failed == job.count(TaskStatus.FAILED)
    assert changed == sorted(uid for uid, job in ssn.jobs.items() if job.status.comparable() != old[uid])
