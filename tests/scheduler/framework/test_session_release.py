"""run_session releases its session: the session's copy of the cluster is freed by reference
counting when the result is returned, not left as cyclic garbage for a full collection."""

from __future__ import annotations

import gc

from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus


def _snapshot(nodes: int = 20, jobs: int = 40) -> ClusterSnapshot:
    snap = ClusterSnapshot(
        nodes=[NodeInfo(f"n{i}", Resource(8000, 32 * 2**30, {"pods": 110})) for i in range(nodes)],
        queues={"default": QueueInfo("default", weight=1), "root": QueueInfo("root", weight=1)},
    )
    for j in range(jobs):
        job = JobInfo(uid=f"ns/j{j}", name=f"j{j}", namespace="ns", queue="default", min_available=2)
        for t in range(2):
            job.add_task(
                TaskInfo(
                    uid=f"u{j}-{t}",
                    name=f"j{j}-{t}",
                    namespace="ns",
                    job=job.uid,
                    resreq=Resource(1000, 2**30, {"pods": 1}),
                    status=TaskStatus.PENDING,
                )
            )
        snap.jobs[job.uid] = job
    return snap


def test_session_leaves_no_cyclic_garbage() -> None:
    snap = _snapshot()
    conf = parse_conf(DEFAULT_SCHEDULER_CONF)
    gc.collect()
    gc.disable()
    try:
        result = run_session(snap, conf)
        leftover = gc.collect()
    finally:
        gc.enable()
    assert len(result.binds) == 80
    # Without the release the session's copy (80 tasks twice, 40 jobs, 20 nodes, plugins) is
    # thousands of objects held only by cycles.
    assert leftover < 50, leftover
