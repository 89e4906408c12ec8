"""The nodeorder plugin: Kubernetes score plugins' integer arithmetic, normalisation over the candidate
nodes, weights, and agreement with a per-node reference written from the Go formulas."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import yaml

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeFacts, NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import PodFacts, Taint, TaskInfo, TaskStatus, Toleration
from fumarole.daemon.scheduler.plugins import nodeorder as no
from fumarole.daemon.scheduler.plugins import predicates as pr
from fumarole.daemon.scheduler.plugins.k8s import node_affinity as k8s_node_affinity
from fumarole.daemon.scheduler.plugins.k8s import node_mirror as k8s_mirror
from fumarole.daemon.scheduler.plugins.k8s import pod_affinity_terms as k8s_terms
from fumarole.daemon.scheduler.plugins.k8s import spread_constraints as k8s_spread
from fumarole.daemon.scheduler.plugins.k8s import taint_toleration as k8s_taints

GI = 1024**3
MI = 1024**2
HOST = "kubernetes.io/hostname"
ONLY = {  # every scorer off; tests switch on the one they look at
    no.LEAST_REQUESTED_WEIGHT: 0,
    no.MOST_REQUESTED_WEIGHT: 0,
    no.NODE_AFFINITY_WEIGHT: 0,
    no.POD_AFFINITY_WEIGHT: 0,
    no.BALANCED_RESOURCE_WEIGHT: 0,
    no.TAINT_TOLERATION_WEIGHT: 0,
    no.IMAGE_LOCALITY_WEIGHT: 0,
    no.POD_TOPOLOGY_SPREAD_WEIGHT: 0,
}


def only(**weights: int) -> dict[str, Any]:
    out: dict[str, Any] = dict(ONLY)
    for k, v in weights.items():
        out[f"{k}.weight"] = v
    return out


@dataclass(frozen=True, slots=True)
class SpreadPod(PodFacts):
    """PodFacts with the raw `spec.topologySpreadConstraints` the plugins read when present."""

    topology_spread_constraints: tuple[dict[str, Any], ...] = ()


def mk_node(
    name: str,
    cpu: int = 4000,
    memory: int = 8 * GI,
    labels: dict[str, str] | None = None,
    *,
    gpu: int = 0,
    taints: tuple[Taint, ...] = (),
    images: dict[str, int] | None = None,
) -> NodeInfo:
    scalars: dict[str, float] = {"pods": 110}
    if gpu:
        scalars["nvidia.com/gpu"] = gpu * 1000
    facts = NodeFacts(labels={HOST: name, **(labels or {})}, taints=taints, images=images or {})
    return NodeInfo(name, Resource(cpu, memory, scalars), facts=facts)


def mk_task(
    name: str,
    cpu: int = 1000,
    memory: int = GI,
    *,
    gpu: int = 0,
    job: str = "default/j",
    labels: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    images: tuple[str, ...] = (),
    node: str = "",
    spread: tuple[dict[str, Any], ...] = (),
) -> TaskInfo:
    scalars: dict[str, float] = {"pods": 1}
    if gpu:
        scalars["nvidia.com/gpu"] = gpu * 1000
    pod = SpreadPod(
        labels=labels or {},
        affinity=affinity or {},
        tolerations=tolerations,
        images=images,
        topology_spread_constraints=spread,
    )
    return TaskInfo(
        uid=f"default-{name}",
        name=name,
        namespace="default",
        job=job,
        resreq=Resource(cpu, memory, scalars),
        status=TaskStatus.RUNNING if node else TaskStatus.PENDING,
        node_name=node,
        pod=pod,
    )


def open_session(
    nodes: list[NodeInfo], tasks: list[TaskInfo], arguments: dict[str, Any], *, with_predicates: bool = True
) -> tuple[Session, no.NodeOrderPlugin]:
    jobs: dict[str, JobInfo] = {}
    by_name = {n.name: n for n in nodes}
    for t in tasks:
        job = jobs.get(t.job)
        if job is None:
            ns, name = t.job.split("/")
            job = jobs[t.job] = JobInfo(uid=t.job, name=name, namespace=ns, queue="default", phase="Inqueue")
        job.add_task(t)
        if t.node_name:
            by_name[t.node_name].add_task(t)
    plugins: list[dict[str, Any]] = [{"name": "nodeorder", "arguments": arguments}]
    if with_predicates:
        plugins.insert(0, {"name": "predicates"})
    conf = parse_conf(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": plugins}]}))
    ssn = Session(ClusterSnapshot(nodes=nodes, jobs=jobs, queues={"default": QueueInfo("default")}), conf)
    if with_predicates:
        pr.new({}).on_session_open(ssn)
    plugin = no.new(arguments)
    plugin.on_session_open(ssn)
    ssn.compile_chains()
    return ssn, plugin


def the(ssn: Session, name: str) -> TaskInfo:
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.name == name:
                return t
    raise KeyError(name)


def scores(ssn: Session, task: TaskInfo, names: list[str] | None = None) -> dict[str, float]:
    nodes = [ssn.nodes[n] for n in names] if names else ssn.node_list
    rows = np.asarray([n.index for n in nodes], dtype=np.int64)
    total = ssn.node_score_batch(task, rows)
    return {n.name: float(s) for n, s in zip(nodes, total, strict=True)}


def best(ssn: Session, task: TaskInfo) -> str:
    s = scores(ssn, task)
    return max(s, key=lambda k: s[k])


# =============================================================================================
# Volcano's nodeorder test cases


def test_least_allocated_prefers_the_emptier_node() -> None:
    ssn, _ = open_session(
        [mk_node("n1", 2000, 4 * GI), mk_node("n2", 4000, 8 * GI)],
        [mk_task("p1", 1000, 10**9)],
        only(leastrequested=1),
    )
    assert best(ssn, the(ssn, "p1")) == "n2"


def test_most_allocated_prefers_the_fuller_node() -> None:
    ssn, _ = open_session(
        [mk_node("n1", 2000, 4 * GI), mk_node("n2", 4000, 8 * GI)],
        [mk_task("p1", 1000, 10**9)],
        only(mostrequested=1),
    )
    assert best(ssn, the(ssn, "p1")) == "n1"


def test_balanced_allocation_prefers_the_balanced_node() -> None:
    ssn, _ = open_session(
        [mk_node("n1", 2000, 2 * GI), mk_node("n2", 4000, 2 * GI)],
        [mk_task("p1", 1000, GI)],
        only(balancedresource=10),
    )
    # Kubernetes 1.36 scores the change in balance: both nodes are perfectly balanced before
    # the pod (100); after it n1 still is (100 -> 75) and n2 is not (87 -> 50 + (50 + 87 - 100) // 2).
    assert scores(ssn, the(ssn, "p1")) == {"n1": 750.0, "n2": 680.0}


def test_balanced_allocation_rewards_a_pod_that_improves_the_balance() -> None:
    # n1 holds a cpu-heavy pod (1 of 2 cpu, no memory): a memory-heavy pod improves its balance.
    ssn, _ = open_session(
        [mk_node("n1", 2000, 4 * GI), mk_node("n2", 2000, 4 * GI)],
        [mk_task("hog", 1000, 0, node="n1"), mk_task("p1", 100, 2 * GI)],
        only(balancedresource=1),
    )
    got = scores(ssn, the(ssn, "p1"))
    # n1: before |0.5 - 0| / 2 -> 75, after |0.55 - 0.5| / 2 -> 97: 50 + (50 + 97 - 75) // 2 = 86.
    # n2: before 100, after |0.05 - 0.5| / 2 -> 77: 50 + (50 + 77 - 100) // 2 = 63.
    assert got == {"n1": 86.0, "n2": 63.0}


def test_node_affinity_prefers_labelled_node() -> None:
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone1"]}]
                    },
                }
            ]
        }
    }
    nodes = [mk_node("n1", labels={"zone": "zone1"}), mk_node("n2", labels={"zone": "zone2"})]
    ssn, _ = open_session(nodes, [mk_task("p1", affinity=pref)], only(nodeaffinity=10))
    assert scores(ssn, the(ssn, "p1")) == {"n1": 1000.0, "n2": 0.0}


def test_taint_toleration_prefers_untainted_node() -> None:
    nodes = [mk_node("n1"), mk_node("n2", taints=(Taint("key1", "value1", "PreferNoSchedule"),))]
    ssn, _ = open_session(nodes, [mk_task("p1")], only(tainttoleration=10))
    assert scores(ssn, the(ssn, "p1")) == {"n1": 1000.0, "n2": 0.0}


def test_inter_pod_affinity_prefers_node_with_matching_pod() -> None:
    pref = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"service": "s1"}},
                        "topologyKey": HOST,
                    },
                }
            ]
        }
    }
    tasks = [
        mk_task("p1", node="n1", labels={"service": "s1"}),
        mk_task("p-noise", node="n3", labels={"service": "s2"}),
        mk_task("p2", affinity=pref),
    ]
    ssn, _ = open_session([mk_node("n1"), mk_node("n2"), mk_node("n3")], tasks, only(podaffinity=10))
    assert scores(ssn, the(ssn, "p2")) == {"n1": 1000.0, "n2": 0.0, "n3": 0.0}


# =============================================================================================
# hand-computed scores


def _soft(key: str, skew: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "foo"}},
        **extra,
    }


def _spread_tasks(*pending: TaskInfo) -> list[TaskInfo]:
    placed = [mk_task(f"p{i}", node=n, labels={"app": "foo"}) for i, n in enumerate(["n1", "n1", "n2"], 1)]
    return [*placed, *pending]


def test_pod_topology_spread_prefers_node_to_reduce_skew() -> None:
    """Volcano's nodeorder case: zone counts 2, 1, 0 -> n3 (needs a topology_spread_constraints field)."""
    nodes = [mk_node(f"n{i}", labels={"zone": f"zone{i}"}) for i in (1, 2, 3)]
    ssn, _ = open_session(
        nodes,
        _spread_tasks(mk_task("p4", labels={"app": "foo"}, spread=(_soft("zone"),))),
        only(podtopologyspread=10),
    )
    # score = count × log(3 + 2): 3.2 -> 3, 1.6 -> 2, 0; normalised 100 × (3 + 0 - s) / 3
    assert scores(ssn, the(ssn, "p4")) == {"n1": 0.0, "n2": 330.0, "n3": 1000.0}


