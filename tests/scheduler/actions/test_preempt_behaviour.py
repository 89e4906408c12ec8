"""The preempt action: staged evictions, queue/job scope, victim order, topology-aware mode, reasons."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_queue,
    mk_snapshot,
    open_session,
    run_actions,
)

from fumarole.daemon.scheduler.actions.preempt import Preempt
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus

S = TaskStatus
R = S.RUNNING
TIER1 = ["priority", "gang", "conformance"]
CONF = mk_conf("preempt", TIER1, ["proportion"])
TOPO = mk_conf(
    "preempt",
    TIER1,
    ["proportion", "predicates"],
    configurations=[{"name": "preempt", "arguments": {"enableTopologyAwarePreemption": True}}],
)


def _running(job, n, cpu="1", node="n1", **kw):  # type: ignore[no-untyped-def]
    return add_tasks(job, n, cpu, "1Gi", status=R, node=node, **kw)


def test_evictions_are_discarded_when_the_preemptor_job_cannot_pipeline() -> None:
    # The high gang needs 3 pods of 2 cpu; only one 2-cpu victim exists: nothing may leave.
    low = mk_job("low", priority=1, min_available=0)
    _running(low, 1, "2")
    high = mk_job("high", priority=100, min_available=3)
    add_tasks(high, 3, "2", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [low, high]), CONF)
    run_actions(ssn, "preempt")
    assert ssn.evictions == []
    victim = next(iter(ssn.jobs[low.uid].tasks.values()))
    assert victim.status is S.RUNNING and ssn.nodes["n1"].releasing.cpu == 0
    assert all(t.status is S.PENDING for t in ssn.jobs[high.uid].tasks.values())


def test_evictions_commit_when_the_job_pipelines_and_carry_their_cause() -> None:
    low = mk_job("low", priority=1, min_available=0)
    _running(low, 2, "1")
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [low, high]), CONF)
    run_actions(ssn, "preempt")
    assert len(ssn.evictions) == 1
    ev = ssn.evictions[0]
    assert ev.action == "preempt" and ev.node == "n1"
    assert ev.reason == (
        "preempted by default/high-0 of job default/high (priority 100); "
        "victims chosen by priority, gang, conformance"
    )
    assert ssn.jobs[high.uid].tasks["default-high-0"].status is S.PIPELINED


def test_preempt_stays_within_the_preemptor_queue() -> None:
    other = mk_job("other", "q2", priority=1, min_available=0)
    _running(other, 2, "1")
    high = mk_job("high", "q1", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    queues = [mk_queue("q1"), mk_queue("q2"), mk_queue("default")]
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [other, high], queues), CONF)
    run_actions(ssn, "preempt")
    assert ssn.evictions == []
    assert {t.status for t in ssn.jobs[other.uid].tasks.values()} == {S.RUNNING}


def test_lowest_priority_job_is_victimised_first() -> None:
    mid = mk_job("mid", priority=50, min_available=0)
    _running(mid, 1, "1")
    low = mk_job("low", priority=10, min_available=0)
    _running(low, 1, "1")
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [mid, low, high]), CONF)
    run_actions(ssn, "preempt")
    assert [e.task for e in ssn.evictions] == ["default/low-0"]


def test_within_job_phase_evicts_lower_priority_tasks_of_the_same_job() -> None:
    job = mk_job("j", priority=5, min_available=1)
    _running(job, 2, "1", priority=1)
    add_tasks(job, 1, "1", "1Gi", prefix="hi", priority=10)
    # Without gang the job starves by priority's rule (ready + pipelined < tasks); phase 1 finds no
    # other job, phase 2 evicts one lower-priority task of the job itself.
    conf = mk_conf("preempt", ["priority", "conformance"], ["proportion"])
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [job]), conf)
    run_actions(ssn, "preempt")
    assert len(ssn.evictions) == 1 and ssn.evictions[0].task.startswith("default/j-")
    assert ssn.evictions[0].reason.endswith("victims chosen by priority, conformance")
    assert ssn.jobs[job.uid].tasks["default-hi-0"].status is S.PIPELINED


def test_preemption_policy_never_does_not_preempt() -> None:
    low = mk_job("low", priority=1, min_available=0)
    _running(low, 1, "1")
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi", pod=PodFacts(preemption_policy="Never"))
    ssn = open_session(mk_snapshot([mk_node("n1", "1")], [low, high]), CONF)
    run_actions(ssn, "preempt")
    assert ssn.evictions == []


def test_topology_aware_reprieves_unneeded_victims_and_picks_the_cheapest_node() -> None:
    # n1: victims of priority 10 and 20 (1 cpu each, node full); n2: one victim of priority 5
    # using 2 cpu.  The preemptor needs 1 cpu: on n1 one victim suffices (the one popped first,
    # lowest job priority); on n2 the priority-5 victim.  The lower highest-victim priority wins: n2.
    # Node choice compares the victims' pod priorities, so the pods carry their job's priority.
    a = mk_job("a", priority=10, min_available=0)
    _running(a, 1, "1", node="n1", priority=10)
    b = mk_job("b", priority=20, min_available=0)
    _running(b, 1, "1", node="n1", priority=20)
    c = mk_job("c", priority=5, min_available=0)
    _running(c, 1, "2", node="n2", priority=5)
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "2"), mk_node("n2", "2")], [a, b, c, high])
    # With the defaults only ceil(10% of 2 nodes) -> 1 candidate is dry-run: the first, n1.
    ssn = open_session(snap, TOPO)
    run_actions(ssn, "preempt")
    assert [e.task for e in ssn.evictions] == ["default/a-0"]
    both = mk_conf(
        "preempt",
        TIER1,
        ["proportion", "predicates"],
        configurations=[
            {
                "name": "preempt",
                "arguments": {"enableTopologyAwarePreemption": True, "minCandidateNodesAbsolute": 2},
            }
        ],
    )
    snap = mk_snapshot([mk_node("n1", "2"), mk_node("n2", "2")], [a, b, c, high])
    ssn = open_session(snap, both)
    run_actions(ssn, "preempt")
    assert [e.task for e in ssn.evictions] == ["default/c-0"]
    assert ssn.jobs[high.uid].tasks["default-high-0"].node_name == "n2"


def test_topology_aware_evicts_only_what_is_needed_on_a_node() -> None:
    a = mk_job("a", priority=10, min_available=0)
    _running(a, 2, "1", node="n1")
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [a, high]), TOPO)
    run_actions(ssn, "preempt")
    assert len(ssn.evictions) == 1


def test_arguments_defaults_and_overrides() -> None:
    p = Preempt()
    p.parse_arguments({})
    assert (p.enable_error_cache, p.topology_aware, p.worker_num) == (True, False, 16)
    assert (p.min_candidate_percentage, p.min_candidate_absolute, p.max_candidate_absolute) == (10, 1, 100)
    p.parse_arguments({"enableTopologyAwarePreemption": True, "minCandidateNodesPercentage": 50})
    assert p.topology_aware and p.num_candidates(10) == 5
    p.parse_arguments({"maxCandidateNodesAbsolute": 2})
    assert p.num_candidates(10) == 2
    assert p.num_candidates(1) == 1


def test_preempt_is_deterministic() -> None:
    def once() -> list[tuple[str, str]]:
        low = mk_job("low", priority=1, min_available=0)
        _running(low, 2, "1", node="n1")
        _running(low, 2, "1", node="n2", start=2)
        high = mk_job("high", priority=100, min_available=2)
        add_tasks(high, 2, "1", "1Gi")
        snap = mk_snapshot([mk_node("n1", "2"), mk_node("n2", "2")], [low, high])
        ssn = open_session(snap, CONF)
        run_actions(ssn, "preempt")
        return [(e.task, e.node) for e in ssn.evictions]

    first = once()
    assert len(first) == 2
    assert all(once() == first for _ in range(3))
