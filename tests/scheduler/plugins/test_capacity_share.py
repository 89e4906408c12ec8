"""Capacity's share and resource helpers (port of Test_updateQueueAttrShare, plus the comparisons)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import rl, rl_map

from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.plugins.capacity_tree import (
    QueueAttr,
    common_level,
    compare_share_with_deserved,
    greater_partly_relevant,
    intersection,
    intersection_without_pods,
    less_equal_partly_zero_filtered,
    queue_share,
)

E = Resource


# Test_updateQueueAttrShare (capacity_test.go): name, deserved, allocated, wanted share.
SHARE_CASES = [
    ("best-effort queue with allocated resources", E(), rl(cpu="1", memory="1Gi"), 1.0),
    ("best-effort queue with pending requests only (no allocated)", E(), E(), 1.0),
    ("best-effort queue with both allocated and request", E(), rl(cpu="1", memory="1Gi"), 1.0),
    ("best-effort queue completely idle", E(), E(), 1.0),
    ("queue with deserved but no allocated", rl(cpu="2", memory="2Gi"), E(), 0.0),
    ("allocated < deserved (CPU dimension)", rl(cpu="2", memory="2Gi"), rl(cpu="1", memory="1Gi"), 0.5),
    ("allocated = deserved", rl(cpu="2", memory="2Gi"), rl(cpu="2", memory="2Gi"), 1.0),
    ("allocated > deserved (CPU dimension)", rl(cpu="2", memory="2Gi"), rl(cpu="3", memory="2Gi"), 1.5),
    ("memory is dominant resource", rl(cpu="2", memory="4Gi"), rl(cpu="1", memory="3Gi"), 0.75),
    ("CPU is dominant resource", rl(cpu="2", memory="4Gi"), rl(cpu="1.5", memory="2Gi"), 0.75),
    ("allocated exceeds on both dimensions", rl(cpu="2", memory="2Gi"), rl(cpu="3", memory="3Gi"), 1.5),
    (
        "request should not affect share calculation",
        rl(cpu="2", memory="2Gi"),
        rl(cpu="1", memory="1Gi"),
        0.5,
    ),
    ("queue with deserved but zero values", rl(cpu="0", memory="0Gi"), rl(cpu="1", memory="1Gi"), 1.0),
    ("queue with deserved, allocated is zero", rl(cpu="2", memory="2Gi"), rl(cpu="0", memory="0Gi"), 0.0),
    ("best-effort queue with only CPU allocated", E(), rl(cpu="1", memory="0Gi"), 1.0),
    ("best-effort queue with only memory allocated", E(), rl(cpu="0", memory="1Gi"), 1.0),
    ("best-effort queue with only CPU request (no allocated)", E(), E(), 1.0),
]


@pytest.mark.parametrize(
    ("name", "deserved", "allocated", "want"), SHARE_CASES, ids=[c[0] for c in SHARE_CASES]
)
def test_update_queue_attr_share(name: str, deserved: Resource, allocated: Resource, want: float) -> None:
    attr = QueueAttr(name="test-queue", deserved=deserved, allocated=allocated)
    attr.update_share()
    assert attr.share == pytest.approx(want)


def test_share_counts_pods_but_pods_alone_is_best_effort() -> None:
    # deserved {pods: 10} is empty for IsEmpty (pods ignored) -> best-effort share 1
    assert queue_share(rl(pods="10"), rl(pods="9")) == 1.0
    # with cpu as well, pods is one of the deserved dimensions
    assert queue_share(rl(cpu="10", pods="10"), rl(cpu="1", pods="9")) == pytest.approx(0.9)


def test_equal_share_puts_queue_with_deserved_first() -> None:
    a = QueueAttr("a", deserved=rl(cpu="2"), allocated=rl(cpu="2"))
    b = QueueAttr("b")
    a.update_share()
    b.update_share()
    assert a.share == b.share == 1.0
    assert compare_share_with_deserved(a, b) == -1
    assert compare_share_with_deserved(b, a) == 1
    c = QueueAttr("c", deserved=rl(cpu="4"), allocated=rl(cpu="1"))
    c.update_share()
    assert compare_share_with_deserved(c, a) == -1
    assert compare_share_with_deserved(a, a) == 0


def test_intersection_keeps_pods_unless_asked() -> None:
    task = rl(cpu="1", pods="1")
    assert intersection(task, rl(pods="4")) == ["pods"]
    assert intersection_without_pods(task, rl(pods="4")) == []
    assert intersection(task, rl(memory="1Gi")) == []


def test_greater_partly_relevant_ignores_dimensions_the_deserved_lacks() -> None:
    gpu = {"nvidia.com/gpu": "2"}
    # deserved without gpu: a gpu overuse does not count
    assert greater_partly_relevant(rl_map(gpu), E(), rl_map({"nvidia.com/gpu": "1"})) == (False, [])
    # deserved naming gpu (even 0) counts it
    got = greater_partly_relevant(
        rl_map(gpu), rl_map({"nvidia.com/gpu": "0"}), rl_map({"nvidia.com/gpu": "1"})
    )
    assert got == (True, ["nvidia.com/gpu"])
    # cpu deserved 0 is ignored, cpu deserved 0.1m counts
    assert greater_partly_relevant(rl(cpu="4"), rl(cpu="0"), rl(cpu="2")) == (False, [])
    assert greater_partly_relevant(rl(cpu="4"), rl(cpu="1m"), rl(cpu="2")) == (True, ["cpu"])


def test_less_equal_partly_zero_filtered() -> None:
    # only memory is below deserved: partly true on memory
    ok, names = less_equal_partly_zero_filtered(
        rl(cpu="3", memory="1Gi"), rl(cpu="2", memory="2Gi"), rl(cpu="1", memory="1Gi")
    )
    assert ok and names == ["memory"]
    # gpu requested but zero on both sides is filtered out
    future = rl_map({"cpu": "3", "nvidia.com/gpu": "0"})
    deserved = rl(cpu="2")
    req = rl_map({"cpu": "1", "nvidia.com/gpu": "1"})
    # gpu: 0 and 0 -> dropped; cpu 3 > 2 -> no dimension within deserved
    assert less_equal_partly_zero_filtered(future, deserved, req) == (False, [])
    # without filtering, gpu 0 <= 0 would have passed
    assert future.less_equal_partly_with_dimension(deserved, req) == (True, ["nvidia.com/gpu"])


def test_common_level() -> None:
    a = QueueAttr("a", ancestors=["root", "p1", "p11"])
    b = QueueAttr("b", ancestors=["root", "p1", "p12"])
    c = QueueAttr("c", ancestors=["root", "p2"])
    assert common_level(a, b) == 1
    assert common_level(a, c) == 0
    assert common_level(a, a) == 2
