"""The node table's rows built for every node at once (session open) equal what `refresh` writes
row by row, over random nodes with random tasks in every node-holding status (hypothesis)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_node, mk_task

from fumarole.daemon.scheduler.framework.nodetable import NodeTable
from fumarole.daemon.scheduler.model.node import NodeError
from fumarole.daemon.scheduler.model.task import TaskStatus

ON_NODE = [
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.RELEASING,
]
EXTRAS: list[dict[str, Any]] = [
    {},
    {"nvidia.com/gpu": "1"},
    {"example.com/fpga": "2"},
    {"nvidia.com/gpu": "0"},
]
node_spec = hst.tuples(
    hst.sampled_from(["0", "3", "16", "1500m"]),
    hst.sampled_from(EXTRAS),
    hst.lists(
        hst.tuples(hst.sampled_from(ON_NODE), hst.sampled_from(["0", "1", "250m"]), hst.sampled_from(EXTRAS)),
        max_size=5,
    ),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hst.lists(node_spec, max_size=6), hst.sets(hst.sampled_from(["nvidia.com/gpu", "x.io/y"]), max_size=2))
def test_rows_at_open_equal_row_by_row_refresh(spec: list[Any], extra_dims: set[str]) -> None:
    nodes = []
    for k, (cpu, extra, tasks) in enumerate(spec):
        node = mk_node(f"n{k}", cpu, "64Gi", extra=extra)
        for i, (status, tcpu, textra) in enumerate(tasks):
            task = mk_task("j", f"n{k}-t{i}", tcpu, "1Gi", status=status, node=node.name, extra=textra)
            with contextlib.suppress(NodeError):  # no room: the node stays as it is
                node.add_task(task)
        nodes.append(node)
    table = NodeTable(nodes, extra_dims)
    at_open = {
        name: getattr(table, name).copy()
        for name in (
            "allocatable",
            "idle",
            "used",
            "releasing",
            "pipelined",
            "future_idle",
            "pod_count",
            "max_pods",
        )
    }
    assert (table.version == 1).all()
    for i, n in enumerate(nodes):
        assert n.index == i and n.on_change == table.refresh
        table.allocatable[i] = table.vector(n.allocatable)
        table.max_pods[i] = n.max_task_num
        table.refresh(n)
    for name, before in at_open.items():
        now = getattr(table, name)
        assert before.dtype == now.dtype and np.array_equal(before, now), name
