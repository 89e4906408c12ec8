"""Simulator clock: submissions, durations, completions, idle jumps, determinism."""

from __future__ import annotations

import asyncio

import pytest

from fumarole.daemon.adapters.base import ClusterSink, ClusterSource, SimulatedCluster
from fumarole.daemon.adapters.simulator import Simulator
from fumarole.store.events import (
    BindDecided,
    ClockAdvanced,
    PodGroupUpserted,
    PodUpserted,
    ResyncCompleted,
    ResyncStarted,
)


def node(name: str, cpu: str = "8") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def vjob(name: str, at: str, replicas: int = 2, duration: str = "30s", cpu: str = "2") -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "annotations": {"fumarole.io/submit-at": at}},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"fumarole.io/duration": duration}},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                    },
                }
            ],
        },
    }


def bind(sim: Simulator, seq: int, ns: str, name: str, node_name: str):
    uid = sim.pods()[f"{ns}/{name}"]["metadata"]["uid"]
    d = BindDecided(cycle=1, namespace=ns, name=name, uid=uid, node=node_name, job="", queue="default")
    return sim.apply_sync(seq, d)


def test_simulator_satisfies_the_adapter_protocols() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s")])
    assert isinstance(sim, ClusterSource)
    assert isinstance(sim, ClusterSink)
    assert isinstance(sim, SimulatedCluster)


def test_initial_listing_creates_time_zero_submissions_and_is_wrapped_in_resync_markers() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s"), vjob("b", "10s")])
    events = asyncio.run(sim.initial_events())
    assert isinstance(events[0], ResyncStarted)
    assert isinstance(events[-1], ResyncCompleted)
    assert "Pod" in events[0].kinds and "PodGroup" in events[0].kinds
    pods = sorted(e.name for e in events if isinstance(e, PodUpserted))
    assert pods == ["a-w-0", "a-w-1"]  # b is due at 10s
    groups = [e for e in events if isinstance(e, PodGroupUpserted)]
    assert [g.name for g in groups] == ["a"]
    assert groups[0].manifest["spec"]["minMember"] == 2
    assert all(e.at_ms == 0 for e in events)


def test_advance_moves_one_period_or_jumps_to_the_next_submission_when_idle() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s"), vjob("b", "45s")], period_ms=1000)
    sim.initial_events_sync()
    out = sim.advance(idle=False)
    assert out == [ClockAdvanced(at_ms=1000)]
    assert sim.now_ms == 1000
    out = sim.advance(idle=True)  # nothing running: jump straight to b's submission
    assert sim.now_ms == 45_000
    names = [(type(e).__name__, getattr(e, "name", ""), e.at_ms) for e in out]
    assert names == [
        ("PodGroupUpserted", "b", 45_000),
        ("PodUpserted", "b-w-0", 45_000),
        ("PodUpserted", "b-w-1", 45_000),
        ("ClockAdvanced", "", 45_000),
    ]
    created = sim.pods()["ns/b-w-0"]["metadata"]["creationTimestamp"]
    assert created == "1970-01-01T00:00:45Z"


def test_bound_pod_runs_for_its_duration_then_succeeds_and_its_podgroup_completes() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s", replicas=2, duration="30s")], period_ms=1000)
    sim.initial_events_sync()
    sim.advance(idle=False)  # t=1s
    bind(sim, 1, "ns", "a-w-0", "n0")
    sim.advance(idle=False)  # t=2s
    bind(sim, 2, "ns", "a-w-1", "n0")
    assert sim.next_due_ms() == 31_000
    out = sim.advance(idle=True)  # jump to the first completion
    assert sim.now_ms == 31_000
    done = [e for e in out if isinstance(e, PodUpserted)]
    assert [(e.name, e.manifest["status"]["phase"], e.at_ms) for e in done] == [
        ("a-w-0", "Succeeded", 31_000)
    ]
    assert done[0].manifest["spec"]["nodeName"] == "n0"
    assert not any(isinstance(e, PodGroupUpserted) for e in out)  # a-w-1 still runs
    out = sim.advance(idle=True)
    assert sim.now_ms == 32_000
    kinds = [(type(e).__name__, e.at_ms) for e in out]
    assert kinds == [("PodUpserted", 32_000), ("PodGroupUpserted", 32_000), ("ClockAdvanced", 32_000)]
    assert out[-1] == ClockAdvanced(at_ms=32_000, facts=2)  # the facts that came with the move
    group = out[1]
    assert isinstance(group, PodGroupUpserted)
    assert group.manifest["status"] == {"phase": "Completed", "succeeded": 2}
    assert sim.drained()
    assert sim.stats().succeeded == 2 and sim.stats().podgroups_completed == 1


def test_non_idle_advance_emits_completions_at_their_own_time_within_the_period() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s", replicas=1, duration="1500ms")], period_ms=1000)
    sim.initial_events_sync()
    bind(sim, 1, "ns", "a-w-0", "n0")  # bound at t=0
    assert sim.advance(idle=False) == [ClockAdvanced(at_ms=1000)]
    out = sim.advance(idle=False)
    assert [(type(e).__name__, e.at_ms) for e in out] == [
        ("PodUpserted", 1500),
        ("PodGroupUpserted", 1500),
        ("ClockAdvanced", 2000),
    ]


def test_idle_with_nothing_left_marks_pending_pods_unschedulable_for_good() -> None:
    big = vjob("huge", "0s", replicas=1, cpu="64")
    sim = Simulator([node("n0")], [big])
    sim.initial_events_sync()
    assert not sim.drained()
    assert sim.advance(idle=True) == []  # nothing due: the clock stays
    assert sim.now_ms == 0
    assert sim.drained()
    assert sim.stuck_pods() == ["ns/huge-w-0"]


def test_horizon_ends_a_run_that_never_settles() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s"), vjob("b", "100s")], horizon_ms=5000)
    sim.initial_events_sync()
    for _ in range(4):
        sim.advance(idle=False)
    assert not sim.drained()
    sim.advance(idle=False)
    assert sim.now_ms == 5000 and sim.drained()


def test_not_drained_while_submissions_remain_or_pods_run() -> None:
    sim = Simulator([node("n0")], [vjob("a", "0s", replicas=1, duration="10s"), vjob("b", "5s", replicas=1)])
    sim.initial_events_sync()
    bind(sim, 1, "ns", "a-w-0", "n0")
    assert not sim.drained()
    sim.advance(idle=True)  # to b's submission at 5s
    assert sim.now_ms == 5000
    bind(sim, 2, "ns", "b-w-0", "n0")
    sim.advance(idle=True)  # a completes at 10s
    assert not sim.drained()
    sim.advance(idle=True)  # b completes at 35s
    assert sim.now_ms == 35_000
    assert sim.drained()


def test_same_inputs_same_event_sequence() -> None:
    def run() -> list:
        sim = Simulator(
            [node("n0"), node("n1")], [vjob(f"j{i}", f"{i * 3}s", duration=f"{10 + i}s") for i in range(5)]
        )
        log = list(sim.initial_events_sync())
        seq = 0
        while not sim.drained():
            for key in sim.pending_pods():
                ns, name = key.split("/")
                seq += 1
                outcome, facts = bind(sim, seq, ns, name, "n0" if seq % 2 else "n1")
                log.extend([outcome, *facts])
            log.extend(sim.advance(idle=True))
        return log

    first, second = run(), run()
    assert first == second
    assert len(first) > 30


def test_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="period_ms"):
        Simulator([node("n0")], [], period_ms=0)
