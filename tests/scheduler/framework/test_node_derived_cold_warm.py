"""Property: what sessions keep in `NodeDerived` (node table rows, the predicates' node mirror,
deviceshare's pools and FilterNode answers) never changes a decision.

Two copies of one random cluster live through the same sequence of sessions and changes (pods
bound and finishing, nodes relabelled, tainted, cordoned, removed and added back, new pods):
one hands a `NodeDerived` from session to session (warm), the other derives everything afresh
(cold).  Every session must decide the same on both.  Changes follow the cache's contract: a node
is replaced by a changed clone, never changed in place.  The study presets (deviceshare vGPU,
fgd) are covered the same way through the core engine's timeline.
"""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import priority_class_manifests, queue_manifest

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.apply import apply_result
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import Taint, TaskStatus
from fumarole.daemon.scheduler.plugins import fgd
from fumarole.daemon.study import core_engine
from fumarole.daemon.study.confs import PERCENTAGE_NODES_TO_FIND, PRESETS, preset_text
from fumarole.daemon.study.runs import Engine, timeline_log
from fumarole.daemon.study.trace import TraceNode, TracePod

CONF = parse_conf(
    """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: binpack}]
""",
    source="cold-warm",
)


def _pod(name: str, cpu: int, rng: random.Random, node: str | None, job: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "priorityClassName": rng.choice(["low", "high"]),
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}}],
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"zone": rng.choice(["a", "b"])}
    if rng.random() < 0.2:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": rng.choice([80, 81])}]
    if rng.random() < 0.2:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"app": rng.choice(["x", "y"])},
            "annotations": {"scheduling.k8s.io/group-name": job},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    if node is not None:
        spec["nodeName"] = node
        pod["status"]["phase"] = "Running"
    return pod


def _job(j: int, rng: random.Random, nodes: list[str] | None) -> list[dict[str, Any]]:
    size = rng.randint(1, 3)
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"j{j}", "namespace": "ns"},
            "spec": {"queue": rng.choice(["q0", "q1"]), "minMember": rng.randint(1, size)},
            "status": {"phase": "Running" if nodes else "Pending"},
        }
    ]
    for p in range(size):
        node = nodes[p % len(nodes)] if nodes else None
        objs.append(_pod(f"j{j}-{p}", 1, rng, node, f"j{j}"))
    return objs


