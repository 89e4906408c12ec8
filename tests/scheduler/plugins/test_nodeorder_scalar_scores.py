"""nodeorder's plain-Python scores of a few stale rows equal the array path's, integer for integer."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session, task_of

from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins import nodeorder as no

node_spec = st.tuples(
    st.integers(1, 96_000),  # allocatable milli-cpu
    st.integers(1, 1024),  # allocatable memory Mi
    st.integers(0, 120_000),  # used milli-cpu (may exceed allocatable)
    st.integers(0, 1200),  # used memory Mi
)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(node_spec, min_size=1, max_size=5),
    st.tuples(st.integers(0, 40_000), st.integers(0, 600)),
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
)
def test_scalar_local_scores_equal_array_scores(nodes: list, req: tuple, weights: tuple) -> None:
    snap_nodes = []
    others = mk_job("others", phase="Running")
    for i, (ac, am, uc, um) in enumerate(nodes):
        snap_nodes.append(mk_node(f"n{i}", f"{ac}m", f"{am}Mi"))
        if uc or um:
            mk_task(others, f"others-{i}", f"{uc}m", f"{um}Mi", status=TaskStatus.RUNNING, node=f"n{i}")
    j = mk_job("j")
    mk_task(j, "j-0", f"{req[0]}m" if req[0] else None, f"{req[1]}Mi" if req[1] else None)
    least, most, balanced = weights
    args = {
        "leastrequested.weight": least,
        "mostrequested.weight": most,
        "balancedresource.weight": balanced,
    }
    ssn = open_session(
        mk_snapshot(snap_nodes, [others, j]), mk_conf("allocate", [{"name": "nodeorder", "arguments": args}])
    )
    plugin = ssn.plugins["nodeorder"]
    assert isinstance(plugin, no.NodeOrderPlugin)
    req_facts = plugin.requests_of(task_of(ssn, "default/j", "j-0"))
    rows = np.arange(len(ssn.node_list), dtype=np.int64)
    scalar = plugin.scalar_local_scores(req_facts, rows)
    assert scalar is not None
    saved = no.SCALAR_ROWS
    no.SCALAR_ROWS = -1  # the array path
    try:
        arrays = plugin.compute_local_scores(req_facts, rows)
    finally:
        no.SCALAR_ROWS = saved
    assert scalar.dtype == arrays.dtype
    assert scalar.tolist() == arrays.tolist()


def test_figures_past_two_to_the_53_take_the_array_path() -> None:
    big = mk_node("big", "4", f"{2**44}Ki")  # 2**54 bytes of memory
    j = mk_job("j")
    mk_task(j, "j-0", "1", "1Gi")
    ssn = open_session(mk_snapshot([big], [j]), mk_conf("allocate", [{"name": "nodeorder"}]))
    plugin = ssn.plugins["nodeorder"]
    req_facts = plugin.requests_of(task_of(ssn, "default/j", "j-0"))
    rows = np.arange(1, dtype=np.int64)
    assert plugin.scalar_local_scores(req_facts, rows) is None
    assert plugin.compute_local_scores(req_facts, rows).dtype == np.int64


@pytest.mark.parametrize("cpu,mem,ac,am", [(0, 0, 1, 1), (5, 7, 3, 11), (10**9, 3, 10**9, 10**12)])
def test_balance_equals_two_resource_balance(cpu: int, mem: int, ac: int, am: int) -> None:
    arr = no.two_resource_balance(np.array([cpu]), np.array([mem]), np.array([ac]), np.array([am]))
    assert no._balance(cpu, mem, ac, am) == int(arr[0])