def test_pod_topology_spread_hostname_skew_and_ignored_nodes() -> None:
    def nodes() -> list[NodeInfo]:
        return [
            mk_node("n1", labels={"zone": "a"}),
            mk_node("n2", labels={"zone": "a"}),
            mk_node("n3"),
            mk_node("n4"),
        ]

    p = mk_task("p", labels={"app": "foo"}, spread=(_soft(HOST, skew=3),))
    ssn, _ = open_session(nodes(), _spread_tasks(p), only(podtopologyspread=1))
    # per-node counts 2, 1, 0, 0; weight log(4 + 2); + (maxSkew - 1) = 2 each: 5.58 -> 6, 3.79 -> 4, 2, 2
    assert scores(ssn, the(ssn, "p")) == {"n1": 33.0, "n2": 66.0, "n3": 100.0, "n4": 100.0}
    q = mk_task("q", labels={"app": "foo"}, spread=(_soft("zone"),))
    ssn, _ = open_session(nodes(), _spread_tasks(q), only(podtopologyspread=1))
    # n3, n4 lack the zone label: ignored (0); zone a alone: maxScore 3 -> 100 × (3 + 3 - 3) / 3
    assert scores(ssn, the(ssn, "q")) == {"n1": 100.0, "n2": 100.0, "n3": 0.0, "n4": 0.0}


