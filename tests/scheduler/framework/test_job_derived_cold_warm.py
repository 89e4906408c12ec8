"""Property: proportion's queue sums and overcommit's inqueue sum kept across sessions
(`NodeDerived(keep_jobs=True)`, plugins/proportion_sums.py, framework/kept_sum.py) never change a
decision nor a queue figure, and equal the cold sums.

Two copies of one random cluster live through the same sessions and changes (pods bound, evicted
and finishing, PodGroup statuses written back, new jobs, some with requests that are not integers,
some with extended resources or minResources, jobs deleted):
one keeps per-job figures from session to session (warm), the other derives them afresh (cold).
The warm copy follows the cache's contract as the daemon's freeze does: a job changed between
sessions is replaced by a new JobInfo object (here a clone made after the change), an unchanged
one is handed on as the same object.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.plugins.overcommit import NAME as OVERCOMMIT
from fumarole.daemon.scheduler.plugins.overcommit import _inqueue_part
from fumarole.daemon.scheduler.plugins.proportion import NAME as PROPORTION

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_node_derived_cold_warm import CONF, _job, change, cluster, decisions, fold


def fingerprint(job: JobInfo) -> tuple[Any, ...]:
    """What a change to the job could touch (status, tasks, their requests and placement)."""
    tasks = tuple(
        (t.uid, t.status, t.node_name, t.resreq.cpu, t.resreq.memory, tuple(sorted(t.resreq.scalars.items())))
        for t in sorted(job.peek_tasks().values(), key=lambda t: t.uid)
    )
    mr = job.min_resources
    return (job.status.comparable(), job.min_available, None if mr is None else repr(mr), tasks)


def replace_changed(snap: ClusterSnapshot, before: dict[str, tuple[JobInfo, tuple[Any, ...]]]) -> None:
    """The contract of keep_jobs: a job that changed is a new object."""
    for uid, job in list(snap.jobs.items()):
        old = before.get(uid)
        if old is not None and old[0] is job and old[1] != fingerprint(job):
            snap.jobs[uid] = job.clone()


def fractional_job(snap: ClusterSnapshot, step: int, pick: int) -> None:
    """A new job whose requests are not integers (the figures are then summed task by task)."""
    part = build_snapshot(
        [("gen.yaml", i, o) for i, o in enumerate(_job(200 + step, random.Random(pick), None))]
    )
    for job in part.jobs.values():
        for t in job.peek_tasks().values():
            t.resreq.cpu += 0.1
            t.resreq.memory += 0.3
        job.total_request.cpu += 0.1 * job.task_num()
        job.total_request.memory += 0.3 * job.task_num()
    snap.jobs.update(part.jobs)


def scalar_job(snap: ClusterSnapshot, step: int, pick: int, names: int) -> None:
    """A new job whose pods ask for `names` extended resources (some at 0) and whose PodGroup
    has minResources: scalar names enter (and, once the job leaves, leave) the queue sums; with
    none, the job is admitted and its inqueue reservation enters overcommit's sum."""
    objs = _job(300 + step, random.Random(pick), None)
    for o in objs:
        if o["kind"] == "PodGroup":
            # Without extended resources the job can be admitted (Inqueue, then Running).
            o["spec"]["minResources"] = {"cpu": "1", "example.com/a": "1"} if names else {"cpu": "1"}
        else:
            requests = o["spec"]["containers"][0]["resources"]["requests"]
            for k in range(names):
                requests[f"example.com/{'ab'[k]}"] = str((pick + k) % 2)
    part = build_snapshot([("gen.yaml", i, o) for i, o in enumerate(objs)])
    snap.jobs.update(part.jobs)


def delete_job(snap: ClusterSnapshot, pick: int) -> None:
    """A job (PodGroup and pods) is deleted: its pods leave their nodes."""
    if not snap.jobs:
        return
    uid = sorted(snap.jobs)[pick % len(snap.jobs)]
    job = snap.jobs.pop(uid)
    for t in job.peek_tasks().values():
        if t.node_name:
            for i, n in enumerate(snap.nodes):
                if n.name == t.node_name and t.uid in n.peek_tasks():
                    snap.nodes[i] = n.clone()
                    snap.nodes[i].remove_task(snap.nodes[i].tasks[t.uid])


