"""The usage plugin: Volcano's usage_test.go and estimator_test.go cases (their expected outcomes),
ported; metrics age on the session's clock."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session

from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.fit import Code
from fumarole.daemon.scheduler.model.node_usage import NodeUsage
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus
from fumarole.daemon.scheduler.plugins import usage as up

NOW = 1_700_000_000.0
ARGS = {"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1, "thresholds": {"cpu": 80, "mem": 80}}


def nu(cpu: float, mem: float, at: float | None) -> NodeUsage:
    return NodeUsage(cpu={"10m": cpu}, memory={"10m": mem}, metrics_time=at)


def session(usages: dict[str, NodeUsage], args: dict[str, Any], tasks: int = 1) -> Session:
    nodes = [mk_node(f"n{i}", cpu="4", memory="8Gi", pods="10") for i in range(1, 6)]
    job = mk_job("pg1", namespace="c1")
    for i in range(tasks):
        mk_task(job, f"p{i + 1}", "1", "1Gi")
    snap = mk_snapshot(nodes, [job])
    snap.now = NOW
    snap.node_usage = usages
    return open_session(snap, mk_conf("allocate", [{"name": "usage", "arguments": args}]))


# TestUsage_predicateFn: n4 sampled 6 minutes ago, n5 never: the plugin passes them.
PRED_USAGE = {
    "n1": nu(81, 60, NOW),
    "n2": nu(60, 81, NOW),
    "n3": nu(80, 79, NOW),
    "n4": nu(90, 81, NOW - 360),
}


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        ("n1", up.NODE_USAGE_CPU_EXTEND),
        ("n2", up.NODE_USAGE_MEMORY_EXTEND),
        ("n3", None),
        ("n4", None),
        ("n5", None),
    ],
)
def test_volcano_predicate(node: str, reason: str | None) -> None:
    ssn = session(PRED_USAGE, ARGS, tasks=2)
    pred = ssn.fns["predicate"]["usage"]
    for task in ssn.jobs["c1/pg1"].tasks.values():
        err = pred(task, ssn.nodes[node])
        if reason is None:
            assert err is None
        else:
            assert err is not None
            assert err.statuses == [(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)]


SCORE_USAGE = {
    "n1": nu(30, 50, NOW),
    "n2": nu(60, 50, NOW),
    "n3": nu(60, 80, NOW),
    "n4": nu(10, 20, NOW - 360),
    "n5": nu(0, 0, float("-inf")),
}


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ((5, 1, 1), {"n1": 300, "n2": 225, "n3": 150, "n4": 0, "n5": 0}),
        ((5, 2, 8), {"n1": 270, "n2": 240, "n3": 120, "n4": 0, "n5": 0}),
    ],
)
def test_volcano_node_order(weights: tuple[int, int, int], expected: dict[str, float]) -> None:
    args = dict(ARGS, **{"usage.weight": weights[0], "cpu.weight": weights[1], "memory.weight": weights[2]})
    ssn = session(SCORE_USAGE, args)
    score = ssn.fns["nodeOrder"]["usage"]
    task = ssn.jobs["c1/pg1"].tasks["c1-p1"]
    got = {n: score(task, ssn.nodes[n]) for n in expected}
    assert got == pytest.approx(expected)


def test_allocation_adds_shadow_load_and_deallocation_removes_it() -> None:
    ssn = session({"n1": nu(50, 50, NOW)}, ARGS)
    plugin = ssn.plugins["usage"]
    assert isinstance(plugin, up.UsagePlugin)
    task = ssn.jobs["c1/pg1"].tasks["c1-p1"]
    before = ssn.fns["nodeOrder"]["usage"](task, ssn.nodes["n1"])
    assert before == pytest.approx(250)
    ssn.allocate(task, ssn.nodes["n1"])
    # composite load 0.5 < 0.6: risk 1; 1 cpu x 0.7 = 700m of 4000m; 1Gi x 0.7 of 8Gi
    assert plugin.shadow.of("n1") == pytest.approx((700.0, 0.7 * 2**30))
    after = ssn.fns["nodeOrder"]["usage"](task, ssn.nodes["n1"])
    assert after == pytest.approx(((1 - 0.675) + (1 - (0.5 + 0.7 / 8))) / 2 * 500)
    plugin.shadow.remove(task.uid)
    assert plugin.shadow.of("n1") == (0.0, 0.0)


def test_metrics_time_is_the_event_clock() -> None:
    """Exactly 5 minutes old is still fresh (Volcano: stale when older than MetricsActiveTime)."""
    ssn = session({"n1": nu(90, 10, NOW - 300), "n2": nu(90, 10, NOW - 300.001)}, ARGS)
    pred = ssn.fns["predicate"]["usage"]
    task = ssn.jobs["c1/pg1"].tasks["c1-p1"]
    assert pred(task, ssn.nodes["n1"]) is not None
    assert pred(task, ssn.nodes["n2"]) is None


# TestShouldAddToShadowCache
@pytest.mark.parametrize(
    ("status", "node", "start", "expected"),
    [
        (TaskStatus.PENDING, "", None, False),
        (TaskStatus.PENDING, "node1", None, False),
        (TaskStatus.ALLOCATED, "node1", None, True),
        (TaskStatus.BINDING, "node1", None, True),
        (TaskStatus.BOUND, "node1", None, True),
        (TaskStatus.RUNNING, "node1", NOW - 60, True),
        (TaskStatus.RUNNING, "node1", NOW - 600, False),
        (TaskStatus.SUCCEEDED, "node1", None, False),
    ],
)
def test_volcano_should_add_to_shadow_cache(
    status: TaskStatus, node: str, start: float | None, expected: bool
) -> None:
    plugin = up.UsagePlugin({})
    plugin.now = NOW
    plugin.metrics_interval = 300.0  # Volcano's test passes 5m
    t = mk_task("j", "t", status=status, node=node, pod=PodFacts(start_time=start))
    assert plugin.is_shadow(t) is expected


def test_volcano_estimator_config() -> None:
    d = up.UsagePlugin({})
    assert (d.request_ratio, d.burst_ratio, d.risk_threshold, d.risk_factor) == (0.7, 0.0, 0.6, 1.2)
    assert (d.be_cpu, d.be_memory) == (250, 200 * 2**20)
    c = up.UsagePlugin(
        {
            "estimator": {
                "request_ratio": 0.8,
                "burst_ratio": 0.3,
                "risk_threshold": 0.75,
                "risk_factor": 1.5,
                "be_cpu": "500m",
                "be_mem": "300Mi",
            }
        }
    )
    assert (c.request_ratio, c.burst_ratio, c.risk_threshold, c.risk_factor) == (0.8, 0.3, 0.75, 1.5)
    assert (c.be_cpu, c.be_memory) == (500, 300 * 2**20)
    bad = up.UsagePlugin(
        {
            "estimator": {
                "request_ratio": 1.5,
                "burst_ratio": -0.1,
                "risk_threshold": 2,
                "risk_factor": 0.9,
                "be_cpu": "-1",
                "be_mem": "bad",
            }
        }
    )
    assert (bad.request_ratio, bad.burst_ratio, bad.risk_threshold, bad.risk_factor) == (0.7, 0.0, 0.6, 1.2)
    assert (bad.be_cpu, bad.be_memory) == (250, 200 * 2**20)
    numeric = up.UsagePlugin({"estimator": {"be_cpu": 500, "be_mem": 200}})
    assert (numeric.be_cpu, numeric.be_memory) == (500, 200 * 2**20)


def test_volcano_generic_strings_keep_defaults() -> None:
    p = up.UsagePlugin(
        {
            "usage.weight": "7",
            "cpu.weight": "2",
            "memory.weight": "3",
            "thresholds": {"cpu": "85", "mem": "75"},
            "estimator": {"request_ratio": "0.8", "risk_factor": "1.5"},
        }
    )
    assert (p.usage_weight, p.cpu_weight, p.memory_weight) == (5, 1, 1)
    assert (p.cpu_threshold, p.mem_threshold, p.request_ratio, p.risk_factor) == (80, 80, 0.7, 1.2)


def test_volcano_out_of_range_and_negative_keep_defaults() -> None:
    p = up.UsagePlugin(
        {"usage.weight": -1, "cpu.weight": -1, "memory.weight": -1, "thresholds": {"cpu": -1, "mem": 101}}
    )
    assert (p.usage_weight, p.cpu_weight, p.memory_weight, p.cpu_threshold, p.mem_threshold) == (
        5,
        1,
        1,
        80,
        80,
    )


@pytest.mark.parametrize(
    ("cpu", "mem", "cw", "mw", "expected"),
    [(0.4, 0.6, 1, 1, 0.5), (0.8, 0.2, 3, 1, 0.65), (0.8, 0.2, 0, 0, 0.0)],
)
def test_volcano_load_composite(cpu: float, mem: float, cw: int, mw: int, expected: float) -> None:
    assert up.load_composite(cpu, mem, cw, mw) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("req", "lim", "rw", "bw", "risk", "expected"),
    [
        (500, 2000, 1.0, 0.0, 1.0, 500),
        (500, 2000, 0.0, 0.0, 1.0, 0),
        (500, 2000, 1.0, 1.0, 1.0, 2000),
        (500, 2000, 0.5, 0.2, 1.0, 550),
        (500, 600, 1.0, 0.0, 1.2, 600),
        (500, 0, 1.0, 1.0, 1.2, 500),
    ],
)
def test_volcano_estimate_pod(
    req: float, lim: float, rw: float, bw: float, risk: float, expected: float
) -> None:
    assert up.estimate_pod(req, lim, rw, bw, risk) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("real", "shadow", "cap", "expected"),
    [
        (50, 0, 8000, 0.5),
        (50, 2000, 8000, 0.75),
        (80, 5000, 8000, 1.0),
        (50, 1000, 0, 0.0),
        (0, 0, 0, 0.0),
        (100, 0, 8000, 1.0),
    ],
)
def test_volcano_composite(real: float, shadow: float, cap: float, expected: float) -> None:
    assert up.composite(real, shadow, cap) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("cpu", "mem", "cw", "mw", "uw", "expected"),
    [
        (0, 0, 1, 1, 1, 100),
        (1, 1, 1, 1, 1, 0),
        (0.5, 0.5, 1, 1, 5, 250),
        (0.3, 0.5, 1, 1, 5, 300),
        (0.6, 0.5, 2, 8, 5, 240),
        (0.5, 0.5, 0, 0, 5, 0),
    ],
)
def test_volcano_node_score(cpu: float, mem: float, cw: int, mw: int, uw: int, expected: float) -> None:
    assert up.node_score(cpu, mem, cw, mw, uw) == pytest.approx(expected)


def test_batch_scores_and_predicates_equal_the_per_node_ones() -> None:
    import numpy as np

    usages = dict(SCORE_USAGE, n2=nu(85, 50, NOW), n3=nu(60, 81, NOW))
    ssn = session(usages, ARGS, tasks=2)
    t1, t2 = ssn.jobs["c1/pg1"].tasks["c1-p1"], ssn.jobs["c1/pg1"].tasks["c1-p2"]
    ssn.allocate(t1, ssn.nodes["n1"])  # shadow load on n1
    rows = np.arange(len(ssn.node_list))
    score, batch = ssn.fns["nodeOrder"]["usage"], ssn.batch_fns["nodeOrder"]["usage"]
    assert list(batch(t2, rows)) == [score(t2, n) for n in ssn.node_list]
    pred, pbatch = ssn.fns["predicate"]["usage"], ssn.batch_fns["predicate"]["usage"]
    ok, reasons, unresolvable = pbatch(t2, rows)
    assert list(ok) == [pred(t2, n) is None for n in ssn.node_list]
    assert list(unresolvable) == [not o for o in ok]
    assert [(text, list(mask)) for text, mask in reasons] == [
        (up.NODE_USAGE_CPU_EXTEND, [n.name == "n2" for n in ssn.node_list]),
        (up.NODE_USAGE_MEMORY_EXTEND, [n.name == "n3" for n in ssn.node_list]),
    ]
