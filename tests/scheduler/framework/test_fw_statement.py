"""Statement: allocate / pipeline / evict take effect at once; discard restores; commit sends out."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session, task_of

from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.task import TaskStatus

S = TaskStatus
JOB = "default/j"


def accounting(node: NodeInfo) -> dict[str, object]:
    return {
        "idle": node.idle.clone(),
        "used": node.used.clone(),
        "releasing": node.releasing.clone(),
        "pipelined": node.pipelined.clone(),
        "future_idle": node.future_idle(),
        "tasks": sorted(node.tasks),
    }


def make() -> tuple[Session, list[str]]:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-r-0", "1", "1Gi", status=S.RUNNING, node="n1")
    mk_task(j, "j-b-0", "1", "1Gi", status=S.BOUND, node="n1")
    mk_task(j, "j-p-0", "2", "2Gi")
    mk_task(j, "j-p-1", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "4", "8Gi"), mk_node("n2", "4", "8Gi")], [j])
    ssn = Session(snap, mk_conf("allocate", ["gang"]))
    ssn.compile_chains()
    events: list[str] = []
    ssn.add_event_handler(
        EventHandler(lambda t: events.append(f"+{t.name}"), lambda t: events.append(f"-{t.name}"))
    )
    return ssn, events


def test_operations_take_effect_immediately() -> None:
    ssn, events = make()
    n1 = ssn.nodes["n1"]
    before = accounting(n1)
    r0, p0, p1 = (task_of(ssn, JOB, n) for n in ("j-r-0", "j-p-0", "j-p-1"))
    stmt = Statement(ssn)

    stmt.evict(r0, "test")
    assert r0.status is S.RELEASING
    assert n1.releasing.cpu == 1000
    assert n1.idle == before["idle"] and n1.used == before["used"]  # net effect: only Releasing grows
    assert n1.future_idle().cpu == before["future_idle"].cpu + 1000

    stmt.pipeline(p0, "n1")
    assert p0.status is S.PIPELINED and p0.node_name == "n1"
    assert n1.pipelined.cpu == 2000
    assert n1.idle == before["idle"]
    assert n1.future_idle().cpu == before["future_idle"].cpu + 1000 - 2000

    stmt.allocate(p1, ssn.nodes["n2"])
    assert p1.status is S.ALLOCATED and p1.node_name == "n2"
    assert ssn.nodes["n2"].idle.cpu == 3000 and ssn.nodes["n2"].used.cpu == 1000

    job = ssn.jobs[JOB]
    assert job.count(S.RELEASING) == 1 and job.waiting_task_num() == 1
    assert job.ready_task_num() == 2  # Bound + Allocated
    assert events == ["-j-r-0", "+j-p-0", "+j-p-1"]
    assert ssn.binds == {} and ssn.evictions == []  # nothing leaves before commit
    # the node table mirrors NodeInfo accounting
    row = n1.index
    assert np.allclose(ssn.table.future_idle[row], ssn.table.vector(n1.future_idle()))


def test_discard_restores_nodes_and_job_and_records_last_tx() -> None:
    ssn, events = make()
    n1, n2 = ssn.nodes["n1"], ssn.nodes["n2"]
    b1, b2 = accounting(n1), accounting(n2)
    job = ssn.jobs[JOB]
    ready0, pending0 = job.ready_task_num(), job.count(S.PENDING)
    r0, p0, p1 = (task_of(ssn, JOB, n) for n in ("j-r-0", "j-p-0", "j-p-1"))
    stmt = Statement(ssn)
    stmt.evict(r0, "test")
    stmt.pipeline(p0, "n1")
    stmt.allocate(p1, n2)
    events.clear()
    stmt.discard()

    assert accounting(n1) == b1
    assert accounting(n2) == b2
    assert np.allclose(ssn.table.future_idle[n1.index], ssn.table.vector(n1.future_idle()))
    assert np.allclose(ssn.table.idle[n2.index], ssn.table.vector(n2.idle))
    assert r0.status is S.RUNNING
    assert p0.status is S.PENDING and p0.node_name == ""
    assert p1.status is S.PENDING and p1.node_name == ""
    assert job.ready_task_num() == ready0 and job.count(S.PENDING) == pending0
    assert job.count(S.RELEASING) == 0 and job.waiting_task_num() == 0
    # undone in reverse order; each task remembers what was discarded
    assert events == ["-j-p-1", "-j-p-0", "+j-r-0"]
    assert p1.last_tx == (S.ALLOCATED, "n2")
    assert p0.last_tx == (S.PIPELINED, "n1")
    assert r0.last_tx == (S.RELEASING, "n1")
    assert stmt.operations == []
    assert ssn.binds == {} and ssn.evictions == []


def test_discarded_eviction_of_a_bound_task_returns_it_running() -> None:
    ssn, _ = make()
    b0 = task_of(ssn, JOB, "j-b-0")
    stmt = Statement(ssn)
    stmt.evict(b0, "test")
    stmt.discard()
    assert b0.status is S.RUNNING
    assert ssn.nodes["n1"].tasks[b0.uid].status is S.RUNNING


def test_commit_records_binds_and_evictions_pipelined_stay_in_session() -> None:
    ssn, _ = make()
    ssn.current_action = "reclaim"
    r0, p0, p1 = (task_of(ssn, JOB, n) for n in ("j-r-0", "j-p-0", "j-p-1"))
    p1.last_tx = (S.ALLOCATED, "n1")
    stmt = Statement(ssn)
    stmt.evict(r0, "make room")
    stmt.pipeline(p0, "n1")
    stmt.allocate(p1, ssn.nodes["n2"])
    stmt.commit()
    assert ssn.binds == {"default/j-p-1": "n2"}
    assert ssn.bind_order == ["default/j-p-1"]
    assert p1.status is S.BINDING
    assert [(e.task, e.node, e.action, e.reason) for e in ssn.evictions] == [
        ("default/j-r-0", "n1", "reclaim", "make room")
    ]
    assert r0.status is S.RELEASING
    assert p0.status is S.PIPELINED and "default/j-p-0" not in ssn.binds
    assert p1.last_tx is None
    assert stmt.operations == []
    # the node keeps the accounting of the committed operations
    assert ssn.nodes["n1"].pipelined.cpu == 2000
    assert ssn.nodes["n2"].used.cpu == 1000


def test_pipeline_to_unknown_node_rolls_back() -> None:
    ssn, _events = make()
    p0 = task_of(ssn, JOB, "j-p-0")
    stmt = Statement(ssn)
    with pytest.raises(KeyError):
        stmt.pipeline(p0, "nope")
    assert p0.status is S.PENDING and p0.node_name == ""
    assert stmt.operations == []


def test_failed_pipeline_leaves_plugin_accounting_balanced() -> None:
    ssn, events = make()
    p0 = task_of(ssn, JOB, "j-p-0")
    with pytest.raises(KeyError):
        Statement(ssn).pipeline(p0, "nope")
    allocs = sum(1 for e in events if e.startswith("+"))
    deallocs = sum(1 for e in events if e.startswith("-"))
    assert allocs == deallocs


def test_merge_moves_operations() -> None:
    ssn, _ = make()
    p0, p1 = task_of(ssn, JOB, "j-p-0"), task_of(ssn, JOB, "j-p-1")
    a, b = Statement(ssn), Statement(ssn)
    a.allocate(p0, ssn.nodes["n1"])
    b.allocate(p1, ssn.nodes["n2"])
    a.merge(b)
    assert [op.task.name for op in a.operations] == ["j-p-0", "j-p-1"]
    assert b.operations == []
    a.discard()
    assert p0.status is S.PENDING and p1.status is S.PENDING


def test_session_allocate_dispatches_allocated_tasks_once_job_ready() -> None:
    """ssn.Allocate (backfill's path): no statement; binds every Allocated task when the job is ready."""
    j = mk_job("g", min_available=2)
    mk_task(j, "g-0", None, None)
    mk_task(j, "g-1", None, None)
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, mk_conf("backfill", ["gang"]))
    g0, g1 = task_of(ssn, "default/g", "g-0"), task_of(ssn, "default/g", "g-1")
    # best-effort pending tasks count as ready: the job is already "ready"
    ssn.allocate(g0, ssn.nodes["n1"])
    assert ssn.binds == {"default/g-0": "n1"}
    assert g0.status is S.BINDING
    ssn.allocate(g1, ssn.nodes["n1"])
    assert ssn.binds == {"default/g-0": "n1", "default/g-1": "n1"}
