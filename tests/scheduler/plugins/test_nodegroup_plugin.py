"""The nodegroup plugin: queue affinity to node groups (predicate, score, hierarchy) and per-group limits."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_snapshot, mk_task, open_session, run

from fumarole.daemon.manifests import ManifestError, build_snapshot
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.fit import Code, FitError
from fumarole.daemon.scheduler.model.node import NodeFacts, NodeInfo
from fumarole.daemon.scheduler.model.queue import NodeGroupAffinity, QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskStatus

GROUP = "volcano.sh/nodegroup-name"
LIMITS = "volcano.sh/nodegroup-resource-limits"
OK = Code.SUCCESS
UNRES = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def node(name: str, group: str | None, cpu: str = "4", memory: str = "16Gi", pods: str = "110") -> NodeInfo:
    labels = {GROUP: group} if group is not None else {}
    alloc = Resource.from_resource_list({"cpu": cpu, "memory": memory, "pods": pods})
    return NodeInfo(name, alloc, facts=NodeFacts(labels=labels))


def aff(
    req: tuple[str, ...] = (),
    pref: tuple[str, ...] = (),
    anti_req: tuple[str, ...] = (),
    anti_pref: tuple[str, ...] = (),
) -> NodeGroupAffinity:
    return NodeGroupAffinity(req, pref, anti_req, anti_pref)


def queue(
    name: str, affinity: NodeGroupAffinity | None, parent: str = "", annotations: dict[str, str] | None = None
) -> QueueInfo:
    return QueueInfo(name, parent=parent, affinity=affinity, annotations=dict(annotations or {}))


def ng_conf(
    args: dict[str, Any] | None = None, hierarchy: bool | None = None, actions: str = "allocate"
) -> Any:
    p: dict[str, Any] = {"name": "nodegroup"}
    if args is not None:
        p["arguments"] = args
    if hierarchy is not None:
        p["enableHierarchy"] = hierarchy
    return mk_conf(actions, [p])


def code_of(err: Any) -> Code:
    if err is None:
        return OK
    assert isinstance(err, FitError)
    return err.statuses[0][0]


FULL = aff(("group1", "group3"), ("group3",), ("group2", "group4"), ("group4",))
NODES = [
    node("n1", "group1", "2", "4Gi"),
    node("n2", "group2"),
    node("n3", "group3"),
    node("n4", "group4"),
    node("n5", None),
]


def ng_session(
    queues: list[QueueInfo], job_queue: str, args: dict[str, Any] | None = None, hierarchy: bool | None = None
) -> tuple[Session, Any]:
    j = mk_job("pg", job_queue, namespace="c1", min_available=0, phase="")
    mk_task(j, "p", "2", "4Gi")
    names = {q.name for q in queues}
    qs = list(queues) + [QueueInfo(n) for n in ("root", "default") if n not in names]
    snap = mk_snapshot([n.clone() for n in NODES], [j], qs)
    ssn = open_session(snap, ng_conf(args, hierarchy))
    return ssn, next(iter(ssn.jobs[j.uid].tasks.values()))


# ---------------------------------------- nodegroup_test.go TestNodeGroup
ROOT_Q = queue("root", FULL)
Q1 = queue("q1", FULL, "root")
Q2 = queue("q2", aff(("group1",), ("group3",), ("group2",), ("group4",)), "root")
Q3 = queue("q3", aff((), ("group1", "group3")))
NO_AFF_ROOT = queue("root-no-affinity", None)
NO_AFF = queue("q-no-affinity", None, "root")
Q1_CHILD = queue("q1-child", None, "q1")
NO_AFF_CHILD = queue("q-no-affinity-child", None, "q-no-affinity")

GO_CASES = [
    (
        "soft constraints is subset of hard constraints",
        [Q1],
        "q1",
        {},
        None,
        {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0},
        {"n1": OK, "n2": UNRES, "n3": OK, "n4": OK, "n5": UNRES},
    ),
    (
        "soft constraints is not subset of hard constraints",
        [Q2],
        "q2",
        {},
        None,
        {"n1": 100, "n2": 0, "n3": 50, "n4": -1, "n5": 0},
        {"n1": OK, "n2": UNRES, "n3": OK, "n4": OK, "n5": UNRES},
    ),
    (
        "affinity is not set for the queue, strict=false",
        [NO_AFF_ROOT],
        "root-no-affinity",
        {"strict": False},
        None,
        {"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
        {"n1": UNRES, "n2": UNRES, "n3": UNRES, "n4": UNRES, "n5": OK},
    ),
    (
        "affinity inherits from parent queue",
        [ROOT_Q, Q1, Q1_CHILD],
        "q1-child",
        {},
        True,
        {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0},
        {"n1": OK, "n2": UNRES, "n3": OK, "n4": OK, "n5": UNRES},
    ),
    (
        "affinity inherits from ancestor queue if parent queue has no affinity",
        [ROOT_Q, NO_AFF, NO_AFF_CHILD],
        "q-no-affinity-child",
        {},
        True,
        {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0},
        {"n1": OK, "n2": UNRES, "n3": OK, "n4": OK, "n5": UNRES},
    ),
    (
        "queue without affinity",
        [NO_AFF],
        "q-no-affinity",
        {},
        None,
        {"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
        {"n1": UNRES, "n2": UNRES, "n3": UNRES, "n4": UNRES, "n5": UNRES},
    ),
    (
        "preferred nodegroup priority ordering",
        [Q3],
        "q3",
        {"enablePreferredOrder": True},
        None,
        {"n1": 50, "n2": 0, "n3": 25, "n4": 0, "n5": 0},
        {"n1": OK, "n2": UNRES, "n3": OK, "n4": UNRES, "n5": UNRES},
    ),
]


@pytest.mark.parametrize(
    ("case", "queues", "job_queue", "args", "hierarchy", "scores", "codes"),
    GO_CASES,
    ids=[c[0] for c in GO_CASES],
)
def test_volcano_nodegroup_table(
    case: str,
    queues: list[QueueInfo],
    job_queue: str,
    args: dict[str, Any],
    hierarchy: bool | None,
    scores: dict[str, float],
    codes: dict[str, Code],
) -> None:
    ssn, task = ng_session(queues, job_queue, args, hierarchy)
    score = ssn.fns["nodeOrder"]["nodegroup"]
    for n in ssn.node_list:
        assert score(task, n) == scores[n.name], (case, n.name)
        assert code_of(ssn.predicate_fn(task, n)) == codes[n.name], (case, n.name)


def test_inheritance_needs_enable_hierarchy() -> None:
    ssn, task = ng_session([ROOT_Q, Q1, Q1_CHILD], "q1-child")
    assert all(code_of(ssn.predicate_fn(task, n)) == UNRES for n in ssn.node_list)


def test_predicate_reasons() -> None:
    ssn, task = ng_session([Q1], "q1")
    reasons = {n.name: ssn.predicate_fn(task, n) for n in ssn.node_list}
    assert reasons["n2"].reasons() == ["node does not satisfy the node group affinity"]  # type: ignore[union-attr]
    assert reasons["n5"].reasons() == ["node group label not found"]  # type: ignore[union-attr]
    ssn, task = ng_session([NO_AFF], "q-no-affinity")
    assert ssn.predicate_fn(task, ssn.nodes["n1"]).reasons() == ["node group affinity not specified"]  # type: ignore[union-attr]


def test_empty_affinity_stops_inheritance_but_counts_as_unset() -> None:
    empty_parent = queue("mid", aff(), "root")
    child = queue("leaf", None, "mid")
    ssn, task = ng_session([ROOT_Q, empty_parent, child], "leaf", hierarchy=True)
    assert all(code_of(ssn.predicate_fn(task, n)) == UNRES for n in ssn.node_list)
    ssn, task = ng_session([ROOT_Q, empty_parent, child], "leaf", {"strict": False}, hierarchy=True)
    assert code_of(ssn.predicate_fn(task, ssn.nodes["n5"])) == OK


def test_parent_cycles_and_missing_parents_stop_the_walk() -> None:
    a = queue("a", None, "b")
    b = queue("b", None, "a")
    orphan = queue("orphan", None, "gone")
    ssn, task = ng_session([ROOT_Q, a, b, orphan], "a", hierarchy=True)
    assert code_of(ssn.predicate_fn(task, ssn.nodes["n1"])) == UNRES
    ssn, task = ng_session([ROOT_Q, a, b, orphan], "orphan", hierarchy=True)
    assert code_of(ssn.predicate_fn(task, ssn.nodes["n1"])) == UNRES


# ---------------------------------------- TestNodeGroupResourceLimits
LIMIT_AFF = aff(("group1", "group2"), ("group1",))


@pytest.mark.parametrize(
    ("case", "annotation", "used_on_n1", "expected"),
    [
        ("no annotation keeps existing behavior", None, False, {"n1": OK, "n2": OK}),
        (
            "under nodegroup limit permits preferred nodegroup",
            '{"group1":{"cpu":"3","memory":"8Gi"}}',
            False,
            {"n1": OK, "n2": OK},
        ),
        ("omitted resource dimension is unlimited", '{"group1":{"cpu":"3"}}', False, {"n1": OK, "n2": OK}),
        (
            "specified resource dimension is enforced",
            '{"group1":{"cpu":"1"}}',
            False,
            {"n1": UNRES, "n2": OK},
        ),
        (
            "over nodegroup limit rejects preferred nodegroup and permits fallback",
            '{"group1":{"cpu":"3","memory":"8Gi"}}',
            True,
            {"n1": UNRES, "n2": OK},
        ),
        ("invalid annotation rejects queue tasks", '{"group1":{"cpu":', False, {"n1": UNRES, "n2": UNRES}),
    ],
)
def test_volcano_nodegroup_resource_limits(
    case: str, annotation: str | None, used_on_n1: bool, expected: dict[str, Code]
) -> None:
    q = queue("q", LIMIT_AFF, annotations={LIMITS: annotation} if annotation is not None else None)
    nodes = [node("n1", "group1", "16", "64Gi", "32"), node("n2", "group2", "16", "64Gi", "32")]
    jobs = []
    if used_on_n1:
        used = mk_job("pg-used", "q", namespace="limit", min_available=0, phase="Running")
        mk_task(used, "used", "2", "4Gi", status=TaskStatus.RUNNING, node="n1")
        jobs.append(used)
    pending = mk_job("pg-pending", "q", namespace="limit", min_available=0, phase="")
    mk_task(pending, "pending", "2", "4Gi")
    jobs.append(pending)
    snap = mk_snapshot(nodes, jobs, [q, QueueInfo("root"), QueueInfo("default")])
    ssn = open_session(snap, ng_conf())
    task = next(iter(ssn.jobs[pending.uid].tasks.values()))
    for n in ssn.node_list:
        assert code_of(ssn.predicate_fn(task, n)) == expected[n.name], (case, n.name)
    if annotation is not None and annotation.endswith(":"):
        assert ssn.predicate_fn(task, ssn.nodes["n1"]).reasons() == [
            "node group resource limit annotation invalid"
        ]  # type: ignore[union-attr]
        assert any("nodegroup-resource-limits" in w for w in ssn.warnings)


def test_volcano_resource_limit_allocation_event() -> None:
    q = queue(
        "q-event-limit", aff(("group1",)), annotations={LIMITS: '{"group1":{"cpu":"3","memory":"8Gi"}}'}
    )
    jobs = []
    for i in (1, 2):
        j = mk_job(f"pg-{i}", "q-event-limit", namespace="limit", min_available=0, phase="")
        mk_task(j, f"pending-{i}", "2", "4Gi")
        jobs.append(j)
    snap = mk_snapshot(
        [node("n1", "group1", "16", "64Gi", "32")], jobs, [q, QueueInfo("root"), QueueInfo("default")]
    )
    ssn = open_session(snap, ng_conf())
    t1 = next(iter(ssn.jobs["limit/pg-1"].tasks.values()))
    t2 = next(iter(ssn.jobs["limit/pg-2"].tasks.values()))
    n1 = ssn.nodes["n1"]
    assert ssn.predicate_fn(t1, n1) is None
    ssn.allocate(t1, n1)
    err = ssn.predicate_fn(t2, n1)
    assert isinstance(err, FitError) and err.reasons() == ["node group resource limit exceeded"]


def test_limits_count_pods_and_scalars_and_deallocation_gives_room_back() -> None:
    q = queue("q", aff(("g",)), annotations={LIMITS: '{"g": {"pods": 1, "nvidia.com/gpu": "1"}}'})
    j = mk_job("j", "q", min_available=0, phase="")
    mk_task(j, "a", "1", "1Gi")
    mk_task(j, "b", "1", "1Gi")
    snap = mk_snapshot([node("n1", "g")], [j], [q, QueueInfo("root"), QueueInfo("default")])
    ssn = open_session(snap, ng_conf())
    a, b = sorted(ssn.jobs[j.uid].tasks.values(), key=lambda t: t.name)
    ssn.allocate(a, ssn.nodes["n1"])
    assert code_of(ssn.predicate_fn(b, ssn.nodes["n1"])) == UNRES  # 2 pods > 1
    ssn.evict(a, "test")
    assert code_of(ssn.predicate_fn(b, ssn.nodes["n1"])) == OK


# ---------------------------------------- manifests and allocate
def test_manifests_queue_affinity_and_allocate_places_by_score() -> None:
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q1"},
            "spec": {
                "affinity": {
                    "nodeGroupAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": ["group1", "group3"],
                        "preferredDuringSchedulingIgnoredDuringExecution": ["group3"],
                    },
                    "nodeGroupAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": ["group2", "group4"],
                        "preferredDuringSchedulingIgnoredDuringExecution": ["group4"],
                    },
                }
            },
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg1", "namespace": "c1"},
            "spec": {"queue": "q1", "minMember": 1},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p1",
                "namespace": "c1",
                "annotations": {"scheduling.k8s.io/group-name": "pg1"},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
        },
    ]
    for n in NODES:
        labels = dict(n.facts.labels)
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n.name, "labels": labels},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "10"}},
            }
        )
    snap = build_snapshot(("m.yaml", i, o) for i, o in enumerate(objs))
    assert snap.queues["q1"].affinity == FULL
    assert snap.queues["default"].affinity is None
    res = run(snap, ng_conf())
    assert res.binds == {"c1/p1": "n3"}
    bad = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {
            "affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "group1"}}
        },
    }
    with pytest.raises(ManifestError, match="requiredDuringSchedulingIgnoredDuringExecution"):
        build_snapshot([("m.yaml", 0, bad)])
