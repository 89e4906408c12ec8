"""Numatopologies reach the daemon's sessions: simulator listing -> events -> projection -> snapshot.

A bind decided with numa-aware carries its CPU set (`fumarole.io/numa-cpus`); folded back into
the projection (the bound pod, as the simulator reports it), the next session keeps those CPUs
taken until the Numatopology lists the pod.
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.cache import Projection, decode_projection, encode_projection, state_image
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.store.events import NumatopologyDeleted, NumatopologyUpserted, upserted

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "10"}},
}
TOPO: dict[str, Any] = {
    "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
    "kind": "Numatopology",
    "metadata": {"name": "n1"},
    "spec": {
        "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
        "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}},
        "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)},
    },
}
GROUP: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "pg1", "namespace": "c1"},
    "spec": {"minMember": 1},
    "status": {"phase": "Inqueue"},
}


def pod(name: str, cpu: str = "5") -> dict[str, Any]:
    res = {"cpu": cpu, "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "c1",
            "annotations": {
                "scheduling.k8s.io/group-name": "pg1",
                "volcano.sh/numa-topology-policy": "single-numa-node",
            },
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
        },
        "status": {"phase": "Pending"},
    }


CONF = parse_conf(
    'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: numa-aware\n'
)


def test_simulator_lists_numatopologies_and_sessions_read_them() -> None:
    events = Simulator([NODE, TOPO], []).initial_events_sync()
    assert any(isinstance(e, NumatopologyUpserted) and e.name == "n1" for e in events)
    events += [upserted(GROUP), upserted(pod("p1"))]
    p = Projection()
    for i, ev in enumerate(events, 1):
        p.fold(i, ev)
    snap = p.freeze()
    assert sorted(snap.numatopologies) == ["n1"]
    # 5 CPUs fit no NUMA node of 4: single-numa-node refuses.
    r = run_session(snap, CONF)
    assert r.binds == {}
    assert "container c cannot be assigned by numa" in r.pending["c1/p1"]
    again = decode_projection(encode_projection(p))
    assert state_image(again) == state_image(p)
    assert sorted(again.freeze().numatopologies) == ["n1"]
    # Deleted: "numa info is empty".
    p.fold(len(events) + 1, NumatopologyDeleted(name="n1"))
    snap = p.freeze()
    assert snap.numatopologies == {}
    assert "numa info is empty" in run_session(snap, CONF).pending["c1/p1"]


def test_a_bad_numatopology_from_the_log_is_left_out_and_reported() -> None:
    p = Projection()
    bad = {**TOPO, "spec": {**TOPO["spec"], "numares": {"cpu": {"allocatable": "7-0"}}}}
    for i, ev in enumerate([upserted(NODE), upserted(bad)], 1):
        p.fold(i, ev)
    snap = p.freeze()
    assert snap.numatopologies == {}
    assert any(pr.startswith("Numatopology n1:") and "allocatable" in pr for pr in p.problems), p.problems
