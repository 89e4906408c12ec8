"""The shuffle action: Running tasks offered to VictimTasks, victims evicted at once.

`test_select_pods_with_low_priority_and_evict_them` ports Volcano's shuffle_test.go TestShuffle
case "select pods with low priority and evict them": the Go test injects, through a gomock
plugin with `enabledVictim`, a VictimTasks function that picks priority-10 tasks; here the same
function is registered on the session under a fake plugin name.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    mk_conf,
    mk_job,
    mk_node,
    mk_snapshot,
    mk_task,
    open_session,
    run_actions,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

S = TaskStatus
LOW, HIGH = 10, 100


def go_shuffle_snapshot() -> ClusterSnapshot:
    nodes = [mk_node("node1", "4", "8Gi", pods="10"), mk_node("node2", "4", "8Gi", pods="10")]
    jobs = []
    layout = {
        "pg1": [("pod1-1", "node1", LOW), ("pod1-2", "node1", HIGH), ("pod1-3", "node1", HIGH)],
        "pg2": [("pod2-1", "node1", LOW), ("pod2-2", "node2", HIGH)],
        "pg3": [("pod3-1", "node2", LOW), ("pod3-2", "node2", HIGH)],
    }
    for pg, pods in layout.items():
        job = mk_job(pg, "default", min_available=0, phase="Running", namespace="test")
        for name, node, prio in pods:
            mk_task(job, name, "1", "2G", status=S.RUNNING, node=node, priority=prio)
        jobs.append(job)
    return mk_snapshot(nodes, jobs)


def session_with_fake_victims(snap: ClusterSnapshot, enabled: bool = True) -> tuple[Session, list[int]]:
    conf = mk_conf("shuffle", [{"name": "fake", "enabledVictim": enabled}])
    ssn = open_session(snap, conf)
    offered: list[int] = []

    def low_priority(candidates: list[TaskInfo]) -> list[TaskInfo]:
        offered.append(len(candidates))
        return [t for t in candidates if t.priority == LOW]

    ssn.register(cb.VICTIM_TASKS, "fake", low_priority)
    ssn.compile_chains()
    return ssn, offered


def test_select_pods_with_low_priority_and_evict_them() -> None:
    ssn, offered = session_with_fake_victims(go_shuffle_snapshot())
    run_actions(ssn, "shuffle")
    assert offered == [7]  # every Running task is a candidate
    assert [e.task for e in ssn.evictions] == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]
    assert {e.action for e in ssn.evictions} == {"shuffle"}
    assert all(e.reason == "victim chosen by fake" for e in ssn.evictions)
    assert task_of(ssn, "test/pg1", "pod1-1").status is S.RELEASING
    assert task_of(ssn, "test/pg1", "pod1-2").status is S.RUNNING
    # The node accounts the victims as releasing: node1 had pod1-1 and pod2-1 evicted.
    assert ssn.nodes["node1"].releasing.cpu == 2000
    assert ssn.nodes["node2"].releasing.cpu == 1000


def test_victim_plugin_without_enabled_victim_flag_is_not_asked() -> None:
    ssn, offered = session_with_fake_victims(go_shuffle_snapshot(), enabled=False)
    run_actions(ssn, "shuffle")
    assert offered == []
    assert ssn.evictions == []


def test_without_victim_plugins_shuffle_evicts_nothing() -> None:
    snap = go_shuffle_snapshot()
    ssn = open_session(snap, mk_conf("shuffle", ["priority", "gang"], ["proportion"]))
    run_actions(ssn, "shuffle")
    assert ssn.evictions == []
    assert all(t.status is S.RUNNING for j in ssn.jobs.values() for t in j.tasks.values())


def test_only_running_tasks_are_offered_and_first_non_empty_tier_decides() -> None:
    job = mk_job("pg", "default", min_available=0, phase="Running", namespace="test")
    mk_task(job, "run-0", status=S.RUNNING, node="n1")
    mk_task(job, "bound-0", status=S.BOUND, node="n1")
    mk_task(job, "pend-0")
    ssn = open_session(
        mk_snapshot([mk_node("n1")], [job]),
        mk_conf(
            "shuffle", [{"name": "empty", "enabledVictim": True}], [{"name": "all", "enabledVictim": True}]
        ),
    )
    seen: list[list[str]] = []

    def nothing(candidates: list[TaskInfo]) -> list[TaskInfo]:
        return []

    def everything(candidates: list[TaskInfo]) -> list[TaskInfo]:
        seen.append([t.name for t in candidates])
        return list(candidates)

    ssn.register(cb.VICTIM_TASKS, "empty", nothing)
    ssn.register(cb.VICTIM_TASKS, "all", everything)
    ssn.compile_chains()
    run_actions(ssn, "shuffle")
    assert seen == [["run-0"]]
    assert [e.task for e in ssn.evictions] == ["test/run-0"]
    assert ssn.evictions[0].reason == "victim chosen by all"


def test_shuffle_through_the_cli_registry() -> None:
    from fumarole.daemon.scheduler.framework.registry import ACTIONS, KNOWN_UNIMPLEMENTED_ACTIONS

    assert "shuffle" in ACTIONS
    assert "shuffle" not in KNOWN_UNIMPLEMENTED_ACTIONS
