"""The incremental node search and score memos decide exactly as the full evaluation does."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_queue, mk_snapshot, open_session, pod_req

from fumarole.daemon.scheduler.framework import placement
from fumarole.daemon.scheduler.framework.combinators import Combinators
from fumarole.daemon.scheduler.framework.placement import (
    ErrorCache,
    SearchOptions,
    choose_node,
    full_search,
    memo_search,
    predicate_nodes,
)
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeFacts, NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import HostPort, PodFacts, Taint, TaskInfo, TaskStatus, Toleration
from fumarole.daemon.scheduler.plugins import binpack, nodeorder

GI = 1024**3

# Pod shapes: (cpu milli, memory GiB, node selector, tolerate the taint, host port).
SHAPES = [
    (1000, 2, {}, False, 0),
    (2000, 4, {}, True, 0),
    (4000, 8, {"disk": "ssd"}, False, 0),
    (500, 1, {}, False, 8080),
    (0, 1, {}, True, 0),
    (3000, 1, {"disk": "ssd"}, True, 9090),
]


def facts(i: int, draw: Any) -> NodeFacts:
    labels = {"kubernetes.io/hostname": f"n{i:04d}"}
    if draw(st.booleans()):
        labels["disk"] = "ssd"
    taints: tuple[Taint, ...] = ()
    kind = draw(st.integers(0, 9))
    if kind == 0:
        taints = (Taint("dedicated", "x", "NoSchedule"),)
    elif kind == 1:
        taints = (Taint("dedicated", "x", "PreferNoSchedule"),)
    return NodeFacts(labels=labels, taints=taints, unschedulable=kind == 2)


def pod_of(shape: int) -> PodFacts:
    _, _, selector, tolerate, port = SHAPES[shape]
    return PodFacts(
        node_selector=dict(selector),
        tolerations=(Toleration("dedicated", "Exists", "", ""),) if tolerate else (),
        host_ports=(HostPort(port),) if port else (),
    )


@st.composite
def clusters(draw: Any) -> ClusterSnapshot:
    n = draw(st.sampled_from([3, 40, 101, 130, 260]))
    nodes = []
    for i in range(n):
        cpu = draw(st.sampled_from([2000, 4000, 8000, 16000]))
        mem = draw(st.sampled_from([4, 8, 16]))
        pods = draw(st.sampled_from([2, 5, 110]))
        nodes.append(NodeInfo(f"n{i:04d}", Resource(cpu, mem * GI, {"pods": pods}), facts=facts(i, draw)))
    jobs: list[JobInfo] = []
    n_jobs = draw(st.integers(1, 12))
    for j in range(n_jobs):
        size = draw(st.integers(1, 12))
        job = mk_job(f"j{j:03d}", f"q{j % 3}", min_available=draw(st.integers(1, size)), creation=float(j))
        shapes = [draw(st.integers(0, len(SHAPES) - 1)) for _ in range(draw(st.integers(1, 2)))]
        for t in range(size):
            shape = shapes[t % len(shapes)]
            cpu, mem, _, _, _ = SHAPES[shape]
            resreq = pod_req(f"{cpu}m" if cpu else None, f"{mem}Gi")
            job.add_task(
                TaskInfo(
                    uid=f"j{j:03d}-t{t}",
                    name=f"j{j:03d}-t-{t}",
                    namespace="default",
                    job=job.uid,
                    resreq=resreq,
                    status=TaskStatus.PENDING,
                    role="worker" if draw(st.booleans()) else "",
                    creation=float(j),
                    pod=pod_of(shape),
                )
            )
        jobs.append(job)
    queues = [mk_queue(f"q{i}", weight=i + 1) for i in range(3)] + [mk_queue("default")]
    return mk_snapshot(nodes, jobs, queues)


CONF_TIERS: list[list[Any]] = [
    ["priority", "gang"],
    [
        "drf",
        "predicates",
        "proportion",
        {"name": "nodeorder", "arguments": {"mostrequested.weight": 1, "balancedresource.weight": 2}},
        {"name": "binpack", "arguments": {"binpack.weight": 3}},
    ],
]


def pending_tasks(ssn: Session) -> list[TaskInfo]:
    out = []
    for uid in sorted(ssn.jobs):
        job = ssn.jobs[uid]
        out.extend(sorted(job.tasks_in(TaskStatus.PENDING), key=lambda t: t.uid))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**16))
def test_incr_memo_search_equals_full_search_step_by_step(snap: ClusterSnapshot, seed: int) -> None:
    """At every step, the memoised search returns the full search's rows, start index and error cache."""
    ssn = open_session(snap, mk_conf("allocate", *CONF_TIERS))
    opts = SearchOptions()
    rng = np.random.default_rng(seed)
    caches: dict[str, ErrorCache] = {}
    scorer = ssn.plugins["nodeorder"]
    assert isinstance(scorer, nodeorder.NodeOrderPlugin)
    for task in pending_tasks(ssn):
        assert ssn.pre_predicate_fn(task) is None
        job_cache = caches.setdefault(task.job, ErrorCache())
        start = ssn.last_processed_node_index
        full_cache = copy.deepcopy(job_cache)
        want, _ = full_search(ssn, task, None, full_cache, opts)
        want_index = ssn.last_processed_node_index
        ssn.last_processed_node_index = start
        got = memo_search(ssn, task, job_cache, opts, True)
        if got is None:
            assert want.size == 0
            ssn.last_processed_node_index = start
            full_search(ssn, task, None, job_cache, opts)
            continue
        assert np.array_equal(got, want)
        assert ssn.last_processed_node_index == want_index
        assert sorted(job_cache.failed) == sorted(full_cache.failed)
        for role, mask in full_cache.failed.items():
            assert np.array_equal(job_cache.failed[role], mask)
        # The Idle fit the search leaves for choose_node is the table's.
        cols, vals = ssn.table.request_columns(task)
        assert ssn.table.search_hint is not None and ssn.table.search_hint[0] is got
        assert np.array_equal(ssn.table.search_hint[1], ssn.table.fits(ssn.table.idle, cols, vals, got))
        # choose_node through the search's Idle hint and without it pick the same node.
        picked = choose_node(ssn, task, got)
        assert picked is choose_node(ssn, task, got.copy())
        assert picked is not None
        # The node-local score memo equals a fresh computation on the candidate rows.
        req = scorer.requests_of(task)
        assert np.array_equal(scorer.node_local_scores(req, got), scorer.compute_local_scores(req, got))
        if rng.random() < 0.85 and task.resreq.less_equal(picked.idle):
            ssn.allocate(task, picked)
        elif rng.random() < 0.5:
            # A node changing under the memo without this task placed: another pod lands there.
            other = ssn.node_list[int(rng.integers(len(ssn.node_list)))]
            filler = TaskInfo(
                uid=f"filler-{task.uid}",
                name=f"filler-{task.uid}",
                namespace="default",
                job="",
                resreq=Resource(500, GI, {"pods": 1}),
                # A releasing pod makes FutureIdle exceed Idle on its node.
                status=TaskStatus.RELEASING if rng.random() < 0.5 else TaskStatus.RUNNING,
            )
            other.add_task(filler)


