"""Copy-on-write session open: the same decisions as a whole copy, and the snapshot untouched.

`ClusterSnapshot.clone` (what `Session` opens with) shares every job's and node's tasks with
the snapshot until the session first uses them.  Over random clusters and event sequences (the
session's own decisions folded back as the cluster would answer them, plus pods finishing and
being deleted), with every plugin of the bundled and test configurations, each session's
SessionResult must equal that of a session opened on a whole copy (`whole_copy=True`, what
`clone` was before), and the snapshot must be bit-for-bit what it was (model/fingerprint.py).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.apply import apply_result
from fumarole.daemon.scheduler.framework.close import update_job_statuses
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.explain import pending_reasons
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.fingerprint import SnapshotChangedError, fingerprint, first_difference
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.deviceshare_gpushare import GPU_MEMORY, GPU_NUMBER

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_sched_kit import first_fit, open_session, priority_class_manifests, queue_manifest, run_actions

_TIER1 = "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
CONFS = {
    "default": 'actions: "enqueue, allocate, backfill"\ntiers:\n' + _TIER1 + "- plugins: "
    "[{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]\n",
    "daemon": 'actions: "enqueue, allocate, preempt, reclaim, backfill"\ntiers:\n' + _TIER1 + "- plugins: "
    "[{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, "
    "{name: binpack}]\n",
    "capacity": 'actions: "enqueue, allocate, reclaim, backfill"\ntiers:\n' + _TIER1 + "- plugins: "
    "[{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]\n",
    "capacity-hierarchy": 'actions: "enqueue, allocate, preempt, reclaim"\ntiers:\n' + _TIER1 + "- plugins: "
    "[{name: drf}, {name: predicates}, {name: capacity, enableHierarchy: true}, {name: nodeorder}]\n",
    "tdm-shuffle": 'actions: "enqueue, allocate, preempt, shuffle, backfill"\ntiers:\n'
    + _TIER1
    + "- plugins: "
    "[{name: predicates}, {name: proportion}, {name: nodeorder}, {name: tdm, arguments: "
    '{"tdm.revocable-zone.rz1": "1:00-2:00", "tdm.evict.period": "0s"}}]\n',
    "deviceshare": 'actions: "enqueue, allocate, preempt, backfill"\ntiers:\n' + _TIER1 + "- plugins: "
    "[{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: deviceshare, "
    'arguments: {"deviceshare.GPUSharingEnable": true}}]\n',
    "gang-actions": 'actions: "enqueue, allocate, gangpreempt, gangreclaim, backfill"\ntiers:\n'
    + _TIER1
    + "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: pdb}, "
    "{name: cdp}, {name: sla}, {name: nodegroup}, {name: task-topology}, {name: resource-strategy-fit}, "
    "{name: fgd}]\n",
}


def _pod(name: str, group: str, cpu: int, pc: str, node: str, phase: str, extra: dict[str, Any]) -> Any:
    limits = {GPU_MEMORY: str(extra["gpu_mem"])} if extra.get("gpu_mem") else {}
    annotations = {"scheduling.k8s.io/group-name": group}
    annotations.update(extra.get("annotations", {}))
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "priorityClassName": pc,
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}, "limits": limits}}
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "spec": spec,
        "status": {"phase": phase},
    }


@st.composite
def clusters(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    conf = draw(st.sampled_from(sorted(CONFS)))
    hierarchy = conf == "capacity-hierarchy"
    objs: list[dict[str, Any]] = []
    n_nodes = draw(st.integers(1, 5))
    free: list[int] = []
    for i in range(n_nodes):
        cpu = draw(st.sampled_from([2, 4, 8]))
        free.append(cpu)
        alloc = {"cpu": str(cpu), "memory": f"{cpu * 2}Gi", "pods": "110"}
        labels: dict[str, str] = {}
        if conf == "deviceshare" or draw(st.booleans()):
            alloc.update({GPU_MEMORY: "32768", GPU_NUMBER: "2"})
        if draw(st.integers(0, 1 if conf == "tdm-shuffle" else 3)) == 0:
            labels["volcano.sh/revocable-zone"] = "rz1"
        if draw(st.booleans()):
            labels["volcano.sh/nodegroup-name"] = draw(st.sampled_from(["g1", "g2"]))
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}", "labels": labels},
                "status": {"allocatable": alloc, "capacity": dict(alloc)},
            }
        )
    objs += priority_class_manifests()
    n_queues = draw(st.integers(1, 3))
    if hierarchy:
        objs.append(queue_manifest("parent", {"weight": 1}))
    for q in range(n_queues):
        spec: dict[str, Any] = {
            "weight": draw(st.integers(1, 4)),
            "reclaimable": draw(st.sampled_from([True, True, False])),
        }
        cap = draw(st.sampled_from([0, 0, 4, 6]))
        if cap:
            spec["capability"] = {"cpu": str(cap), "memory": "1Ti"}
        if hierarchy:
            spec["parent"] = "parent"
        if conf.startswith("capacity") and draw(st.booleans()):
            spec["deserved"] = {"cpu": str(draw(st.integers(1, 4))), "memory": "1Ti"}
        objs.append(queue_manifest(f"q{q}", spec))
    for j in range(draw(st.integers(2, 10))):
        size = draw(st.integers(1, 5))
        cpu = draw(st.sampled_from([1, 1, 2, 3]))
        pc = draw(st.sampled_from(["low", "high"]))
        extra: dict[str, Any] = {"annotations": {}}
        if draw(st.integers(0, 1 if conf == "deviceshare" else 2)) == 0:
            extra["gpu_mem"] = draw(st.sampled_from([4096, 16384]))
        if draw(st.booleans()):
            extra["annotations"]["volcano.sh/preemptable"] = draw(st.sampled_from(["true", "false"]))
        if draw(st.integers(0, 1 if conf == "tdm-shuffle" else 3)) == 0:
            extra["annotations"]["volcano.sh/revocable-zone"] = "*"
        running = (draw(st.booleans()) and pc == "low") or draw(st.integers(0, 3)) == 0
        spots = first_fit(free, cpu, size) if running else []
        phases = ["Pending"] * size
        for p, spot in enumerate(spots):
            phases[p] = draw(st.sampled_from(["Running", "Running", "Running", "Succeeded"]))
            if phases[p] == "Succeeded":
                free[spot] += cpu
        objs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"j{j}", "namespace": "ns"},
                "spec": {
                    # Now and then a queue that does not exist: the job is left out of the session
                    # but its pods stay on their nodes (victim fall-backs hand out node copies).
                    "queue": "q-missing"
                    if spots and draw(st.integers(0, 5)) == 0
                    else f"q{draw(st.integers(0, n_queues - 1))}",
                    "minMember": draw(st.integers(1, size)),
                    "priorityClassName": pc,
                },
                "status": {"phase": "Running" if spots else draw(st.sampled_from(["Pending", "Inqueue"]))},
            }
        )
        for p in range(size):
            node = f"n{spots[p]}" if p < len(spots) else ""
            objs.append(_pod(f"j{j}-{p}", f"j{j}", cpu, pc, node, phases[p], extra))
    for i, spot in enumerate(draw(st.lists(st.integers(0, n_nodes - 1), max_size=2))):
        # Pods of another scheduler: they only occupy their nodes (`other_tasks`).
        pod = _pod(f"foreign-{i}", "none", 1, "", f"n{spot}", "Running", {})
        pod["spec"]["schedulerName"] = "default-scheduler"
        del pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        objs.append(pod)
    return conf, objs


def _comparable(result: SessionResult) -> dict[str, Any]:
    """The result without measured timings."""
    out = dataclasses.asdict(result)
    for key in ("action_seconds", "phase_seconds"):
        out.pop(key)
    out["stats"] = {k: v["calls"] for k, v in out["stats"].items()}
    return out


def _churn(snap: ClusterSnapshot, picks: list[int], cycle: int) -> None:
    """Pods created, finishing and being deleted between sessions (jobs then no longer only
    added to)."""
    for k, pick in enumerate(picks):
        every = sorted((t for j in snap.jobs.values() for t in j.tasks.values()), key=lambda t: t.uid)
        if k % 3 == 2 and every:
            new = every[pick % len(every)].clone()
            new.uid, new.name = f"{new.uid}-c{cycle}", f"{new.name}-c{cycle}"
            new.status, new.node_name, new.last_tx = TaskStatus.PENDING, "", None
            snap.jobs[new.job].add_task(new)
            continue
        running = [t for t in every if t.status is TaskStatus.RUNNING]
        if not running:
            continue
        task = running[pick % len(running)]
        job = snap.jobs[task.job]
        node = next(n for n in snap.nodes if n.name == task.node_name)
        if k % 3 == 1:
            node.remove_task(task)
            job.delete_task(task)
        else:
            job.update_task_status(task, TaskStatus.SUCCEEDED)
            node.update_task(task)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.lists(st.lists(st.integers(0, 50), max_size=4), min_size=4, max_size=4))
def test_cow_session_decides_as_a_whole_copy_and_leaves_the_snapshot_untouched(
    case: tuple[str, list[dict[str, Any]]], churn: list[list[int]]
) -> None:
    conf_name, objs = case
    _check_sessions(conf_name, objs, churn)


def _check_sessions(
    conf_name: str, objs: list[dict[str, Any]], churn: list[list[int]]
) -> list[SessionResult]:
    conf = parse_conf(CONFS[conf_name], source=conf_name)
    snap = build_snapshot([("gen.yaml", i, o) for i, o in enumerate(objs)])
    results = []
    for cycle in range(len(churn)):
        snap.now = 1000.0 + 30 * cycle
        snap.session_id = f"session-{cycle + 1}"
        before = fingerprint(snap)
        reference = run_session(snap, conf, whole_copy=True)
        assert first_difference(before, fingerprint(snap)) is None
        result = run_session(snap, conf)
        assert first_difference(before, fingerprint(snap)) is None, (conf_name, cycle)
        assert _comparable(result) == _comparable(reference), (conf_name, cycle)
        results.append(result)
        apply_result(snap, result)
        _churn(snap, churn[cycle], cycle)
    return results


@pytest.mark.parametrize("conf_name", ["daemon", "capacity"])
def test_reclaim_from_an_overused_queue_decides_as_a_whole_copy(conf_name: str) -> None:
    """q0 fills the only node with a running gang (minMember 1); q1's pending gang reclaims."""
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}, "status": {"allocatable": alloc}}
    ]
    for q in ("q0", "q1"):
        spec = {"weight": 1, "reclaimable": True}
        if conf_name == "capacity":
            spec["deserved"] = {"cpu": "2", "memory": "4Gi"}
        objs.append(queue_manifest(q, spec))
    for name, queue, node, phase in (("a", "q0", "n0", "Running"), ("b", "q1", "", "Inqueue")):
        objs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"queue": queue, "minMember": 1},
                "status": {"phase": phase},
            }
        )
        pod_phase = "Running" if node else "Pending"
        objs += [_pod(f"{name}-{p}", name, 1, "", node, pod_phase, {}) for p in range(4)]
    results = _check_sessions(conf_name, objs, [[], [], []])
    assert any(e.action == "reclaim" for r in results for e in r.evictions)


