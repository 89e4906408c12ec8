"""task-topology: annotation parsing (Go cases), buckets, task order, node scores and placements."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session, run_actions

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus
from fumarole.daemon.scheduler.plugins import task_topology as tt
from fumarole.daemon.scheduler.plugins.task_topology import TaskTopology, TopologyError, read_topology


def job_with(roles: dict[str, str], annotations: dict[str, str] | None) -> JobInfo:
    j = mk_job("job1", namespace="default")
    j.annotations = dict(annotations or {})
    for name, role in roles.items():
        mk_task(j, name, role=role)
    return j


SIX = {
    "job1-ps-0": "ps",
    "job1-ps-1": "ps",
    "job1-worker-0": "worker",
    "job1-worker-1": "worker",
    "job1-chief-0": "chief",
    "job1-evaluator-0": "evaluator",
}
FOUR = {k: v for k, v in SIX.items() if v in ("ps", "worker")}


@pytest.mark.parametrize(
    ("roles", "annotations", "want"),
    [
        (  # correct annotation
            SIX,
            {
                tt.AFFINITY: "ps,worker;ps,chief",
                tt.ANTI_AFFINITY: "ps;worker,chief",
                tt.TASK_ORDER: "ps,worker,chief,evaluator",
            },
            TaskTopology(
                [["ps", "worker"], ["ps", "chief"]],
                [["ps"], ["worker", "chief"]],
                ["ps", "worker", "chief", "evaluator"],
            ),
        ),
        (  # task names with '-'
            {"a-0": "ps-some", "b-0": "worker-another-some", "c-0": "chief-kk", "d-0": "evaluator-tt"},
            {
                tt.AFFINITY: "ps-some,worker-another-some;ps-some,chief-kk",
                tt.ANTI_AFFINITY: "ps-some;worker-another-some,chief-kk",
                tt.TASK_ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt",
            },
            TaskTopology(
                [["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]],
                [["ps-some"], ["worker-another-some", "chief-kk"]],
                ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"],
            ),
        ),
        ({}, None, None),  # nil annotation
        (  # redundant punctuations: empty names are kept and ignored by the check
            SIX,
            {
                tt.AFFINITY: "ps,worker;ps,,chief,;",
                tt.ANTI_AFFINITY: "ps;worker,chief;;;",
                tt.TASK_ORDER: "ps,worker,chief,evaluator,,,",
            },
            TaskTopology(
                [["ps", "worker"], ["ps", "", "chief", ""], [""]],
                [["ps"], ["worker", "chief"], [""], [""], [""]],
                ["ps", "worker", "chief", "evaluator", "", "", ""],
            ),
        ),
    ],
)
def test_read_topology_from_pg_annotations(
    roles: dict[str, str], annotations: dict[str, str] | None, want: TaskTopology | None
) -> None:
    """topology_test.go Test_readTopologyFromPgAnnotations (valid cases)."""
    assert read_topology(job_with(roles, annotations)) == want


@pytest.mark.parametrize(
    ("roles", "annotations", "message"),
    [
        (
            SIX,
            {
                tt.AFFINITY: "$%GF$^trtqwrg^",
                tt.ANTI_AFFINITY: "ps;worker,chief;#@FGEW^vfa897bgs;;",
                tt.TASK_ORDER: "ps,worker,chief,evaluator,,,",
            },
            "task $%GF$^trtqwrg^ do not exist in job <default/job1>",
        ),
        (
            FOUR,
            {tt.AFFINITY: "ps,worker", tt.ANTI_AFFINITY: "ps", tt.TASK_ORDER: "ps,worker,chief"},
            "task chief do not exist in job <default/job1>",
        ),
        (
            FOUR,
            {tt.AFFINITY: "ps,worker", tt.ANTI_AFFINITY: "ps,ps", tt.TASK_ORDER: "ps,worker"},
            "task ps is duplicate in job <default/job1>",
        ),
    ],
)
def test_read_topology_errors(roles: dict[str, str], annotations: dict[str, str], message: str) -> None:
    """topology_test.go: invalid annotation, invalid task name, duplicate task name."""
    with pytest.raises(TopologyError) as e:
        read_topology(job_with(roles, annotations))
    assert str(e.value) == message


# ------------------------------------------------------------------------------- buckets and order
def ps_worker_job(annotations: dict[str, str], nodes: list[Any] | None = None) -> tuple[Session, JobInfo]:
    j = mk_job("tf", "q1", namespace="ns", min_available=6)
    j.annotations = annotations
    for role, n in (("ps", 2), ("worker", 4)):
        for i in range(n):
            mk_task(
                j, f"tf-{role}-{i}", "1", "1Gi", role=role, pod=PodFacts(annotations={tt.TASK_SPEC: role})
            )
    snap = mk_snapshot(nodes or [mk_node("n1", "16", "32Gi"), mk_node("n2", "16", "32Gi")], [j])
    ssn = open_session(snap, mk_conf("allocate", ["priority", "gang"], ["predicates", "task-topology"]))
    return ssn, j


PS_WORKER = {tt.AFFINITY: "ps,worker", tt.ANTI_AFFINITY: "ps"}


def test_buckets_pack_affine_tasks_and_split_anti_affine_ones() -> None:
    ssn, j = ps_worker_job(PS_WORKER)
    m = ssn.plugins["task-topology"].managers[j.uid]  # type: ignore[attr-defined]
    assert [sorted(t.name for t in b.tasks.values()) for b in m.buckets] == [
        ["tf-ps-0", "tf-worker-0", "tf-worker-2"],
        ["tf-ps-1", "tf-worker-1", "tf-worker-3"],
    ]
    assert m.bucket_max_size == 3
    assert m.task_affinity_priority == {"ps": tt.SELF_ANTI_AFFINITY, "worker": tt.INTER_AFFINITY}


def test_task_order_bucket_first_then_affinity_kind() -> None:
    ssn, j = ps_worker_job(PS_WORKER)
    ordered = sorted(ssn.jobs[j.uid].tasks.values(), key=_cmp_key(ssn))
    assert [t.name for t in ordered] == [
        "tf-ps-0",
        "tf-worker-0",
        "tf-worker-2",
        "tf-ps-1",
        "tf-worker-1",
        "tf-worker-3",
    ]


def _cmp_key(ssn: Session) -> Any:
    from functools import cmp_to_key

    def cmp(a: Any, b: Any) -> int:
        if ssn.task_order_fn(a, b):
            return -1
        if ssn.task_order_fn(b, a):
            return 1
        return 0

    return cmp_to_key(cmp)


def test_allocation_follows_the_buckets() -> None:
    ssn, _j = ps_worker_job(PS_WORKER)
    run_actions(ssn, "allocate")
    by_node: dict[str, list[str]] = {}
    for key, node in sorted(ssn.binds.items()):
        by_node.setdefault(node, []).append(key.split("/")[1])
    assert by_node == {
        "n1": ["tf-ps-0", "tf-worker-0", "tf-worker-2"],
        "n2": ["tf-ps-1", "tf-worker-1", "tf-worker-3"],
    }


def test_without_the_plugin_everything_lands_on_the_first_node() -> None:
    ssn, j = ps_worker_job({})
    assert j.uid not in ssn.plugins["task-topology"].managers  # type: ignore[attr-defined]
    run_actions(ssn, "allocate")
    assert set(ssn.binds.values()) == {"n1"}


def test_node_score_values() -> None:
    ssn, j = ps_worker_job(PS_WORKER)
    p = ssn.plugins["task-topology"]
    task = {t.name: t for t in ssn.jobs[j.uid].tasks.values()}
    n1, n2 = ssn.nodes["n1"], ssn.nodes["n2"]
    # Nothing bound yet: the whole bucket (3 tasks) on either node -> 3 * 100 / max bucket size 3.
    assert p.node_order(task["tf-ps-0"], n1) == pytest.approx(100.0)  # type: ignore[attr-defined]
    p.on_allocate(_placed(task["tf-ps-0"], "n1"))  # type: ignore[attr-defined]
    # worker-0 shares ps-0's bucket: n1 has 1 bound + 2 pending = 3; n2 only the 2 pending.
    assert p.node_order(task["tf-worker-0"], n1) == pytest.approx(100.0)  # type: ignore[attr-defined]
    assert p.node_order(task["tf-worker-0"], n2) == pytest.approx(200.0 / 3)  # type: ignore[attr-defined]
    # ps-1 (other bucket) is anti-affine with the ps already on n1.
    assert p.node_order(task["tf-ps-1"], n1) == pytest.approx(200.0 / 3)  # type: ignore[attr-defined]
    assert p.node_order(task["tf-ps-1"], n2) == pytest.approx(100.0)  # type: ignore[attr-defined]


def _placed(t: Any, node: str) -> Any:
    c = t.clone()
    c.node_name = node
    return c


def test_bucket_sheds_tasks_to_fit_and_unfit_task_scores_zero() -> None:
    ssn, j = ps_worker_job(PS_WORKER, nodes=[mk_node("small", "2", "32Gi"), mk_node("tiny", "500m", "1Gi")])
    p = ssn.plugins["task-topology"]
    task = {t.name: t for t in ssn.jobs[j.uid].tasks.values()}
    # The bucket needs 3 cpu; 'small' has 2: one other task must leave -> 3 - 1 = 2.
    assert p.bucket_score(task["tf-ps-0"], ssn.nodes["small"])[0] == 2  # type: ignore[attr-defined]
    assert p.node_order(task["tf-ps-0"], ssn.nodes["tiny"]) == 0.0  # type: ignore[attr-defined]


def test_weight_argument_scales_scores() -> None:
    j = mk_job("tf", "q1", namespace="ns", min_available=1)
    j.annotations = {tt.AFFINITY: "ps"}
    mk_task(j, "tf-ps-0", role="ps", pod=PodFacts(annotations={tt.TASK_SPEC: "ps"}))
    snap = mk_snapshot([mk_node("n1")], [j])
    ssn = open_session(
        snap, mk_conf("allocate", [{"name": "task-topology", "arguments": {"task-topology.weight": 3}}])
    )
    p = ssn.plugins["task-topology"]
    assert p.weight == 3  # type: ignore[attr-defined]
    t = next(iter(ssn.jobs[j.uid].tasks.values()))
    assert p.node_order(t, ssn.nodes["n1"]) == pytest.approx(300.0)  # type: ignore[attr-defined]
    assert tt.new({}).weight == 1


def test_jobs_left_out_of_the_topology() -> None:
    # invalid annotation, task order alone (no role gets a priority), no pending task
    bad = mk_job("bad", "q1", namespace="ns")
    bad.annotations = {tt.AFFINITY: "nope"}
    mk_task(bad, "bad-0", role="ps", pod=PodFacts(annotations={tt.TASK_SPEC: "ps"}))
    order_only = mk_job("ord", "q1", namespace="ns")
    order_only.annotations = {tt.TASK_ORDER: "ps"}
    mk_task(order_only, "ord-0", role="ps", pod=PodFacts(annotations={tt.TASK_SPEC: "ps"}))
    done = mk_job("done", "q1", namespace="ns", phase="Running")
    done.annotations = {tt.AFFINITY: "ps"}
    mk_task(
        done,
        "done-0",
        role="ps",
        status=TaskStatus.RUNNING,
        node="n1",
        pod=PodFacts(annotations={tt.TASK_SPEC: "ps"}),
    )
    ssn = open_session(
        mk_snapshot([mk_node("n1")], [bad, order_only, done]), mk_conf("allocate", ["task-topology"])
    )
    managers = ssn.plugins["task-topology"].managers  # type: ignore[attr-defined]
    assert set(managers) == {order_only.uid}
    assert managers[order_only.uid].buckets == []  # task order alone puts nothing in a bucket
    assert ssn.has(cb.TASK_ORDER) and ssn.has(cb.NODE_ORDER)


def test_job_annotations_from_a_volcano_job_manifest() -> None:
    objs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        },
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "tf", "namespace": "ns", "annotations": {tt.AFFINITY: "ps,worker"}},
            "spec": {
                "minAvailable": 2,
                "tasks": [
                    {
                        "name": "ps",
                        "replicas": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                        },
                    },
                    {
                        "name": "worker",
                        "replicas": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                        },
                    },
                ],
            },
        },
    ]
    snap = build_snapshot([("t", i, o) for i, o in enumerate(objs)])
    ssn = open_session(snap, mk_conf("allocate", ["task-topology"]))
    managers = ssn.plugins["task-topology"].managers  # type: ignore[attr-defined]
    (m,) = managers.values()
    assert [sorted(t.name for t in b.tasks.values()) for b in m.buckets] == [["tf-ps-0", "tf-worker-0"]]
