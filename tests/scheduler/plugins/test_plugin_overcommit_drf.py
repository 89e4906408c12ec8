"""The overcommit and drf plugins."""

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
    rl,
    run_actions,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.drf import dominant_share

S = TaskStatus


def oc_conf(factor: float | None = None):
    p: dict = {"name": "overcommit"}
    if factor is not None:
        p["arguments"] = {"overcommit-factor": factor}
    return mk_conf("enqueue", [p])


# --------------------------------------------------------------------------- overcommit
# overcommit_test.go: nodes 2c/4Gi and 4c/16Gi; minResources normal 2c/2G, huge 20c/20G
NODES = [mk_node("n1", "2", "4Gi", pods=None), mk_node("n2", "4", "16Gi", pods=None)]


@pytest.mark.parametrize(
    ("min_resources", "factor", "expected"),
    [
        (rl(cpu="2000m", memory="2G"), 1.2, True),
        (rl(cpu="2000m", memory="2G"), 0.8, True),  # < 1 is replaced by 1.2
        (rl(cpu="20000m", memory="20G"), 1.2, False),
        (None, 1.2, True),
    ],
)
def test_overcommit_volcano_table(min_resources: Resource | None, factor: float, expected: bool) -> None:
    j = mk_job("pg1", "c1", min_available=2, min_resources=min_resources, namespace="test-namespace")
    snap = mk_snapshot([n.clone() for n in NODES], [j])
    ssn = open_session(snap, oc_conf(factor))
    job = ssn.jobs[j.uid]
    ssn.job_enqueued(job)
    assert ssn.job_enqueueable(job) is expected


def test_factor_default_and_replacement_warning() -> None:
    snap = mk_snapshot([mk_node("n1", "10", "10Gi")], [])
    ssn = open_session(snap, oc_conf())
    assert ssn.plugins["overcommit"].factor == 1.2
    assert ssn.plugins["overcommit"].idle.cpu == pytest.approx(12000)
    ssn = open_session(snap, oc_conf(0.5))
    assert ssn.plugins["overcommit"].factor == 1.2
    assert any("overcommit-factor" in w for w in ssn.warnings)
    ssn = open_session(snap, oc_conf(2.0))
    assert ssn.plugins["overcommit"].idle.cpu == pytest.approx(20000)


def test_idle_subtracts_used_and_inqueue_accounting() -> None:
    running = mk_job("run", phase="Running", min_available=1, min_resources=rl(cpu="3"))
    mk_task(running, "run-0", "1", "1Gi", status=S.RUNNING, node="n1")
    inq = mk_job("inq", phase="Inqueue", min_available=1, min_resources=rl(cpu="2"))
    mk_task(inq, "inq-0", "2", "1Gi")
    below = mk_job("below", phase="Running", min_available=2, min_resources=rl(cpu="5"))
    mk_task(below, "below-0", "1", "1Gi", status=S.RUNNING, node="n1")
    mk_task(below, "below-1", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "10", "10Gi")], [running, inq, below])
    ssn = open_session(snap, oc_conf(1.0))
    p = ssn.plugins["overcommit"]
    assert p.idle.cpu == 10000 - 2000
    # Inqueue: its minResources; Running with allocated tasks >= minMember: what is left of minResources;
    # Running below minMember: nothing
    assert p.inqueue.cpu == 2000 + (3000 - 1000)


def test_reject_message_names_overused_dimensions() -> None:
    j = mk_job("j", phase="Pending", min_resources=rl(cpu="100", memory="100Gi", **{"nvidia.com/gpu": "1"}))
    mk_task(j, "j-0")
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [j])
    ssn = open_session(snap, oc_conf())
    assert ssn.job_enqueueable(ssn.jobs[j.uid]) is False
    assert ssn.enqueue_rejections[j.uid] == (
        "overcommit: resource in cluster is overused: overused cpu, overused memory, overused nvidia.com/gpu"
    )


def test_enqueued_jobs_accumulate_until_idle_is_used_up() -> None:
    jobs = []
    for i in range(4):
        j = mk_job(f"j{i}", phase="Pending", min_resources=rl(cpu="3"), creation=i)
        mk_task(j, f"j{i}-0", "3", "1Gi")
        jobs.append(j)
    snap = mk_snapshot([mk_node("n1", "10", "10Gi")], jobs)
    ssn = open_session(snap, oc_conf())
    run_actions(ssn, "enqueue")
    # idle 12 cpu: 3 + 3 + 3 + 3 = 12 <= 12 admits all four; a fifth would not fit
    assert [ssn.jobs[j.uid].status.phase for j in jobs] == ["Inqueue"] * 4
    assert ssn.plugins["overcommit"].inqueue.cpu == 12000
    extra = mk_job("x", phase="Pending", min_resources=rl(cpu="1"), creation=10)
    mk_task(extra, "x-0")
    ssn = open_session(mk_snapshot([mk_node("n1", "10", "10Gi")], [*jobs, extra]), oc_conf())
    run_actions(ssn, "enqueue")
    assert ssn.jobs[extra.uid].status.phase == "Pending"