def test_least_and_most_requested_integer_arithmetic() -> None:
    nodes = [mk_node("n1", 4000, 8 * GI)]
    tasks = [mk_task("old", 1000, 2 * GI, node="n1"), mk_task("p", 500, GI)]
    ssn, _ = open_session(nodes, tasks, only(leastrequested=1))
    # cpu (4000-1500)*100/4000 = 62, memory (8-3)*100/8 = 62; (62*50 + 62*50) / 100 = 62
    assert scores(ssn, the(ssn, "p")) == {"n1": 62.0}
    ssn, _ = open_session(
        [mk_node("n1", 4000, 8 * GI)],
        [mk_task("old", 1000, 2 * GI, node="n1"), mk_task("p", 500, GI)],
        only(mostrequested=3),
    )
    # cpu 1500*100/4000 = 37, memory 3*100/8 = 37; (37 + 37) / 2 = 37; × 3
    assert scores(ssn, the(ssn, "p")) == {"n1": 111.0}


def test_zero_requests_count_as_100m_and_200mi_for_least_requested() -> None:
    nodes = [mk_node("n1", 1000, 1000 * MI)]
    tasks = [mk_task("old", 0, 0, node="n1"), mk_task("p", 0, 0)]
    ssn, _ = open_session(nodes, tasks, only(leastrequested=1))
    # cpu (1000-200)*100/1000 = 80; memory (1000-400)*100/1000 = 60; (80*50 + 60*50)/100 = 70
    assert scores(ssn, the(ssn, "p")) == {"n1": 70.0}


