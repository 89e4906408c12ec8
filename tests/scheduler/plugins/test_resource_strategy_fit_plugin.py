"""resource-strategy-fit: argument decoding, Most/LeastAllocated, sra and proportional (Go cases ported)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session, rl_map

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import ConfError
from fumarole.daemon.scheduler.model.fit import Code
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins import resource_strategy_fit as rsf
from fumarole.daemon.scheduler.plugins.resource_strategy_fit import (
    LEAST_ALLOCATED as LEAST,
)
from fumarole.daemon.scheduler.plugins.resource_strategy_fit import (
    MOST_ALLOCATED as MOST,
)
from fumarole.daemon.scheduler.plugins.resource_strategy_fit import (
    BaseResource,
    ResourceStrategy,
    find_strategy,
    least_requested,
    most_requested,
    proportional_arguments,
    proportional_reason,
    sra_arguments,
    strategy_arguments,
    strategy_score,
)

GPU, FOO, T4, A10 = "nvidia.com/gpu", "example.com/foo", "nvidia.com/t4", "nvidia.com/a10"
EPS = 1e-6


def strategies(**kw: tuple[str, int]) -> dict[str, ResourceStrategy]:
    return {k.replace("_", "/"): ResourceStrategy(t, w) for k, (t, w) in kw.items()}


# ------------------------------------------------------------------------------- Test_calculateWeight
@pytest.mark.parametrize(
    ("args", "weight", "resources"),
    [
        (  # test1
            {
                "resourceStrategyFitWeight": 10,
                "resources": {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}},
            },
            10,
            {"cpu": ResourceStrategy(MOST, 1), "memory": ResourceStrategy(LEAST, 2)},
        ),
        (  # test2: weight defaults to 10
            {"resources": {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}}},
            10,
            {"cpu": ResourceStrategy(MOST, 1), "memory": ResourceStrategy(LEAST, 2)},
        ),
        (  # test3: resources default to cpu and memory LeastAllocated 1
            {"resourceStrategyFitWeight": 10},
            10,
            {"cpu": ResourceStrategy(LEAST, 1), "memory": ResourceStrategy(LEAST, 1)},
        ),
        (  # test4: '*' alone is ignored; the misspelt weight key leaves the default
            {
                "ResourceStrategyFitPlusWeight": 10,
                "resources": {"cpu": {"type": LEAST, "weight": 1}, "*": {"type": MOST, "weight": 2}},
            },
            10,
            {"cpu": ResourceStrategy(LEAST, 1)},
        ),
        (  # test5: '**' is not a valid pattern
            {
                "resources": {
                    "nvidia.com/gpu/*": {"type": MOST, "weight": 3},
                    "cloudml.gpu**": {"type": LEAST, "weight": 2},
                }
            },
            10,
            {"nvidia.com/gpu/*": ResourceStrategy(MOST, 3)},
        ),
        (  # test6: a '*' that is not trailing is not valid
            {
                "resources": {
                    "memory": {"type": LEAST, "weight": 1},
                    "cloudml.*.gpu": {"type": MOST, "weight": 2},
                    "*.com/gpu": {"type": MOST, "weight": 3},
                }
            },
            10,
            {"memory": ResourceStrategy(LEAST, 1)},
        ),
        (  # test7
            {
                "resources": {
                    "nvidia.com/gpu/*": {"type": MOST, "weight": 3},
                    "example.com/foo/*": {"type": LEAST, "weight": 2},
                    "*test*resource*": {"type": MOST, "weight": 4},
                    "*": {"type": LEAST, "weight": 1},
                }
            },
            10,
            {"nvidia.com/gpu/*": ResourceStrategy(MOST, 3), "example.com/foo/*": ResourceStrategy(LEAST, 2)},
        ),
    ],
)
def test_calculate_weight_volcano_cases(args: dict[str, Any], weight: int, resources: Any) -> None:
    assert strategy_arguments(args) == (weight, resources)


def test_weight_negative_means_default_zero_is_kept_and_bad_entries_are_repaired() -> None:
    assert strategy_arguments({"resourceStrategyFitWeight": -3})[0] == 10
    assert strategy_arguments({"resourceStrategyFitWeight": 0})[0] == 0
    assert strategy_arguments({"resourceStrategyFitWeight": 7.9})[0] == 7  # mapstructure truncates
    _, res = strategy_arguments({"resources": {"cpu": {"type": "RequestedToCapacityRatio", "weight": -2}}})
    assert res == {"cpu": ResourceStrategy(LEAST, 1)}


@pytest.mark.parametrize(
    "args",
    [
        {"resourceStrategyFitWeight": "10"},
        {"resources": {"cpu": {"type": MOST, "weight": "2"}}},
        {"resources": ["cpu"]},
        {"sra": {"enable": "yes"}},
        {"proportional": {"enable": True, "resourceProportion": {"nvidia.com/gpu.cpu": "4"}}},
    ],
)
def test_undecodable_arguments_are_configuration_errors(args: dict[str, Any]) -> None:
    # Volcano's framework.Get exits (klog.Fatal) on these.
    with pytest.raises(ConfError, match="resource-strategy-fit"):
        rsf.new(args)


# ------------------------------------------------------------------------------- TestScore
def task(cpu: float, mem: float, annotations: dict[str, str] | None = None) -> TaskInfo:
    return TaskInfo(
        uid="t",
        name="t",
        namespace="ns",
        job="ns/j",
        resreq=Resource(cpu, mem),
        status=TaskStatus.PENDING,
        pod=PodFacts(annotations=annotations or {}),
    )


def node(used_cpu: float, used_mem: float, alloc_cpu: float, alloc_mem: float) -> NodeInfo:
    n = NodeInfo("n", Resource(alloc_cpu, alloc_mem))
    n.used = Resource(used_cpu, used_mem)
    return n


def least(w: int, c: int, m: int) -> dict[str, ResourceStrategy]:
    return {"cpu": ResourceStrategy(LEAST, c), "memory": ResourceStrategy(LEAST, m)}


def most(w: int, c: int, m: int) -> dict[str, ResourceStrategy]:
    return {"cpu": ResourceStrategy(MOST, c), "memory": ResourceStrategy(MOST, m)}


def mixed(ct: str, c: int, mt: str, m: int) -> dict[str, ResourceStrategy]:
    return {"cpu": ResourceStrategy(ct, c), "memory": ResourceStrategy(mt, m)}


@pytest.mark.parametrize(
    ("t", "n", "weight", "resources", "want"),
    [
        (task(100, 100), node(200, 200, 500, 500), 10, least(10, 1, 1), 400),
        (task(100, 100), node(200, 200, 400, 400), 10, least(10, 1, 1), 250),
        (task(100, 100), node(200, 200, 500, 500), 10, most(10, 1, 1), 600),
        (task(100, 100), node(200, 200, 400, 400), 10, most(10, 1, 1), 750),
        (task(100, 100), node(200, 200, 500, 500), 10, mixed(LEAST, 2, MOST, 1), 466.66666667),
        (task(100, 100), node(200, 200, 500, 500), 10, mixed(LEAST, 1, MOST, 2), 533.33333333),
        (task(0, 100), node(200, 200, 500, 500), 10, mixed(LEAST, 1, MOST, 2), 600),
        (task(100, 100), node(200, 200, 0, 400), 10, mixed(LEAST, 1, MOST, 2), 500),
        (task(100, 100), node(200, 200, 500, 500), 10, {"memory": ResourceStrategy(MOST, 2)}, 600),
        (
            task(
                100,
                100,
                {
                    rsf.SCORING_TYPE_ANNOTATION: LEAST,
                    rsf.SCORING_WEIGHT_ANNOTATION: '{"cpu": 2, "memory": 1}',
                },
            ),
            node(200, 200, 500, 500),
            10,
            least(10, 1, 1),
            400,
        ),
        (
            task(
                100,
                100,
                {rsf.SCORING_TYPE_ANNOTATION: MOST, rsf.SCORING_WEIGHT_ANNOTATION: '{"cpu": 1, "memory": 2}'},
            ),
            node(200, 200, 500, 500),
            10,
            least(10, 1, 1),
            600,
        ),
        (
            task(
                100, 100, {rsf.SCORING_TYPE_ANNOTATION: LEAST, rsf.SCORING_WEIGHT_ANNOTATION: "invalid-json"}
            ),
            node(200, 200, 500, 500),
            10,
            least(10, 1, 1),
            0,
        ),
        (
            task(100, 100, {rsf.SCORING_TYPE_ANNOTATION: LEAST, rsf.SCORING_WEIGHT_ANNOTATION: '{"cpu": 2}'}),
            node(200, 200, 500, 500),
            10,
            least(10, 1, 1),
            400,
        ),
        (task(0, 0), node(200, 200, 500, 500), 10, least(10, 1, 1), 0),
        (task(100, 100), node(500, 500, 500, 500), 10, least(10, 1, 1), 0),
        (task(100, 100), node(200, 200, 500, 500), 10, mixed(LEAST, 3, MOST, 1), 450),
        (task(100, 100), node(200, 200, 500, 500), 20, least(20, 5, 5), 800),
    ],
)
def test_score_volcano_cases(
    t: TaskInfo, n: NodeInfo, weight: int, resources: dict[str, ResourceStrategy], want: float
) -> None:
    assert strategy_score(t, n, weight, resources) == pytest.approx(want, abs=EPS)


def test_pod_level_type_without_weights_scores_zero() -> None:
    t = task(100, 100, {rsf.SCORING_TYPE_ANNOTATION: MOST})
    assert strategy_score(t, node(200, 200, 500, 500), 10, least(10, 1, 1)) == 0
    t = task(100, 100, {rsf.SCORING_TYPE_ANNOTATION: MOST, rsf.SCORING_WEIGHT_ANNOTATION: '{"cpu": 1.5}'})
    assert strategy_score(t, node(200, 200, 500, 500), 10, least(10, 1, 1)) == 0


def test_requested_scores() -> None:
    assert most_requested(0, 0, 0, 0) == 0
    assert most_requested(1, 2, 2, 1) is None
    assert least_requested(0, 0, 0, 0) == 0
    assert least_requested(1, 2, 2, 1) is None
    assert most_requested(1, 1, 4, 2) == pytest.approx(1.0)
    assert least_requested(1, 1, 4, 2) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("name", "resources", "want"),
    [
        (
            "nvidia.com/gpu",
            {"nvidia.com/gpu": ResourceStrategy(MOST, 3), "nvidia.com/*": ResourceStrategy(LEAST, 1)},
            ResourceStrategy(MOST, 3),
        ),
        (
            "nvidia.com/gpu/v100",
            {"nvidia.com/gpu/*": ResourceStrategy(MOST, 2), "nvidia.com/*": ResourceStrategy(LEAST, 1)},
            ResourceStrategy(MOST, 2),
        ),
        ("example.com/foo", {"nvidia.com/gpu/*": ResourceStrategy(MOST, 2)}, None),
        ("any.resource", {}, None),
        (
            "cloudml.gpu/tensorflow/v2",
            {
                "cloudml.gpu/tensorflow/*": ResourceStrategy(MOST, 3),
                "cloudml.gpu/*": ResourceStrategy(LEAST, 2),
                "cloudml/*": ResourceStrategy(MOST, 1),
            },
            ResourceStrategy(MOST, 3),
        ),
    ],
)
def test_find_resource_config_with_prefix(
    name: str, resources: dict[str, ResourceStrategy], want: ResourceStrategy | None
) -> None:
    assert find_strategy(name, resources) == want


# ------------------------------------------------------------------------------- plugin in a session
def scores(
    nodes: list[Any], pods: list[tuple[str, dict[str, str]]], args: dict[str, Any]
) -> dict[str, dict[str, float]]:
    job = mk_job("pg1", "c1", namespace="c1", min_available=0)
    for name, req in pods:
        mk_task(job, name, resreq=rl_map({**req, "pods": "1"}))
    ssn = open_session(
        mk_snapshot(nodes, [job]), mk_conf("allocate", [{"name": "resource-strategy-fit", "arguments": args}])
    )
    plugin = ssn.plugins["resource-strategy-fit"]
    out: dict[str, dict[str, float]] = {}
    for t in ssn.jobs[job.uid].tasks.values():
        out[t.name] = {n.name: plugin.node_order(t, n) for n in ssn.node_list}
    return out


def test_resource_strategy_fit_plugin_case1_scalar_strategies() -> None:
    """TestResourceStrategyFitPlugin case 1."""
    nodes = [
        mk_node("n1", "4", "4Gi", "10", {GPU: "10"}),
        mk_node("n2", "4", "4Gi", "10", {GPU: "5"}),
        mk_node("n3", "4", "4Gi", "10", {FOO: "10"}),
        mk_node("n4", "4", "4Gi", "10", {FOO: "5"}),
    ]
    pods = [
        ("p1", {"cpu": "1", "memory": "1Gi", FOO: "2"}),
        ("p2", {"cpu": "1", "memory": "1Gi", FOO: "3"}),
        ("p3", {"cpu": "1", "memory": "10Gi", GPU: "2"}),
        ("p4", {"cpu": "1", "memory": "1Gi", GPU: "3"}),
    ]
    args = {
        "resourceStrategyFitWeight": 10,
        "resources": {GPU: {"type": MOST, "weight": 1}, FOO: {"type": LEAST, "weight": 1}},
    }
    want = {
        "p1": {"n1": 0, "n2": 0, "n3": 800, "n4": 600},
        "p2": {"n1": 0, "n2": 0, "n3": 700, "n4": 400},
        "p3": {"n1": 200, "n2": 400, "n3": 0, "n4": 0},
        "p4": {"n1": 300, "n2": 600, "n3": 0, "n4": 0},
    }
    got = scores(nodes, pods, args)
    for p, per in want.items():
        assert got[p] == pytest.approx(per, abs=EPS), p


def test_resource_strategy_fit_plugin_case2_missing_capacity_still_weighs() -> None:
    """TestResourceStrategyFitPlugin case 2: a dimension the node lacks scores 0 but keeps its weight."""
    nodes = [
        mk_node("n5", "4", "4Gi", "10", {GPU: "10", FOO: "5"}),
        mk_node("n6", "4", "4Gi", "10", {FOO: "10"}),
    ]
    args = {
        "resourceStrategyFitWeight": 10,
        "resources": {GPU: {"type": MOST, "weight": 1}, FOO: {"type": LEAST, "weight": 2}},
    }
    got = scores(nodes, [("p5", {"cpu": "1", "memory": "1Gi", GPU: "4", FOO: "4"})], args)
    assert got["p5"] == pytest.approx({"n5": 266.66666666, "n6": 399.99999999}, abs=1e-6)


SRA_NODES = [
    ("n1", "32", "64Gi", {}),
    ("n2", "8", "16Gi", {T4: "16"}),
    ("n3", "8", "16Gi", {A10: "16"}),
    ("n4", "8", "16Gi", {T4: "8", A10: "16"}),
]
SRA_PODS = [
    ("p1", {"cpu": "1", "memory": "1Gi"}),
    ("p2", {"cpu": "1.5", T4: "2"}),
    ("p3", {"cpu": "2", "memory": "4Gi", A10: "2"}),
    ("p4", {"cpu": "3", "memory": "4Gi", T4: "1", A10: "3"}),
]


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (  # case1: sra only, two scarce resources
            {
                "resourceStrategyFitWeight": 0,
                "sra": {
                    "enable": True,
                    "resources": "nvidia.com/t4, nvidia.com/a10",
                    "weight": 5,
                    "resourceWeight": {T4: 2, A10: 3},
                },
            },
            {
                "p1": {"n1": 500, "n2": 300, "n3": 200, "n4": 0},
                "p2": {"n1": 0, "n2": 300, "n3": 0, "n4": 0},
                "p3": {"n1": 0, "n2": 0, "n3": 200, "n4": 0},
                "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
            },
        ),
        (  # case2: sra only, one scarce resource
            {
                "resourceStrategyFitWeight": 0,
                "sra": {"enable": True, "resources": "nvidia.com/t4", "weight": 5, "resourceWeight": {T4: 2}},
            },
            {
                "p1": {"n1": 500, "n2": 0, "n3": 500, "n4": 0},
                "p2": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
                "p3": {"n1": 0, "n2": 0, "n3": 500, "n4": 0},
                "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
            },
        ),
        (  # case3: strategies with sra weight 0
            {
                "resourceStrategyFitWeight": 8,
                "resources": {T4: {"type": MOST, "weight": 3}, "cpu": {"type": LEAST, "weight": 1}},
                "sra": {"enable": True, "resources": "nvidia.com/t4", "weight": 0, "resourceWeight": {T4: 2}},
            },
            {
                "p1": {"n1": 775, "n2": 700, "n3": 700, "n4": 700},
                "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
                "p3": {"n1": 750, "n2": 600, "n3": 600, "n4": 600},
                "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200},
            },
        ),
        (  # case4: strategies plus sra
            {
                "resourceStrategyFitWeight": 8,
                "resources": {T4: {"type": MOST, "weight": 3}, "cpu": {"type": LEAST, "weight": 1}},
                "sra": {"enable": True, "resources": "nvidia.com/t4", "weight": 5, "resourceWeight": {T4: 2}},
            },
            {
                "p1": {"n1": 1275, "n2": 700, "n3": 1200, "n4": 700},
                "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
                "p3": {"n1": 750, "n2": 600, "n3": 1100, "n4": 600},
                "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200},
            },
        ),
    ],
)
def test_sra_node_scores_volcano_cases(args: dict[str, Any], want: dict[str, dict[str, float]]) -> None:
    """sra_test.go TestNode cases 1-4."""
    nodes = [mk_node(n, c, m, "10", extra) for n, c, m, extra in SRA_NODES]
    got = scores(nodes, SRA_PODS, args)
    for p, per in want.items():
        assert got[p] == pytest.approx(per, abs=EPS), p


def test_sra_and_proportional_arguments() -> None:
    """sra_test.go TestArguments."""
    args = {
        "sra": {
            "enable": True,
            "resources": "nvidia.com/t4, nvidia.com/a10",
            "weight": 3,
            "resourceWeight": {T4: 1, A10: 2},
        },
        "proportional": {
            "enable": True,
            "resources": "nvidia.com/t4, nvidia.com/a10",
            "resourceProportion": {f"{T4}.cpu": 3, f"{T4}.memory": 6, f"{A10}.cpu": 4, f"{A10}.memory": 8},
        },
    }
    sra = sra_arguments(args)
    assert (sra.weight, sra.weight_sum, sra.resources) == (3, 3, {T4: 1, A10: 2})
    assert proportional_arguments(args) == {A10: BaseResource(4, 8), T4: BaseResource(3, 6)}
    # Missing or negative rates are 1; disabled sections are off; resource weight 0 is kept.
    assert proportional_arguments(
        {"proportional": {"enable": True, "resources": "x/y", "resourceProportion": {"x/y.cpu": -1}}}
    ) == {"x/y": BaseResource(1.0, 1.0)}
    assert proportional_arguments({"proportional": {"enable": False, "resources": "x/y"}}) is None
    assert sra_arguments(
        {"sra": {"enable": True, "resources": "a/b", "resourceWeight": {"a/b": 0}}}
    ).resources == {"a/b": 0}


# ------------------------------------------------------------------------------- proportional
def gpu_task(cpu: str, mem: str, gpu: str) -> TaskInfo:
    return TaskInfo(
        uid="t",
        name="t",
        namespace="ns",
        job="ns/j",
        resreq=rl_map({"cpu": cpu, "memory": mem, GPU: gpu}),
        status=TaskStatus.PENDING,
    )


def gpu_node(cpu: str, mem: str, gpu: str) -> NodeInfo:
    return NodeInfo("n", rl_map({"cpu": cpu, "memory": mem, GPU: gpu}))


@pytest.mark.parametrize(
    ("t", "n", "fails"),
    [
        (gpu_task("4", "4G", "0"), gpu_node("30", "30G", "6"), False),
        (gpu_task("10", "10G", "0"), gpu_node("30", "30G", "6"), True),
        (gpu_task("10", "10G", "1"), gpu_node("30", "30G", "6"), False),
        (gpu_task("10", "10G", "0"), gpu_node("26", "26G", "2"), False),
    ],
)
def test_check_node_resource_is_proportional(t: TaskInfo, n: NodeInfo, fails: bool) -> None:
    """proportional_test.go Test_checkNodeResourceIsProportional."""
    reason = proportional_reason(t, n, {GPU: BaseResource(4, 4)})
    assert (reason is not None) == fails
    if fails:
        assert reason == "proportional of resource nvidia.com/gpu check failed"


def test_proportional_predicate_is_unresolvable_and_registered_only_when_enabled() -> None:
    nodes = [mk_node("n1", "30", "30G", "110", {GPU: "6"})]
    job = mk_job("pg1", "c1", namespace="c1", min_available=0)
    mk_task(job, "p1", "10", "10G")
    snap = mk_snapshot(nodes, [job])
    args = {
        "proportional": {
            "enable": True,
            "resources": GPU,
            "resourceProportion": {f"{GPU}.cpu": 4, f"{GPU}.memory": 4},
        }
    }
    ssn = open_session(snap, mk_conf("allocate", [{"name": "resource-strategy-fit", "arguments": args}]))
    err = ssn.predicate_fn(ssn.jobs[job.uid].tasks["c1-p1"], ssn.nodes["n1"])
    assert err is not None and err.codes() == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    ssn2 = open_session(
        mk_snapshot([mk_node("n1")], []), mk_conf("allocate", [{"name": "resource-strategy-fit"}])
    )
    assert not ssn2.has(cb.PREDICATE)
    assert ssn2.has(cb.NODE_ORDER)
    ssn3 = open_session(
        mk_snapshot([mk_node("n1")], []),
        mk_conf(
            "allocate", [{"name": "resource-strategy-fit", "arguments": {"resourceStrategyFitWeight": 0}}]
        ),
    )
    assert not ssn3.has(cb.NODE_ORDER)
