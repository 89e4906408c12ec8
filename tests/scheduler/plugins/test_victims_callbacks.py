"""Victim-side callbacks: tiered victim combination with deciders, UnifiedEvictable, Simulate*."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_conf, mk_job, mk_node, mk_snapshot, open_session

from fumarole.daemon.scheduler.actions import victims as vh
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import CycleState, Session
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus

R = TaskStatus.RUNNING


def _two_jobs(conf: Any) -> tuple[Session, TaskInfo, list[TaskInfo]]:
    low = mk_job("low", priority=1, min_available=1)
    add_tasks(low, 3, "1", "1Gi", status=R, node="n1")
    high = mk_job("high", priority=10, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "4")], [low, high]), conf)
    pre = ssn.jobs[high.uid].tasks["default-high-0"]
    return ssn, pre, list(ssn.jobs[low.uid].tasks.values())


def test_preemptable_intersection_and_deciders() -> None:
    ssn, pre, cands = _two_jobs(mk_conf("preempt", ["priority", "gang", "conformance"]))
    victims = ssn.preemptable(pre, cands)
    # gang keeps minMember (1) of the 3 running tasks: 2 victims; priority and conformance allow all.
    assert len(victims) == 2
    assert ssn.last_victim_deciders == ("priority", "gang", "conformance")


def test_empty_answer_falls_through_to_the_next_tier() -> None:
    # gang alone in tier 1 refuses (job at minMember), so tier 2 (priority) decides.
    low = mk_job("low", priority=1, min_available=1)
    add_tasks(low, 1, "1", "1Gi", status=R, node="n1")
    high = mk_job("high", priority=10, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    ssn = open_session(
        mk_snapshot([mk_node("n1", "1")], [low, high]), mk_conf("preempt", ["gang"], ["priority"])
    )
    pre = ssn.jobs[high.uid].tasks["default-high-0"]
    assert [v.name for v in ssn.preemptable(pre, list(ssn.jobs[low.uid].tasks.values()))] == ["low-0"]
    assert ssn.last_victim_deciders == ("priority",)
    ssn.preemptable(pre, [])
    assert ssn.last_victim_deciders == ()


def test_empty_intersection_restarts_from_the_next_plugin() -> None:
    ssn, pre, cands = _two_jobs(mk_conf("preempt", ["priority", "conformance", "drf"]))
    ssn.register(cb.PREEMPTABLE, "priority", lambda p, c: ([c[0]], cb.PERMIT))
    ssn.register(cb.PREEMPTABLE, "conformance", lambda p, c: ([c[1]], cb.PERMIT))
    ssn.register(cb.PREEMPTABLE, "drf", lambda p, c: ([c[2], c[1]], cb.PERMIT))
    ssn.compile_chains()
    assert [v.name for v in ssn.preemptable(pre, cands)] == ["low-2", "low-1"]
    assert ssn.last_victim_deciders == ("drf",)


def test_reclaimable_registrations_of_gang_and_conformance() -> None:
    ssn, pre, cands = _two_jobs(mk_conf("reclaim", ["gang", "conformance"]))
    assert len(ssn.reclaimable(pre, cands)) == 2
    assert ssn.last_victim_deciders == ("gang", "conformance")


def test_unified_evictable_priority_gang_conformance() -> None:
    low = mk_job("low", priority=1, min_available=1)
    add_tasks(low, 1, "1", "1Gi", status=R, node="n1")
    peer = mk_job("peer", priority=10, min_available=1)
    add_tasks(peer, 1, "1", "1Gi", status=R, node="n1")
    sysj = mk_job("sys", priority=1, min_available=1, namespace="kube-system")
    add_tasks(sysj, 1, "1", "1Gi", status=R, node="n1")
    high = mk_job("high", priority=10, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "4")], [low, peer, sysj, high])
    ssn = open_session(snap, mk_conf("gangpreempt", ["priority", "gang", "conformance"]))
    cands = [t for j in (low, peer, sysj) for t in ssn.jobs[j.uid].tasks.values()]
    job = ssn.jobs[high.uid]
    preempt_ctx = cb.EvictionContext(cb.EVICTION_KIND_GANG_PREEMPT, job)
    assert [t.name for t in ssn.unified_evictable(preempt_ctx, cands)] == ["low-0"]
    reclaim_ctx = cb.EvictionContext(cb.EVICTION_KIND_GANG_RECLAIM, job)
    assert [t.name for t in ssn.unified_evictable(reclaim_ctx, cands)] == ["low-0", "peer-0"]
    assert ssn.last_victim_deciders == ("priority", "gang", "conformance")


def test_victims_queue_pops_lowest_priority_job_first() -> None:
    a = mk_job("a", priority=5, min_available=0)
    add_tasks(a, 1, "1", "1Gi", status=R, node="n1")
    b = mk_job("b", priority=1, min_available=0)
    add_tasks(b, 2, "1", "1Gi", status=R, node="n1", priority=3)
    high = mk_job("high", priority=10, min_available=1)
    add_tasks(high, 1, "1", "1Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "4")], [a, b, high]), mk_conf("preempt", ["priority"]))
    ssn.jobs[b.uid].tasks["default-b-1"].priority = 2
    pre = ssn.jobs[high.uid].tasks["default-high-0"]
    q = vh.victims_queue(ssn, vh.tasks_on_node(ssn, ssn.nodes["n1"], None), pre)
    order = []
    while not q.empty():
        order.append(q.pop().name)
    assert order == ["b-1", "b-0", "a-0"]


def test_proportion_simulate_allocatable_needs_its_prepredicate_state() -> None:
    ssn, pre, _ = _two_jobs(mk_conf("preempt", ["priority"], ["proportion"]))
    queue = ssn.queues["default"]
    assert ssn.simulate_allocatable(queue, pre, CycleState()) is False
    assert ssn.pre_predicate_fn(pre) is None
    base = ssn.cycle_state(pre.uid)
    state = base.clone()
    assert ssn.simulate_allocatable(queue, pre, state) is True
    # Simulated removals touch only the clone.
    live: Any = ssn.plugins["proportion"]
    before = live.attrs["default"].allocated.cpu
    victim = next(t for t in ssn.jobs["default/low"].tasks.values())
    ssn.simulate_remove_task(state, pre, victim, ssn.nodes["n1"])
    assert state["proportion"].attrs["default"].allocated.cpu == before - 1000
    assert base["proportion"].attrs["default"].allocated.cpu == before
    assert live.attrs["default"].allocated.cpu == before


def test_predicates_simulate_interpod_anti_affinity() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    low = mk_job("low", priority=1, min_available=0)
    add_tasks(low, 1, "1", "1Gi", status=R, node="n1", pod=PodFacts(labels={"app": "x"}))
    high = mk_job("high", priority=10, min_available=1)
    add_tasks(high, 1, "1", "1Gi", pod=PodFacts(labels={"app": "y"}, affinity=anti))
    node = mk_node("n1", "4")
    node.facts.labels["kubernetes.io/hostname"] = "n1"
    ssn = open_session(mk_snapshot([node], [low, high]), mk_conf("preempt", ["priority"], ["predicates"]))
    pre = ssn.jobs[high.uid].tasks["default-high-0"]
    victim = ssn.jobs[low.uid].tasks["default-low-0"]
    assert ssn.pre_predicate_fn(pre) is None
    state = ssn.cycle_state(pre.uid).clone()
    n1 = ssn.nodes["n1"].clone()
    assert ssn.simulate_predicate(state, pre, n1) is not None
    ssn.simulate_remove_task(state, pre, victim, n1)
    assert ssn.simulate_predicate(state, pre, n1) is None
    ssn.simulate_add_task(state, pre, victim, n1)
    assert ssn.simulate_predicate(state, pre, n1) is not None
    # The session's own predicate is untouched by the dry run.
    assert ssn.predicate_fn(pre, ssn.nodes["n1"]) is not None
