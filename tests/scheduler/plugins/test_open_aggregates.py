"""Session-open aggregates taken from what JobInfo maintains (drf's job allocations, proportion's
queue allocated/request) equal the task-by-task sums Volcano computes, over random jobs whose tasks
were added, moved between statuses and removed (hypothesis); decisions follow from them, so the
decisions digests of bench/core.py check the rest."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_queue, mk_snapshot, mk_task, open_session

from fumarole.daemon.scheduler.framework.close import update_queue_allocated
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskStatus
from fumarole.daemon.scheduler.plugins.util import elastic_resources

STATUSES = [
    TaskStatus.PENDING,
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.RELEASING,
    TaskStatus.SUCCEEDED,
    TaskStatus.FAILED,
]
EXTRAS: list[dict[str, Any]] = [
    {},
    {"nvidia.com/gpu": "1"},
    {"example.com/fpga": "2"},
    {"nvidia.com/gpu": "0"},
]

task_spec = st.tuples(
    st.sampled_from(STATUSES),
    st.integers(0, 4),
    st.sampled_from(EXTRAS),
    st.sampled_from([*STATUSES, None]),  # moved to this status before the session (None: stays)
    st.booleans(),  # removed before the session
)
job_spec = st.tuples(st.sampled_from(["q0", "q1", "default"]), st.lists(task_spec, max_size=6))


def snapshot_of(jobs_spec: list[Any]) -> ClusterSnapshot:
    """One node with room for everything, queues q0, q1 (weight 2) and default, and the jobs of
    `jobs_spec`: tasks in their status (on the node when placed), then moved or removed."""
    jobs = []
    for j, (queue, tasks) in enumerate(jobs_spec):
        job = mk_job(f"j{j}", queue)
        for i, (status, cpu, extra, moved, removed) in enumerate(tasks):
            node = "n0" if status not in (TaskStatus.PENDING, TaskStatus.SUCCEEDED, TaskStatus.FAILED) else ""
            t = mk_task(job, f"j{j}-t{i}", str(cpu), "1Gi", status=status, node=node, extra=extra)
            if moved is not None:
                job.update_task_status(t, moved)
            if removed:
                job.delete_task(t)
        jobs.append(job)
    return mk_snapshot(
        [mk_node("n0", "1000", "1000Gi", extra={"nvidia.com/gpu": "100", "example.com/fpga": "100"})],
        jobs,
        [mk_queue("q0"), mk_queue("q1", 2), mk_queue("default")],
    )


def _exact(r: Resource) -> tuple[Any, Any, dict[str, Any]]:
    return (r.cpu, r.memory, dict(r.scalars))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_spec, min_size=1, max_size=8))
def test_open_aggregates_equal_task_by_task_sums(jobs_spec: list[Any]) -> None:
    snap = snapshot_of(jobs_spec)
    ssn = open_session(snap, mk_conf("allocate", ["drf", "proportion"]))
    drf: Any = ssn.plugins["drf"]
    proportion: Any = ssn.plugins["proportion"]
    allocated: dict[str, Resource] = {}
    request: dict[str, Resource] = {}
    elastic: dict[str, Resource] = {}
    for uid in sorted(ssn.jobs):
        job = ssn.jobs[uid]
        mine = Resource()
        qa = allocated.setdefault(job.queue, Resource())
        qr = request.setdefault(job.queue, Resource())
        for st_, bucket in job.index.items():
            for t in bucket.values():
                if st_ in ALLOCATED_STATUSES:
                    mine.add(t.resreq)
                    qa.add(t.resreq)
                    qr.add(t.resreq)
                elif st_ is TaskStatus.PENDING:
                    qr.add(t.resreq)
        assert _exact(drf.attrs[uid].allocated) == _exact(mine)
        elastic.setdefault(job.queue, Resource()).add(elastic_resources(job))
    for q in allocated:
        assert _exact(proportion.attrs[q].allocated) == _exact(allocated[q])
        assert _exact(proportion.attrs[q].request) == _exact(request[q])
        assert _exact(proportion.attrs[q].elastic) == _exact(elastic[q])


def _nonzero(r: Resource) -> tuple[Any, Any, dict[str, Any]]:
    return (r.cpu, r.memory, {k: v for k, v in r.scalars.items() if v})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(job_spec, min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 63), st.sampled_from(STATUSES)), max_size=12),
)
def test_close_queue_allocated_equals_task_by_task_sums(jobs_spec: list[Any], moves: list[Any]) -> None:
    """update_queue_allocated sums JobInfo.allocated; tasks moved inside the session included."""
    jobs = []
    for j, (queue, tasks) in enumerate(jobs_spec):
        job = mk_job(f"j{j}", queue)
        for i, (status, cpu, extra, moved, removed) in enumerate(tasks):
            t = mk_task(job, f"j{j}-t{i}", str(cpu), "1Gi", status=status, node="n0", extra=extra)
            if moved is not None:
                job.update_task_status(t, moved)
            if removed:
                job.delete_task(t)
        jobs.append(job)
    snap = mk_snapshot(
        [mk_node("n0", "1000", "1000Gi", extra={"nvidia.com/gpu": "100", "example.com/fpga": "100"})],
        jobs,
        [mk_queue("q0"), mk_queue("q1", 2), mk_queue("default"), mk_queue("root")],
    )
    ssn = open_session(snap, mk_conf("allocate", ["proportion"]))
    every = [(job, t) for uid in sorted(ssn.jobs) for job in [ssn.jobs[uid]] for t in job.tasks.values()]
    for pick, status in moves:  # status changes made during the session (allocate, evict, ...)
        if every:
            job, t = every[pick % len(every)]
            job.update_task_status(t, status)
    update_queue_allocated(ssn)
    expected: dict[str, Resource] = {name: Resource() for name in ssn.queues}
    for job in ssn.jobs.values():
        for st_ in ALLOCATED_STATUSES:
            for t in job.index.get(st_, {}).values():
                expected[job.queue].add(t.resreq)
                if job.queue != "root":
                    expected["root"].add(t.resreq)
    for name, q in ssn.queues.items():
        assert _nonzero(q.allocated) == _nonzero(expected[name]), name
