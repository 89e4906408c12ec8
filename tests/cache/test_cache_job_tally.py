"""JobTally (daemon/runtime/job_tally.py): the task count, the bound and pending tasks and the pod-key
lookups it keeps across freezes equal what passing over every task of the snapshot gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cache_incremental_freeze import _cluster, _pod
from test_cache_property import _all_events, any_op

from fumarole.daemon.cache import Projection
from fumarole.daemon.runtime.cycle import _task_index, decide
from fumarole.daemon.runtime.job_tally import BOUND_STATUSES, JobTally
from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, parse_conf
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus


def _recounted(snapshot: ClusterSnapshot) -> tuple[int, int, int]:
    """Tasks, bound and pending tasks, counted over every task of the snapshot."""
    tasks = bound = pending = 0
    for job in snapshot.jobs.values():
        for t in job.tasks.values():
            tasks += 1
            if t.status in BOUND_STATUSES:
                bound += 1
            elif t.status == TaskStatus.PENDING:
                pending += 1
    return tasks, bound, pending


def _check(tally: JobTally, snapshot: ClusterSnapshot, extra: list[str]) -> None:
    assert (tally.tasks, tally.bound, tally.pending) == _recounted(snapshot)
    keys = {t.key for j in snapshot.jobs.values() for t in j.tasks.values()} | set(extra)
    assert tally.lookup(keys) == _task_index(snapshot, keys)
    some = set(sorted(keys)[::3])
    assert tally.lookup(some) == _task_index(snapshot, some)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_op, min_size=1, max_size=40), st.data())
def test_cache_job_tally_across_freezes_equals_a_full_pass(ops: list[Any], data: st.DataObject) -> None:
    # The tally re-reads only the jobs whose JobInfo object changed since its last update; with the
    # projection's generation it skips the pass when nothing snapshot-relevant was folded.
    events = [*_cluster(pods=4), *_all_events(ops)]
    freeze_at = set(data.draw(st.lists(st.integers(1, len(events)), min_size=1, max_size=10)))
    with_generation = data.draw(st.booleans())
    projection, tally = Projection(), JobTally()
    for seq, ev in enumerate(events, 1):
        projection.fold(seq, ev)
        if seq in freeze_at or seq == len(events):
            snapshot = projection.freeze(cycle=seq)
            tally.update(snapshot, projection.generation if with_generation else None)
            assert tally.jobs is snapshot.jobs
            _check(tally, snapshot, ["ns/nobody", "other/p0"])


def _task(name: str, job: str, status: TaskStatus = TaskStatus.PENDING, ns: str = "ns") -> TaskInfo:
    return TaskInfo(uid=f"u-{job}-{name}", name=name, namespace=ns, job=job, resreq=Resource(), status=status)


def _job(uid: str, *tasks: TaskInfo) -> JobInfo:
    job = JobInfo(uid=uid, name=uid.partition("/")[2], namespace="ns", queue="q")
    for t in tasks:
        job.add_task(t)
    return job


def test_cache_job_tally_a_key_held_by_several_jobs_is_the_first_jobs_in_snapshot_order() -> None:
    # A pod key in two jobs (a whole build never makes one, but the lookup keeps the recomputation's
    # rule: the first job in snapshot order, then the first task in the job's order).
    a = _job("ns/a", _task("p", "ns/a"), _task("q", "ns/a", TaskStatus.RUNNING))
    b = _job("ns/b", _task("p", "ns/b", TaskStatus.RUNNING), _task("r", "ns/b"))
    c = _job("ns/c", _task("p", "ns/c"))
    tally = JobTally()
    for order in ([b, a, c], [a, b, c], [c, a], [a], [b, c, a], []):
        snapshot = ClusterSnapshot(jobs={j.uid: j for j in order})
        tally.update(snapshot)
        _check(tally, snapshot, ["ns/zzz"])
    # A job replaced by another object under the same uid, with other tasks.
    b2 = _job("ns/b", _task("s", "ns/b", TaskStatus.BINDING))
    for order in ([a, b, c], [a, b2, c], [b2, a], [b, a]):
        snapshot = ClusterSnapshot(jobs={j.uid: j for j in order})
        tally.update(snapshot)
        _check(tally, snapshot, [])


def test_cache_job_tally_generation_shortcut_trusts_the_caller() -> None:
    a = _job("ns/a", _task("p", "ns/a"))
    tally = JobTally()
    tally.update(ClusterSnapshot(jobs={"ns/a": a}), generation=7)
    again = ClusterSnapshot(jobs={"ns/a": a})
    tally.update(again, generation=7)
    assert tally.jobs is again.jobs and tally.tasks == 1
    # Without a generation (or with another one) the jobs are read again.
    b = _job("ns/b", _task("q", "ns/b"), _task("r", "ns/b"))
    other = ClusterSnapshot(jobs={"ns/a": a, "ns/b": b})
    tally.update(other, generation=8)
    _check(tally, other, [])


def test_cache_decide_refuses_a_tally_of_another_snapshot() -> None:
    projection = Projection()
    for seq, ev in enumerate([*_cluster(pods=2), _pod("w", "a")], 1):
        projection.fold(seq, ev)
    first, second = projection.freeze(cycle=1), projection.freeze(cycle=2)
    tally = JobTally()
    tally.update(first)
    conf = parse_conf(DEFAULT_SCHEDULER_CONF, source="default")
    with pytest.raises(ValueError, match="tally"):
        decide(second, conf, cycle=2, watermark=0, conf_hash="", tally=tally)
    tally.update(second)
    with_tally = decide(second, conf, cycle=2, watermark=0, conf_hash="", tally=tally)
    without = decide(second, conf, cycle=2, watermark=0, conf_hash="")
    blank = {"duration_s": 0.0, "action_seconds": {}, "plugin_seconds": {}}
    assert [_blanked(e, blank) for e in with_tally.events] == [_blanked(e, blank) for e in without.events]


def _blanked(ev: Any, blank: dict[str, Any]) -> Any:
    import msgspec

    fields = {k: v for k, v in blank.items() if hasattr(ev, k)}
    return msgspec.structs.replace(ev, **fields) if fields else ev
