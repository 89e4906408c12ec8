"""The proportion plugin: deserved shares, queue order, overuse, allocatable, reclaim, enqueue."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_queue,
    mk_snapshot,
    mk_task,
    open_session,
    rl,
    run,
    run_actions,
    task_of,
)

from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.resources import Resource, exceeded_part
from fumarole.daemon.scheduler.model.task import TaskStatus

S = TaskStatus
PROP = mk_conf("allocate", ["proportion"])
GI = 1024**3


def attrs(ssn: Session) -> dict[str, Any]:
    return ssn.plugins["proportion"].attrs


def queue_job(queue: str, n: int, cpu: str = "1", memory: str = "1Gi", **kw: Any):
    j = mk_job(f"job-{queue}", queue, min_available=1, **kw)
    add_tasks(j, n, cpu, memory)
    return j


# --------------------------------------------------------------------------- deserved
def test_weights_2_3_5_with_capability_and_guarantee() -> None:
    queues = [
        mk_queue("queue-a", 2, capability=rl(cpu="50"), guarantee=rl(cpu="10")),
        mk_queue("queue-b", 3),
        mk_queue("queue-c", 5, guarantee=rl(cpu="20")),
        mk_queue("default"),
        mk_queue("root"),
    ]
    jobs = [
        queue_job("queue-a", 8, "10", None),
        queue_job("queue-b", 6, "10", None),
        queue_job("queue-c", 3, "10", None),
    ]
    for j in jobs:
        for t in j.tasks.values():
            t.resreq = rl(cpu="10", pods="1")
    snap = mk_snapshot([mk_node("n1", "100", "400Gi")], jobs, queues)
    ssn = open_session(snap, PROP)
    a = attrs(ssn)
    assert sorted(a) == ["queue-a", "queue-b", "queue-c"]  # queues without jobs take no part
    assert [a[q].deserved.cpu for q in ("queue-a", "queue-b", "queue-c")] == pytest.approx(
        [28000, 42000, 30000]
    )
    # realCapability = total - every guarantee + own guarantee, capped by capability
    assert [a[q].real_capability.cpu for q in ("queue-a", "queue-b", "queue-c")] == [50000, 70000, 90000]
    res = run(snap, mk_conf("allocate", ["priority", "gang"], ["proportion"]))
    # queue-a may use 28 of its 80 requested cpus: two 10-cpu tasks
    assert sorted(k for k in res.binds if k.startswith("default/job-queue-a-")) == [
        "default/job-queue-a-0",
        "default/job-queue-a-1",
    ]
    assert res.queues["queue-a"]["deserved"].cpu == pytest.approx(28000)


def test_weights_1_3_on_4_cpus() -> None:
    jobs = [queue_job("q1", 4), queue_job("q2", 4)]
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], jobs, [mk_queue("q1", 1), mk_queue("q2", 3)])
    a = attrs(open_session(snap, PROP))
    assert a["q1"].deserved.cpu == pytest.approx(1000)
    assert a["q2"].deserved.cpu == pytest.approx(3000)


def test_queue_asking_less_than_its_share_frees_the_rest() -> None:
    jobs = [queue_job("q1", 1), queue_job("q2", 10)]
    snap = mk_snapshot([mk_node("n1", "8", "64Gi")], jobs, [mk_queue("q1"), mk_queue("q2")])
    a = attrs(open_session(snap, PROP))
    assert a["q1"].deserved.cpu == pytest.approx(1000)
    assert a["q2"].deserved.cpu == pytest.approx(7000)
    # deserved never exceeds the request
    assert a["q1"].deserved.memory == pytest.approx(1024**3)


def test_deserved_never_below_guarantee() -> None:
    jobs = [queue_job("q1", 1), queue_job("q2", 10)]
    queues = [mk_queue("q1", guarantee=rl(cpu="3")), mk_queue("q2")]
    a = attrs(open_session(mk_snapshot([mk_node("n1", "8", "64Gi")], jobs, queues), PROP))
    assert a["q1"].deserved.cpu == pytest.approx(3000)


def test_weight_zero_queue_gets_only_its_guarantee() -> None:
    jobs = [queue_job("q0", 4), queue_job("q1", 10)]
    queues = [mk_queue("q0", 0, guarantee=rl(cpu="2")), mk_queue("q1", 1)]
    a = attrs(open_session(mk_snapshot([mk_node("n1", "8", "64Gi")], jobs, queues), PROP))
    assert a["q0"].deserved.cpu == pytest.approx(2000)
    # q1 gets the rest of what its realCapability allows (total - all guarantees)
    assert a["q1"].deserved.cpu == pytest.approx(6000)


def test_real_capability_counts_guarantees_of_queues_without_jobs() -> None:
    jobs = [queue_job("qa", 1), queue_job("qb", 1), queue_job("qc", 1)]
    queues = [
        mk_queue("qa", guarantee=rl(cpu="10"), capability=rl(cpu="50")),
        mk_queue("qb"),
        mk_queue("qc", capability=rl(memory="10Gi")),  # no cpu in capability: cpu unlimited
        mk_queue("qx", guarantee=rl(cpu="30")),  # no jobs, still reserves its guarantee
    ]
    snap = mk_snapshot([mk_node("n1", "100", "400Gi", extra={"nvidia.com/gpu": "8"})], jobs, queues)
    a = attrs(open_session(snap, PROP))
    assert a["qa"].real_capability.cpu == 50000
    assert a["qb"].real_capability.cpu == 60000
    assert a["qc"].real_capability.cpu == 60000
    assert a["qc"].real_capability.memory == 10 * 1024**3
    # scalars missing from the capability are unlimited
    assert a["qa"].real_capability.scalars["nvidia.com/gpu"] == 8000
    assert "qx" not in a


# --------------------------------------------------------------------------- order / overused / allocatable
def test_queue_order_priority_then_share() -> None:
    ja = queue_job("qa", 2)
    mk_task(ja, "a-r-0", "2", "1Gi", status=S.RUNNING, node="n1")
    jb = queue_job("qb", 2)
    jc = queue_job("qc", 2)
    queues = [mk_queue("qa"), mk_queue("qb"), mk_queue("qc", priority=-1)]
    ssn = open_session(mk_snapshot([mk_node("n1", "16", "64Gi")], [ja, jb, jc], queues), PROP)
    qa, qb, qc = (ssn.queues[n] for n in ("qa", "qb", "qc"))
    a = attrs(ssn)
    assert a["qa"].share > a["qb"].share == 0
    assert ssn.queue_order_fn(qb, qa)  # lower share first
    assert ssn.queue_order_fn(qa, qc)  # higher priority beats share
    assert ssn.queue_order_fn(qb, qc)


def test_overused_when_allocated_reaches_deserved_on_every_dimension() -> None:
    ja = mk_job("ja", "qa", min_available=1, phase="Running")
    add_tasks(ja, 2, "1", "1Gi", status=S.RUNNING, node="n1")
    jb = queue_job("qb", 4)
    queues = [mk_queue("qa"), mk_queue("qb")]
    ssn = open_session(mk_snapshot([mk_node("n1", "4", "4Gi")], [ja, jb], queues), PROP)
    a = attrs(ssn)
    # qa asks exactly what it has: deserved == allocated => overused
    assert a["qa"].deserved == a["qa"].allocated
    assert ssn.overused(ssn.queues["qa"]) is True
    assert ssn.overused(ssn.queues["qb"]) is False


def test_allocatable_compares_only_requested_dimensions() -> None:
    ja = mk_job("ja", "qa", min_available=1)
    mk_task(ja, "ja-0", "1", "3Gi", status=S.RUNNING, node="n1")
    mk_task(ja, "ja-1", "1", None)  # cpu only
    mk_task(ja, "ja-2", None, "1Gi")  # memory only
    jb = queue_job("qb", 3, "1", "1Gi")
    queues = [mk_queue("qa"), mk_queue("qb")]
    ssn = open_session(mk_snapshot([mk_node("n1", "4", "4Gi")], [ja, jb], queues), PROP)
    a = attrs(ssn)
    # qa: deserved memory 2Gi < allocated 3Gi, cpu deserved 2 > allocated 1
    assert a["qa"].deserved.memory < a["qa"].allocated.memory
    qa = ssn.queues["qa"]
    assert ssn.allocatable_fn(qa, task_of(ssn, ja.uid, "ja-1")) is True
    assert ssn.allocatable_fn(qa, task_of(ssn, ja.uid, "ja-2")) is False


def test_allocatable_refuses_a_queue_that_is_not_open() -> None:
    j = queue_job("qa", 1)
    ssn = open_session(mk_snapshot([mk_node("n1")], [j], [mk_queue("qa", state="Closed")]), PROP)
    assert ssn.allocatable_fn(ssn.queues["qa"], next(iter(ssn.jobs[j.uid].tasks.values()))) is False


def test_allocation_events_move_allocated_and_share() -> None:
    j = queue_job("qa", 2)
    other = queue_job("qb", 2)
    ssn = open_session(
        mk_snapshot([mk_node("n1", "8", "8Gi")], [j, other], [mk_queue("qa"), mk_queue("qb")]), PROP
    )
    a = attrs(ssn)["qa"]
    assert a.allocated.cpu == 0 and a.share == 0
    run_actions(ssn, "allocate")
    assert a.allocated.cpu == 2000
    assert a.share == pytest.approx(1.0)


# --------------------------------------------------------------------------- reclaim
def test_reclaimable_victims_while_allocated_exceeds_deserved() -> None:
    ja = mk_job("ja", "qa", min_available=1, phase="Running")
    add_tasks(ja, 4, "1", "1Gi", status=S.RUNNING, node="n1")
    jb = queue_job("qb", 4, "1", "1Gi")
    queues = [mk_queue("qa"), mk_queue("qb")]
    ssn = open_session(mk_snapshot([mk_node("n1", "4", "8Gi")], [ja, jb], queues), PROP)
    assert attrs(ssn)["qa"].deserved.cpu == pytest.approx(2000)
    cands = [task_of(ssn, ja.uid, f"ja-{i}") for i in range(4)]
    reclaimer = task_of(ssn, jb.uid, "job-qb-0")
    assert [t.name for t in ssn.reclaimable(reclaimer, cands)] == ["ja-0", "ja-1"]


# --------------------------------------------------------------------------- enqueue
def test_enqueueable_message_and_inqueue_accounting() -> None:
    first = mk_job("first", "qa", phase="Pending", min_resources=rl(cpu="3"), creation=1)
    mk_task(first, "first-0", "3", "1Gi")
    second = mk_job("second", "qa", phase="Pending", min_resources=rl(cpu="2"), creation=2)
    mk_task(second, "second-0", "2", "1Gi")
    queues = [mk_queue("qa", capability=rl(cpu="4"))]
    ssn = open_session(
        mk_snapshot([mk_node("n1", "16", "64Gi")], [first, second], queues),
        mk_conf("enqueue", ["proportion"]),
    )
    run_actions(ssn, "enqueue")
    assert ssn.jobs[first.uid].status.phase == "Inqueue"
    assert attrs(ssn)["qa"].inqueue.cpu == 3000
    assert ssn.jobs[second.uid].status.phase == "Pending"
    assert (
        ssn.enqueue_rejections[second.uid]
        == "proportion: queue resource quota insufficient: insufficient cpu"
    )


def test_enqueue_rejects_closed_queue_even_without_min_resources() -> None:
    j = mk_job("j", "qa", phase="Pending")
    mk_task(j, "j-0")
    ssn = open_session(
        mk_snapshot([mk_node("n1")], [j], [mk_queue("qa", state="Closed")]),
        mk_conf("enqueue", ["proportion"]),
    )
    assert ssn.job_enqueueable(ssn.jobs[j.uid]) is False
    # the enqueue action does not ask plugins for a job without minResources
    run_actions(ssn, "enqueue")
    assert ssn.jobs[j.uid].status.phase == "Inqueue"


def test_inqueue_of_inqueue_job_deducts_its_allocated_tasks() -> None:
    j = mk_job("j", "qa", phase="Inqueue", min_available=2, min_resources=rl(cpu="4"))
    mk_task(j, "j-0", "1", "1Gi", status=S.BINDING, node="n1")
    mk_task(j, "j-1", "3", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "16", "64Gi")], [j], [mk_queue("qa")]), PROP)
    assert attrs(ssn)["qa"].inqueue.cpu == 3000


# ---------------------------------------------------------------- Volcano's TestEnqueueAndAllocable
def enq_alloc_cluster(pending: tuple[str, str, str, str], queue3_closed: bool = False):
    """nodes n1/n2 2c/2G pods 10; pod1 1c2G on n1 (q1), pod2 2c1G on n2 (q2); one pending pod."""
    nodes = [mk_node("n1", "2", "2G", pods="10"), mk_node("n2", "2", "2G", pods="10")]
    pg1 = mk_job("pg1", "q1", phase="Running", namespace="ns1", min_resources=rl(cpu="1", memory="2G"))
    mk_task(pg1, "pod1", "1", "2G", status=S.RUNNING, node="n1")
    pg2 = mk_job("pg2", "q2", phase="Running", namespace="ns1", min_resources=rl(cpu="2", memory="1G"))
    mk_task(pg2, "pod2", "2", "1G", status=S.RUNNING, node="n2")
    name, queue, cpu, mem = pending
    pg = mk_job(name, queue, phase="Pending", namespace="ns1", min_resources=rl(cpu=cpu, memory=mem))
    mk_task(pg, f"pod-{name}", cpu, mem)
    queues = [
        mk_queue("q1", capability=rl(cpu="2", memory="2G")),
        mk_queue("q2", capability=rl(cpu="3", memory="3G")),
    ]
    jobs = [pg1, pg2, pg]
    if queue3_closed:
        queues = [mk_queue("q3", capability=rl(cpu="3", memory="3G"), state="Closed")]
        jobs = [pg]
    return mk_snapshot(nodes, jobs, queues)


ALL_ENABLE = mk_conf("enqueue, allocate", ["proportion"])
ENQUEUEABLE = mk_conf(
    "enqueue, allocate", [{"name": "proportion", "enabledAllocatable": False, "enabledOverused": False}]
)
ALLOCATABLE = mk_conf(
    "enqueue, allocate", [{"name": "proportion", "enabledOverused": False, "enableJobEnqueued": False}]
)


@pytest.mark.parametrize(
    ("pending", "conf", "closed", "binds"),
    [
        # case0: memory exceeds deserved, a job requesting only cpu is enqueued and allocated
        (("pg3", "q1", "1", "0"), ALL_ENABLE, False, {"ns1/pod-pg3": "n1"}),
        # case1: cpu exceeds deserved, a job requesting only memory is enqueued and allocated
        (("pg4", "q2", "0", "1G"), ALL_ENABLE, False, {"ns1/pod-pg4": "n2"}),
        # case2: exceeds capability: not enqueued
        (("pg5", "q1", "1", "1G"), ENQUEUEABLE, False, {}),
        # case3: exceeds deserved: enqueued but not allocated
        (("pg5", "q1", "1", "1G"), ALLOCATABLE, False, {}),
        # case4: queue not open: not enqueued
        (("pg6", "q3", "1", "1G"), ENQUEUEABLE, True, {}),
    ],
)
def test_volcano_enqueue_and_allocatable_table(pending: tuple, conf: Any, closed: bool, binds: dict) -> None:
    res = run(enq_alloc_cluster(pending, closed), conf)
    assert res.binds == binds
    uid = f"ns1/{pending[0]}"
    if conf is ALLOCATABLE:
        assert res.podgroups[uid].phase == "Inqueue"
    elif not binds:
        assert res.podgroups[uid].phase == "Pending"


def test_queue_figures_for_output() -> None:
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [queue_job("q1", 4)], [mk_queue("q1")])
    res = run(snap, mk_conf("allocate", ["gang"], ["proportion"]))
    fig = res.queues["q1"]
    assert isinstance(fig["deserved"], Resource)
    assert fig["deserved"].cpu == pytest.approx(4000)
    assert fig["allocated"].cpu == 4000
    assert fig["share"] == pytest.approx(1.0)


# --------------------------------------------------------------------------- Volcano's other proportion tests
def test_volcano_allocate_by_queue_priority() -> None:
    """proportion_test.go TestAllocate case0 (allocate only): the highest-priority queue is served first."""
    nodes = [mk_node("n1", "2", "4Gi", pods="10"), mk_node("n2", "2", "4Gi", pods="10")]
    pg1 = mk_job("pg1", "q1", phase="Running", namespace="ns1")
    mk_task(pg1, "p1", "2", "4Gi", status=S.RUNNING, node="n1")
    pg2 = mk_job("pg2", "q2", namespace="ns1")
    mk_task(pg2, "p2", "2", "4Gi")
    pg3 = mk_job("pg3", "q3", namespace="ns1")
    mk_task(pg3, "p3", "2", "4Gi")
    cap = rl(cpu="2", memory="4Gi")
    queues = [
        mk_queue("q1", priority=5, capability=cap),
        mk_queue("q2", priority=1, capability=cap),
        mk_queue("q3", priority=10, capability=cap),
    ]
    conf = mk_conf(
        "allocate", [{"name": "proportion", "enabledAllocatable": False, "enabledOverused": False}]
    )
    res = run(mk_snapshot(nodes, [pg1, pg2, pg3], queues), conf)
    assert res.binds == {"ns1/p3": "n2"}


def test_volcano_no_double_counting_for_inqueue_job_with_binding_tasks() -> None:
    conf = mk_conf("enqueue, allocate", ["proportion"])
    queues = [mk_queue("q1", capability=rl(cpu="4", memory="8Gi"))]

    def pg_a(status: TaskStatus):
        j = mk_job("pgA", "q1", min_available=3, namespace="ns1", min_resources=rl(cpu="3", memory="3Gi"))
        for i in (1, 2, 3):
            mk_task(j, f"pA{i}", "1", "1Gi", status=status, node="n1" if status is not S.PENDING else "")
        return j

    # cycle 1: the gang is bound
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi", pods="10")], [pg_a(S.PENDING)], queues), conf)
    assert sorted(res.binds) == ["ns1/pA1", "ns1/pA2", "ns1/pA3"]
    # cycle 2: its tasks are Binding and the PodGroup still Inqueue; a new 1-cpu job must fit
    pg_b = mk_job("pgB", "q1", phase="Pending", namespace="ns1", min_resources=rl(cpu="1", memory="1Gi"))
    mk_task(pg_b, "pB1", "1", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi", pods="10")], [pg_a(S.BINDING), pg_b], queues), conf)
    assert res.binds == {"ns1/pB1": "n1"}


def test_volcano_job_enqueued_only_after_every_plugin_admitted() -> None:
    """A job rejected by another plugin must not reserve proportion's inqueue."""
    pga = mk_job("pgA", "q1", phase="Pending", namespace="ns1", min_resources=rl(cpu="1", memory="1G"))
    mk_task(pga, "podA", "1", "1G")
    pgb = mk_job("pgB", "q1", phase="Pending", namespace="ns1", min_resources=rl(cpu="1", memory="1G"))
    mk_task(pgb, "podB", "1", "1G")
    queues = [mk_queue("q1", capability=rl(cpu="1", memory="4G"))]
    snap = mk_snapshot([mk_node("n1", "4", "4G", pods="10")], [pga, pgb], queues)
    ssn = open_session(snap, mk_conf("enqueue", ["proportion", "test-rejecter"]))
    from fumarole.daemon.scheduler.framework import combinators as cb

    ssn.register(
        cb.JOB_ENQUEUEABLE, "test-rejecter", lambda job: cb.REJECT if job.name == "pgA" else cb.PERMIT
    )
    ssn.compile_chains()
    run_actions(ssn, "enqueue")
    assert ssn.jobs["ns1/pgA"].status.phase == "Pending"
    assert ssn.jobs["ns1/pgB"].status.phase == "Inqueue"


