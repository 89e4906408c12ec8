"""HyperNodes reach the daemon's sessions: simulator listing -> events -> projection -> snapshot."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.cache import Projection, decode_projection, encode_projection, state_image
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.store.events import HyperNodeDeleted, HyperNodeUpserted, upserted


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
    }


RACK: dict[str, Any] = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "rack-b"},
    "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^b"}}}]},
}
GROUP: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "pg1", "namespace": "c1"},
    "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
    "status": {"phase": "Inqueue"},
}


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "c1",
            "annotations": {"scheduling.k8s.io/group-name": "pg1"},
            "labels": {"volcano.sh/task-spec": name},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Pending"},
    }


CONF = parse_conf(
    'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'
    "  - name: network-topology-aware\n"
)


def test_simulator_lists_hypernodes_and_sessions_place_the_gang_in_one() -> None:
    cluster = [node("a1"), node("b1"), node("a2"), node("b2"), RACK]
    events = Simulator(cluster, []).initial_events_sync()
    assert any(isinstance(e, HyperNodeUpserted) and e.name == "rack-b" for e in events)
    events += [upserted(GROUP), upserted(pod("p1")), upserted(pod("p2"))]
    p = Projection()
    for i, ev in enumerate(events, 1):
        p.fold(i, ev)
    snap = p.freeze()
    assert [h.name for h in snap.hypernodes] == ["rack-b"]
    # Without a HyperNode the gang would take a1 and b1 (node-list order); rack-b holds b1, b2.
    assert run_session(snap, CONF).binds == {"c1/p1": "b1", "c1/p2": "b2"}
    # A snapshot of the projection keeps them.
    again = decode_projection(encode_projection(p))
    assert state_image(again) == state_image(p)
    assert [h.name for h in again.freeze().hypernodes] == ["rack-b"]
    # Deleted: the next snapshot has none, and the gang goes back to node-list order.
    p.fold(len(events) + 1, HyperNodeDeleted(name="rack-b"))
    snap = p.freeze()
    assert snap.hypernodes == ()
    assert run_session(snap, CONF).binds == {"c1/p1": "a1", "c1/p2": "b1"}


def test_a_bad_hypernode_from_the_log_is_left_out_and_reported() -> None:
    p = Projection()
    bad = {**RACK, "metadata": {"name": "bad"}, "spec": {"tier": 1}}
    for i, ev in enumerate([upserted(node("b1")), upserted(bad), upserted(RACK)], 1):
        p.fold(i, ev)
    snap = p.freeze()
    assert [h.name for h in snap.hypernodes] == ["rack-b"]
    assert any(pr.startswith("HyperNode bad:") and "spec.members" in pr for pr in p.problems), p.problems