def _many_running_one_pending() -> ClusterSnapshot:
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
        }
        for i in range(20)
    ]
    objs.append(queue_manifest("q0", {"weight": 1}))
    for j in range(30):
        running = j < 29
        objs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"j{j:02d}", "namespace": "ns"},
                "spec": {"queue": "q0", "minMember": 2},
                "status": {"phase": "Running" if running else "Inqueue"},
            }
        )
        for p in range(2):
            node = f"n{(2 * j + p) % 20}" if running else ""
            phase = "Running" if running else "Pending"
            objs.append(_pod(f"j{j:02d}-{p}", f"j{j:02d}", 1, "", node, phase, {}))
    return build_snapshot([("gen.yaml", i, o) for i, o in enumerate(objs)])


def test_a_session_copies_only_the_jobs_and_nodes_it_changes() -> None:
    """29 running gangs and one pending gang of 2 pods on 20 nodes: opening the session
    copies no task; placing the pending gang copies that job's tasks, and gives the nodes it lands
    on their own task dicts (their running tasks still shared: nothing handed them out)."""
    snap = _many_running_one_pending()
    ssn = open_session(snap, parse_conf(CONFS["default"], source="default"))
    assert not any(j.materialised for j in ssn.jobs.values())
    assert {_node_state(n) for n in ssn.node_list} == {"shared"}
    run_actions(ssn, "enqueue", "allocate", "backfill")
    update_job_statuses(ssn)
    pending_reasons(ssn)
    assert sorted(ssn.binds) == ["ns/j29-0", "ns/j29-1"]
    assert [uid for uid, j in ssn.jobs.items() if j.materialised] == ["ns/j29"]
    placed_on = set(ssn.binds.values())
    assert {n.name: _node_state(n) for n in ssn.node_list if _node_state(n) != "shared"} == {
        name: "own dict" for name in placed_on
    }
    # Handing a node's tasks out copies the ones still shared, not the session's own.
    node = ssn.nodes[sorted(placed_on)[0]]
    own = {uid: t for uid, t in node.peek_tasks().items() if t.job == "ns/j29"}
    snapshot_tasks = next(n for n in snap.nodes if n.name == node.name).tasks
    handed = node.tasks
    assert _node_state(node) == "copied"
    assert own and snapshot_tasks
    assert all(handed[uid] is t for uid, t in own.items())
    assert all(handed[uid] is not t for uid, t in snapshot_tasks.items())


def _node_state(node: Any) -> str:
    try:
        type(node).__dict__["tasks"].__get__(node, type(node))
    except AttributeError:
        return "shared" if node.peek_tasks() is node._src else "own dict"
    return "copied"


def test_the_guard_catches_a_session_that_writes_to_its_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the snapshot handed to the session uncopied, the guard (on in these tests) fails."""
    snap = _many_running_one_pending()
    monkeypatch.setattr(
        ClusterSnapshot, "clone_without_jobs", lambda self, nodes=None: dataclasses.replace(self, jobs={})
    )
    monkeypatch.setattr(JobInfo, "cow_clone", lambda self: self)
    with pytest.raises(SnapshotChangedError, match="changed its snapshot"):
        run_session(snap, parse_conf(CONFS["default"], source="default"))
