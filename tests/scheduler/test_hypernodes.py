"""HyperNodes and network topologies: manifests, the session's topology, allocate's search, why-pending.

Volcano's own allocate cases for hypernodes run as scenarios (tests/scenarios/volcano/
allocate-hypernodes/, through tests/acceptance); these tests check the parts around them.
"""

from __future__ import annotations

from typing import Any

import pytest

from fumarole.daemon.manifests import ManifestError, build_snapshot
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.topology import session_topology
from fumarole.daemon.scheduler.model.hypernode import CLUSTER_TOP, MODE_HARD, NetworkTopology, build_topology
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: network-topology-aware
"""


def node(name: str, cpu: str = "2", labels: dict[str, str] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if labels:
        md["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": md,
        "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "10"}},
    }


def hypernode(name: str, tier: int, *members: dict[str, Any], tier_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": list(members)}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def podgroup(name: str, min_member: int, nt: dict[str, Any] | None, phase: str = "Inqueue") -> dict[str, Any]:
    spec: dict[str, Any] = {"queue": "q1", "minMember": min_member}
    if nt is not None:
        spec["networkTopology"] = nt
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "c1"},
        "spec": spec,
        "status": {"phase": phase},
    }


def pod(name: str, group: str, cpu: str = "2", node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "c1",
            "annotations": {"scheduling.k8s.io/group-name": group},
            "labels": {"volcano.sh/task-spec": name},
        },
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "q1"},
    "spec": {"weight": 1},
}


def two_racks() -> list[dict[str, Any]]:
    """s0 = {s0-n1, s0-n2} (regex), s1 = {s1-n3, s1-n4} (labels), both under s2 (tier 2)."""
    return [
        node("s0-n1"),
        node("s0-n2"),
        node("s1-n3", labels={"rack": "s1"}),
        node("s1-n4", labels={"rack": "s1"}),
        hypernode(
            "s0", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "^s0-"}}}, tier_name="rack"
        ),
        hypernode(
            "s1",
            1,
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "s1"}}}},
            tier_name="rack",
        ),
        hypernode("s2", 2, exact("s0", "HyperNode"), exact("s1", "HyperNode"), tier_name="spine"),
        QUEUE,
    ]


def snap(objs: list[dict[str, Any]]) -> ClusterSnapshot:
    return build_snapshot([("t.yaml", i, o) for i, o in enumerate(objs)])


def schedule(objs: list[dict[str, Any]], conf: str = CONF) -> Any:
    return run_session(snap(objs), parse_conf(conf), explain=True)


# ------------------------------------------------------------------------------------ topology
def test_members_by_exact_regex_and_label_make_a_tree_under_the_cluster_top() -> None:
    s = snap(two_racks())
    assert [h.name for h in s.hypernodes] == ["s0", "s1", "s2"]
    topo = build_topology(s.hypernodes, [(n.name, n.facts.labels) for n in s.nodes])
    assert topo.ready
    assert topo.real_nodes["s0"] == ["s0-n1", "s0-n2"]
    assert topo.real_nodes["s1"] == ["s1-n3", "s1-n4"]
    assert topo.real_nodes["s2"] == ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]
    assert topo.hypernodes["s0"].parent == "s2" and topo.hypernodes["s2"].parent == CLUSTER_TOP
    assert topo.top.tier == 3 and topo.tiers == [1, 2, 3]
    assert topo.lca("s0", "s1") == "s2" and topo.lca("s0", "") == "s0"
    assert topo.hypernode_of_node("s1-n4") == "s1"
    assert topo.tier_names == {"rack": 1, "spine": 2}


def test_without_hypernodes_the_cluster_top_is_tier_one_and_holds_every_node() -> None:
    s = snap([node("n1"), node("n2"), QUEUE])
    topo = build_topology(s.hypernodes, [(n.name, n.facts.labels) for n in s.nodes])
    assert topo.tiers == [1] and topo.real_nodes[CLUSTER_TOP] == ["n1", "n2"]


def test_a_member_claimed_by_two_parents_or_a_cycle_makes_the_topology_not_ready() -> None:
    two_parents = [*two_racks(), hypernode("s9", 2, exact("s0", "HyperNode"))]
    topo = build_topology(snap(two_parents).hypernodes, [])
    assert not topo.ready and "already has a parent" in topo.problem
    cycle = [hypernode("a", 1, exact("b", "HyperNode")), hypernode("b", 2, exact("a", "HyperNode"))]
    topo = build_topology(snap(cycle).hypernodes, [])
    assert not topo.ready and "cyclic dependency" in topo.problem


def test_jobs_with_a_topology_are_not_allocated_while_hypernodes_are_not_ready() -> None:
    objs = [
        *two_racks(),
        hypernode("s9", 2, exact("s0", "HyperNode")),
        podgroup("pg1", 1, {"mode": "hard", "highestTierAllowed": 2}),
        pod("p1", "pg1"),
        podgroup("pg2", 1, None),
        pod("p2", "pg2"),
    ]
    r = schedule(objs)
    assert set(r.binds) == {"c1/p2"}
    assert any("hypernodes are not ready" in w for w in r.warnings)


# ------------------------------------------------------------------------------------ manifests
@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"members": [exact("n1")]}, "spec.tier", "required"),
        ({"tier": -1, "members": [exact("n1")]}, "spec.tier", "out of range"),
        ({"tier": 1}, "spec.members", "at least one member"),
        (
            {"tier": 1, "members": [{"type": "Rack", "selector": {"exactMatch": {"name": "n"}}}]},
            "type",
            "Node or HyperNode",
        ),
        ({"tier": 1, "members": [{"type": "Node", "selector": {}}]}, "selector", "Either ExactMatch"),
        (
            {
                "tier": 1,
                "members": [
                    {
                        "type": "Node",
                        "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "a"}},
                    }
                ],
            },
            "selector",
            "Only one of",
        ),
        (
            {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "(["}}}]},
            "pattern",
            "invalid regular",
        ),
        (
            {"tier": 1, "members": [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s.*"}}}]},
            "regexMatch",
            "exactMatch only",
        ),
        (
            {
                "tier": 1,
                "members": [
                    {
                        "type": "Node",
                        "selector": {"labelMatch": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
                    }
                ],
            },
            "labelMatch",
            "invalid label selector",
        ),
    ],
)
def test_a_bad_hypernode_is_one_error_naming_the_field(spec: dict[str, Any], field: str, reason: str) -> None:
    obj = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "h1"},
        "spec": spec,
    }
    with pytest.raises(ManifestError) as ei:
        snap([obj])
    msg = str(ei.value)
    assert "\n" not in msg and "HyperNode h1" in msg and field in msg and reason in msg, msg


def test_network_topology_of_podgroups_and_volcano_jobs() -> None:
    with pytest.raises(ManifestError, match=r"spec\.networkTopology\.mode.*hard or soft"):
        snap([QUEUE, podgroup("pg1", 1, {"mode": "strict"})])
    s = snap([QUEUE, podgroup("pg1", 1, {"highestTierName": "rack"})])
    assert s.jobs["c1/pg1"].network_topology == NetworkTopology(MODE_HARD, None, "rack")
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j1", "namespace": "c1"},
        "spec": {
            "queue": "q1",
            "networkTopology": {"mode": "soft", "highestTierAllowed": 2, "highestTierName": "spine"},
            "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
        },
    }
    # The Job controller copies highestTierAllowed, else highestTierName.
    assert snap([QUEUE, job]).jobs["c1/j1"].network_topology == NetworkTopology("soft", 2, "")


# ------------------------------------------------------------------------------------ session
def test_session_translates_tier_names_and_turns_soft_into_hard_up_to_the_cluster_top() -> None:
    objs = [
        *two_racks(),
        podgroup("named", 1, {"mode": "hard", "highestTierName": "rack"}),
        pod("p1", "named"),
        podgroup("soft", 1, {"mode": "soft"}),
        pod("p2", "soft"),
        podgroup("unknown", 1, {"mode": "hard", "highestTierName": "pod"}),
        pod("p3", "unknown"),
        podgroup("placed", 2, {"mode": "hard", "highestTierAllowed": 2}, phase="Running"),
        pod("p4", "placed", node_name="s0-n1"),
        pod("p5", "placed", node_name="s0-n2"),
    ]
    ssn = Session(snap(objs), parse_conf(CONF))
    assert ssn.jobs["c1/named"].network_topology == NetworkTopology(MODE_HARD, 1, "")
    assert ssn.jobs["c1/soft"].network_topology == NetworkTopology(MODE_HARD, 3, "")
    unknown = ssn.jobs["c1/unknown"].network_topology
    assert unknown is not None and unknown.hard_tier() is None  # left as is: the plain path
    assert any("tier name pod" in w for w in ssn.warnings)
    # Recovered from the placed tasks: the lowest-tier HyperNode holding both nodes.
    assert ssn.jobs["c1/placed"].allocated_hypernode == "s0"
    assert session_topology(ssn).ready


def test_a_hard_gang_goes_to_the_lowest_tier_that_holds_it() -> None:
    objs = [
        *two_racks(),
        podgroup("pg1", 2, {"mode": "hard", "highestTierAllowed": 2}),
        pod("a", "pg1"),
        pod("b", "pg1"),
    ]
    r = schedule(objs)
    assert r.binds == {"c1/a": "s0-n1", "c1/b": "s0-n2"}
    # Three tasks fit no rack: the tier-2 HyperNode holds them.
    objs.append(pod("c", "pg1"))
    objs[objs.index(podgroup("pg1", 2, {"mode": "hard", "highestTierAllowed": 2}))] = podgroup(
        "pg1", 3, {"mode": "hard", "highestTierAllowed": 2}
    )
    r = schedule(objs)
    assert sorted(r.binds) == ["c1/a", "c1/b", "c1/c"]
    assert {r.binds["c1/a"][:2], r.binds["c1/c"][:2]} == {"s0", "s1"}


def test_why_pending_names_the_tier_that_could_not_hold_the_gang() -> None:
    objs = [
        *two_racks(),
        podgroup("pg1", 3, {"mode": "hard", "highestTierAllowed": 1}),
        pod("a", "pg1"),
        pod("b", "pg1"),
        pod("c", "pg1"),
    ]
    r = schedule(objs)
    assert r.binds == {}
    why = r.pending["c1/a"]
    assert "network topology (hard, highestTierAllowed 1)" in why
    assert "fits in no HyperNode up to tier 1 (rack)" in why and "tried tier 1 (rack): s0, s1" in why, why
    # Without the topology the same gang is placed across the racks.
    objs[-4] = podgroup("pg1", 3, None)
    assert len(schedule(objs).binds) == 3


def test_why_pending_when_no_hypernode_has_room_for_min_resources() -> None:
    pg = podgroup("pg1", 1, {"mode": "hard", "highestTierAllowed": 1})
    pg["spec"]["minResources"] = {"cpu": "6"}
    r = schedule([*two_racks(), pg, pod("a", "pg1")], conf=CONF.replace('"enqueue, allocate"', '"allocate"'))
    assert r.binds == {}
    assert "no HyperNode of tier 1 (rack) or lower with idle or releasing resources" in r.pending["c1/a"]


def test_the_plugin_without_a_topology_job_scores_normal_pods_by_hypernode_binpack() -> None:
    # A pod without a topology prefers the rack already in use (tier-weighted binpack).
    objs = [*two_racks(), podgroup("run", 1, None, phase="Running"), pod("r", "run", node_name="s1-n3")]
    objs += [podgroup("pg1", 1, None), pod("a", "pg1", cpu="1")]
    assert schedule(objs).binds == {"c1/a": "s1-n4"}
    plain = CONF.replace("  - name: network-topology-aware\n", "")
    assert schedule(objs, conf=plain).binds == {"c1/a": "s0-n1"}


def test_without_the_plugin_a_hard_topology_has_no_gradient_and_the_whole_cluster_is_one_domain() -> None:
    """Volcano: HyperNodeGradientForJobFn with no plugin gives the cluster top alone."""
    objs = [*two_racks(), podgroup("pg1", 3, {"mode": "hard", "highestTierAllowed": 1})]
    objs += [pod("a", "pg1"), pod("b", "pg1"), pod("c", "pg1")]
    plain = CONF.replace("  - name: network-topology-aware\n", "")
    assert len(schedule(objs, conf=plain).binds) == 3
    assert schedule(objs).binds == {}


def test_a_job_with_a_network_topology_does_not_preempt() -> None:
    """Volcano's preempt skips preemptors with a network topology (volcano-sh/volcano#4374)."""
    import copy
    from pathlib import Path

    import yaml

    case = yaml.safe_load(
        (
            Path(__file__).resolve().parents[1]
            / "scenarios/volcano/preempt"
            / "besteffort-high-priority-pod-preempt-besteffort-low-priority-pod-in-same-queue.yaml"
        ).read_text()
    )
    objs = case["objects"]
    assert [e.task for e in schedule(objs, conf=case["conf"]).evictions] == ["c1/preemptee1"]
    pending = {
        o["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        for o in objs
        if o["kind"] == "Pod" and o.get("status", {}).get("phase") == "Pending"
    }
    with_topology = copy.deepcopy(objs)
    for o in with_topology:
        if o["kind"] == "PodGroup" and o["metadata"]["name"] in pending:
            o["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    assert schedule(with_topology, conf=case["conf"]).evictions == []
