"""JobInfo's ready counter equals a count over its status index after any sequence of changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

READY = (TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.SUCCEEDED)
STATUSES = list(TaskStatus)


def counted(job: JobInfo) -> int:
    return sum(len(job.index.get(s, {})) for s in READY)


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "delete", "clone"]), st.integers(0, 5), st.sampled_from(STATUSES)
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_ready_count_follows_the_index(steps: list[tuple[str, int, TaskStatus]]) -> None:
    job = JobInfo(uid="ns/j", name="j", namespace="ns", queue="q", min_available=2)
    tasks: dict[int, TaskInfo] = {}
    for op, i, status in steps:
        if op == "add":
            t = TaskInfo(
                uid=f"t{i}", name=f"j-{i}", namespace="ns", job="ns/j", resreq=Resource(1, 1), status=status
            )
            tasks[i] = t
            job.add_task(t)
        elif op == "update" and i in tasks and tasks[i].uid in job.tasks:
            job.update_task_status(job.tasks[tasks[i].uid], status)
        elif op == "delete" and i in tasks:
            job.delete_task(tasks[i])
        elif op == "clone":
            job = job.clone()
            tasks = {k: job.tasks[t.uid] for k, t in tasks.items() if t.uid in job.tasks}
        assert job.ready_task_num() == counted(job)
        assert job.is_ready() == (counted(job) + job.pending_best_effort >= job.min_available)
