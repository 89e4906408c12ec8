"""Simulator sink: binds, evictions, Volcano Job pod recreation, idempotent re-apply, kubelet admission."""

from __future__ import annotations

import asyncio

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    EvictDecided,
    EvictSucceeded,
    PodDeleted,
    PodUpserted,
)


def node(name: str, cpu: str = "8") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def vjob(name: str, replicas: int = 2, cpu: str = "2", duration: str = "30s") -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "tasks": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"fumarole.io/duration": duration}},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                    },
                }
            ]
        },
    }


def group_with_pods(name: str, n: int) -> list[dict]:
    objs: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "annotations": {"fumarole.io/duration": "20s"}},
            "spec": {"minMember": n},
        }
    ]
    for i in range(n):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": "ns",
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    return objs


def uid_of(sim: Simulator, key: str) -> str:
    return sim.pods()[key]["metadata"]["uid"]


def bind_decision(sim: Simulator, key: str, node_name: str, uid: str | None = None) -> BindDecided:
    ns, name = key.split("/")
    return BindDecided(
        cycle=1, namespace=ns, name=name, uid=uid or uid_of(sim, key), node=node_name, job="", queue=""
    )


def evict_decision(sim: Simulator, key: str, uid: str | None = None) -> EvictDecided:
    ns, name = key.split("/")
    return EvictDecided(
        cycle=2,
        namespace=ns,
        name=name,
        uid=uid or uid_of(sim, key),
        node="n0",
        job="",
        queue="",
        action="preempt",
        reason="test",
    )


def started(objs: list[dict], nodes: list[dict] | None = None) -> Simulator:
    sim = Simulator(nodes or [node("n0"), node("n1")], objs)
    sim.initial_events_sync()
    return sim


def test_bind_upserts_the_pod_running_on_its_node() -> None:
    sim = started([vjob("a")])
    outcome, facts = asyncio.run(sim.apply(7, bind_decision(sim, "ns/a-w-0", "n1")))
    assert outcome == BindSucceeded(decision_seq=7, namespace="ns", name="a-w-0", node="n1")
    assert len(facts) == 1 and isinstance(facts[0], PodUpserted)
    assert facts[0].manifest["spec"]["nodeName"] == "n1"
    assert facts[0].manifest["status"]["phase"] == "Running"


def test_reapplying_the_same_bind_does_not_bind_twice() -> None:
    sim = started([vjob("a")])
    d = bind_decision(sim, "ns/a-w-0", "n0")
    first = sim.apply_sync(3, d)
    again = sim.apply_sync(3, d)
    assert again == (first[0], [])
    assert sim.stats().binds == 1
    # the same bind under another seq (a decision re-made after a restart) is also a no-op success
    other, facts = sim.apply_sync(4, d)
    assert isinstance(other, BindSucceeded) and other.decision_seq == 4 and facts == []


def test_bind_to_another_node_of_an_already_bound_pod_fails() -> None:
    sim = started([vjob("a")])
    sim.apply_sync(1, bind_decision(sim, "ns/a-w-0", "n0"))
    outcome, facts = sim.apply_sync(2, bind_decision(sim, "ns/a-w-0", "n1"))
    assert isinstance(outcome, BindFailed) and "already bound to node n0" in outcome.reason
    assert facts == []


def test_bind_failures_unknown_pod_stale_uid_unknown_node() -> None:
    sim = started([vjob("a")])
    o1, _ = sim.apply_sync(1, bind_decision(sim, "ns/a-w-0", "n0", uid="nope"))
    assert isinstance(o1, BindFailed) and "not found" in o1.reason
    o2, _ = sim.apply_sync(2, bind_decision(sim, "ns/a-w-0", "n9"))
    assert isinstance(o2, BindFailed) and o2.reason == "node n9 not found"
    ghost = BindDecided(cycle=1, namespace="ns", name="ghost", uid="", node="n0", job="", queue="")
    o3, _ = sim.apply_sync(3, ghost)
    assert isinstance(o3, BindFailed)