def run_both(snap: ClusterSnapshot, monkeypatch: pytest.MonkeyPatch, conf_actions: str) -> tuple[Any, Any]:
    conf = mk_conf(conf_actions, *CONF_TIERS)
    fast = run_session(snap, conf, explain=True)
    with monkeypatch.context() as m:
        m.setattr(placement, "memo_search", lambda *a, **k: None)
        m.setattr(
            nodeorder.NodeOrderPlugin,
            "node_local_scores",
            lambda self, req, rows: self.compute_local_scores(req, rows),
        )
        m.setattr(Combinators, "_compile_local_scoring", lambda self: None)
        slow = run_session(snap, conf, explain=True)
    return fast, slow


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_incr_sessions_decide_as_without_memos(snap: ClusterSnapshot) -> None:
    """Whole sessions (allocate, backfill) decide the same with and without the memos."""
    with pytest.MonkeyPatch.context() as mp:
        fast, slow = run_both(snap, mp, "allocate, backfill")
    assert fast.bind_order == slow.bind_order
    assert fast.binds == slow.binds
    assert fast.pipelined == slow.pipelined
    assert fast.pending == slow.pending


def big_snapshot(n_nodes: int = 300, n_jobs: int = 40) -> ClusterSnapshot:
    nodes = [NodeInfo(f"n{i:04d}", Resource(16000, 64 * GI, {"pods": 110})) for i in range(n_nodes)]
    jobs = []
    for j in range(n_jobs):
        job = mk_job(f"j{j:03d}", "default", min_available=4, creation=float(j))
        for t in range(8):
            job.add_task(
                TaskInfo(
                    uid=f"j{j:03d}-t{t}",
                    name=f"j{j:03d}-t-{t}",
                    namespace="default",
                    job=job.uid,
                    resreq=pod_req("1", "2Gi"),
                    status=TaskStatus.PENDING,
                    creation=float(j),
                )
            )
        jobs.append(job)
    return mk_snapshot(nodes, jobs)


