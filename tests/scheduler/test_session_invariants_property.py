"""Property: across random clusters and configurations, no session over-commits a node, lifts a
queue above its capability, or leaves a gang partly bound below its minMember.

Each example builds a cluster from manifests (nodes, queues with weights and some capabilities,
PriorityClasses, gang PodGroups with pods, some already running), then runs three sessions with
one of several configurations (the default; with preempt and reclaim; the capacity plugin with a
queue hierarchy), applying each session's decisions as the cluster would, and checks the
invariants after every session.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_sched_kit import first_fit, priority_class_manifests, queue_manifest

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.apply import apply_result
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus

CONFS = {
    "default": """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
""",
    "preempt-reclaim": """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: overcommit}
  - {name: drf}
  - {name: predicates}
  - {name: proportion}
  - {name: nodeorder}
  - {name: binpack}
""",
    "capacity": """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]
""",
    "capacity-hierarchy": """
actions: "enqueue, allocate, preempt, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity, enableHierarchy: true}, {name: nodeorder}]
""",
}
OCCUPYING = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})


@st.composite
def clusters(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], dict[str, int]]:
    conf = draw(st.sampled_from(sorted(CONFS)))
    hierarchy = conf == "capacity-hierarchy"
    n_nodes = draw(st.integers(1, 5))
    node_cpu = [draw(st.sampled_from([2, 4, 8])) for _ in range(n_nodes)]
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": str(c), "memory": f"{c * 2}Gi", "pods": "110"}},
        }
        for i, c in enumerate(node_cpu)
    ]
    objs += priority_class_manifests()
    n_queues = draw(st.integers(1, 3))
    capability: dict[str, int] = {}
    if hierarchy:
        parent_cap = draw(st.sampled_from([0, 4, 8]))
        spec: dict[str, Any] = {"weight": 1}
        if parent_cap:
            spec["capability"] = {"cpu": str(parent_cap), "memory": "1Ti"}
            capability["parent"] = parent_cap
        objs.append(queue_manifest("parent", spec))
    for q in range(n_queues):
        spec = {"weight": draw(st.integers(1, 4)), "reclaimable": draw(st.booleans())}
        cap = draw(st.sampled_from([0, 0, 2, 4, 6]))
        if cap:
            spec["capability"] = {"cpu": str(cap), "memory": "1Ti"}
            capability[f"q{q}"] = cap
        if hierarchy:
            spec["parent"] = "parent"
        if conf.startswith("capacity") and draw(st.booleans()):
            spec["deserved"] = {"cpu": str(draw(st.integers(1, 4))), "memory": "1Ti"}
        objs.append(queue_manifest(f"q{q}", spec))
    free = list(node_cpu)
    used: dict[str, int] = {}
    for j in range(draw(st.integers(1, 6))):
        q = f"q{draw(st.integers(0, n_queues - 1))}"
        size = draw(st.integers(1, 4))
        min_member = draw(st.integers(1, size))
        cpu = draw(st.sampled_from([1, 2]))
        running = draw(st.booleans())
        pc = draw(st.sampled_from(["low", "high"]))
        # Running jobs are placed whole only where they fit and respect capabilities.
        placement: list[int] = []
        if running:
            placement = first_fit(free, cpu, size)
            within = all(
                used.get(name, 0) + cpu * len(placement) <= cap
                for name, cap in capability.items()
                if name in (q, "parent")
            )
            if len(placement) < size or not within:
                for spot in placement:
                    free[spot] += cpu
                placement = []
            else:
                used[q] = used.get(q, 0) + cpu * size
                used["parent"] = used.get("parent", 0) + cpu * size
        phase = "Running" if placement else "Pending"
        objs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"j{j}", "namespace": "ns"},
                "spec": {"queue": q, "minMember": min_member, "priorityClassName": pc},
                "status": {"phase": phase},
            }
        )
        for p in range(size):
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"j{j}-{p}",
                    "namespace": "ns",
                    "annotations": {"scheduling.k8s.io/group-name": f"j{j}"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "priorityClassName": pc,
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}}
                    ],
                },
                "status": {"phase": "Pending"},
            }
            if placement:
                pod["spec"]["nodeName"] = f"n{placement[p]}"
                pod["status"]["phase"] = "Running"
            objs.append(pod)
    return conf, objs, capability


def _node_usage(snap: ClusterSnapshot) -> list[str]:
    problems = []
    for node in snap.nodes:
        cpu = mem = 0.0
        for t in node.tasks.values():
            if t.status in OCCUPYING:
                cpu += t.resreq.cpu
                mem += t.resreq.memory
        if cpu > node.allocatable.cpu + 0.1 or mem > node.allocatable.memory + 0.1:
            problems.append(f"node {node.name} over-committed: cpu {cpu} > {node.allocatable.cpu}")
    return problems


def _queue_usage(snap: ClusterSnapshot) -> dict[str, float]:
    use: dict[str, float] = {}
    for job in snap.jobs.values():
        for t in job.tasks.values():
            if t.status in OCCUPYING:
                use[job.queue] = use.get(job.queue, 0.0) + t.resreq.cpu
                parent = snap.queues[job.queue].parent if job.queue in snap.queues else ""
                if parent and parent != "root":
                    use[parent] = use.get(parent, 0.0) + t.resreq.cpu
    return use


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_no_overcommit_no_capability_breach_no_partial_gang(
    case: tuple[str, list[dict[str, Any]], dict[str, int]],
) -> None:
    conf_name, objs, capability = case
    conf = parse_conf(CONFS[conf_name], source=conf_name)
    snap = build_snapshot([("gen.yaml", i, o) for i, o in enumerate(objs)])
    assert _node_usage(snap) == []
    for cycle in range(3):
        snap.now = 1000.0 + cycle
        snap.session_id = f"session-{cycle + 1}"
        result = run_session(snap, conf)
        apply_result(snap, result)
        assert _node_usage(snap) == [], (conf_name, cycle)
        use = _queue_usage(snap)
        for q, cap in capability.items():
            assert use.get(q, 0.0) <= cap * 1000 + 0.1, (conf_name, cycle, q, use, cap)
        # A job that got binds this session has at least minMember pods placed (or finished) —
        # counting its pods that the same session then evicted: with default tiers an empty victim
        # list from tier 1 (priority, gang) lets tier 2 (drf) choose, so Volcano itself may preempt
        # a gang below minMember after allocate bound it whole (kept on purpose, see README).
        evicted = Counter(ev.task.rsplit("-", 1)[0] for ev in result.evictions)
        bound_jobs = {key.rsplit("-", 1)[0] for key in result.binds}
        for key in bound_jobs:
            job = snap.jobs[key]
            placed = sum(
                1 for t in job.tasks.values() if t.status in OCCUPYING or t.status == TaskStatus.SUCCEEDED
            )
            placed += evicted[key]
            assert placed >= job.min_available, (conf_name, cycle, key, placed, job.min_available)