# --------------------------------------------------------------------------- open figures
STATUSES = [S.PENDING, S.RUNNING, S.ALLOCATED, S.BINDING, S.SUCCEEDED]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["q1", "q2"]),
            st.lists(
                st.tuples(st.sampled_from(STATUSES), st.integers(0, 4000), st.integers(0, 3)), max_size=5
            ),
            st.one_of(
                st.none(),
                st.tuples(st.sampled_from([-1, 0, 1000, 3000]), st.integers(0, 2), st.integers(-1, 2)),
            ),
        ),
        max_size=6,
    )
)
def test_open_request_and_elastic_equal_the_direct_sums(jobs: list[Any]) -> None:
    """Queue `request` (allocated + pending requests) and `elastic` (allocated over minResources,
    summed over jobs) at session open, against the sums written out job by job."""
    made = []
    for j, (queue, tasks, min_res) in enumerate(jobs):
        minimum = None if min_res is None else Resource(min_res[0], min_res[1] * GI, {"x.io/dev": min_res[2]})
        job = mk_job(f"j{j}", queue, min_resources=minimum)
        for t, (status, cpu, dev) in enumerate(tasks):
            node = "n1" if status != S.PENDING else ""
            mk_task(
                job,
                f"j{j}-t{t}",
                resreq=Resource(cpu, GI, {"x.io/dev": dev} if dev else None),
                status=status,
                node=node,
            )
        made.append(job)
    snap = mk_snapshot(
        [mk_node("n1", "64", "256Gi", extra={"x.io/dev": "100"})], made, [mk_queue("q1"), mk_queue("q2")]
    )
    ssn = open_session(snap, PROP)
    want_request: dict[str, Resource] = {}
    want_elastic: dict[str, Resource] = {}
    for job in ssn.jobs.values():
        request = want_request.setdefault(job.queue, Resource())
        request.add(job.allocated)
        for t in job.tasks_in(S.PENDING):
            request.add(t.resreq)
        want_elastic.setdefault(job.queue, Resource()).add(
            exceeded_part(job.allocated, job.min_resources or Resource())
        )
    for queue, attr in attrs(ssn).items():
        assert (attr.request.cpu, attr.request.memory, attr.request.scalars) == (
            want_request[queue].cpu,
            want_request[queue].memory,
            want_request[queue].scalars,
        )
        assert (attr.elastic.cpu, attr.elastic.memory, attr.elastic.scalars) == (
            want_elastic[queue].cpu,
            want_elastic[queue].memory,
            want_elastic[queue].scalars,
        )
