"""The projection's folding rules, one by one (daemon/cache/state.py module notes)."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.cache import Projection
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    ClockAdvanced,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    JobExplained,
    NodeUpserted,
    PendingReason,
    PodDeleted,
    PodGroupConditionRecord,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    QueueUpserted,
    ResyncCompleted,
    ResyncStarted,
)


def node(name: str, cpu: str = "4") -> NodeUpserted:
    m = {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}}}
    return NodeUpserted(name=name, manifest=m, at_ms=1)


def pod(
    name: str, *, node_name: str = "", phase: str = "", uid: str = "", group: str = "pg", cpu: str = "1"
) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if uid:
        meta["uid"] = uid
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    m: dict[str, Any] = {"metadata": meta, "spec": spec}
    if phase:
        m["status"] = {"phase": phase}
    return PodUpserted(namespace="ns", name=name, manifest=m, at_ms=2)


def podgroup(name: str = "pg", phase: str | None = None) -> PodGroupUpserted:
    m: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": 1}}
    if phase is not None:
        m["status"] = {"phase": phase}
    return PodGroupUpserted(namespace="ns", name=name, manifest=m, at_ms=3)


def fold(p: Projection, *events: Any) -> list[int]:
    seqs = []
    for ev in events:
        p.fold(p.seq + 1, ev)
        seqs.append(p.seq)
    return seqs


def task(p: Projection, name: str = "p0") -> Any:
    snap = p.freeze()
    for job in snap.jobs.values():
        for t in job.tasks.values():
            if t.name == name:
                return t, snap
    raise AssertionError(f"no task {name}")


def base() -> Projection:
    p = Projection()
    fold(p, node("n0"), node("n1"), podgroup(), pod("p0"))
    return p


def test_cache_bind_makes_the_pod_binding_on_its_node_until_the_cluster_answers() -> None:
    p = base()
    fold(
        p,
        BindDecided(cycle=1, namespace="ns", name="p0", uid="ns-p0", node="n1", job="ns/pg", queue="default"),
    )
    t, snap = task(p)
    assert (t.status, t.node_name) == (TaskStatus.BINDING, "n1")
    n1 = next(n for n in snap.nodes if n.name == "n1")
    assert "ns-p0" in n1.tasks and n1.idle.cpu == 3000
    # An update without a node (bind still in flight) keeps it; BindSucceeded changes nothing.
    fold(p, pod("p0", phase="Pending"), BindSucceeded(decision_seq=5, namespace="ns", name="p0", node="n1"))
    assert task(p)[0].status is TaskStatus.BINDING
    # The cluster's answer: the pod is on n1 and Running.
    fold(p, pod("p0", node_name="n1", phase="Running"))
    t, _ = task(p)
    assert (t.status, t.node_name) == (TaskStatus.RUNNING, "n1")
    assert p.binds == {}


def test_cache_bind_failed_reverts_only_its_own_decision() -> None:
    p = base()
    (first,) = fold(p, BindDecided(cycle=1, namespace="ns", name="p0", uid="", node="n0", job="", queue=""))
    fold(p, BindFailed(decision_seq=first + 100, namespace="ns", name="p0", node="n0", reason="other"))
    assert task(p)[0].status is TaskStatus.BINDING
    fold(p, BindFailed(decision_seq=first, namespace="ns", name="p0", node="n0", reason="node gone"))
    t, _ = task(p)
    assert (t.status, t.node_name) == (TaskStatus.PENDING, "")


def test_cache_bind_is_ignored_for_another_uid_or_a_bound_pod() -> None:
    p = base()
    fold(p, BindDecided(cycle=1, namespace="ns", name="p0", uid="old-uid", node="n0", job="", queue=""))
    assert task(p)[0].status is TaskStatus.PENDING
    fold(p, pod("p1", node_name="n0", phase="Running"))
    fold(p, BindDecided(cycle=1, namespace="ns", name="p1", uid="", node="n1", job="", queue=""))
    t, _ = task(p, "p1")
    assert (t.status, t.node_name) == (TaskStatus.RUNNING, "n0")
    # A recreated pod (new uid) drops the bind in flight.
    fold(p, BindDecided(cycle=2, namespace="ns", name="p0", uid="", node="n0", job="", queue=""))
    fold(p, pod("p0", uid="fresh"))
    assert task(p)[0].status is TaskStatus.PENDING


def test_cache_evict_marks_releasing_until_deleted_or_failed() -> None:
    p = base()
    fold(p, pod("p1", node_name="n0", phase="Running"))
    (seq,) = fold(
        p,
        EvictDecided(
            cycle=1,
            namespace="ns",
            name="p1",
            uid="",
            node="n0",
            job="",
            queue="",
            action="preempt",
            reason="",
        ),
    )
    t, snap = task(p, "p1")
    assert t.status is TaskStatus.RELEASING
    n0 = next(n for n in snap.nodes if n.name == "n0")
    assert n0.releasing.cpu == 1000
    fold(p, EvictFailed(decision_seq=seq, namespace="ns", name="p1", reason="pdb"))
    assert task(p, "p1")[0].status is TaskStatus.RUNNING
    fold(
        p,
        EvictDecided(
            cycle=2, namespace="ns", name="p1", uid="", node="n0", job="", queue="", action="a", reason=""
        ),
        PodDeleted(namespace="ns", name="p1", at_ms=9),
    )
    assert p.evictions == {}
    assert all(t.name != "p1" for j in p.freeze().jobs.values() for t in j.tasks.values())


def test_cache_podgroup_status_is_kept_until_the_api_copy_with_a_status_arrives() -> None:
    p = base()
    cond = PodGroupConditionRecord(type="Scheduled", status="True", reason="tasks", transition_id="session-1")
    fold(p, PodGroupStatusChanged(cycle=1, namespace="ns", name="pg", phase="Inqueue", conditions=(cond,)))
    job = p.freeze().jobs["ns/pg"]
    assert job.status.phase == "Inqueue"
    assert [(c.type, c.reason, c.transition_id) for c in job.status.conditions] == [
        ("Scheduled", "tasks", "session-1")
    ]
    fold(p, podgroup())  # no status in the manifest: the written status stays
    assert p.freeze().jobs["ns/pg"].status.phase == "Inqueue"
    fold(p, podgroup(phase="Running"))
    assert p.freeze().jobs["ns/pg"].status.phase == "Running"


def test_cache_implicit_podgroup_status_is_dropped_with_its_last_pod() -> None:
    p = Projection()
    fold(p, node("n0"), pod("solo", group=""))
    job_id = "ns/podgroup-ns-solo"
    assert job_id in p.freeze().jobs
    fold(p, PodGroupStatusChanged(cycle=1, namespace="ns", name="podgroup-ns-solo", phase="Inqueue"))
    assert p.freeze().jobs[job_id].status.phase == "Inqueue"
    fold(p, PodDeleted(namespace="ns", name="solo"))
    assert p.pg_status == {}
    fold(p, pod("solo", group=""))
    assert p.freeze().jobs[job_id].status.phase == "Pending"


def test_cache_resync_deletes_objects_not_listed_again() -> None:
    p = base()
    fold(p, pod("p1"), QueueUpserted(name="q", manifest={"metadata": {"name": "q"}}))
    fold(p, ResyncStarted(source="sim", kinds=("Pod", "nodes")), node("n0"), pod("p1"))
    fold(p, ResyncCompleted(source="sim", kinds=("Pod", "nodes")))
    assert list(p.objects["Node"]) == [("", "n0")]
    assert list(p.objects["Pod"]) == [("ns", "p1")]
    assert ("", "q") in p.objects["Queue"]  # kinds not named are left alone
    fold(p, ResyncCompleted(source="other"))  # no start: ignored
    assert list(p.objects["Pod"]) == [("ns", "p1")]


def test_cache_bad_manifest_is_left_out_and_reported() -> None:
    p = base()
    bad = pod("p9", cpu="1x")
    fold(p, bad)
    snap = p.freeze()
    assert all(t.name != "p9" for j in snap.jobs.values() for t in j.tasks.values())
    assert len(p.problems) == 1 and "Pod ns/p9" in p.problems[0] and "bad quantity" in p.problems[0]
    fold(p, pod("p9"))
    p.freeze()
    assert p.problems == []


def test_cache_clock_cycle_and_explanations() -> None:
    p = base()
    fold(p, ClockAdvanced(at_ms=90_500), ClockAdvanced(at_ms=10))
    snap = p.freeze()
    assert snap.now == 90.5 and snap.session_id == "session-1"
    fold(p, CycleOpened(cycle=7, watermark=3, now_ms=90_500, conf_hash="h"))
    assert p.freeze().session_id == "session-8" and p.freeze(cycle=3).session_id == "session-3"
    why = JobExplained(
        cycle=7,
        namespace="ns",
        name="pg",
        queue="default",
        message="1/1 pods pending",
        reasons=(PendingReason(code="predicates-failed", message="x"),),
    )
    fold(p, why)
    assert p.explanations() == {"ns/pg": why}
    fold(p, JobExplained(cycle=8, namespace="ns", name="pg", queue="default", message=""))
    assert p.explanations() == {}


def test_cache_binding_that_no_longer_fits_counts_as_bound() -> None:
    p = base()
    fold(p, BindDecided(cycle=1, namespace="ns", name="p0", uid="", node="n0", job="", queue=""))
    fold(p, node("n0", cpu="500m"))
    t, _ = task(p)
    assert (t.status, t.node_name) == (TaskStatus.BOUND, "n0")
    assert any("counted as Bound" in x for x in p.problems)