def cluster(seed: int, n_nodes: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    for i in range(n_nodes):
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"n{i}",
                "labels": {"zone": rng.choice(["a", "b"]), "kubernetes.io/hostname": f"n{i}"},
            },
            "status": {"allocatable": {"cpu": str(rng.choice([2, 4, 8])), "memory": "16Gi", "pods": "110"}},
        }
        if rng.random() < 0.2:
            node["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
        objs.append(node)
    objs += priority_class_manifests()
    for q in range(2):
        objs.append(queue_manifest(f"q{q}", {"weight": q + 1}))
    for j in range(rng.randint(2, 6)):
        running = [f"n{rng.randrange(n_nodes)}"] if rng.random() < 0.4 else None
        objs += _job(j, rng, running)
    return objs


def decisions(r: SessionResult) -> tuple[Any, ...]:
    return (
        r.bind_order,
        r.binds,
        r.bind_annotations,
        r.pipelined,
        [(e.task, e.node, e.action, e.reason) for e in r.evictions],
        {uid: (pg.phase, pg.running, pg.failed) for uid, pg in r.podgroups.items()},
        r.pending,
        r.warnings,
    )


def replace_node(snap: ClusterSnapshot, name: str) -> NodeInfo | None:
    """The contract of NodeDerived: a changed node is a new object."""
    for i, n in enumerate(snap.nodes):
        if n.name == name:
            snap.nodes[i] = n.clone()
            return snap.nodes[i]
    return None


def fold(snap: ClusterSnapshot, r: SessionResult) -> None:
    for name in {*r.binds.values(), *(e.node for e in r.evictions)}:
        replace_node(snap, name)
    apply_result(snap, r)


def end_a_pod(snap: ClusterSnapshot, pick: int, status: TaskStatus) -> None:
    """A running pod (chosen by `pick`) ends in `status` (Succeeded, Failed) and leaves its node."""
    running = sorted(
        (uid, t.uid)
        for uid, job in snap.jobs.items()
        for t in job.tasks.values()
        if t.status == TaskStatus.RUNNING and t.node_name
    )
    if not running:
        return
    job_uid, task_uid = running[pick % len(running)]
    job = snap.jobs[job_uid]
    task = job.tasks[task_uid]
    node = replace_node(snap, task.node_name)
    if node is not None and task.uid in node.tasks:
        node.remove_task(task)
    job.update_task_status(task, status)


def change(snap: ClusterSnapshot, kind: int, pick: int, step: int, removed: dict[str, NodeInfo]) -> None:
    """One change between sessions, the same on both copies (chosen by `kind` and `pick`)."""
    names = [n.name for n in snap.nodes]
    name = names[pick % len(names)] if names else ""
    if kind == 0:  # a running pod finishes
        end_a_pod(snap, pick, TaskStatus.SUCCEEDED)
    elif kind == 1 and name:  # relabelled
        node = replace_node(snap, name)
        assert node is not None
        labels = {**node.facts.labels, "zone": "b" if node.facts.labels.get("zone") == "a" else "a"}
        node.facts = replace(node.facts, labels=labels)
    elif kind == 2 and name:  # tainted or untainted
        node = replace_node(snap, name)
        assert node is not None
        taints = () if node.facts.taints else (Taint("dedicated", "x", "NoSchedule"),)
        node.facts = replace(node.facts, taints=taints)
    elif kind == 3 and name:  # cordoned or uncordoned
        node = replace_node(snap, name)
        assert node is not None
        node.facts = replace(node.facts, unschedulable=not node.facts.unschedulable)
    elif kind == 4 and len(names) > 1:  # an idle node leaves; or one that left comes back
        idle = [n for n in snap.nodes if not n.tasks]
        if removed:
            back = removed.pop(sorted(removed)[0])
            snap.nodes.insert(pick % (len(snap.nodes) + 1), back)
        elif idle:
            gone = idle[pick % len(idle)]
            snap.nodes.remove(gone)
            removed[gone.name] = gone
    elif kind == 5:  # new pods arrive
        part = build_snapshot(
            [("gen.yaml", i, o) for i, o in enumerate(_job(100 + step, random.Random(pick), None))]
        )
        snap.jobs.update(part.jobs)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10_000),
    st.integers(2, 7),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50)), min_size=1, max_size=8),
)
def test_warm_sessions_decide_as_cold_ones(seed: int, n_nodes: int, changes: list[tuple[int, int]]) -> None:
    objs = [("gen.yaml", i, o) for i, o in enumerate(cluster(seed, n_nodes))]
    warm, cold = build_snapshot(objs), build_snapshot(objs)
    warm.derived = NodeDerived()
    removed: dict[str, dict[str, NodeInfo]] = {"warm": {}, "cold": {}}
    for step, (kind, pick) in enumerate([(5, 0), *changes]):
        for name, snap in (("warm", warm), ("cold", cold)):
            change(snap, kind, pick, step, removed[name])
            snap.now = 100.0 + step
            snap.session_id = f"s{step}"
        a, b = run_session(warm, CONF), run_session(cold, CONF)
        assert decisions(a) == decisions(b), (seed, step, kind)
        fold(warm, a)
        fold(cold, b)
        # Bounded: one entry per node of the last session.
        assert len(warm.derived) == len(warm.nodes)


def _engine(policy: str) -> Engine:
    text = preset_text(policy)
    return Engine(parse_conf(text), PRESETS[policy][0], text, PERCENTAGE_NODES_TO_FIND[policy])


