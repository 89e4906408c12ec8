"""The pdb plugin: PodDisruptionBudgets filter preemption, reclaim and shuffle victims."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session, run

from fumarole.daemon.manifests import ManifestError, build_snapshot
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import NamespaceInfo, PodDisruptionBudgetInfo
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.pdb import filter_victims

JOB_LABEL = "volcano.sh/job-name"


def budget(
    name: str, allowed: int, selector: Any, ns: str = "default", disrupted: tuple[str, ...] = ()
) -> PodDisruptionBudgetInfo:
    return PodDisruptionBudgetInfo(name, ns, selector, allowed, frozenset(disrupted))


def running(job: Any, name: str, labels: dict[str, str] | None, ns: str = "default") -> TaskInfo:
    return mk_task(
        job,
        name,
        status=TaskStatus.RUNNING,
        node="n1",
        namespace=ns,
        pod=PodFacts(labels=dict(labels or {}), phase="Running"),
    )


def pdb_session(
    tasks_labels: dict[str, dict[str, str] | None], pdbs: list[PodDisruptionBudgetInfo]
) -> tuple[Session, list[TaskInfo]]:
    j = mk_job("job-1", min_available=0, phase="Running")
    for name, labels in tasks_labels.items():
        running(j, name, labels)
    snap = mk_snapshot([mk_node("n1", "16", "64Gi")], [j])
    for p in pdbs:
        snap.namespaces.setdefault(p.namespace, NamespaceInfo(p.namespace)).pdbs.append(p)
    conf = mk_conf("preempt, reclaim, shuffle", ["pdb"])
    ssn = open_session(snap, conf)
    tasks = sorted(ssn.jobs[j.uid].tasks.values(), key=lambda t: t.name)
    return ssn, tasks


# ---------------------------------------- pdb_test.go TestPreemptableAndReclaimableFn
SELECT_JOB1 = {"matchLabels": {JOB_LABEL: "job-1"}}


@pytest.mark.parametrize(
    ("case", "pdbs", "expected"),
    [
        ("test without pdbs", [], ["test-pod1", "test-pod2"]),
        ("test with pdbs(can evict 0 pod)", [budget("test-pdb", 0, SELECT_JOB1)], []),
        ("test with pdbs(can evict 1 pod)", [budget("test-pdb", 1, SELECT_JOB1)], ["test-pod1"]),
    ],
)
def test_volcano_pdb_table(case: str, pdbs: list[PodDisruptionBudgetInfo], expected: list[str]) -> None:
    ssn, tasks = pdb_session({"test-pod1": {JOB_LABEL: "job-1"}, "test-pod2": {JOB_LABEL: "job-1"}}, pdbs)
    preemptor = tasks[0]
    assert [t.name for t in ssn.preemptable(preemptor, tasks)] == expected, case
    assert [t.name for t in ssn.reclaimable(preemptor, tasks)] == expected, case
    assert [t.name for t in ssn.victim_tasks(tasks)] == expected, case


# ---------------------------------------- filter rules
def test_unlabelled_pods_are_never_victims() -> None:
    ssn, tasks = pdb_session({"bare": None, "labelled": {"a": "b"}}, [])
    assert [t.name for t in ssn.preemptable(tasks[0], tasks)] == ["labelled"]


def test_disrupted_pods_are_not_charged_and_other_namespaces_are_ignored() -> None:
    pdbs = [
        budget("pdb", 0, SELECT_JOB1, disrupted=("p1",)),
        budget("elsewhere", 0, SELECT_JOB1, ns="other"),
    ]
    ssn, tasks = pdb_session({"p1": {JOB_LABEL: "job-1"}, "p2": {JOB_LABEL: "job-1"}}, pdbs)
    assert [t.name for t in ssn.preemptable(tasks[0], tasks)] == ["p1"]


@pytest.mark.parametrize("selector", [None, {}, {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}])
def test_nil_empty_or_bad_selectors_match_nothing(selector: Any) -> None:
    ssn, tasks = pdb_session({"p1": {"a": "b"}}, [budget("pdb", 0, selector)])
    assert [t.name for t in ssn.preemptable(tasks[0], tasks)] == ["p1"]


def test_match_expressions_select() -> None:
    sel = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}
    ssn, tasks = pdb_session({"db-0": {"tier": "db"}, "web-0": {"tier": "web"}}, [budget("pdb", 0, sel)])
    assert [t.name for t in ssn.preemptable(tasks[0], tasks)] == ["web-0"]


def test_every_matching_budget_is_charged_even_for_a_refused_pod() -> None:
    # p1 matches A (1 allowed) and B (0 allowed): refused by B, but A is spent too, so p2 (A only) is refused.
    a = budget("a", 1, {"matchLabels": {"app": "x"}})
    b = budget("b", 0, {"matchLabels": {"role": "lead"}})
    j = mk_job("j", min_available=0)
    t1 = running(j, "p1", {"app": "x", "role": "lead"})
    t2 = running(j, "p2", {"app": "x"})
    assert filter_victims([a, b], [t1, t2]) == []
    assert filter_victims([a, b], [t2, t1]) == [t2]


def test_flags_gate_each_hook() -> None:
    j = mk_job("job-1", min_available=0, phase="Running")
    running(j, "p1", {JOB_LABEL: "job-1"})
    snap = mk_snapshot([mk_node("n1")], [j])
    snap.namespaces["default"] = NamespaceInfo("default", pdbs=[budget("pdb", 5, SELECT_JOB1)])
    conf = mk_conf("shuffle", [{"name": "pdb", "enablePreemptable": False, "enabledVictim": False}])
    ssn = open_session(snap, conf)
    tasks = list(ssn.jobs[j.uid].tasks.values())
    assert ssn.victim_tasks(tasks) == []
    assert ssn.preemptable(tasks[0], tasks) == []
    assert [t.name for t in ssn.reclaimable(tasks[0], tasks)] == ["p1"]


# ---------------------------------------- manifests and an action
PDB_DOC: dict[str, Any] = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "keep-one", "namespace": "ns1"},
    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    "status": {"disruptionsAllowed": 1, "disruptedPods": {"web-0": "2024-01-01T00:00:00Z"}},
}


def test_manifests_load_pod_disruption_budgets() -> None:
    snap = build_snapshot([("m.yaml", 0, PDB_DOC)])
    assert snap.namespaces["ns1"].pdbs == [
        PodDisruptionBudgetInfo("keep-one", "ns1", {"matchLabels": {"app": "web"}}, 1, frozenset({"web-0"}))
    ]
    bad = {**PDB_DOC, "status": {"disruptionsAllowed": "one"}}
    with pytest.raises(ManifestError, match=r"status\.disruptionsAllowed"):
        build_snapshot([("m.yaml", 0, bad)])


def test_shuffle_with_pdb_evicts_every_running_pod_the_budgets_allow() -> None:
    # Volcano's VictimTasks unites a tier's answers, so pdb alone nominates all it does not protect.
    objs: list[dict[str, Any]] = [PDB_DOC]
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}},
        }
    )
    for i in range(3):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"web-{i + 1}", "namespace": "ns1", "labels": {"app": "web"}},
                "spec": {"schedulerName": "volcano", "nodeName": "n1", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            }
        )
    snap = build_snapshot(("m.yaml", i, o) for i, o in enumerate(objs))
    res = run(snap, mk_conf("shuffle", ["pdb"]))
    assert [e.task for e in res.evictions] == ["ns1/web-1"]
