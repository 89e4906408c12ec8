"""The cdp plugin: running pods inside their cooldown time are kept out of preemption and reclaim victims."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task, open_session

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.cdp import cooldown_time

NOW = 1_700_000_000.0
KEY = "volcano.sh/cooldown-time"


def make_pod_task(
    job: Any,
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    scheduled_ago: float | None,
) -> TaskInfo:
    """cdp_test.go makePod: Running with a PodScheduled=True condition when scheduled_ago is given."""
    facts = PodFacts(
        labels=dict(labels),
        annotations={"scheduling.k8s.io/group-name": "test-group", **annotations},
        phase="Running" if scheduled_ago is not None else "Pending",
        scheduled_time=NOW - scheduled_ago if scheduled_ago is not None else None,
    )
    status = TaskStatus.RUNNING if scheduled_ago is not None else TaskStatus.PENDING
    return mk_task(job, name, status=status, node="n1" if scheduled_ago is not None else "", pod=facts)


def cdp_session(jobs: list[Any], **flags: Any) -> Session:
    snap = mk_snapshot([mk_node("n1", "16", "64Gi")], jobs)
    snap.now = NOW
    return open_session(snap, mk_conf("preempt, reclaim", [{"name": "cdp", **flags}]))


# ---------------------------------------- Test_CooldownTimePlugin_podPreemptStableTime
@pytest.mark.parametrize(
    ("case", "value", "expected"),
    [("normal", "600s", 600 * 10**9), ("not-enabled", "600abcde", None)],
)
def test_volcano_pod_cooldown_time(case: str, value: str, expected: int | None) -> None:
    j = mk_job("test-group")
    t = make_pod_task(j, "test-pod", {}, {KEY: value}, 100)
    assert cooldown_time(t) == expected, case


# ---------------------------------------- TestPreemptableFn
def test_volcano_preemptable_fn() -> None:
    j = mk_job("test-group", min_available=0, phase="Running")
    pre = {"volcano.sh/preemptable": "true"}
    make_pod_task(j, "task1", pre, {KEY: "600s"}, 100)  # inside its cooldown: filtered
    make_pod_task(j, "task2", pre, {KEY: "600abcde"}, 100)  # invalid value: not protected
    make_pod_task(j, "task3", pre, {KEY: "600s"}, 800)  # cooldown over
    ssn = cdp_session([j])
    tasks = sorted(ssn.jobs[j.uid].tasks.values(), key=lambda t: t.name)
    assert [t.name for t in ssn.preemptable(preemptor(), tasks)] == ["task2", "task3"]
    assert [t.name for t in ssn.reclaimable(preemptor(), tasks)] == ["task2", "task3"]
    assert any("600abcde" in w for w in ssn.warnings)


def preemptor() -> TaskInfo:
    return mk_task("none/none", "preemptor", add=False)


# ---------------------------------------- rules
def test_label_wins_over_annotation() -> None:
    j = mk_job("j")
    t = make_pod_task(j, "t", {KEY: "1h"}, {KEY: "1s"}, 100)
    assert cooldown_time(t) == 3600 * 10**9


@pytest.mark.parametrize(
    ("ago", "protected"),
    [(599.0, True), (599.999, True), (600.0, False), (601.0, False)],
)
def test_cooldown_boundary(ago: float, protected: bool) -> None:
    j = mk_job("j", min_available=0, phase="Running")
    make_pod_task(j, "t", {}, {KEY: "10m"}, ago)
    ssn = cdp_session([j])
    tasks = list(ssn.jobs[j.uid].tasks.values())
    assert (ssn.preemptable(preemptor(), tasks) == []) is protected


def test_only_running_pods_with_a_pod_scheduled_condition_are_protected() -> None:
    j = mk_job("j", min_available=0, phase="Running")
    pending = make_pod_task(j, "pending", {}, {KEY: "1h"}, None)
    no_condition = mk_task(
        j,
        "nocond",
        status=TaskStatus.RUNNING,
        node="n1",
        pod=PodFacts(annotations={KEY: "1h"}, phase="Running"),
    )
    ssn = cdp_session([j])
    tasks = sorted(ssn.jobs[j.uid].tasks.values(), key=lambda t: t.name)
    assert {t.name for t in ssn.preemptable(preemptor(), tasks)} == {pending.name, no_condition.name}


def test_flags_gate_the_hooks() -> None:
    j = mk_job("j", min_available=0, phase="Running")
    make_pod_task(j, "t", {}, {KEY: "1h"}, 10)
    ssn = cdp_session([j], enableReclaimable=False)
    tasks = list(ssn.jobs[j.uid].tasks.values())
    assert ssn.preemptable(preemptor(), tasks) == []
    assert ssn.callbacks("reclaimable") == []


def test_manifests_read_the_first_true_pod_scheduled_condition() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {KEY: "10m"}},
        "spec": {"schedulerName": "volcano", "nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:05:00Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:01:00Z"},
            ],
        },
    }
    snap = build_snapshot([("m.yaml", 0, pod)])
    (task,) = [t for j in snap.jobs.values() for t in j.tasks.values()]
    assert task.pod.scheduled_time == 1704067260.0
    assert task.pod.phase == "Running"
