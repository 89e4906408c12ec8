"""The binpack plugin: weights from arguments, the score formula, and the batch path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session, run, task_of

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.binpack import weights_from

S = TaskStatus
GPU, FOO = "nvidia.com/gpu", "example.com/foo"


def conf(args: dict[str, Any]):
    return mk_conf("allocate", [{"name": "binpack", "arguments": args}])


def test_arguments_volcano_table() -> None:
    weight, per = weights_from(
        {
            "binpack.weight": 10,
            "binpack.cpu": 5,
            "binpack.memory": 2,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": -3,
        }
    )
    assert weight == 10
    assert per == {"cpu": 5, "memory": 2, GPU: 7, FOO: 1}


def test_argument_defaults_and_negative_weights() -> None:
    assert weights_from({}) == (1, {"cpu": 1, "memory": 1})
    assert weights_from({"binpack.cpu": -1, "binpack.memory": -7}) == (1, {"cpu": 1, "memory": 1})
    assert weights_from({"binpack.cpu": 0, "binpack.memory": 3}) == (1, {"cpu": 0, "memory": 3})
    # a non-string resources argument is ignored
    assert weights_from({"binpack.resources": 5})[1] == {"cpu": 1, "memory": 1}


def test_zero_weight_registers_nothing() -> None:
    ssn = open_session(mk_snapshot([mk_node("n1")], []), conf({"binpack.weight": 0}))
    assert not ssn.has(cb.NODE_ORDER)


def volcano_cluster():
    """binpack_test.go TestNode: three nodes, p1 bound on n1, p2 bound on n3, p3/p4 pending."""
    j = mk_job("pg1", "c1", namespace="c1", min_available=0)
    mk_task(j, "p1", "1", "1Gi", status=S.BOUND, node="n1")
    mk_task(j, "p2", "1.5", "0Gi", status=S.BOUND, node="n3")
    mk_task(j, "p3", "2", "10Gi", extra={GPU: "2"})
    mk_task(j, "p4", "3", "4Gi", extra={FOO: "3"})
    nodes = [
        mk_node("n1", "2", "4Gi", pods="10"),
        mk_node("n2", "4", "16Gi", pods="10", extra={GPU: "4"}),
        mk_node("n3", "2", "4Gi", pods="10", extra={FOO: "16"}),
    ]
    return mk_snapshot(nodes, [j])


CASES = [
    (
        {
            "binpack.weight": 10,
            "binpack.cpu": 2,
            "binpack.memory": 3,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": 8,
        },
        {
            "p1": {"n1": 700, "n2": 137.5, "n3": 0},
            "p2": {"n1": 0, "n2": 375, "n3": 0},
            "p3": {"n1": 0, "n2": 531.25, "n3": 0},
            "p4": {"n1": 0, "n2": 173.076923076, "n3": 0},
        },
    ),
    (
        {
            "binpack.weight": 1,
            "binpack.cpu": 1,
            "binpack.memory": 1,
            "binpack.resources": "nvidia.com/gpu",
            "binpack.resources.nvidia.com/gpu": 23,
        },
        {
            "p1": {"n1": 75, "n2": 15.625, "n3": 0},
            "p2": {"n1": 0, "n2": 37.5, "n3": 0},
            "p3": {"n1": 0, "n2": 50.5, "n3": 0},
            "p4": {"n1": 0, "n2": 50, "n3": 0},
        },
    ),
]


@pytest.mark.parametrize(("args", "expected"), CASES)
def test_node_scores_volcano_table(args: dict, expected: dict) -> None:
    ssn = open_session(volcano_cluster(), conf(args))
    fn = ssn.fns[cb.NODE_ORDER]["binpack"]
    rows = np.arange(len(ssn.node_list), dtype=np.int64)
    for tname, per_node in expected.items():
        task = task_of(ssn, "c1/pg1", tname)
        batch = ssn.node_score_batch(task, rows)
        for i, node in enumerate(ssn.node_list):
            assert fn(task, node) == pytest.approx(per_node[node.name], abs=1e-6), (tname, node.name)
            assert batch[i] == pytest.approx(per_node[node.name], abs=1e-6), (tname, node.name, "batch")


def test_score_formula_by_hand() -> None:
    # node 8 cpu / 16Gi with 2 cpu / 4Gi used; task 2 cpu / 4Gi; weights cpu 3, memory 1, weight 2
    other = mk_job("o", phase="Running")
    mk_task(other, "o-0", "2", "4Gi", status=S.RUNNING, node="n1")
    j = mk_job("j")
    mk_task(j, "j-0", "2", "4Gi")
    ssn = open_session(
        mk_snapshot([mk_node("n1", "8", "16Gi")], [other, j]),
        conf({"binpack.weight": 2, "binpack.cpu": 3, "binpack.memory": 1}),
    )
    fn = ssn.fns[cb.NODE_ORDER]["binpack"]
    expected = ((4 / 8) * 3 + (8 / 16) * 1) / 4 * 100 * 2
    assert fn(task_of(ssn, "default/j", "j-0"), ssn.nodes["n1"]) == pytest.approx(expected)


def test_overflow_on_any_weighted_dimension_scores_zero() -> None:
    other = mk_job("o", phase="Running")
    mk_task(other, "o-0", "1", "15Gi", status=S.RUNNING, node="n1")
    j = mk_job("j")
    mk_task(j, "j-0", "1", "2Gi")
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], [other, j]), conf({}))
    task = task_of(ssn, "default/j", "j-0")
    assert ssn.fns[cb.NODE_ORDER]["binpack"](task, ssn.nodes["n1"]) == 0
    assert ssn.node_score_batch(task, np.array([0]))[0] == 0
    # the same overflow on an unweighted dimension does not matter
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], [other, j]), conf({"binpack.memory": 0}))
    assert ssn.fns[cb.NODE_ORDER]["binpack"](task, ssn.nodes["n1"]) == pytest.approx(25.0)


def test_binpack_packs_onto_the_fuller_node() -> None:
    other = mk_job("o", phase="Running")
    mk_task(other, "o-0", "3", "1Gi", status=S.RUNNING, node="n2")
    j = mk_job("j")
    mk_task(j, "j-0", "1", "1Gi")
    res = run(
        mk_snapshot([mk_node("n1"), mk_node("n2"), mk_node("n3")], [other, j]),
        mk_conf("allocate", ["gang"], [{"name": "binpack"}]),
    )
    assert res.binds == {"default/j-0": "n2"}


# --------------------------------------------------------------------------- batch == scalar
node_spec = st.tuples(
    st.integers(0, 16),  # allocatable cpu
    st.integers(0, 32),  # allocatable memory Gi
    st.integers(0, 4),  # allocatable gpu
    st.integers(0, 16),  # used cpu
    st.integers(0, 32),  # used memory Gi
    st.integers(0, 4),  # used gpu
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(node_spec, min_size=1, max_size=6),
    st.tuples(st.integers(0, 8), st.integers(0, 16), st.integers(0, 3)),
    st.tuples(st.integers(-2, 5), st.integers(-2, 5), st.integers(-2, 5), st.integers(1, 5)),
)
def test_batch_scores_equal_scalar_scores(nodes: list, req: tuple, weights: tuple) -> None:
    snap_nodes = []
    others = mk_job("others", phase="Running")
    for i, (ac, am, ag, uc, um, ug) in enumerate(nodes):
        snap_nodes.append(mk_node(f"n{i}", str(ac), f"{am}Gi", extra={GPU: str(ag)}))
        if uc or um or ug:
            mk_task(
                others,
                f"others-{i}",
                str(uc),
                f"{um}Gi",
                status=S.RUNNING,
                node=f"n{i}",
                extra={GPU: str(ug)},
            )
    j = mk_job("j")
    mk_task(j, "j-0", str(req[0]), f"{req[1]}Gi", extra={GPU: str(req[2])})
    wc, wm, wg, w = weights
    args = {
        "binpack.weight": w,
        "binpack.cpu": wc,
        "binpack.memory": wm,
        "binpack.resources": GPU,
        f"binpack.resources.{GPU}": wg,
    }
    ssn = open_session(mk_snapshot(snap_nodes, [others, j]), conf(args))
    task = task_of(ssn, "default/j", "j-0")
    fn = ssn.fns[cb.NODE_ORDER]["binpack"]
    rows = np.arange(len(ssn.node_list), dtype=np.int64)
    batch = ssn.node_score_batch(task, rows)
    scalar = [fn(task, n) for n in ssn.node_list]
    assert batch == pytest.approx(scalar, abs=1e-9)
