"""The allocate action (actions/allocate/allocate.go semantics)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
    run,
    run_actions,
    statuses,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus

S = TaskStatus
GANG = mk_conf("allocate", ["priority", "gang"])


def fake(ssn: Session, point: str, plugin: str, fn: Any) -> None:
    """Register a callback for a plugin listed in the conf and recompile the chains."""
    ssn.register(point, plugin, fn)
    ssn.compile_chains()


# --------------------------------------------------------------------------- gang
def test_gang_is_all_or_nothing_and_discarded() -> None:
    g = mk_job("g", min_available=3)
    add_tasks(g, 3, "2", "1Gi")
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [g])
    ssn = open_session(snap, GANG)
    run_actions(ssn, "allocate")
    assert ssn.binds == {}
    assert set(statuses(ssn, g.uid).values()) == {S.PENDING}
    n1 = ssn.nodes["n1"]
    assert n1.idle.cpu == 4000 and n1.used.cpu == 0 and not n1.tasks
    # the first two were placed then discarded; the third did not fit
    assert task_of(ssn, g.uid, "g-0").last_tx == (S.ALLOCATED, "n1")
    assert task_of(ssn, g.uid, "g-1").last_tx == (S.ALLOCATED, "n1")
    fe = ssn.jobs[g.uid].nodes_fit_errors[task_of(ssn, g.uid, "g-2").uid]
    assert fe.message() == "0/1 nodes are unavailable: 1 Insufficient cpu."

    res = run(snap, GANG)
    assert res.binds == {}
    cond = res.podgroups[g.uid].conditions[0]
    assert (cond.type, cond.reason) == ("Unschedulable", "NotEnoughResources")
    assert cond.message.startswith(
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"
    )
    assert res.podgroups[g.uid].phase == "Inqueue"


def test_gang_that_fits_is_bound_and_stays_inqueue() -> None:
    g = mk_job("g", min_available=2)
    add_tasks(g, 2, "2", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi")], [g]), GANG)
    assert res.binds == {"default/g-0": "n1", "default/g-1": "n1"}
    assert res.podgroups[g.uid].phase == "Inqueue"
    assert [(c.type, c.reason) for c in res.podgroups[g.uid].conditions] == [
        ("Scheduled", "tasks in gang are ready to be scheduled")
    ]


def test_pipelined_only_gang_is_kept_in_session_but_not_bound() -> None:
    other = mk_job("other", min_available=1, phase="Running")
    mk_task(other, "other-0", "2", "1Gi", status=S.RELEASING, node="n1")
    g = mk_job("g", min_available=2)
    add_tasks(g, 2, "2", "1Gi")
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [other, g])
    ssn = open_session(snap, GANG)
    run_actions(ssn, "allocate")
    assert statuses(ssn, g.uid) == {"g-0": S.ALLOCATED, "g-1": S.PIPELINED}
    assert ssn.binds == {}
    n1 = ssn.nodes["n1"]
    assert n1.pipelined.cpu == 2000 and n1.future_idle().cpu == 0

    res = run(snap, GANG)
    assert res.binds == {}
    assert res.pipelined == {"default/g-1": "n1"}


def test_pipelining_onto_future_idle_when_a_releasing_pod_frees_resources() -> None:
    other = mk_job("other", min_available=1, phase="Running")
    mk_task(other, "other-0", "2", "1Gi", status=S.RELEASING, node="n1")
    mk_task(other, "other-1", "1", "1Gi", status=S.RUNNING, node="n1")
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "3", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi")], [other, j]), GANG)
    assert res.binds == {}
    assert res.pipelined == {"default/j-0": "n1"}
    assert res.podgroups[j.uid].phase == "Inqueue"


def test_idle_fit_node_is_preferred_over_future_idle_fit() -> None:
    other = mk_job("other", min_available=1, phase="Running")
    mk_task(other, "other-0", "4", "1Gi", status=S.RELEASING, node="n1")
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "3", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi"), mk_node("n2", "4", "8Gi")], [other, j]), GANG)
    assert res.binds == {"default/j-0": "n2"}
    assert res.pipelined == {}


def test_nominated_node_is_tried_first() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "1", "1Gi", pod=PodFacts(nominated_node_name="n3"))
    nodes = [mk_node("n1"), mk_node("n2"), mk_node("n3")]
    res = run(mk_snapshot(nodes, [j]), GANG)
    assert res.binds == {"default/j-0": "n3"}


def test_nodes_without_pods_allocatable_fit_nothing() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "64", "64Gi", pods=None)], [j])
    ssn = open_session(snap, GANG)
    run_actions(ssn, "allocate")
    assert ssn.binds == {}
    fe = ssn.jobs[j.uid].nodes_fit_errors[task_of(ssn, j.uid, "j-0").uid]
    assert fe.message() == "0/1 nodes are unavailable: 1 Insufficient pods."


def test_pod_count_limit_through_pods_scalar() -> None:
    j = mk_job("j", min_available=1)
    add_tasks(j, 3, "100m", "10Mi")
    res = run(mk_snapshot([mk_node("n1", "64", "64Gi", pods="2")], [j]), GANG)
    assert sorted(res.binds) == ["default/j-0", "default/j-1"]


# --------------------------------------------------------------------------- fairness and queues
def test_ready_job_places_one_task_per_queue_turn() -> None:
    conf = mk_conf("allocate", ["priority", "gang"], ["proportion"])
    a = mk_job("a", "qa", min_available=1)
    add_tasks(a, 3, "1", "1Gi")
    b = mk_job("b", "qb", min_available=1)
    add_tasks(b, 3, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], [a, b], [mk_queue("qa"), mk_queue("qb")])
    res = run(snap, conf)
    assert res.bind_order == [
        "default/a-0",
        "default/b-0",
        "default/a-1",
        "default/b-1",
        "default/a-2",
        "default/b-2",
    ]


def test_without_share_plugin_a_queue_keeps_its_turns() -> None:
    a = mk_job("a", "qa", min_available=1)
    add_tasks(a, 2, "1", "1Gi")
    b = mk_job("b", "qb", min_available=1)
    add_tasks(b, 2, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], [a, b], [mk_queue("qa"), mk_queue("qb")])
    res = run(snap, GANG)
    # queue order falls back to creation then name: qa is served until it has nothing left
    assert res.bind_order == ["default/a-0", "default/a-1", "default/b-0", "default/b-1"]


def test_overused_queue_is_dropped_for_the_rest_of_the_action() -> None:
    a = mk_job("a", "qa", min_available=1)
    add_tasks(a, 2, "1", "1Gi")
    b = mk_job("b", "qb", min_available=1)
    add_tasks(b, 2, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], [a, b], [mk_queue("qa"), mk_queue("qb")])
    ssn = open_session(snap, GANG)
    asked: list[str] = []

    def overused(q):
        asked.append(q.name)
        return q.name == "qa"

    fake(ssn, cb.OVERUSED, "gang", overused)
    run_actions(ssn, "allocate")
    assert sorted(ssn.binds) == ["default/b-0", "default/b-1"]
    assert asked.count("qa") == 1  # popped once, never pushed back


def test_allocatable_false_skips_only_that_task() -> None:
    j = mk_job("j", min_available=1)
    add_tasks(j, 3, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "16", "32Gi")], [j])
    ssn = open_session(snap, GANG)
    fake(ssn, cb.ALLOCATABLE, "gang", lambda q, t: t.name != "j-1")
    run_actions(ssn, "allocate")
    assert sorted(ssn.binds) == ["default/j-0", "default/j-2"]
    assert task_of(ssn, j.uid, "j-1").status is S.PENDING


def test_best_effort_tasks_are_left_to_backfill() -> None:
    j = mk_job("j", min_available=2)
    mk_task(j, "j-0", "1", "1Gi")
    mk_task(j, "j-1", None, None)
    snap = mk_snapshot([mk_node("n1")], [j])
    res = run(snap, GANG)
    assert res.binds == {"default/j-0": "n1"}
    res = run(snap, mk_conf("allocate, backfill", ["priority", "gang"]))
    assert res.binds == {"default/j-0": "n1", "default/j-1": "n1"}


def test_enqueue_configured_skips_pending_jobs() -> None:
    j = mk_job("j", min_available=1, phase="Pending")
    mk_task(j, "j-0")
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, mk_conf("enqueue, allocate", ["priority", "gang"]))
    run_actions(ssn, "allocate")
    assert ssn.binds == {}
    assert ssn.jobs[j.uid].status.phase == "Pending"


def test_without_enqueue_pending_jobs_are_promoted_and_allocated() -> None:
    j = mk_job("j", min_available=1, phase="Pending")
    mk_task(j, "j-0")
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(snap, GANG)
    run_actions(ssn, "allocate")
    assert ssn.binds == {"default/j-0": "n1"}
    assert ssn.jobs[j.uid].status.phase == "Inqueue"
    res = run(snap, GANG)
    assert res.podgroups[j.uid].phase == "Inqueue"


def test_invalid_job_is_skipped() -> None:
    j = mk_job("j", min_available=3)
    add_tasks(j, 2)
    res = run(mk_snapshot([mk_node("n1")], [j]), GANG)
    assert res.binds == {}
    assert "Not enough valid tasks for gang-scheduling, valid: 2, min: 3" in res.pending["default/j-0"]


def test_job_of_unknown_queue_is_not_scheduled() -> None:
    j = mk_job("j", "ghost", min_available=1)
    mk_task(j, "j-0")
    snap = mk_snapshot([mk_node("n1")], [j], [mk_queue("default")])
    res = run(snap, GANG)
    assert res.binds == {}
    assert j.uid not in res.podgroups


# --------------------------------------------------------------------------- fit failures
def test_failure_continues_when_gang_can_still_be_met() -> None:
    j = mk_job("j", min_available=2)
    mk_task(j, "j-0", "1", "1Gi")
    mk_task(j, "j-1", "100", "1Gi")
    mk_task(j, "j-2", "1", "1Gi")
    mk_task(j, "j-3", "1", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], [j]), GANG)
    assert sorted(res.binds) == ["default/j-0", "default/j-2", "default/j-3"]


def test_failed_role_below_its_minimum_breaks_the_turn() -> None:
    j = mk_job("j", min_available=2, task_min={"master": 1, "worker": 1})
    mk_task(j, "j-master-0", "100", "1Gi", role="master", priority=10)
    mk_task(j, "j-worker-0", "1", "1Gi", role="worker")
    mk_task(j, "j-worker-1", "1", "1Gi", role="worker")
    snap = mk_snapshot([mk_node("n1", "8", "16Gi")], [j])
    ssn = open_session(snap, GANG)
    run_actions(ssn, "allocate")
    assert ssn.binds == {}
    job = ssn.jobs[j.uid]
    # the turn stopped at the master: the workers were never tried
    assert set(job.nodes_fit_errors) == {task_of(ssn, j.uid, "j-master-0").uid}
    assert task_of(ssn, j.uid, "j-worker-0").last_tx is None


def test_role_error_cache_skips_later_tasks_of_a_failed_role() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-w-0", "100", "1Gi", role="worker")
    mk_task(j, "j-w-1", "1", "1Gi", role="worker")  # would fit, but its role already failed
    snap = mk_snapshot([mk_node("n1", "8", "16Gi")], [j])
    ssn = open_session(snap, GANG)
    run_actions(ssn, "allocate")
    assert ssn.binds == {}
    fe = ssn.jobs[j.uid].nodes_fit_errors[task_of(ssn, j.uid, "j-w-1").uid]
    assert fe.message() == "Task j-w-1 with role spec worker has already predicated failed, skip"
    res = run(snap, GANG)
    assert (
        "Task j-w-1 with role spec worker has already predicated failed, skip" in res.pending["default/j-w-1"]
    )


def test_tasks_without_role_do_not_use_the_role_cache() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-w-0", "100", "1Gi")
    mk_task(j, "j-w-1", "1", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "8", "16Gi")], [j]), GANG)
    assert res.binds == {"default/j-w-1": "n1"}


def test_pre_predicate_error_is_recorded_on_every_node() -> None:
    j = mk_job("j", min_available=2)
    add_tasks(j, 3, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1"), mk_node("n2")], [j])
    ssn = open_session(snap, GANG)
    fake(ssn, cb.PRE_PREDICATE, "gang", lambda t: ValueError("nope") if t.name == "j-0" else None)
    run_actions(ssn, "allocate")
    fe = ssn.jobs[j.uid].nodes_fit_errors[task_of(ssn, j.uid, "j-0").uid]
    assert fe.message() == "0/2 nodes are unavailable: 2 nope."
    # min 2 of 3 tasks: allocation continued with the others
    assert sorted(ssn.binds) == ["default/j-1", "default/j-2"]


def test_predicate_failure_reason_in_fit_errors() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1"), mk_node("n2"), mk_node("n3", "0", "8Gi")], [j])
    ssn = open_session(snap, GANG)
    from fumarole.daemon.scheduler.model.fit import Code, fit_error

    fake(
        ssn,
        cb.PREDICATE,
        "gang",
        lambda t, n: fit_error(
            t.namespace, t.name, n.name, Code.UNSCHEDULABLE, "node(s) had untolerated taint"
        ),
    )
    run_actions(ssn, "allocate")
    assert ssn.binds == {}
    fe = ssn.jobs[j.uid].nodes_fit_errors[task_of(ssn, j.uid, "j-0").uid]
    assert fe.message() == "0/3 nodes are unavailable: 1 Insufficient cpu, 2 node(s) had untolerated taint."


def test_task_order_by_priority_then_index() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-x-10", "1", "1Gi")
    mk_task(j, "j-x-9", "1", "1Gi")
    mk_task(j, "j-x-1", "1", "1Gi", priority=5)
    res = run(mk_snapshot([mk_node("n1", "2", "8Gi")], [j]), GANG)
    assert res.bind_order == ["default/j-x-1", "default/j-x-9"]


def test_job_order_by_priority_within_a_queue() -> None:
    lo = mk_job("lo", min_available=1, priority=1)
    mk_task(lo, "lo-0", "2", "1Gi")
    hi = mk_job("hi", min_available=1, priority=10, creation=5)
    mk_task(hi, "hi-0", "2", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "2", "8Gi")], [lo, hi]), GANG)
    assert res.binds == {"default/hi-0": "n1"}


def test_allocation_respects_previous_session_running_tasks() -> None:
    r = mk_job("r", min_available=1, phase="Running")
    mk_task(r, "r-0", "3", "1Gi", status=S.RUNNING, node="n1")
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0", "2", "1Gi")
    res = run(mk_snapshot([mk_node("n1", "4", "8Gi"), mk_node("n2", "4", "8Gi")], [r, j]), GANG)
    assert res.binds == {"default/j-0": "n2"}
