"""The priority and conformance plugins."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_snapshot,
    mk_task,
    open_session,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus

S = TaskStatus


# --------------------------------------------------------------------------- priority
def priority_session():
    hi = mk_job("hi", priority=10, min_available=1)
    mk_task(hi, "hi-0", priority=5)
    mk_task(hi, "hi-r-0", status=S.RUNNING, node="n1", priority=3)
    mk_task(hi, "hi-r-1", status=S.RUNNING, node="n1", priority=5)
    mk_task(hi, "hi-r-2", status=S.RUNNING, node="n1", priority=9)
    lo = mk_job("lo", priority=1, min_available=1)
    mk_task(lo, "lo-r-0", status=S.RUNNING, node="n1", priority=100)
    eq = mk_job("eq", priority=10, min_available=1)
    mk_task(eq, "eq-r-0", status=S.RUNNING, node="n1", priority=0)
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], [hi, lo, eq])
    return open_session(snap, mk_conf("allocate", ["priority"]))


def test_task_order_higher_priority_first() -> None:
    ssn = priority_session()
    a, b = task_of(ssn, "default/hi", "hi-r-0"), task_of(ssn, "default/hi", "hi-r-2")
    assert ssn.task_order_fn(b, a) and not ssn.task_order_fn(a, b)
    assert ssn.task_compare(b, a) == -1


def test_job_order_higher_priority_first() -> None:
    ssn = priority_session()
    hi, lo = ssn.jobs["default/hi"], ssn.jobs["default/lo"]
    assert ssn.job_order_fn(hi, lo) and not ssn.job_order_fn(lo, hi)
    assert ssn.job_order_compare(hi, ssn.jobs["default/eq"]) == 0


def test_preemptable_same_job_by_task_priority_other_job_by_job_priority() -> None:
    ssn = priority_session()
    preemptor = task_of(ssn, "default/hi", "hi-0")
    cands = [
        task_of(ssn, "default/hi", "hi-r-0"),  # same job, task priority 3 < 5: victim
        task_of(ssn, "default/hi", "hi-r-1"),  # same job, equal task priority: not
        task_of(ssn, "default/hi", "hi-r-2"),  # same job, higher: not
        task_of(ssn, "default/lo", "lo-r-0"),  # other job of lower priority (task priority irrelevant)
        task_of(ssn, "default/eq", "eq-r-0"),  # other job of equal priority: not
    ]
    assert [t.name for t in ssn.preemptable(preemptor, cands)] == ["hi-r-0", "lo-r-0"]


def test_job_starving_counts_all_tasks() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", status=S.RUNNING, node="n1")
    mk_task(j, "j-1", status=S.PIPELINED, node="n1")
    mk_task(j, "j-2")
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, mk_conf("allocate", ["priority"]))
    assert ssn.job_starving(ssn.jobs[j.uid]) is True  # 1 ready + 1 pipelined < 3 tasks
    ssn2 = open_session(snap, mk_conf("allocate", ["priority"], ["gang"]))
    assert ssn2.job_starving(ssn2.jobs[j.uid]) is True  # priority's tier decides first
    ssn3 = open_session(snap, mk_conf("allocate", ["gang"], ["priority"]))
    assert ssn3.job_starving(ssn3.jobs[j.uid]) is False  # gang: 2 >= minMember 1


def test_priority_has_no_reclaimable() -> None:
    ssn = priority_session()
    assert not ssn.has(cb.RECLAIMABLE)
    assert not ssn.has(cb.JOB_PIPELINED)


# --------------------------------------------------------------------------- conformance
def test_conformance_drops_kube_system_and_critical_classes() -> None:
    ordinary = mk_job("o", namespace="team", min_available=1)
    system = mk_job("s", namespace="kube-system", min_available=1)
    mk_task(ordinary, "o-0", status=S.RUNNING, node="n1")
    mk_task(system, "s-0", status=S.RUNNING, node="n1")
    mk_task(
        ordinary,
        "o-1",
        status=S.RUNNING,
        node="n1",
        pod=PodFacts(priority_class_name="system-cluster-critical"),
    )
    mk_task(
        ordinary, "o-2", status=S.RUNNING, node="n1", pod=PodFacts(priority_class_name="system-node-critical")
    )
    mk_task(ordinary, "o-3", status=S.RUNNING, node="n1", pod=PodFacts(priority_class_name="high"))
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], [ordinary, system])
    ssn = open_session(snap, mk_conf("allocate", ["conformance"]))
    cands = [task_of(ssn, "kube-system/s", "s-0")] + [task_of(ssn, "team/o", f"o-{i}") for i in range(4)]
    preemptor = task_of(ssn, "team/o", "o-0")
    for fn in (ssn.preemptable, ssn.reclaimable, ssn.unified_evictable):
        assert [t.name for t in fn(preemptor, cands)] == ["o-0", "o-3"]


def test_conformance_volcano_table() -> None:
    """conformance_test.go: a kube-system pod and an ordinary pod => only the ordinary one."""
    j1 = mk_job("pg1", namespace="kube-system", min_available=1)
    j2 = mk_job("pg1", namespace="test-namespace", min_available=1)
    add_tasks(j1, 1, status=S.RUNNING, node="n1", prefix="test-pod")
    add_tasks(j2, 1, status=S.RUNNING, node="n1", prefix="test-pod")
    ssn = open_session(mk_snapshot([mk_node("n1")], [j1, j2]), mk_conf("allocate", ["conformance"]))
    cands = [next(iter(ssn.jobs[j.uid].tasks.values())) for j in (j1, j2)]
    assert [t.namespace for t in ssn.preemptable(cands[1], cands)] == ["test-namespace"]
