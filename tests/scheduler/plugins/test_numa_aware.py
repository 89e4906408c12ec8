"""numa-aware: policies, the CPU manager provider, manifests, and whole sessions.

The policy and provider cases are Volcano's own unit tests (plugins/numaaware/policy/*_test.go,
provider/cpumanager/cpu_mng_test.go at ed72c7c), their expected outcomes ported; Volcano's
plugin test (numaaware_test.go: OnSessionClose records the bound tasks' assignments) is ported
as the bind-annotation checks below.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from fumarole.daemon.manifests import ManifestError, build_snapshot
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.model.numa import (
    NUMA_CPUS_ANNOTATION,
    CPUDetails,
    CPUInfo,
    format_cpuset,
    parse_cpuset,
)
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.plugins import numa_cpumanager as cm
from fumarole.daemon.scheduler.plugins import numa_policy as pol
from fumarole.daemon.scheduler.plugins.numa_aware import normalize_reversed

Raw = list[dict[str, list[tuple[list[int], bool]]]]

# Volcano's policy test cases (the same provider hints for each policy; numaNodes [0, 1]).
_PROVIDERS: dict[str, Raw] = {
    "test-1": [{"cpu": [([0, 1], False), ([0], True)]}, {"gpu": [([0, 1], False), ([0], True)]}],
    "test-2": [{"cpu": [([0, 1], False), ([1], True)]}, {"gpu": [([0, 1], False), ([1], True)]}],
    "test-3": [
        {"cpu": [([0, 1], False), ([0], True), ([1], True)]},
        {"gpu": [([0, 1], False), ([0], True), ([1], True)]},
    ],
    "test-4": [{"cpu": [([0, 1], False), ([0], True)]}, {"gpu": [([0, 1], False), ([1], True)]}],
    "test-5": [{"cpu": [([0, 1], False), ([0], True)]}, {"gpu": [([0, 1], True)]}],
    "test-6": [{"cpu": [([0, 1], True)]}, {"gpu": [([0, 1], True)]}],
}
_EXPECT: dict[str, dict[str, tuple[list[int], bool]]] = {
    pol.BEST_EFFORT: {
        "test-1": ([0], True),
        "test-2": ([1], True),
        "test-3": ([0], True),
        "test-4": ([0], False),
        "test-5": ([0], True),
        "test-6": ([0, 1], True),
    },
    pol.RESTRICTED: {
        "test-1": ([0], True),
        "test-2": ([1], True),
        "test-3": ([0], True),
        "test-4": ([0], False),
        "test-5": ([0], True),
        "test-6": ([0, 1], True),
    },
    pol.SINGLE_NUMA_NODE: {
        "test-1": ([0], True),
        "test-2": ([1], True),
        "test-3": ([0], True),
        "test-4": ([0, 1], False),
        "test-5": ([0, 1], False),
    },
}


def _hints(raw: Raw) -> list[pol.ProviderHints]:
    return [{r: [pol.Hint(pol.mask_of(b), p) for b, p in hs] for r, hs in m.items()} for m in raw]


@pytest.mark.parametrize(("policy", "case"), [(p, c) for p in sorted(_EXPECT) for c in sorted(_EXPECT[p])])
def test_volcano_policy_cases(policy: str, case: str) -> None:
    best, admit = pol.predicate(policy, [0, 1], _hints(_PROVIDERS[case]))
    bits, preferred = _EXPECT[policy][case]
    assert best == pol.Hint(pol.mask_of(bits), preferred)
    assert admit == (True if policy == pol.BEST_EFFORT else preferred)


def test_policy_none_admits_with_an_empty_hint() -> None:
    assert pol.predicate(pol.NONE, [0, 1], _hints(_PROVIDERS["test-4"])) == (pol.Hint(None, False), True)


def test_no_preference_and_no_possible_affinity() -> None:
    # No answer (None) means "any": the whole node, preferred; an empty list: nothing preferred.
    assert pol.predicate(pol.RESTRICTED, [0, 1], [None]) == (pol.Hint(0b11, True), True)
    assert pol.predicate(pol.RESTRICTED, [0, 1], [{"cpu": []}]) == (pol.Hint(0b11, False), False)
    assert pol.predicate(pol.BEST_EFFORT, [0, 1], [{"cpu": []}]) == (pol.Hint(0b11, False), True)


# Volcano's cpu_mng_test.go topology: 2 sockets = 2 NUMA nodes, 2 cores each, 2 threads per core.
DETAILS = CPUDetails({c: CPUInfo(numa=c // 4, socket=c // 4, core=c // 2) for c in range(8)})


@pytest.mark.parametrize(
    ("request_", "available", "expect"),
    [
        (4, range(8), [([0], True), ([1], True), ([0, 1], False)]),
        (4, range(1, 8), [([1], True), ([0, 1], False)]),
        (5, range(8), [([0, 1], True)]),
        (8, range(8), [([0, 1], True)]),
        (9, range(8), []),
        (4, [2, 3, 4, 5], [([0, 1], False)]),
    ],
)
def test_volcano_cpu_hints(request_: int, available: Any, expect: list[tuple[list[int], bool]]) -> None:
    got = cm.topology_hints(Fraction(request_), DETAILS, None, {"cpu": frozenset(available)})
    assert got == {"cpu": [pol.Hint(pol.mask_of(b), p) for b, p in expect]}


@pytest.mark.parametrize(
    ("request_", "available", "best", "expect"),
    [
        (4, range(8), [0], {0, 1, 2, 3}),
        (4, range(1, 8), [1], {4, 5, 6, 7}),
        (5, range(8), [0, 1], {0, 1, 2, 3, 4}),
        (5, range(1, 8), [0, 1], {1, 4, 5, 6, 7}),
        (8, range(1, 8), [0, 1], set()),
    ],
)
def test_volcano_cpu_allocate(request_: int, available: Any, best: list[int], expect: set[int]) -> None:
    hint = pol.Hint(pol.mask_of(best), True)
    got = cm.allocate(Fraction(request_), hint, DETAILS, None, {"cpu": frozenset(available)})
    assert got == {"cpu": frozenset(expect)}


def test_guaranteed_cpus_and_reserved_cpus() -> None:
    assert cm.guaranteed_cpus(Fraction(2)) == 2
    assert cm.guaranteed_cpus(Fraction(3, 2)) == 0
    assert cm.guaranteed_cpus(Fraction(19995, 10000)) == 2  # ceil(q)*1000 == ceil(1000q)
    assert cm.guaranteed_cpus(None) == 0
    # resReserved cpu "1.5" rounds up to 2 CPUs taken by topology (0 and 1, one core): never offered.
    got = cm.topology_hints(Fraction(4), DETAILS, 1500, {"cpu": frozenset(range(8))})
    assert got == {"cpu": [pol.Hint(0b10, True), pol.Hint(0b11, False)]}


def test_cpuset_text_and_normalize() -> None:
    assert parse_cpuset("0-3,5,7-8") == frozenset({0, 1, 2, 3, 5, 7, 8})
    assert format_cpuset({8, 0, 1, 2, 5}) == "0-2,5,8"
    assert parse_cpuset("") == frozenset()
    assert normalize_reversed([1, 2, 0]) == [50, 0, 100]
    assert normalize_reversed([0, 0]) == [100, 100]


# ------------------------------------------------------------------------------------ sessions
CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: numa-aware
    arguments:
      weight: 10
"""


