"""JobStarving answers kept across sessions (framework/job_memo.py): asked again exactly when they
could differ, and equal to the plugins' answers on random clusters and changes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task
from test_job_derived_cold_warm import warm_cold_sessions
from test_node_derived_cold_warm import change, decisions, end_a_pod

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework import registry
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.session import STARVING_MEMO, Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus

CONF = parse_conf(
    """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
""",
    source="job-memo",
)


def _snapshot(keep_jobs: bool = True) -> ClusterSnapshot:
    jobs = []
    for name in ("a", "b"):
        j = mk_job(name, min_available=2)
        mk_task(j, f"{name}-0", status=TaskStatus.RUNNING, node="n1")
        mk_task(j, f"{name}-1")
        jobs.append(j)
    snap = mk_snapshot([mk_node("n1", cpu="64")], jobs)
    snap.derived = NodeDerived(keep_jobs=keep_jobs)
    return snap


def _counting_session(snap: ClusterSnapshot, asked: list[str], conf: Any) -> Session:
    ssn = Session(snap, conf)
    ssn.register(cb.JOB_STARVING, "priority", lambda job: asked.append(job.name) or True)
    ssn.compile_chains()
    return ssn


def test_an_untouched_job_of_the_same_snapshot_object_is_answered_from_the_session_before() -> None:
    snap, conf, asked = _snapshot(), mk_conf("preempt", ["priority"]), []
    ssn = _counting_session(snap, asked, conf)
    assert [ssn.job_starving(j) for j in ssn.jobs.values()] == [True, True]
    assert [ssn.job_starving(j) for j in ssn.jobs.values()] == [True, True]  # within the session too
    assert asked == ["a", "b"]
    asked.clear()
    ssn = _counting_session(snap, asked, conf)
    assert [ssn.job_starving(j) for j in ssn.jobs.values()] == [True, True]
    assert asked == []


def test_a_job_asked_again_when_touched_replaced_or_under_another_configuration() -> None:
    snap, conf, asked = _snapshot(), mk_conf("preempt", ["priority"]), []
    ssn = _counting_session(snap, asked, conf)
    for j in ssn.jobs.values():
        ssn.job_starving(j)
    asked.clear()
    # Touched: the session took its own tasks (every write to tasks goes through them).
    ssn = _counting_session(snap, asked, conf)
    a, b = ssn.jobs.values()
    assert a.tasks and a.cow_origin is None
    ssn.job_starving(a), ssn.job_starving(b)
    assert asked == ["a"]
    # The next session asks a again: the session before touched it, so kept nothing for it.
    asked.clear()
    ssn = _counting_session(snap, asked, conf)
    for j in ssn.jobs.values():
        ssn.job_starving(j)
    assert asked == ["a"]
    # Replaced: the snapshot holds a new JobInfo for b (the freeze's contract for a changed job).
    asked.clear()
    uid_b = next(uid for uid, j in snap.jobs.items() if j.name == "b")
    snap.jobs[uid_b] = snap.jobs[uid_b].clone()
    ssn = _counting_session(snap, asked, conf)
    for j in ssn.jobs.values():
        ssn.job_starving(j)
    assert asked == ["b"]
    # Another configuration object: every answer is asked again.
    asked.clear()
    ssn = _counting_session(snap, asked, mk_conf("preempt", ["priority"]))
    for j in ssn.jobs.values():
        ssn.job_starving(j)
    assert asked == ["a", "b"]


def test_without_a_kept_store_every_question_goes_to_the_plugins() -> None:
    snap, conf, asked = _snapshot(keep_jobs=False), mk_conf("preempt", ["priority"]), []
    for _ in range(2):
        ssn = _counting_session(snap, asked, conf)
        assert ssn.starving_memo is None
        for j in ssn.jobs.values():
            ssn.job_starving(j)
    assert asked == ["a", "b", "a", "b"]


def test_only_pure_job_starving_callbacks_are_registered() -> None:
    """The memo holds only while every JobStarving callback reads nothing but the job's tasks and
    fixed fields: a plugin that starts registering one must be checked and added here."""
    registering = set()
    for name, factory in sorted(registry.PLUGINS.items()):
        snap = _snapshot(keep_jobs=False)
        ssn = Session(
            snap, parse_conf(f"actions: preempt\ntiers:\n- plugins: [{{name: {name}}}]\n", source="t")
        )
        factory({}).on_session_open(ssn)  # every plugin opens on this small cluster
        if name in ssn.fns.get(cb.JOB_STARVING, {}):
            registering.add(name)
    assert registering == {"gang", "priority", "tdm"}


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10_000),
    st.integers(2, 5),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 50)), min_size=1, max_size=6),
)
def test_kept_starving_answers_equal_the_plugins(
    seed: int, n_nodes: int, changes: list[tuple[int, int]]
) -> None:
    """Every answer a warm session gives equals the plugins' answer for the job as it is then,
    and warm sessions decide as cold ones."""
    answered = {"memo": 0, "asked": 0}
    mismatches: list[str] = []
    memoised = Session.job_starving

    def checked(ssn: Session, job: JobInfo) -> bool:
        got = memoised(ssn, job)
        answered["memo" if job.cow_origin is not None else "asked"] += 1
        if got != ssn._job_starving(job):
            mismatches.append(job.uid)
        return got

    def apply(snap: ClusterSnapshot, kind: int, pick: int, step: int, removed: dict[str, NodeInfo]) -> None:
        if kind == 6:  # a running pod fails: its job's ready count drops
            end_a_pod(snap, pick, TaskStatus.FAILED)
        else:
            change(snap, kind, pick, step, removed)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Session, "job_starving", checked)
        for step, kind, warm, a, b in warm_cold_sessions(seed, n_nodes, changes, apply, CONF):
            assert decisions(a) == decisions(b), (seed, step, kind)
            assert not mismatches, (seed, step, mismatches)
            assert warm.derived is not None and warm.derived.jobs is not None
            assert set(warm.derived.jobs[STARVING_MEMO][1]) <= set(warm.jobs)  # bounded by the cluster
    assert answered["memo"] or not changes  # the memo was used
