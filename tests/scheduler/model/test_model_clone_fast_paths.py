"""The session's copies of the snapshot (TaskInfo, NodeInfo, JobInfo.clone) are exact: the fast
paths give the state the slow ones (adding every task again) give."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus


def _task(i: int, status: TaskStatus, cpu: int, gpu: int) -> TaskInfo:
    return TaskInfo(
        uid=f"u{i}",
        name=f"p{i}",
        namespace="ns",
        job="ns/j",
        resreq=Resource(cpu, 0, {"nvidia.com/gpu": gpu} if gpu else None),
        status=status,
    )


def _state(j: JobInfo) -> Any:
    def res(r: Resource) -> Any:
        return (r.cpu, r.memory, sorted(r.scalars.items()), list(r.scalars))

    return (
        [(uid, t.uid, t.status) for uid, t in j.tasks.items()],
        [(st, list(bucket)) for st, bucket in j.index.items()],
        res(j.allocated),
        res(j.total_request),
        j.pending_best_effort,
    )


def test_model_task_clone_copies_every_slot() -> None:
    t = _task(1, TaskStatus.RUNNING, 1000, 1)
    for i, slot in enumerate(TaskInfo.__slots__):
        setattr(t, slot, object() if slot != "status" else TaskStatus.BOUND)
        c = t.clone()
        assert all(getattr(c, s) is getattr(t, s) for s in TaskInfo.__slots__), (i, slot)


def test_model_node_clone_is_a_fresh_node_with_copied_accounting() -> None:
    n = NodeInfo("n", Resource(4000, 8, {"pods": 10}))
    n.add_task(_task(1, TaskStatus.RUNNING, 1000, 0))
    n.index = 3
    n.on_change = lambda node: None
    c = n.clone()
    assert (c.index, c.on_change, c.max_task_num) == (-1, None, 10)
    assert (c.idle.cpu, c.used.cpu, list(c.tasks)) == (3000, 1000, ["u1"])
    assert c.idle is not n.idle and c.tasks["u1"] is not n.tasks["u1"]


statuses = st.sampled_from(list(TaskStatus))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(statuses, st.integers(0, 3000), st.integers(0, 2)), max_size=12),
    st.lists(st.tuples(st.integers(0, 11), statuses), max_size=6),
    st.lists(st.integers(0, 11), max_size=2),
)
def test_model_job_clone_equals_adding_the_tasks_again(
    tasks: list[tuple[TaskStatus, int, int]],
    moves: list[tuple[int, TaskStatus]],
    duplicates: list[int],
) -> None:
    job = JobInfo(uid="ns/j", name="j", namespace="ns", queue="q")
    made = [_task(i, s, cpu, gpu) for i, (s, cpu, gpu) in enumerate(tasks)]
    for t in made:
        job.add_task(t)
    for i in duplicates:  # the same uid added twice
        if i < len(made):
            job.add_task(_task(i, made[i].status, 5, 0))
    for i, s in moves:
        if i < len(made) and made[i].uid in job.tasks:
            job.update_task_status(job.tasks[made[i].uid], s)
    again = JobInfo(uid="ns/j", name="j", namespace="ns", queue="q")
    for t in job.tasks.values():
        again.add_task(t.clone())
    assert _state(job.clone()) == _state(again)