def test_kubelet_admission_refuses_a_pod_that_does_not_fit() -> None:
    sim = started([vjob("a", replicas=3, cpu="3")], nodes=[node("n0", cpu="8")])
    assert isinstance(sim.apply_sync(1, bind_decision(sim, "ns/a-w-0", "n0"))[0], BindSucceeded)
    assert isinstance(sim.apply_sync(2, bind_decision(sim, "ns/a-w-1", "n0"))[0], BindSucceeded)
    outcome, facts = sim.apply_sync(3, bind_decision(sim, "ns/a-w-2", "n0"))
    assert isinstance(outcome, BindFailed) and outcome.reason == "node n0 rejected the pod: OutOfcpu"
    assert facts == []
    assert sim.pending_pods() == ["ns/a-w-2"]


def test_evicted_volcano_job_pod_is_deleted_and_recreated_with_a_new_uid() -> None:
    sim = started([vjob("a")])
    sim.apply_sync(1, bind_decision(sim, "ns/a-w-0", "n0"))
    old_uid = uid_of(sim, "ns/a-w-0")
    sim.advance(idle=False)
    outcome, facts = sim.apply_sync(2, evict_decision(sim, "ns/a-w-0"))
    assert outcome == EvictSucceeded(decision_seq=2, namespace="ns", name="a-w-0")
    assert isinstance(facts[0], PodDeleted) and facts[0].at_ms == 1000
    assert isinstance(facts[1], PodUpserted)
    new = facts[1].manifest
    assert new["metadata"]["name"] == "a-w-0"
    assert new["metadata"]["uid"] != old_uid
    assert new["metadata"]["annotations"]["fumarole.io/incarnation"] == "1"
    assert "nodeName" not in new["spec"] and new["status"] == {"phase": "Pending"}
    assert new["metadata"]["creationTimestamp"] == "1970-01-01T00:00:01Z"
    assert sim.pending_pods() == ["ns/a-w-0", "ns/a-w-1"]
    # nothing runs any more: the evicted pod's completion is gone with it
    assert sim.next_due_ms() is None
    # re-applying the eviction (or evicting by the old uid) is a no-op success
    again, facts2 = sim.apply_sync(2, evict_decision(sim, "ns/a-w-0", uid=old_uid))
    assert again == outcome and facts2 == []
    other, facts3 = sim.apply_sync(9, evict_decision(sim, "ns/a-w-0", uid=old_uid))
    assert isinstance(other, EvictSucceeded) and facts3 == []
    # the recreated pod binds and runs its full duration again
    sim.apply_sync(10, bind_decision(sim, "ns/a-w-0", "n1"))
    assert sim.next_due_ms() == 31_000
    s = sim.stats()
    assert (s.evictions, s.recreated) == (1, 1)


def test_evicted_plain_pod_is_gone_for_good() -> None:
    sim = started(group_with_pods("pg", 2))
    sim.apply_sync(1, bind_decision(sim, "ns/pg-0", "n0"))
    outcome, facts = sim.apply_sync(2, evict_decision(sim, "ns/pg-0"))
    assert isinstance(outcome, EvictSucceeded)
    assert [type(f).__name__ for f in facts] == ["PodDeleted"]
    assert "ns/pg-0" not in sim.pods()
    gone, facts2 = sim.apply_sync(3, evict_decision(sim, "ns/pg-0", uid="ns-pg-0"))
    assert isinstance(gone, EvictSucceeded) and facts2 == []


def test_podgroup_with_pods_is_submitted_together_and_durations_inherit_from_the_group() -> None:
    sim = started(group_with_pods("pg", 2))
    pods = sim.pods()
    assert sorted(pods) == ["ns/pg-0", "ns/pg-1"]
    assert pods["ns/pg-0"]["metadata"]["annotations"]["fumarole.io/duration"] == "20s"
    sim.apply_sync(1, bind_decision(sim, "ns/pg-0", "n0"))
    sim.apply_sync(2, bind_decision(sim, "ns/pg-1", "n1"))
    out = sim.advance(idle=True)
    assert sim.now_ms == 20_000
    assert [type(e).__name__ for e in out] == [
        "PodUpserted",
        "PodUpserted",
        "PodGroupUpserted",
        "ClockAdvanced",
    ]
    assert sim.drained()
