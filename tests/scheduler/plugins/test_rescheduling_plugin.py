"""The rescheduling plugin: lowNodeUtilization victims for shuffle, Volcano's argument parsing and
quirks (the metricsPeriod key, the name-only task match), the interval gate on the event clock.

Volcano has no unit tests for this plugin; the expected outcomes below are worked by hand from
low_node_utilization.go and node_utilization_util.go (comments give the arithmetic)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, run

from fumarole.daemon.scheduler.model.node_usage import NodeUsage
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins import rescheduling as rs

NOW = 3_000.0
LNU = {
    "name": "lowNodeUtilization",
    "params": {"thresholds": {"cpu": 20, "memory": 20}, "targetThresholds": {"cpu": 50, "memory": 50}},
}
ARGS: dict[str, Any] = {"interval": "0s", "metricsPeriod": "10m", "strategies": [LNU]}


def nu(cpu: float, mem: float) -> NodeUsage:
    return NodeUsage(cpu={"10m": cpu}, memory={"10m": mem}, metrics_time=NOW)


def evicted(
    args: dict[str, Any], usages: dict[str, NodeUsage], *, previous: float | None = NOW - 1
) -> list[str]:
    nodes = [mk_node("n1", cpu="4", memory="8Gi"), mk_node("n2", cpu="4", memory="8Gi")]
    job = mk_job("j", namespace="c1")
    for name, prio in (("a", 5), ("b", 1), ("c", 3), ("d", 9)):
        mk_task(job, name, "1", "1Gi", status=TaskStatus.RUNNING, node="n1", priority=prio)
    snap = mk_snapshot(nodes, [job])
    snap.now = NOW
    snap.previous_now = previous
    snap.node_usage = usages
    conf = mk_conf("shuffle", [{"name": "rescheduling", "arguments": args}])
    return [e.task for e in run(snap, conf).evictions]


def test_low_node_utilization_evicts_by_priority_while_the_node_is_over_target() -> None:
    # Budget on n2: cpu 4000m x (50 - 10)% = 1600m, memory 8Gi x 40%.  n1 at cpu 90%, mem 85%:
    # b (prio 1): cpu 65, mem 72.5; c (3): cpu 40, mem 60 (mem >= 50 goes on); a (5): cpu 15,
    # mem 47.5: below every target, d (9) stays.  The budget went negative: that does not stop it.
    got = evicted(ARGS, {"n1": nu(90, 85), "n2": nu(10, 10)})
    assert sorted(got) == ["c1/a", "c1/b", "c1/c"]


def test_default_metrics_period_reads_no_usage() -> None:
    """Volcano's cache fills only the "10m" key; the default metricsPeriod "5m" reads 0% everywhere."""
    args = {k: v for k, v in ARGS.items() if k != "metricsPeriod"}
    assert evicted(args, {"n1": nu(90, 85), "n2": nu(10, 10)}) == []


def test_no_low_node_or_no_high_node_evicts_nothing() -> None:
    assert evicted(ARGS, {"n1": nu(90, 85), "n2": nu(30, 30)}) == []  # n2 not low
    assert evicted(ARGS, {"n1": nu(40, 40), "n2": nu(10, 10)}) == []  # n1 not high


def test_default_thresholds_evict_nothing() -> None:
    """Default thresholds are 100%: every node below 100% is low, so all nodes are low."""
    assert evicted({"interval": "0s", "metricsPeriod": "10m"}, {"n1": nu(99, 99), "n2": nu(10, 10)}) == []


def test_interval_gate_on_the_event_clock() -> None:
    usages = {"n1": nu(90, 85), "n2": nu(10, 10)}
    args = dict(ARGS, interval="7m")  # windows of 420 s: now 3000 is in [2940, 3360)
    assert evicted(args, usages, previous=None) == []  # the first session never runs
    assert evicted(args, usages, previous=2_950.0) == []  # same window
    assert len(evicted(args, usages, previous=2_939.0)) == 3  # the window before


@pytest.mark.parametrize(
    ("interval", "now", "previous", "expected"),
    [
        (0.0, 10.0, None, True),
        (-1.0, 10.0, 9.0, True),
        (300.0, 10.0, None, False),
        (300.0, 599.0, 301.0, False),
        (300.0, 600.0, 599.0, True),
    ],
)
def test_time_to_run(interval: float, now: float, previous: float | None, expected: bool) -> None:
    assert rs.time_to_run(interval, now, previous) is expected


def test_argument_parsing_as_volcano() -> None:
    w: list[str] = []
    c = rs.parse_arguments({}, w)
    assert (c.interval_s, c.metrics_period, [s.name for s in c.strategies]) == (
        300,
        "5m",
        ["lowNodeUtilization"],
    )
    c = rs.parse_arguments({"interval": "bad", "metricsPeriod": "", "strategies": "x"}, w)
    assert (c.interval_s, c.metrics_period, len(c.strategies)) == (300, "5m", 1)
    assert w == []
    c = rs.parse_arguments({"interval": 5}, w)
    assert c.interval_s == 300 and "interval" in w[-1]
    # thresholds: only cpu, memory and "pod" (sic) are read; a non-mapping stops the parse.
    lnu = rs.parse_lnu({"thresholds": {"cpu": 10, "pods": 5}, "targetThresholds": {"memory": 70}}, w)
    assert lnu.thresholds == {"cpu": 10, "memory": 100, "pods": 100}
    assert lnu.target_thresholds == {"cpu": 100, "memory": 70, "pods": 100}
    lnu = rs.parse_lnu({"thresholds": "x", "targetThresholds": {"memory": 70}}, w)
    assert lnu.target_thresholds["memory"] == 100
    lnu = rs.parse_lnu({"thresholds": {"cpu": 1.5}}, w)
    assert lnu.thresholds["cpu"] == 100 and "Volcano would crash" in w[-1]
