"""NodeInfo accounting by task status (api/node_info.go): FutureIdle = Idle + Releasing - Pipelined."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_node, mk_task

from fumarole.daemon.scheduler.model.node import NodeError
from fumarole.daemon.scheduler.model.task import TaskStatus

S = TaskStatus


@pytest.mark.parametrize(
    ("status", "idle", "used", "releasing", "pipelined", "future"),
    [
        (S.RUNNING, 3000, 1000, 0, 0, 3000),
        (S.BOUND, 3000, 1000, 0, 0, 3000),
        (S.ALLOCATED, 3000, 1000, 0, 0, 3000),
        (S.BINDING, 3000, 1000, 0, 0, 3000),
        (S.PENDING, 3000, 1000, 0, 0, 3000),
        (S.RELEASING, 3000, 1000, 1000, 0, 4000),
        (S.PIPELINED, 4000, 0, 0, 1000, 3000),
    ],
)
def test_add_task_accounting(
    status: TaskStatus, idle: int, used: int, releasing: int, pipelined: int, future: int
) -> None:
    n = mk_node("n1", "4", "8Gi")
    t = mk_task("default/j", "j-0", "1", "1Gi", status=status, add=False)
    n.add_task(t)
    assert (n.idle.cpu, n.used.cpu, n.releasing.cpu, n.pipelined.cpu) == (idle, used, releasing, pipelined)
    assert n.future_idle().cpu == future
    assert t.node_name == "n1"
    n.remove_task(t)
    assert (n.idle.cpu, n.used.cpu, n.releasing.cpu, n.pipelined.cpu) == (4000, 0, 0, 0)


def test_update_task_moves_between_statuses() -> None:
    n = mk_node("n1", "4", "8Gi")
    t = mk_task("default/j", "j-0", "1", "1Gi", status=S.RUNNING, add=False)
    n.add_task(t)
    t.status = S.RELEASING
    n.update_task(t)
    assert (n.idle.cpu, n.used.cpu, n.releasing.cpu) == (3000, 1000, 1000)
    assert n.tasks[t.uid].status is S.RELEASING
    # the node keeps a copy: changing the task later does not change the stored status
    t.status = S.RUNNING
    assert n.tasks[t.uid].status is S.RELEASING


def test_add_task_errors() -> None:
    n = mk_node("n1", "1", "1Gi")
    t = mk_task("default/j", "j-0", "1", "1Gi", status=S.RUNNING, add=False)
    n.add_task(t)
    with pytest.raises(NodeError):
        n.add_task(t)  # already on this node
    other = mk_task("default/j", "j-1", "1", "1Gi", status=S.RUNNING, node="n2", add=False)
    with pytest.raises(NodeError):
        n.add_task(other)  # belongs to another node
    binding = mk_task("default/j", "j-2", "1", "1Gi", status=S.BINDING, add=False)
    with pytest.raises(NodeError):
        n.add_task(binding)  # Binding needs idle resources
    with pytest.raises(NodeError):
        n.remove_task(mk_task("default/j", "j-3", add=False))


def test_idle_may_go_negative_and_pods_scalar() -> None:
    n = mk_node("n1", "1", "1Gi", pods="2")
    assert n.max_task_num == 2
    for i in range(3):
        n.add_task(mk_task("default/j", f"j-{i}", "1", "1Gi", status=S.RUNNING, add=False))
    assert n.idle.cpu == -2000
    assert n.idle.scalars["pods"] == -1
    assert n.pod_count() == 3


def test_clone_is_independent() -> None:
    n = mk_node("n1", "4", "8Gi")
    n.add_task(mk_task("default/j", "j-0", "1", "1Gi", status=S.RUNNING, add=False))
    c = n.clone()
    c.add_task(mk_task("default/j", "j-1", "1", "1Gi", status=S.RUNNING, add=False))
    assert n.idle.cpu == 3000 and c.idle.cpu == 2000
    assert len(n.tasks) == 1 and len(c.tasks) == 2
