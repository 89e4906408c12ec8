"""The capacity plugin without hierarchy: figures, allocatable, enqueue, queue order, preemptive."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
    run,
    run_actions,
    task_of,
)

from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.capacity import CapacityPlugin

S = TaskStatus
INF = float("inf")
CAP = mk_conf("enqueue, allocate", ["capacity"])


def q(name: str, **kw: Any) -> QueueInfo:
    return QueueInfo(name, **kw)


def plugin(ssn: Session) -> CapacityPlugin:
    p = ssn.plugins["capacity"]
    assert isinstance(p, CapacityPlugin)
    return p


def running(queue: str, name: str, cpu: str, memory: str, node: str = "n1", **kw: Any) -> Any:
    j = mk_job(name, queue, phase="Running", **kw)
    mk_task(j, f"{name}-0", cpu, memory, status=S.RUNNING, node=node)
    return j


def pending(
    queue: str, name: str, cpu: str | None, memory: str | None, n: int = 1, extra: Any = None, **kw: Any
) -> Any:
    j = mk_job(name, queue, **kw)
    add_tasks(j, n, cpu, memory, extra=extra)
    return j


# --------------------------------------------------------------------------- figures
def test_flat_figures_only_for_queues_with_jobs_deserved_clipped_and_raised_to_guarantee() -> None:
    queues = [
        q("a", deserved=rl(cpu="20", memory="100Gi"), guarantee=rl(cpu="6")),
        q("b", deserved=rl(cpu="1"), guarantee=rl(cpu="2"), capability=rl(cpu="8")),
        q("idle", guarantee=rl(cpu="1")),
        q("default"),
        q("root"),
    ]
    jobs = [pending("a", "ja", "1", "1Gi"), pending("b", "jb", "1", "1Gi")]
    ssn = open_session(mk_snapshot([mk_node("n1", "10", "16Gi")], jobs, queues), CAP)
    a = plugin(ssn).attrs
    assert sorted(a) == ["a", "b"]
    # real capability = (total - all guarantees 9) + own guarantee, capped by capability
    assert a["a"].real_capability.cpu == 1000 + 6000
    assert a["b"].real_capability.cpu == 1000 + 2000
    # deserved clipped to real capability (memory too), then raised to the guarantee
    assert a["a"].deserved.cpu == 7000
    assert a["a"].deserved.memory == 16 * 1024**3
    assert a["b"].deserved.cpu == 2000
    # capability without memory: memory unlimited
    assert a["b"].capability.memory == INF


def test_capability_zero_cpu_means_unlimited() -> None:
    queues = [q("a", capability=rl(cpu="0", memory="2Gi")), q("default"), q("root")]
    ssn = open_session(mk_snapshot([mk_node("n1", "4", "8Gi")], [pending("a", "j", "1", "1Gi")], queues), CAP)
    attr = plugin(ssn).attrs["a"]
    assert attr.capability.cpu == INF
    assert attr.real_capability.cpu == 4000
    assert attr.real_capability.memory == 2 * 1024**3


# --------------------------------------------------------------------------- allocatable
def test_allocatable_is_limited_by_real_capability_not_deserved() -> None:
    # deserved 1 cpu but capability 3: three 1-cpu pods bind, the fourth does not
    queues = [q("a", deserved=rl(cpu="1"), capability=rl(cpu="3")), q("default"), q("root")]
    job = pending("a", "j", "1", "1Gi", n=4)
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], [job], queues), CAP)
    assert len(res.binds) == 3
    assert "default/j-3" not in res.binds
    assert "Allocatable" in res.pending["default/j-3"]


def test_allocatable_checks_only_requested_dimensions() -> None:
    # memory already above capability, the task asks for cpu only: allowed
    queues = [q("a", capability=rl(cpu="4", memory="1Gi")), q("default"), q("root")]
    jobs = [running("a", "big", "1", "2Gi"), pending("a", "cpu-only", "1", None)]
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), CAP)
    assert res.binds == {"default/cpu-only-0": "n1"}


def test_closed_queue_refuses_allocation_and_enqueue() -> None:
    queues = [q("a", state="Closed"), q("default"), q("root")]
    inq = pending("a", "inq", "1", "1Gi")
    pend = pending("a", "pend", "1", "1Gi", phase="Pending", min_resources=rl(cpu="1"))
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], [inq, pend], queues), CAP)
    assert res.binds == {}
    assert res.podgroups["default/pend"].phase == "Pending"


# --------------------------------------------------------------------------- enqueue
def test_enqueue_counts_allocated_inqueue_and_elastic() -> None:
    queues = [q("a", capability=rl(cpu="4")), q("default"), q("root")]
    # 2 cpu allocated by a job whose minResources is 1 cpu: 1 cpu elastic
    run_job = mk_job("run", "a", phase="Running", min_resources=rl(cpu="1"))
    add_tasks(run_job, 2, "1", "1Gi", status=S.RUNNING, node="n1")
    j1 = pending("a", "j1", "1", None, phase="Pending", min_resources=rl(cpu="2"), creation=1)
    j2 = pending("a", "j2", "1", None, phase="Pending", min_resources=rl(cpu="2"), creation=2)
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], [run_job, j1, j2], queues), CAP)
    run_actions(ssn, "enqueue")
    # j1: 2 + allocated 2 + inqueue 0 - elastic 1 = 3 <= 4: admitted; then inqueue = 2
    # j2: 2 + 2 + 2 - 1 = 5 > 4: refused
    assert ssn.jobs["default/j1"].status.phase == "Inqueue"
    assert ssn.jobs["default/j2"].status.phase == "Pending"
    assert (
        ssn.enqueue_rejections["default/j2"]
        == "capacity: queue resource quota insufficient: insufficient cpu"
    )
    assert plugin(ssn).attrs["a"].inqueue.cpu == 2000


def test_inqueue_job_with_bound_tasks_is_not_counted_twice() -> None:
    # TestNoDoubleCountingForInqueueJobWithBindingTasks: a 3-cpu Inqueue job whose three tasks are
    # already Bound reserves nothing more; a 1-cpu job still fits a 4-cpu queue.
    queues = [q("q1", capability=rl(cpu="4", memory="8Gi")), q("default"), q("root")]
    a = mk_job("pgA", "q1", min_available=3, min_resources=rl(cpu="3", memory="3Gi"))
    add_tasks(a, 3, "1", "1Gi", status=S.BOUND, node="n1")
    b = pending("q1", "pgB", "1", "1Gi", phase="Pending", min_resources=rl(cpu="1", memory="1Gi"))
    ssn = open_session(mk_snapshot([mk_node("n1", "4", "8Gi", pods="10")], [a, b], queues), CAP)
    assert plugin(ssn).attrs["q1"].inqueue.cpu == 0
    run_actions(ssn, "enqueue", "allocate")
    assert ssn.binds == {"default/pgB-0": "n1"}


# --------------------------------------------------------------------------- queue order
def test_queue_order_priority_then_share_then_deserved_before_best_effort() -> None:
    queues = [
        q("best-effort"),
        q("half", deserved=rl(cpu="4")),
        q("full", deserved=rl(cpu="1")),
        q("urgent", priority=10),
        q("default"),
        q("root"),
    ]
    jobs = [
        running("half", "h", "2", "1Gi"),
        running("full", "f", "1", "1Gi"),
        running("urgent", "u", "1", "1Gi"),
        running("best-effort", "b", "1", "1Gi"),
    ]
    ssn = open_session(mk_snapshot([mk_node("n1", "16", "32Gi")], jobs, queues), CAP)
    order = sorted(
        (ssn.queues[n] for n in ("best-effort", "half", "full", "urgent")),
        key=_cmp_key(ssn),
    )
    # urgent (priority) ; half (share 0.5) ; full (share 1, has deserved) ; best-effort (share 1)
    assert [x.name for x in order] == ["urgent", "half", "full", "best-effort"]


def _cmp_key(ssn: Session) -> Any:
    import functools

    def cmp(l: QueueInfo, r: QueueInfo) -> int:
        return -1 if ssn.queue_order_fn(l, r) else (1 if ssn.queue_order_fn(r, l) else 0)

    return functools.cmp_to_key(cmp)


def test_allocate_event_updates_share() -> None:
    queues = [q("a", deserved=rl(cpu="4")), q("default"), q("root")]
    ssn = open_session(
        mk_snapshot([mk_node("n1", "8", "16Gi")], [pending("a", "j", "1", "1Gi", n=2)], queues), CAP
    )
    attr = plugin(ssn).attrs["a"]
    assert attr.share == 0.0
    run_actions(ssn, "allocate")
    assert attr.allocated.cpu == 2000
    assert attr.share == pytest.approx(0.5)


# --------------------------------------------------------------------------- preemptive
def test_preemptive_needs_room_in_capability_and_one_dimension_below_deserved() -> None:
    queues = [
        q("a", deserved=rl(cpu="2", memory="2Gi"), capability=rl(cpu="4", memory="4Gi")),
        q("default"),
        q("root"),
    ]
    jobs = [running("a", "r", "2", "1Gi"), pending("a", "p", "1", "1Gi")]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), CAP)
    p = plugin(ssn)
    t = task_of(ssn, "default/p", "p-0")
    # future 3 cpu / 2Gi: cpu above deserved, memory within -> may reclaim
    assert p.preemptive(ssn.queues["a"], [t]) is True
    assert ssn.preemptive(ssn.queues["a"], t) is True
    # a request that would pass capability on cpu is refused
    big = mk_task("default/p", "big", "3", "1Gi", add=False)
    assert p.preemptive(ssn.queues["a"], [big]) is False
    # above deserved on every requested dimension -> no
    mem = mk_task("default/p", "mem", "1", "2Gi", add=False)
    assert p.preemptive(ssn.queues["a"], [mem]) is False


def test_preemptive_dimension_missing_from_deserved_never_passes() -> None:
    queues = [q("a", deserved=rl(cpu="2")), q("default"), q("root")]
    jobs = [pending("a", "p", "0", None, extra={"nvidia.com/gpu": "1"})]
    ssn = open_session(
        mk_snapshot([mk_node("n1", "8", "16Gi", extra={"nvidia.com/gpu": "4"})], jobs, queues), CAP
    )
    t = task_of(ssn, "default/p", "p-0")
    assert plugin(ssn).preemptive(ssn.queues["a"], [t]) is False


def test_arguments_and_defaults() -> None:
    p = CapacityPlugin({})
    assert (p.ancestor_reclaim_level, p.dra_enable, p.dra_consumable_capacity_enable) == (0, True, False)
    p = CapacityPlugin(
        {
            "ancestorReclaimLevel": -3,
            "capacity.DynamicResourceAllocationEnable": "false",
            "capacity.DRAConsumableCapacityEnable": True,
        }
    )
    assert (p.ancestor_reclaim_level, p.dra_enable, p.dra_consumable_capacity_enable) == (0, False, True)
    assert CapacityPlugin({"ancestorReclaimLevel": 2}).ancestor_reclaim_level == 2
    # a non-integer keeps the default, as Volcano's GetInt
    assert CapacityPlugin({"ancestorReclaimLevel": "2"}).ancestor_reclaim_level == 0


def test_queue_figures_for_schedule_output() -> None:
    queues = [q("a", deserved=rl(cpu="4"), guarantee=rl(cpu="1")), q("default"), q("root")]
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], [pending("a", "j", "1", "1Gi", n=2)], queues), CAP)
    fig = res.queues["a"]
    assert fig["deserved"].cpu == 4000
    assert fig["allocated"].cpu == 2000
    assert fig["guarantee"].cpu == 1000
    assert fig["capability"].cpu == 8000
    assert fig["share"] == pytest.approx(0.5)
    assert isinstance(fig["request"], Resource)