# --------------------------------------------------------------------------- drf
DRF = mk_conf("allocate", ["drf"])


def test_dominant_share_uses_total_dimensions_including_pods() -> None:
    total = Resource(8000, 32 * 1024**3, {"pods": 4})
    assert dominant_share(Resource(2000, 1024**3, {"pods": 1}), total) == pytest.approx(0.25)
    assert dominant_share(Resource(1000, 1024**3, {"pods": 3}), total) == pytest.approx(0.75)
    # a dimension the cluster does not have is not part of the share
    assert dominant_share(Resource(0, 0, {"nvidia.com/gpu": 5000}), total) == 0.0


def test_drf_share_and_job_order_follow_allocations() -> None:
    a = mk_job("a", min_available=1)
    mk_task(a, "a-0", "2", "1Gi", status=S.RUNNING, node="n1")
    mk_task(a, "a-1", "2", "1Gi")
    b = mk_job("b", min_available=1)
    mk_task(b, "b-0", "1", "1Gi", status=S.RUNNING, node="n1")
    mk_task(b, "b-1", "4", "1Gi")
    snap = mk_snapshot([mk_node("n1", "8", "64Gi", pods="1000")], [a, b])
    ssn = open_session(snap, DRF)
    drf = ssn.plugins["drf"]
    assert drf.attrs[a.uid].share == pytest.approx(0.25)
    assert drf.attrs[b.uid].share == pytest.approx(0.125)
    ja, jb = ssn.jobs[a.uid], ssn.jobs[b.uid]
    assert ssn.job_order_fn(jb, ja)
    # allocating b's big task through a statement raises its share above a's
    from fumarole.daemon.scheduler.framework.statement import Statement

    stmt = Statement(ssn)
    stmt.allocate(task_of(ssn, b.uid, "b-1"), ssn.nodes["n1"])
    assert drf.attrs[b.uid].share == pytest.approx(0.625)
    assert ssn.job_order_fn(ja, jb)
    stmt.discard()
    assert drf.attrs[b.uid].share == pytest.approx(0.125)


def test_drf_orders_allocation_by_share() -> None:
    a = mk_job("a", min_available=1)
    mk_task(a, "a-r-0", "4", "1Gi", status=S.RUNNING, node="n1")
    mk_task(a, "a-0", "1", "1Gi")
    b = mk_job("b", min_available=1)
    mk_task(b, "b-0", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "5", "64Gi")], [a, b])
    ssn = open_session(snap, mk_conf("allocate", ["drf", "gang"]))
    run_actions(ssn, "allocate")
    # b has the smaller share: it gets the last cpu although a was created first
    assert ssn.binds == {"default/b-0": "n1"}


def test_drf_preemptable_share_rule_with_delta() -> None:
    # 2000 cpus so that shares differ by fractions of 1e-6
    p = mk_job("p", min_available=1)
    mk_task(p, "p-0", "400", "1Gi")  # preemptor: share with its request = 0.2
    v1 = mk_job("v1", min_available=1)
    mk_task(v1, "v1-0", "399999m", "1Gi", status=S.RUNNING, node="n1")
    mk_task(v1, "v1-1", "1m", "1Gi", status=S.RUNNING, node="n1")  # after removal 0.1999995: within 1e-6
    v2 = mk_job("v2", min_available=1)
    mk_task(v2, "v2-0", "399997m", "1Gi", status=S.RUNNING, node="n1")
    mk_task(v2, "v2-1", "1m", "1Gi", status=S.RUNNING, node="n1")  # after removal 0.1999985: not a victim
    v3 = mk_job("v3", min_available=1)
    add_tasks(v3, 5, "200", "1Gi", status=S.RUNNING, node="n1")  # 1000 cpus: 0.5
    snap = mk_snapshot([mk_node("n1", "2000", "100Ti", pods="100000")], [p, v1, v2, v3])
    ssn = open_session(snap, DRF)
    preemptor = task_of(ssn, p.uid, "p-0")
    cands = [task_of(ssn, v1.uid, "v1-1"), task_of(ssn, v2.uid, "v2-1")]
    cands += [task_of(ssn, v3.uid, f"v3-{i}") for i in range(5)]
    got = [t.name for t in ssn.preemptable(preemptor, cands)]
    # v3 shares after successive removals: 0.4, 0.3, 0.2 (equal: victim), 0.1, 0.0
    assert got == ["v1-1", "v3-0", "v3-1", "v3-2"]


def test_drf_registers_no_queue_order_without_hierarchy() -> None:
    snap = mk_snapshot([mk_node("n1")], [])
    ssn = open_session(snap, DRF)
    assert not ssn.has(cb.QUEUE_ORDER)
    assert not ssn.has(cb.RECLAIMABLE)
    assert ssn.has(cb.PREEMPTABLE) and ssn.has(cb.JOB_ORDER)