def _sum(r: Resource) -> tuple[Any, ...]:
    return (r.cpu, r.memory, list(r.scalars.items()))


def cold_inqueue(snap: ClusterSnapshot) -> Resource:
    """overcommit's inqueue sum as a cold open adds it (the session's jobs, in uid order)."""
    total = Resource()
    for uid in sorted(snap.jobs):
        job = snap.jobs[uid]
        if job.has_pod_group and job.queue in snap.queues:
            part = _inqueue_part(job)
            if part is not None:
                total.add(part)
    return total


def exact(figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The queue figures with every Resource as its exact numbers (scalar keys included)."""
    return {
        q: {k: (v.cpu, v.memory, dict(v.scalars)) if isinstance(v, Resource) else v for k, v in f.items()}
        for q, f in figures.items()
    }


Change = Callable[[ClusterSnapshot, int, int, int, dict[str, NodeInfo]], None]


def change_jobs(snap: ClusterSnapshot, kind: int, pick: int, step: int, removed: dict[str, NodeInfo]) -> None:
    """`change`'s kinds 0-5, and jobs with fractional requests (6), extended resources or
    minResources (7, 8, 10), deleted (9)."""
    if kind == 6:
        fractional_job(snap, step, pick)
    elif kind in (7, 8, 10):
        scalar_job(snap, step, pick, (kind - 6) % 4)
    elif kind == 9:
        delete_job(snap, pick)
    else:
        change(snap, kind, pick, step, removed)


def warm_cold_sessions(
    seed: int, n_nodes: int, changes: list[tuple[int, int]], apply: Change, conf: Any
) -> Iterator[tuple[int, int, ClusterSnapshot, SessionResult, SessionResult]]:
    """Two copies of a random cluster through the same changes and sessions, one keeping per-job
    state across sessions (warm, replacing changed jobs as the freeze does), one not (cold):
    yields (step, kind, the warm snapshot, warm result, cold result) after each pair of sessions,
    then folds each result into its copy."""
    objs = [("gen.yaml", i, o) for i, o in enumerate(cluster(seed, n_nodes))]
    warm, cold = build_snapshot(objs), build_snapshot(objs)
    warm.derived = NodeDerived(keep_jobs=True)
    removed: dict[str, dict[str, NodeInfo]] = {"warm": {}, "cold": {}}
    for step, (kind, pick) in enumerate([(5, 0), *changes]):
        before = {uid: (j, fingerprint(j)) for uid, j in warm.jobs.items()}
        for name, snap in (("warm", warm), ("cold", cold)):
            apply(snap, kind, pick, step, removed[name])
            snap.now = 100.0 + step
            snap.session_id = f"s{step}"
        replace_changed(warm, before)
        a, b = run_session(warm, conf), run_session(cold, conf)
        yield step, kind, warm, a, b
        before = {uid: (j, fingerprint(j)) for uid, j in warm.jobs.items()}
        fold(warm, a)
        fold(cold, b)
        replace_changed(warm, before)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10_000),
    st.integers(2, 6),
    st.lists(st.tuples(st.integers(0, 10), st.integers(0, 50)), min_size=1, max_size=8),
)
def test_kept_queue_sums_decide_as_cold(seed: int, n_nodes: int, changes: list[tuple[int, int]]) -> None:
    for step, kind, warm, a, b in warm_cold_sessions(seed, n_nodes, changes, change_jobs, CONF):
        assert decisions(a) == decisions(b), (seed, step, kind)
        assert exact(a.queues) == exact(b.queues), (seed, step, kind)
        # overcommit's kept inqueue sum is the cold one (values and scalar names, in order).
        assert warm.derived is not None and warm.derived.jobs is not None
        kept_inqueue = warm.derived.jobs.get(OVERCOMMIT)
        if kept_inqueue is not None:
            assert _sum(kept_inqueue.total) == _sum(cold_inqueue(warm)), (seed, step, kind)
        # Bounded: one entry per job of the session (none once the sums were made cold).
        kept = warm.derived.jobs.get(PROPORTION)
        assert kept is None or set(kept.jobs) <= set(warm.jobs)