def test_over_capacity_scores_zero() -> None:
    nodes = [mk_node("n1", 1000, GI)]
    ssn, _ = open_session(
        nodes,
        [mk_task("old", 900, GI // 2, node="n1"), mk_task("p", 200, GI // 4)],
        only(leastrequested=1, mostrequested=1),
    )
    # least: cpu over capacity -> 0, memory (1024-768)*100/1024 = 25 -> (0+25*50)/100 = 12
    # most: cpu capped 100, memory 75 -> (100+75)/2 = 87
    assert scores(ssn, the(ssn, "p")) == {"n1": 12.0 + 87.0}


def test_balanced_allocation_with_gpu_and_best_effort_skip() -> None:
    nodes = [mk_node("n1", 4000, 8 * GI, gpu=4)]
    tasks = [
        mk_task("old", 1000, 4 * GI, node="n1", gpu=1),
        mk_task("p", 1000, GI, gpu=1),
        mk_task("be", 0, 0),
    ]
    ssn, _ = open_session(nodes, tasks, only(balancedresource=1))

    def balance(f: list[float]) -> int:
        if len(f) == 2:
            return int((1 - abs(f[0] - f[1]) / 2) * 100)
        mean = sum(f) / len(f)
        return int((1 - math.sqrt(sum((x - mean) ** 2 for x in f) / len(f))) * 100)

    with_pod = balance([2000 / 4000, 5 * GI / (8 * GI), 2000 / 4000])
    without = balance([1000 / 4000, 4 * GI / (8 * GI), 1000 / 4000])
    assert scores(ssn, the(ssn, "p")) == {"n1": float(50 + (50 + with_pod - without) // 2)}
    assert scores(ssn, the(ssn, "be")) == {"n1": 0.0}
    # A pod without a GPU request leaves the GPU out: two fractions, std = |a-b|/2.
    ssn, _ = open_session(
        [mk_node("n1", 4000, 8 * GI, gpu=4)], [mk_task("q", 1000, GI)], only(balancedresource=1)
    )
    with_pod = balance([0.25, 0.125])
    assert scores(ssn, the(ssn, "q")) == {"n1": float(50 + (50 + with_pod - 100) // 2)}


def _pref_node(*weighted: tuple[int, str, str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": w,
                    "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]},
                }
                for w, k, v in weighted
            ]
        }
    }


def test_node_affinity_normalised_over_the_given_rows() -> None:
    nodes = [
        mk_node("n1", labels={"zone": "a", "rack": "r1"}),
        mk_node("n2", labels={"rack": "r1"}),
        mk_node("n3"),
    ]
    aff = _pref_node((20, "zone", "a"), (10, "rack", "r1"))
    ssn, _ = open_session(nodes, [mk_task("p", affinity=aff)], only(nodeaffinity=1))
    t = the(ssn, "p")
    assert scores(ssn, t) == {"n1": 100.0, "n2": 33.0, "n3": 0.0}
    assert scores(ssn, t, ["n2", "n3"]) == {"n2": 100.0, "n3": 0.0}
    assert scores(ssn, t, ["n3"]) == {"n3": 0.0}


def test_taint_toleration_counts_and_reverse_normalisation() -> None:
    soft = (
        Taint("a", "1", "PreferNoSchedule"),
        Taint("b", "", "PreferNoSchedule"),
        Taint("c", "", "NoSchedule"),
    )
    nodes = [mk_node("n1", taints=soft), mk_node("n2", taints=soft[1:]), mk_node("n3")]
    tasks = [
        mk_task("p"),
        mk_task("q", tolerations=(Toleration("a", "Equal", "1", "PreferNoSchedule"),)),
        mk_task("r", tolerations=(Toleration("", "Exists", "", ""),)),
    ]
    ssn, _ = open_session(nodes, tasks, only(tainttoleration=1))
    assert scores(ssn, the(ssn, "p")) == {"n1": 0.0, "n2": 50.0, "n3": 100.0}
    assert scores(ssn, the(ssn, "q")) == {"n1": 0.0, "n2": 0.0, "n3": 100.0}
    assert scores(ssn, the(ssn, "r")) == {"n1": 100.0, "n2": 100.0, "n3": 100.0}
    assert scores(ssn, the(ssn, "p"), ["n2", "n3"]) == {"n2": 0.0, "n3": 100.0}


def _weighted(kind: str, weight: int, key: str, value: str, topology: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]
        }
    }


def test_inter_pod_preferred_affinity_and_anti_affinity_min_max() -> None:
    nodes = [
        mk_node("n1", labels={"zone": "a"}),
        mk_node("n2", labels={"zone": "a"}),
        mk_node("n3", labels={"zone": "b"}),
    ]
    aff = _weighted("podAffinity", 50, "app", "db", "zone")
    aff.update(_weighted("podAntiAffinity", 20, "app", "web", HOST))
    tasks = [
        mk_task("db", node="n1", labels={"app": "db"}),
        mk_task("web", node="n2", labels={"app": "web"}),
        mk_task("p", affinity=aff),
    ]
    ssn, _ = open_session(nodes, tasks, only(podaffinity=1))
    # zone a: +50, host n2: -20 -> raw n1 50, n2 30, n3 0 -> min-max 100, 60, 0
    assert scores(ssn, the(ssn, "p")) == {"n1": 100.0, "n2": 60.0, "n3": 0.0}
    assert scores(ssn, the(ssn, "p"), ["n2", "n3"]) == {"n2": 100.0, "n3": 0.0}


def test_existing_pods_preferred_terms_towards_the_incoming_pod() -> None:
    nodes = [
        mk_node("n1", labels={"zone": "a"}),
        mk_node("n2", labels={"zone": "a"}),
        mk_node("n3", labels={"zone": "b"}),
    ]
    repel = _weighted("podAntiAffinity", 10, "app", "web", HOST)
    attract = _weighted("podAffinity", 5, "app", "web", "zone")
    tasks = [
        mk_task("x", node="n1", affinity=repel),
        mk_task("y", node="n3", affinity=attract),
        mk_task("web", labels={"app": "web"}),
        mk_task("db", labels={"app": "db"}),
    ]
    ssn, _ = open_session(nodes, tasks, only(podaffinity=1))
    # raw: n1 -10, n2 0, n3 +5 -> min-max over (-10..5): 0, int(100*10/15)=66, 100
    assert scores(ssn, the(ssn, "web")) == {"n1": 0.0, "n2": 66.0, "n3": 100.0}
    assert scores(ssn, the(ssn, "db")) == {"n1": 0.0, "n2": 0.0, "n3": 0.0}


def test_image_locality_scalar_and_batch() -> None:
    size = 500 * MI
    nodes = [
        mk_node("n1", images={"nginx:1.0": size, "busybox:latest": 30 * MI}),
        mk_node("n2", images={"nginx:1.0": size}),
        mk_node("n3"),
        mk_node("n4"),
    ]
    tasks = [mk_task("p", images=("nginx:1.0",)), mk_task("q", images=("busybox", "nginx:1.0"))]
    ssn, plugin = open_session(nodes, tasks, only(imagelocality=2))
    # nginx on 2 of 4 nodes: 250MB; 100*(250MB-23MB)/(1000MB-23MB) = 23; × 2
    assert scores(ssn, the(ssn, "p")) == {"n1": 46.0, "n2": 46.0, "n3": 0.0, "n4": 0.0}
    # busybox (":latest" implied) on 1 of 4: 7.5MB; sum 257.5MB over 2 containers: 100*(234.5)/(1977) = 11
    assert scores(ssn, the(ssn, "q"))["n1"] == 22.0
    for name in ("p", "q"):
        t = the(ssn, name)
        for n in ssn.node_list:
            assert plugin.node_order(t, n) == scores(ssn, t)[n.name]


def test_weights_and_registration() -> None:
    ssn, plugin = open_session([mk_node("n1")], [mk_task("p")], only())
    assert not ssn.has(cb.BATCH_NODE_ORDER) and not ssn.has(cb.NODE_ORDER)
    ssn, plugin = open_session([mk_node("n1"), mk_node("n2")], [mk_task("p")], {})
    assert plugin.weights == no.Weights()
    assert ssn.has(cb.BATCH_NODE_ORDER) and ssn.has(cb.NODE_ORDER)
    t = the(ssn, "p")
    by_name = plugin.batch_node_order(t, ssn.node_list)
    assert by_name == scores(ssn, t)
    assert no.weights_from({"leastrequested.weight": "3", "mostrequested.weight": 2}).most_requested == 2
    assert no.weights_from({"leastrequested.weight": "3"}).least_requested == 1  # strings keep the default


def test_requested_follows_allocations_through_the_predicates_snapshot() -> None:
    nodes = [mk_node("n1", 4000, 8 * GI)]
    tasks = [mk_task("a", 2000, 4 * GI), mk_task("p", 1000, GI, job="default/k")]
    ssn, _ = open_session(nodes, tasks, only(leastrequested=1))
    # cpu (4000-1000)*100/4000 = 75, memory 7*100/8 = 87 -> 81; with `a` placed: 25, 37 -> 31
    assert scores(ssn, the(ssn, "p")) == {"n1": 81.0}
    stmt = Statement(ssn)
    # As the actions do: PrePredicate first (its PreFilter state is what Reserve needs for the
    # allocation to reach the snapshot; see test_predicates_restored_victims.py).
    assert ssn.pre_predicate_fn(the(ssn, "a")) is None
    stmt.allocate(the(ssn, "a"), ssn.nodes["n1"])
    assert scores(ssn, the(ssn, "p")) == {"n1": 31.0}
    stmt.discard()
    assert scores(ssn, the(ssn, "p")) == {"n1": 81.0}
    # Without the predicates plugin nothing updates Volcano's k8s snapshot.
    ssn, _ = open_session(
        [mk_node("n1", 4000, 8 * GI)],
        [mk_task("a", 2000, 4 * GI), mk_task("p", 1000, GI, job="default/k")],
        only(leastrequested=1),
        with_predicates=False,
    )
    Statement(ssn).allocate(the(ssn, "a"), ssn.nodes["n1"])
    assert scores(ssn, the(ssn, "p")) == {"n1": 81.0}


def test_go_division_truncates_toward_zero() -> None:
    a = np.asarray([7, -7, 7, -7], dtype=np.int64)
    assert list(no.go_div(a, np.asarray([2, 2, -2, -2], dtype=np.int64))) == [3, -3, -3, 3]
    assert list(no.default_normalize(np.asarray([0, 0], dtype=np.int64), reverse=True)) == [100, 100]
    assert list(no.default_normalize(np.asarray([-5, 0], dtype=np.int64), reverse=False)) == [-5, 0]


# =============================================================================================
# vectorised scores == a per-node reference from the Go formulas, on random clusters


def _ref_least(req: int, cap: int) -> int:
    return 0 if req > cap else (cap - req) * 100 // cap


def _ref_most(req: int, cap: int) -> int:
    return min(req, cap) * 100 // cap


def _ref_weighted(pairs: list[tuple[int, int]], weights: tuple[int, int], fn: Any) -> int:
    total = wsum = 0
    for (req, cap), w in zip(pairs, weights, strict=True):
        if cap == 0:
            continue
        total += fn(req, cap) * w
        wsum += w
    return 0 if wsum == 0 else total // wsum


def _ref_balanced(pairs: list[tuple[int, int]]) -> int:
    fr = [min(req / cap, 1.0) for req, cap in pairs if cap != 0]
    std = 0.0
    if len(fr) == 2:
        std = abs((fr[0] - fr[1]) / 2)
    elif len(fr) > 2:
        mean = sum(fr) / len(fr)
        acc = 0.0
        for f in fr:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fr))
    return int((1 - std) * 100)