def test_incr_memo_is_used_and_evaluates_few_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 300-node cluster of identical tasks the memo serves the search: rows are re-evaluated
    in a few batches, not once per task over every node."""
    calls: list[int] = []
    real = placement.evaluate_rows

    def counting(ssn: Session, task: TaskInfo, memo: Any, rows: Any, check: bool) -> None:
        calls.append(len(rows))
        real(ssn, task, memo, rows, check)

    monkeypatch.setattr(placement, "evaluate_rows", counting)
    ssn = open_session(big_snapshot(), mk_conf("allocate", *CONF_TIERS))
    tasks = pending_tasks(ssn)
    for task in tasks:
        assert ssn.pre_predicate_fn(task) is None
        found, _ = predicate_nodes(ssn, task, None, ErrorCache(), SearchOptions())
        node = choose_node(ssn, task, found)
        assert node is not None
        ssn.allocate(task, node)
    assert calls[0] == 300  # the first search evaluates every node once
    assert len(calls) < len(tasks)
    assert sum(calls[1:]) < len(tasks) * 2  # afterwards only rows that changed


def test_incr_non_row_local_tasks_use_the_full_search() -> None:
    """A pod with required pod anti-affinity reads other nodes: no signature, no memo."""
    snap = big_snapshot(120, 2)
    job = snap.jobs["default/j000"]
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}
            ]
        }
    }
    for t in job.tasks.values():
        t.pod = PodFacts(labels={"app": "a"}, affinity=anti)
    ssn = open_session(snap, mk_conf("allocate", *CONF_TIERS))
    task = sorted(ssn.jobs["default/j000"].tasks.values(), key=lambda t: t.uid)[0]
    assert ssn.pre_predicate_fn(task) is None
    assert placement.row_local_key(ssn, task, True) is None
    plain = sorted(ssn.jobs["default/j001"].tasks.values(), key=lambda t: t.uid)[0]
    assert ssn.pre_predicate_fn(plain) is None
    assert placement.row_local_key(ssn, plain, True) is not None


# ------------------------------------------------------------------ node-local score memo


def without_prefer_taints(snap: ClusterSnapshot) -> ClusterSnapshot:
    """The cluster with its PreferNoSchedule taints removed (they make nodeorder's score normalise
    over the candidates, so no task would be node-local)."""
    for node in snap.nodes:
        taints = tuple(t for t in node.facts.taints if t.effect != "PreferNoSchedule")
        node.facts = NodeFacts(node.facts.labels, node.facts.annotations, taints, node.facts.unschedulable)
    return snap


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans(), st.integers(0, 2**16))
def test_score_memo_equals_the_batch_scores_step_by_step(
    snap: ClusterSnapshot, strip_taints: bool, seed: int
) -> None:
    """At every step the memoised scores of the candidate rows are the batch scores, bit for bit
    (or None: some scorer is not node-local for the task, e.g. PreferNoSchedule taints)."""
    if strip_taints:
        snap = without_prefer_taints(snap)
    ssn = open_session(snap, mk_conf("allocate", *CONF_TIERS))
    local = ssn.local_scoring
    assert local is not None  # nodeorder and binpack both declare node-local scorers
    rng = np.random.default_rng(seed)
    prefer_taints = any(t.effect == "PreferNoSchedule" for n in ssn.node_list for t in n.facts.taints)
    for task in pending_tasks(ssn):
        assert ssn.pre_predicate_fn(task) is None
        found, _ = predicate_nodes(ssn, task, None, ErrorCache(), SearchOptions())
        if found.size == 0:
            continue
        for rows in (found, found[: int(rng.integers(1, found.size + 1))], found[::-1].copy()):
            got = local.scores(task, rows)
            assert (got is None) == prefer_taints
            if got is not None:
                assert np.array_equal(got, ssn.node_score_batch(task, rows))
        picked = choose_node(ssn, task, found)
        assert picked is not None
        if rng.random() < 0.85 and task.resreq.less_equal(picked.idle):
            ssn.allocate(task, picked)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**16))
def test_binpack_few_rows_equal_the_batch(snap: ClusterSnapshot, seed: int) -> None:
    """Binpack's plain-Python scores of a few rows are the array batch's floats, bit for bit."""
    weights = {"binpack.weight": 3, "binpack.cpu": 3, "binpack.memory": 7}
    ssn = open_session(snap, mk_conf("allocate", ["predicates", {"name": "binpack", "arguments": weights}]))
    rng = np.random.default_rng(seed)
    n = len(ssn.node_list)
    for task in pending_tasks(ssn):
        for node in ssn.node_list[: int(rng.integers(0, 3))]:  # some nodes partly used
            if task.resreq.less_equal(node.idle):
                ssn.allocate(task, node)
                break
        rows = rng.integers(0, n, size=int(rng.integers(1, binpack.SCALAR_ROWS + 1))).astype(np.int64)
        plugin = ssn.plugins["binpack"]
        assert isinstance(plugin, binpack.BinpackPlugin) and plugin.local is not None
        scores = plugin.local.scores
        want = scores(task, np.concatenate([rows, np.arange(n, dtype=np.int64)]))[: len(rows)]
        assert np.array_equal(scores(task, rows), want)


def test_score_memo_declines_tasks_whose_scores_normalise() -> None:
    """Preferred node affinity is normalised over the candidates: no signature for that task."""
    snap = big_snapshot(120, 2)
    job = snap.jobs["default/j000"]
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [expr_in("disk", "ssd")]}}
            ]
        }
    }
    for t in job.tasks.values():
        t.pod = PodFacts(affinity=preferred)
    ssn = open_session(snap, mk_conf("allocate", *CONF_TIERS))
    local = ssn.local_scoring
    assert local is not None
    task = sorted(ssn.jobs["default/j000"].tasks.values(), key=lambda t: t.uid)[0]
    assert local.signature(task) is None
    plain = sorted(ssn.jobs["default/j001"].tasks.values(), key=lambda t: t.uid)[0]
    assert local.signature(plain) is not None


def expr_in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def test_score_memo_declines_once_a_placed_pod_prefers_the_task() -> None:
    """Inter-pod affinity reads the pods placed so far: a task is node-local until a pod whose
    preferred affinity term selects it is placed, then not."""
    snap = big_snapshot(120, 2)
    prefers_web = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    },
                }
            ]
        }
    }
    with_hostnames(snap)
    for t in snap.jobs["default/j000"].tasks.values():
        t.pod = PodFacts(labels={"app": "db"}, affinity=prefers_web)
    for t in snap.jobs["default/j001"].tasks.values():
        t.pod = PodFacts(labels={"app": "web"})
    ssn = open_session(snap, mk_conf("allocate", *CONF_TIERS))
    local = ssn.local_scoring
    assert local is not None
    web, web2 = sorted(ssn.jobs["default/j001"].tasks.values(), key=lambda t: t.uid)[:2]
    db = sorted(ssn.jobs["default/j000"].tasks.values(), key=lambda t: t.uid)[0]
    # Nothing placed: no pod to be near, every affinity score is 0 on every node.
    assert local.signature(web) is not None
    assert local.signature(db) is not None
    assert ssn.pre_predicate_fn(web2) is None  # (Reserve lets a pod reach the mirror after PreFilter)
    ssn.allocate(web2, ssn.node_list[1])
    assert local.signature(db) is None  # a db pod prefers to be near the placed web pod
    assert local.signature(web) is not None

    # A pod with preferred terms already running at open (Volcano scores other pods towards it).
    snap = with_hostnames(big_snapshot(120, 2))
    for t in snap.jobs["default/j001"].tasks.values():
        t.pod = PodFacts(labels={"app": "web"})
    running = snap.jobs["default/j000"].tasks["j000-t0"]
    running.pod = PodFacts(labels={"app": "db"}, affinity=prefers_web)
    snap.jobs["default/j000"].update_task_status(running, TaskStatus.RUNNING)
    running.node_name = snap.nodes[0].name
    snap.nodes[0].add_task(running)
    ssn = open_session(snap, mk_conf("allocate", *CONF_TIERS))
    assert ssn.local_scoring is not None
    web = sorted(ssn.jobs["default/j001"].tasks.values(), key=lambda t: t.uid)[0]
    assert ssn.local_scoring.signature(web) is None


def with_hostnames(snap: ClusterSnapshot) -> ClusterSnapshot:
    for node in snap.nodes:
        node.facts = NodeFacts(labels={"kubernetes.io/hostname": node.name})
    return snap