def _trace(seed: int) -> tuple[list[TraceNode], list[TracePod]]:
    r = random.Random(seed)
    nodes = [
        TraceNode(
            f"n{i:02d}", r.choice([16000, 32000]), r.choice([65536, 131072]), r.choice([0, 1, 2, 4]), "T4"
        )
        for i in range(r.randint(3, 10))
    ]
    pods = []
    for i in range(r.randint(10, 60)):
        k = r.random()
        g, m = (0, 0) if k < 0.2 else (1, r.choice([250, 500, 700])) if k < 0.7 else (r.choice([1, 2]), 1000)
        created = i * 30 + r.randrange(60)
        pods.append(
            TracePod(
                f"p{i:03d}",
                r.choice([1000, 4000, 8000]),
                r.choice([1024, 8192]),
                g,
                m,
                (),
                r.choice(["LS", "BE", "Burstable"]),
                "Running",
                created,
                created + r.choice([60, 300, 3000]),
                created,
            )
        )
    return nodes, pods


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(policy=st.sampled_from(sorted(PRESETS)), seed=st.integers(0, 10_000))
def test_study_timeline_warm_decides_as_cold(policy: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _trace(seed)
    engine = _engine(policy)
    warm, _ = timeline_log(nodes, pods, policy, period_s=60, trace_name="x", engine=engine)
    with monkeypatch.context() as m:
        m.setattr(core_engine, "NodeDerived", lambda: None)  # every session derives afresh
        cold, _ = timeline_log(nodes, pods, policy, period_s=60, trace_name="x", engine=engine)
    assert [repr(e) for e in warm.events] == [repr(e) for e in cold.events]


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_a_session_that_changed_kept_pools_is_not_seen_by_the_next(policy: str) -> None:
    """A session allocates cards on kept pools; its binds are never folded (the cluster refused
    them, say): the next session over the same snapshot decides as the first did."""
    nodes, pods = _trace(7)
    core = core_engine.CoreCluster(nodes, _engine(policy).conf, arrival_order=False)
    core._add([(p, 0) for p in pods[:12]])
    first = run_session(core.snapshot, core.conf, search=core.search)
    assert first.binds
    again = run_session(core.snapshot, core.conf, search=core.search)
    assert decisions(again) == decisions(first)


# The fgd plugin's per-row cards kept between sessions (stamped by deviceshare's kept pools) are
# exactly what reading the node's cards afresh gives; a session over unchanged nodes reads none.
def _fresh(plugin: fgd.FgdPlugin, rows: Any) -> tuple[Any, Any]:
    assert plugin.table is not None
    cards = [plugin.node_cards(plugin.table.nodes[int(r)]) for r in rows]
    width = max([len(c) for c in cards if c is not None] + [1])
    left = np.zeros((len(rows), width), dtype=np.int64)
    for i, c in enumerate(cards):
        if c is not None:
            left[i, : len(c)] = c
    return left, np.array([c is not None for c in cards], dtype=np.bool_)


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000))
def test_kept_cards_equal_fresh_reads(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _trace(seed)
    original = fgd.FgdPlugin._cards
    checked = []

    def checking(self: fgd.FgdPlugin, rows: Any) -> tuple[Any, Any]:
        left, has = original(self, rows)
        want_left, want_has = _fresh(self, rows)
        assert np.array_equal(has, want_has)
        # Kept rows may be padded wider than this batch needs: the extra columns are zero.
        assert left.shape[1] >= want_left.shape[1]
        assert np.array_equal(left[:, : want_left.shape[1]], want_left)
        assert not left[:, want_left.shape[1] :].any()
        checked.append(len(rows))
        return left, has

    with monkeypatch.context() as m:
        m.setattr(fgd.FgdPlugin, "_cards", checking)
        timeline_log(nodes, pods, "fgd", period_s=60, trace_name="x", engine=_engine("fgd"))
    assert checked or not any(p.gpu_milli for p in pods)


def test_a_session_over_unchanged_nodes_reads_no_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _trace(25)
    core = core_engine.CoreCluster(nodes, _engine("fgd").conf, arrival_order=False)
    core._add([(p, 0) for p in pods[:12]])
    reads: list[str] = []
    original = fgd.FgdPlugin.node_cards

    def counting(self: fgd.FgdPlugin, node: Any) -> Any:
        reads.append(node.name)
        return original(self, node)

    monkeypatch.setattr(fgd.FgdPlugin, "node_cards", counting)
    first = run_session(core.snapshot, core.conf, search=core.search)
    assert first.binds and reads
    scored = set(reads)
    # Only the nodes whose pools the first session's allocations changed are read again.
    reads.clear()
    second = run_session(core.snapshot, core.conf, search=core.search)
    assert decisions(second) == decisions(first)
    bound = set(first.binds.values())
    assert set(reads) <= bound
    assert scored - bound  # nodes scored, not bound to: read once only