def node(name: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "20"}},
    }


def numatopo(
    name: str,
    allocatable: str = "0-7",
    policy: str = "single-numa-node",
    cpu_manager: str = "static",
    allocations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": cpu_manager, "TopologyManagerPolicy": policy},
            "numares": {"cpu": {"allocatable": allocatable, "capacity": 8}},
            "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)},
            "podAllocations": allocations or [],
        },
    }


QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "q1"},
    "spec": {"weight": 1},
}


def podgroup(name: str, min_member: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "c1"},
        "spec": {"queue": "q1", "minMember": min_member},
        "status": {"phase": "Inqueue"},
    }


def pod(
    name: str,
    group: str,
    cpu: str = "2",
    policy: str | None = "single-numa-node",
    guaranteed: bool = True,
    node_name: str = "",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if guaranteed:
        res["limits"] = {"cpu": cpu, "memory": "1Gi"}
    ann = {"scheduling.k8s.io/group-name": group, **(annotations or {})}
    if policy is not None:
        ann["volcano.sh/numa-topology-policy"] = policy
    spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [{"name": "main", "resources": res}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "c1", "uid": f"uid-{name}", "annotations": ann},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def snap(objs: list[dict[str, Any]]) -> ClusterSnapshot:
    return build_snapshot([("t.yaml", i, o) for i, o in enumerate(objs)])


def schedule(objs: list[dict[str, Any]], conf: str = CONF) -> Any:
    return run_session(snap(objs), parse_conf(conf), explain=True)


def test_a_pod_goes_where_it_fits_one_numa_node_and_carries_its_cpus() -> None:
    # n1 has 3 free CPUs on each NUMA node: 4 CPUs fit only across both, refused by
    # single-numa-node; n2 has a whole NUMA node free.
    objs = [
        node("n1"),
        node("n2"),
        numatopo("n1", allocatable="1-3,5-7"),
        numatopo("n2", allocatable="0-4"),
        QUEUE,
        podgroup("pg1"),
        pod("p1", "pg1", cpu="4"),
    ]
    r = schedule(objs)
    assert r.binds == {"c1/p1": "n2"}
    assert r.bind_annotations["c1/p1"] == {NUMA_CPUS_ANNOTATION: "0-3"}


def test_a_container_no_policy_admits_is_unresolvable() -> None:
    topo = numatopo("n1", allocatable="1-3,5-7")
    objs = [node("n1"), topo, QUEUE, podgroup("pg1"), pod("p1", "pg1", cpu="4")]
    r = schedule(objs)
    assert r.binds == {}
    assert "container main cannot be assigned by numa" in r.pending["c1/p1"]


@pytest.mark.parametrize(
    ("topo", "reason"),
    [
        (None, "numa info is empty"),
        ({"cpu_manager": "none"}, "cpu manager policy isn't static"),
        (
            {"policy": "restricted"},
            "task topology policy[single-numa-node] is different with node[restricted]",
        ),
        ({"allocatable": ""}, "cpu allocatable map is empty"),
    ],
)
def test_node_filter_errors(topo: dict[str, Any] | None, reason: str) -> None:
    objs = [node("n1"), QUEUE, podgroup("pg1"), pod("p1", "pg1")]
    if topo is not None:
        objs.append(numatopo("n1", **topo))
    r = schedule(objs)
    assert r.binds == {}
    assert reason in r.pending["c1/p1"]


def test_pods_that_are_not_guaranteed_or_ask_no_policy_pass_unchecked() -> None:
    objs = [
        node("n1"),
        QUEUE,
        podgroup("pg1"),
        pod("p1", "pg1", guaranteed=False),
        podgroup("pg2"),
        pod("p2", "pg2", policy=None),
    ]
    r = schedule(objs)
    assert r.binds == {"c1/p1": "n1", "c1/p2": "n1"}
    assert r.bind_annotations == {}


def test_fewer_numa_nodes_score_higher() -> None:
    # best-effort: n1 can give 4 CPUs only across both NUMA nodes, n2 within one.
    objs = [
        node("n1"),
        node("n2"),
        numatopo("n1", allocatable="1-3,5-7", policy="best-effort"),
        numatopo("n2", allocatable="0-4", policy="best-effort"),
        QUEUE,
        podgroup("pg1"),
        pod("p1", "pg1", cpu="4", policy="best-effort"),
    ]
    r = schedule(objs)
    assert r.binds == {"c1/p1": "n2"}
    assert r.bind_annotations["c1/p1"] == {NUMA_CPUS_ANNOTATION: "0-3"}


def test_allocations_in_one_session_update_the_node() -> None:
    # Two 4-CPU pods: the first takes NUMA node 0, the second NUMA node 1.
    objs = [
        node("n1"),
        numatopo("n1"),
        QUEUE,
        podgroup("pg1", 2),
        pod("p1", "pg1", cpu="4"),
        pod("p2", "pg1", cpu="4"),
    ]
    r = schedule(objs)
    assert r.binds == {"c1/p1": "n1", "c1/p2": "n1"}
    cpus = sorted(r.bind_annotations[k][NUMA_CPUS_ANNOTATION] for k in ("c1/p1", "c1/p2"))
    assert cpus == ["0-3", "4-7"]


def test_an_unlisted_bound_pod_keeps_its_cpus_until_the_numatopology_lists_it() -> None:
    running = pod("p0", "pg0", cpu="4", node_name="n1", annotations={NUMA_CPUS_ANNOTATION: "0-3"})
    base = [node("n1"), QUEUE, podgroup("pg0"), running, podgroup("pg1"), pod("p1", "pg1", cpu="4")]
    # Unlisted: its CPUs 0-3 stay taken, so p1 gets 4-7.
    r = schedule([*base, numatopo("n1")])
    assert r.bind_annotations["c1/p1"] == {NUMA_CPUS_ANNOTATION: "4-7"}
    # Listed: the exporter has seen it (and its allocatable would already reflect kubelet's choice).
    listed = numatopo("n1", allocations=[{"uid": "uid-p0", "namespace": "c1", "name": "p0"}])
    r = schedule([*base, listed])
    assert r.bind_annotations["c1/p1"] == {NUMA_CPUS_ANNOTATION: "0-3"}


# ------------------------------------------------------------------------------------ manifests
@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"numares": {"cpu": {"allocatable": "0-x"}}}, "spec.numares.cpu.allocatable"),
        ({"numares": {"cpu": {"allocatable": "3-1"}}}, "spec.numares.cpu.allocatable"),
        ({"cpuDetail": {"a": {"numa": 0}}}, "spec.cpuDetail.a"),
        ({"cpuDetail": {"0": {"numa": -1}}}, "spec.cpuDetail.0.numa"),
        ({"resReserved": {"cpu": "lots"}}, "spec.resReserved.cpu"),
        ({"policies": ["static"]}, "spec.policies"),
    ],
)
def test_bad_numatopology_names_file_and_field(patch: dict[str, Any], field: str) -> None:
    obj = numatopo("n1")
    obj["spec"].update(patch)
    with pytest.raises(ManifestError) as err:
        snap([node("n1"), obj])
    msg = str(err.value)
    assert "t.yaml" in msg and field in msg and "\n" not in msg


def test_numatopology_manifest_decodes() -> None:
    obj = numatopo("n1", allocatable="0-2,6")
    obj["spec"]["resReserved"] = {"cpu": "500m"}
    nt = snap([node("n1"), obj]).numatopologies["n1"]
    assert nt.numa_res["cpu"] == (frozenset({0, 1, 2, 6}), 8)
    assert nt.policies == {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"}
    assert nt.reserved_cpu_milli == 500
    assert nt.cpu_detail[5] == CPUInfo(numa=1, socket=1, core=2)