def _ref_normalize(raw: list[int], reverse: bool) -> list[int]:
    mx = max([0, *raw])
    if mx == 0:
        return [100] * len(raw) if reverse else raw
    out = [100 * s // mx if s >= 0 else -((100 * -s) // mx) for s in raw]
    return [100 - s for s in out] if reverse else out


def _ref_interpod(ssn: Session, task: TaskInfo, rows: list[int]) -> list[int] | None:
    """PreScore by walking every pod of the snapshot, as the Go code does."""
    m = k8s_mirror.node_mirror(ssn)
    pa = m.pod_affinity(task.namespace, task.pod)
    merged = k8s_terms.merge_pod_affinity(pa, k8s_mirror.namespace_labels(ssn))
    has = bool(pa.preferred_affinity or pa.preferred_anti)
    topo: dict[tuple[str, str], int] = {}
    hit = False
    for row in range(m.n):
        if not has and not m.affinity_rows_at_open[row]:
            continue
        node_labels = m.node_labels[row]
        for e in m.pods[row].values():
            e_aff = k8s_terms.parse_pod_affinity(e.namespace, e.pod.affinity)
            if not has and not e_aff.with_affinity:
                continue
            if not node_labels:
                continue
            for terms, sign, incoming in (
                (merged.preferred_affinity, 1, True),
                (merged.preferred_anti, -1, True),
                (e_aff.preferred_affinity, 1, False),
                (e_aff.preferred_anti, -1, False),
            ):
                for w in terms:
                    if incoming:
                        ok = w.term.matches(e.namespace, e.pod.labels, None)
                    else:
                        ok = w.term.matches(task.namespace, task.pod.labels, None)
                    v = node_labels.get(w.term.topology_key)
                    if ok and v is not None:
                        key = (w.term.topology_key, v)
                        topo[key] = topo.get(key, 0) + w.weight * sign
                        hit = True
    if not hit:
        return None
    raw = [sum(c for (k, v), c in topo.items() if m.node_labels[r].get(k) == v) for r in rows]
    lo, hi = min(raw), max(raw)
    return [int(100.0 * ((s - lo) / (hi - lo))) if hi > lo else 0 for s in raw]


def _reference(ssn: Session, plugin: no.NodeOrderPlugin, task: TaskInfo, rows: list[int]) -> list[int]:
    m = k8s_mirror.node_mirror(ssn)
    w = plugin.weights
    r = task.resreq
    cpu, mem, gpu = int(r.cpu), int(r.memory), int(r.scalars.get("nvidia.com/gpu", 0))
    nz_cpu, nz_mem = cpu or 100, mem or 200 * MI
    total = [0] * len(rows)
    aff_raw, taint_raw = [], []
    prefs = k8s_node_affinity.preferred_node_terms(task.pod.affinity)
    soft = k8s_taints.prefer_no_schedule_tolerations(task.pod.tolerations)
    for i, row in enumerate(rows):
        node = ssn.node_list[row]
        a = node.allocatable
        nz = [(int(m.nz_cpu[row]) + nz_cpu, int(a.cpu)), (int(m.nz_memory[row]) + nz_mem, int(a.memory))]
        total[i] += w.least_requested * _ref_weighted(nz, (50, 50), _ref_least)
        total[i] += w.most_requested * _ref_weighted(nz, (1, 1), _ref_most)
        if cpu or mem or gpu:
            held = [(int(m.req_cpu[row]), int(a.cpu)), (int(m.req_memory[row]), int(a.memory))]
            pod = [cpu, mem]
            if gpu:
                held.append((int(m.req_gpu[row]), int(a.scalars.get("nvidia.com/gpu", 0))))
                pod.append(gpu)
            after = _ref_balanced([(h + p, c) for (h, c), p in zip(held, pod, strict=True)])
            before = _ref_balanced(held)
            total[i] += w.balanced_resource * (50 + (50 + after - before) // 2)
        aff_raw.append(k8s_node_affinity.preferred_node_score(prefs, node.facts.labels, node.name))
        taint_raw.append(k8s_taints.count_intolerable_prefer_no_schedule(node.facts.taints, soft))
    for i, s in enumerate(_ref_normalize(aff_raw, False)):
        total[i] += w.node_affinity * s
    for i, s in enumerate(_ref_normalize(taint_raw, True)):
        total[i] += w.taint_toleration * s
    ipa = _ref_interpod(ssn, task, rows)
    if ipa is not None:
        for i, s in enumerate(ipa):
            total[i] += w.pod_affinity * s
    spread = _ref_spread(ssn, task, rows)
    if spread is not None:
        for i, s in enumerate(spread):
            total[i] += w.pod_topology_spread * s
    for i, row in enumerate(rows):
        total[i] += int(plugin.node_order(task, ssn.node_list[row]))
    return total


def _ref_spread(ssn: Session, task: TaskInfo, rows: list[int]) -> list[int] | None:
    """PodTopologySpread PreScore / Score / NormalizeScore by walking every node and pod (Go's loops)."""
    m = k8s_mirror.node_mirror(ssn)
    cs = k8s_spread.spread_constraints(
        k8s_spread.raw_spread_constraints(task.pod), task.pod.labels, k8s_spread.SCHEDULE_ANYWAY
    )
    if not cs:
        return None
    nodes = ssn.node_list
    ignored: set[int] = set()
    pairs: dict[tuple[str, str], int] = {}
    size = [0] * len(cs)
    for r in rows:
        labels = nodes[r].facts.labels
        if not k8s_spread.node_has_spread_keys(labels, cs):
            ignored.add(r)
            continue
        for i, c in enumerate(cs):
            if c.topology_key != HOST and (c.topology_key, labels[c.topology_key]) not in pairs:
                pairs[(c.topology_key, labels[c.topology_key])] = 0
                size[i] += 1
    weights = [
        math.log((len(rows) - len(ignored) if c.topology_key == HOST else size[i]) + 2)
        for i, c in enumerate(cs)
    ]
    aff = k8s_node_affinity.required_node_affinity(task.pod.node_selector, task.pod.affinity)

    def count(row: int, c: k8s_spread.SpreadConstraint) -> int:
        return sum(
            k8s_spread.spread_matches(c, t.namespace, t.pod.labels, t.pod.deleting, task.namespace)
            for t in m.pods[row].values()
        )

    for row, node in enumerate(nodes):
        labels = node.facts.labels
        if not k8s_spread.node_has_spread_keys(labels, cs):
            continue
        for c in cs:
            if c.honor_node_affinity and not aff.matches(labels, node.name):
                continue
            if c.honor_node_taints and k8s_taints.find_untolerated_taint(
                node.facts.taints, task.pod.tolerations
            ):
                continue
            pair = (c.topology_key, labels[c.topology_key])
            if pair in pairs:
                pairs[pair] += count(row, c)
    raw: dict[int, int] = {}
    for r in rows:
        if r in ignored:
            continue
        labels = nodes[r].facts.labels
        sc = 0.0
        for c, wt in zip(cs, weights, strict=True):
            cnt = count(r, c) if c.topology_key == HOST else pairs[(c.topology_key, labels[c.topology_key])]
            sc += float(cnt) * wt + float(c.max_skew - 1)
        raw[r] = int(sc) + (1 if sc - int(sc) >= 0.5 else 0)
    lo, hi = min(raw.values(), default=0), max(raw.values(), default=0)
    return [0 if r in ignored else (100 if hi == 0 else 100 * (hi + lo - raw[r]) // hi) for r in rows]


def _rand_pref_pod(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rng.random() < 0.5:
        out.update(
            _pref_node(*[(rng.randint(1, 100), "zone", rng.choice("abc")) for _ in range(rng.randint(1, 3))])
        )
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.3:
            terms = [
                {
                    "weight": rng.randint(1, 100),
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": rng.choice(["web", "db"])}},
                        "topologyKey": rng.choice(["zone", HOST]),
                    },
                }
                for _ in range(rng.randint(1, 2))
            ]
            out[kind] = {"preferredDuringSchedulingIgnoredDuringExecution": terms}
    return out


def _rand_soft(rng: random.Random) -> tuple[dict[str, Any], ...]:
    if rng.random() < 0.5:
        return ()
    out = []
    for _ in range(rng.randint(1, 2)):
        c = _soft(rng.choice(["zone", HOST]), rng.randint(1, 3))
        c["labelSelector"] = {"matchLabels": {"app": rng.choice(["web", "db"])}}
        if rng.random() < 0.3:
            c["nodeTaintsPolicy"] = "Honor"
        out.append(c)
    return tuple(out)


@pytest.mark.parametrize("seed", range(40))
def test_batch_scores_match_reference(seed: int) -> None:
    rng = random.Random(seed)
    soft = (
        Taint("a", "", "PreferNoSchedule"),
        Taint("b", "1", "PreferNoSchedule"),
        Taint("c", "", "NoSchedule"),
    )
    images = {"img:1": 300 * MI, "img:2": 900 * MI, "other:latest": 50 * MI}
    nodes = [
        mk_node(
            f"n{i}",
            rng.choice([0, 2000, 4000, 8000][1 - seed % 2 :]),  # even seeds: every node has cpu and memory
            rng.choice([0, 4 * GI, 16 * GI][1 - seed % 2 :]),
            {"zone": rng.choice("abc")} if rng.random() < 0.9 else {},
            gpu=rng.choice([0, 0, 4, 8]),
            taints=tuple(t for t in soft if rng.random() < 0.3),
            images={k: v for k, v in images.items() if rng.random() < 0.5},
        )
        for i in range(rng.randint(3, 20))
    ]
    tasks = []
    for i in range(rng.randint(0, 20)):
        tasks.append(
            mk_task(
                f"r{i}",
                rng.choice([0, 500, 1500]),
                rng.choice([0, GI, 3 * GI]),
                gpu=rng.choice([0, 0, 1]),
                job=f"default/r{i % 3}",
                node=rng.choice(nodes).name,
                labels={"app": rng.choice(["web", "db"])},
                affinity=_rand_pref_pod(rng),
            )
        )
    pending = [
        mk_task(
            f"p{i}",
            rng.choice([0, 500, 1500]),
            rng.choice([0, GI, 3 * GI]),
            gpu=rng.choice([0, 0, 1, 2]),
            job="default/p",
            labels={"app": rng.choice(["web", "db"])},
            affinity=_rand_pref_pod(rng),
            tolerations=(Toleration("a", "Exists", "", ""),) if rng.random() < 0.3 else (),
            images=tuple(rng.sample(["img:1", "img:2", "other", "none"], rng.randint(0, 2))),
            spread=_rand_soft(rng),
        )
        for i in range(6)
    ]
    weights = {k: rng.choice([0, 1, 2, 5]) for k in ONLY}
    ssn, plugin = open_session(nodes, tasks + pending, weights)
    stmt = Statement(ssn)
    stmt.allocate(the(ssn, "p0"), rng.choice(ssn.node_list))
    for step in range(2):
        for t in pending[1 + step :]:
            task = the(ssn, t.name)
            rows = sorted(rng.sample(range(len(nodes)), rng.randint(1, len(nodes))))
            got = ssn.node_score_batch(task, np.asarray(rows, dtype=np.int64))
            assert [int(v) for v in got] == _reference(ssn, plugin, task, rows), (seed, step, t.name)
        # Move the snapshot after the PreScore watches exist: place one more, maybe undo the first.
        Statement(ssn).allocate(the(ssn, pending[1 + step].name), rng.choice(ssn.node_list))
        if rng.random() < 0.5:
            stmt.discard()
