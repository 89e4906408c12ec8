"""Tests for daemon.manifests: YAML/JSON loading and the snapshot Volcano's cache would hold."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fumarole.daemon.manifests import ManifestError, build_snapshot, load_objects, load_snapshot
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import HostPort, Taint, TaskInfo, TaskStatus, Toleration

GI = 1 << 30


# ------------------------------------------------------------------------------------ helpers
def snap(*objs: dict[str, Any], **kw: Any) -> ClusterSnapshot:
    return build_snapshot([("t.yaml", i, o) for i, o in enumerate(objs)], **kw)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


def node(name: str, cpu: str = "8", memory: str = "16Gi", pods: str = "110", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }
    obj.update(extra)
    return obj


def pod(
    name: str,
    ns: str = "ns1",
    group: str | None = "pg1",
    requests: Any = None,
    *,
    annotations: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if group is not None:
        ann["scheduling.k8s.io/group-name"] = group
    md: dict[str, Any] = {"name": name, "namespace": ns, "annotations": ann}
    if labels:
        md["labels"] = labels
    md.update(meta or {})
    sp: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}],
    }
    sp.update(spec or {})
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": sp}
    if status is not None:
        obj["status"] = status
    return obj


def podgroup(name: str = "pg1", ns: str = "ns1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def queue(
    name: str, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec or {},
    }
    if status is not None:
        obj["status"] = status
    return obj


def pclass(name: str, value: Any, global_default: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
        **extra,
    }


def vcjob(name: str = "job", ns: str = "ns1", **spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {})
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": spec,
    }


def task_spec(name: str | None, replicas: int, requests: dict[str, Any], **extra: Any) -> dict[str, Any]:
    template_spec = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    template_spec.update(extra.pop("template_spec", {}))
    t: dict[str, Any] = {"replicas": replicas, "template": {"spec": template_spec}, **extra}
    if name is not None:
        t["name"] = name
    return t


def only_task(s: ClusterSnapshot) -> TaskInfo:
    tasks = [t for j in s.jobs.values() for t in j.tasks.values()]
    assert len(tasks) == 1
    return tasks[0]


def res(cpu: int = 0, memory: int = 0, pods: int = 0) -> Resource:
    return Resource(cpu, memory, {"pods": pods} if pods else None)


def error_of(*objs: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as ei:
        snap(*objs)
    return str(ei.value)


# ------------------------------------------------------------------------------------ requests
def test_quantities_in_requests_are_summed_over_containers() -> None:
    p = pod("p", requests={"cpu": "500m", "memory": "1.5Gi", "nvidia.com/gpu": 1})
    p["spec"]["containers"].append(
        {"name": "d", "resources": {"requests": {"cpu": 0.25, "memory": "1e9", "ephemeral-storage": "1Ki"}}}
    )
    t = only_task(snap(podgroup(), p))
    scalars = {"nvidia.com/gpu": 1000, "pods": 1, "ephemeral-storage": 1024_000}
    assert t.resreq == Resource(750, 3 * GI // 2 + 10**9, scalars)
    assert not t.best_effort


def test_extended_resources_per_container_only_for_names_with_a_slash() -> None:
    """The per-container device figures: containers asking a name with a '/' (limits or
    requests, init containers first), whole units rounded up; none for plain cpu/memory pods."""
    plain = pod("p", requests={"cpu": "1", "memory": "1Gi"})
    assert only_task(snap(podgroup(), plain)).pod.extended_resources == ()
    dev = pod("p", requests={"cpu": "1", "volcano.sh/gpu-memory": "1500m"})
    dev["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 2}
    dev["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "1"}}})
    dev["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"example.com/fpga": 1}}}]
    (init, main) = only_task(snap(podgroup(), dev)).pod.extended_resources
    assert (init.init, dict(init.limits), dict(init.requests)) == (True, {"example.com/fpga": 1}, {})
    assert (main.init, dict(main.limits), dict(main.requests)) == (
        False,
        {"nvidia.com/gpu": 2},
        {"volcano.sh/gpu-memory": 2},
    )
    only_init = pod("p", requests={"cpu": "1"})
    only_init["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"a.io/x": "1"}}}]
    (init,) = only_task(snap(podgroup(), only_init)).pod.extended_resources
    assert init.init and dict(init.requests) == {"a.io/x": 1}


def test_creation_timestamps_shared_by_pods_parse_alike() -> None:
    """Equal timestamp texts give equal seconds (remembered per text); no offset means UTC."""
    a = pod("a", requests={"cpu": "1"})
    b = pod("b", requests={"cpu": "1"})
    for p in (a, b):
        p["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05Z"
    c = pod("c", requests={"cpu": "1"})
    c["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05"
    s = snap(podgroup(), a, b, c)
    assert {t.name: t.creation for j in s.jobs.values() for t in j.tasks.values()} == {
        "a": 1767225605.0,
        "b": 1767225605.0,
        "c": 1767225605.0,
    }


def test_sub_milli_cpu_is_rounded_up_per_container() -> None:
    p = pod("p", requests={"cpu": "100u"})
    p["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "100u"}}})
    assert only_task(snap(podgroup(), p)).resreq.cpu == 2


def test_init_containers_take_the_max_per_dimension() -> None:
    # The example in Volcano's pod_info.go: result cpu 3, memory 3G.
    p = pod("p", requests={"cpu": "2", "memory": "1G"})
    p["spec"]["containers"].append({"name": "c2", "resources": {"requests": {"cpu": "1", "memory": "1G"}}})
    p["spec"]["initContainers"] = [
        {"name": "i1", "resources": {"requests": {"cpu": "2", "memory": "1G"}}},
        {"name": "i2", "resources": {"requests": {"cpu": "2", "memory": "3G"}}},
    ]
    assert only_task(snap(podgroup(), p)).resreq == res(3000, 3 * 10**9, pods=1)


def test_restartable_init_containers_run_alongside() -> None:
    p = pod("p", requests={"cpu": "1"})
    p["spec"]["initContainers"] = [
        {
            "name": "sidecar",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
        {"name": "setup", "resources": {"requests": {"cpu": "3"}}},
    ]
    # Running sum: containers 1 + sidecar 1 = 2; init phase: setup 3 + sidecar 1 = 4.
    assert only_task(snap(podgroup(), p)).resreq == res(4000, GI, pods=1)


def test_overhead_and_pod_level_requests() -> None:
    p = pod("p", requests={"cpu": "1", "memory": "1Gi"})
    p["spec"]["overhead"] = {"cpu": "100m", "memory": "64Mi"}
    assert only_task(snap(podgroup(), p)).resreq == res(1100, GI + 64 * 2**20, pods=1)
    p["spec"]["resources"] = {"requests": {"cpu": "3"}}
    assert only_task(snap(podgroup(), p)).resreq == res(3100, GI + 64 * 2**20, pods=1)


def test_requests_default_to_limits() -> None:
    p = pod("p", requests={"memory": "1Gi"})
    p["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "2", "memory": "4Gi"}
    assert only_task(snap(podgroup(), p)).resreq == res(2000, GI, pods=1)


def test_pods_one_is_always_added() -> None:
    p = pod("p")
    p["spec"]["containers"] = [{"name": "c"}]
    t = only_task(snap(podgroup(), p))
    assert t.resreq == res(pods=1)
    assert t.best_effort


# ------------------------------------------------------------------------------------ queues
def test_default_and_root_queues_are_created() -> None:
    s = snap()
    assert set(s.queues) == {"root", "default"}
    root, default = s.queues["root"], s.queues["default"]
    assert (root.weight, root.reclaimable, root.state) == (1, False, "Open")
    assert (default.weight, default.reclaimable, default.state) == (1, True, "Open")


def test_given_default_queue_is_kept_and_custom_default_queue_name() -> None:
    s = snap(queue("default", {"weight": 5, "reclaimable": False}))
    assert s.queues["default"].weight == 5
    assert s.queues["default"].reclaimable is False
    s = snap(podgroup(), default_queue="batch")
    assert set(s.queues) == {"root", "batch"}
    assert s.jobs["ns1/pg1"].queue == "batch"


def test_queue_fields_and_state_default_open() -> None:
    s = snap(
        queue(
            "q1",
            {
                "capability": {"cpu": "10", "memory": "20Gi"},
                "deserved": {"cpu": "4"},
                "guarantee": {"resource": {"cpu": "1"}},
                "parent": "root",
                "priority": 3,
            },
            {"state": ""},
        ),
        queue("q2", {"weight": 2, "capability": {}}, {"state": "Closed"}),
    )
    q1, q2 = s.queues["q1"], s.queues["q2"]
    assert q1.state == "Open" and q1.is_open()
    assert q1.weight == 1 and q1.reclaimable is None and q1.is_reclaimable()
    assert q1.capability == res(10000, 20 * GI)
    assert q1.deserved == res(4000) and q1.guarantee == res(1000)
    assert (q1.parent, q1.priority) == ("root", 3)
    assert q2.state == "Closed" and not q2.is_open()
    assert q2.weight == 2 and q2.capability is None and q2.deserved is None and q2.guarantee is None
    assert list(s.queues) == ["q1", "q2", "root", "default"]


# ------------------------------------------------------------------------------------ nodes
def test_node_facts_and_allocatable_fallback() -> None:
    n = node("n1")
    n["status"] = {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"},
        "images": [{"names": ["nginx:1", "docker.io/nginx:1"], "sizeBytes": 1000}],
    }
    n["metadata"]["labels"] = {"zone": "a", "gpu": True}
    n["spec"] = {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]}
    s = snap(n, node("n0", cpu="2"))
    assert [x.name for x in s.nodes] == ["n1", "n0"]
    n1 = s.nodes[0]
    assert n1.allocatable == res(4000, 8 * GI, pods=10) and n1.capability == n1.allocatable
    assert n1.max_task_num == 10
    assert n1.facts.labels == {"gpu": "true", "zone": "a"}
    assert n1.facts.taints == (Taint("k", "", "NoSchedule"),)
    assert n1.facts.unschedulable
    assert n1.facts.images == {"nginx:1": 1000, "docker.io/nginx:1": 1000}


def test_bound_tasks_occupy_their_node() -> None:
    s = snap(
        node("n1", cpu="4"),
        podgroup(),
        pod("run", status={"phase": "Running"}, spec={"nodeName": "n1"}),
        pod("bound", spec={"nodeName": "n1"}),
        pod("done", status={"phase": "Succeeded"}, spec={"nodeName": "n1"}),
        pod("gone", status={"phase": "Running"}, spec={"nodeName": "nowhere"}),
        pod(
            "del",
            status={"phase": "Running"},
            spec={"nodeName": "n1"},
            meta={"deletionTimestamp": "2024-01-01T00:00:00Z"},
        ),
    )
    n1 = s.nodes[0]
    assert sorted(n1.tasks) == ["ns1-bound", "ns1-del", "ns1-run"]
    assert n1.used == res(3000, pods=3)
    assert n1.releasing == res(1000, pods=1)
    job = s.jobs["ns1/pg1"]
    statuses = {t.name: t.status for t in job.tasks.values()}
    assert statuses == {
        "run": TaskStatus.RUNNING,
        "bound": TaskStatus.BOUND,
        "done": TaskStatus.SUCCEEDED,
        "gone": TaskStatus.RUNNING,
        "del": TaskStatus.RELEASING,
    }
    assert job.tasks["ns1-gone"].node_name == "nowhere"


# ------------------------------------------------------------------------------------ pods
def test_pod_facts() -> None:
    p = pod(
        "p",
        labels={"app": "x"},
        spec={
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "schedulingGates": [{"name": "wait"}],
            "preemptionPolicy": "Never",
        },
        status={"phase": "Pending", "nominatedNodeName": "n9"},
        meta={
            "uid": "u-1",
            "creationTimestamp": "2024-01-01T00:00:10Z",
            "ownerReferences": [{"uid": "o-0"}, {"uid": "o-1", "controller": True}],
        },
    )
    p["spec"]["containers"][0]["image"] = "busybox"
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]
    t = only_task(snap(podgroup(), p))
    assert (t.uid, t.name, t.namespace, t.job) == ("u-1", "p", "ns1", "ns1/pg1")
    assert t.creation == 1704067210.0
    assert t.sch_gated
    f = t.pod
    assert f.labels == {"app": "x"}
    assert f.annotations == {"scheduling.k8s.io/group-name": "pg1"}
    assert f.node_selector == {"disk": "ssd"}
    assert "podAntiAffinity" in f.affinity
    assert f.tolerations == (Toleration("k", "Exists", "", "NoSchedule"),)
    assert f.host_ports == (HostPort(8080),)
    assert f.scheduling_gates == ("wait",)
    assert f.images == ("busybox",)
    assert f.owner_uid == "o-1"
    assert f.nominated_node_name == "n9"
    assert f.preemption_policy == "Never"
    assert (f.phase, f.deleting, f.scheduler_name) == ("Pending", False, "volcano")


def test_pod_defaults() -> None:
    p = pod("p")
    del p["metadata"]["namespace"]
    t = only_task(snap(podgroup(ns="default"), p))
    assert (t.uid, t.namespace, t.job, t.status) == (
        "default-p",
        "default",
        "default/pg1",
        TaskStatus.PENDING,
    )
    assert (t.priority, t.role, t.preemptable, t.creation) == (1, "", True, 0.0)


def test_task_priority_and_annotation_override() -> None:
    s = snap(
        pclass("high", 1000),
        podgroup(),
        pod("plain"),
        pod("spec", spec={"priority": 7}),
        pod("class", spec={"priorityClassName": "high"}),
        pod("ann", spec={"priority": 7}, annotations={"volcano.sh/task-priority": "-3"}),
        pod("bad", spec={"priority": 7}, annotations={"volcano.sh/task-priority": "x1"}),
        pod("big", annotations={"volcano.sh/task-priority": str(1 << 31)}),
    )
    prio = {t.name: t.priority for t in s.jobs["ns1/pg1"].tasks.values()}
    assert prio == {"plain": 1, "spec": 7, "class": 1000, "ann": -3, "bad": 7, "big": 1}
    assert s.jobs["ns1/pg1"].tasks["ns1-class"].pod.preemption_policy == "PreemptLowerPriority"


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        ({}, {}, True),
        ({"volcano.sh/preemptable": "false"}, {}, False),
        ({"volcano.sh/preemptable": "T"}, {"volcano.sh/preemptable": "false"}, True),
        ({}, {"volcano.sh/preemptable": "0"}, False),
        ({}, {"volcano.sh/preemptable": True}, True),
        ({"volcano.sh/preemptable": "yes"}, {}, False),
        ({"volcano.sh/preemptable": "TRUE"}, {}, True),
    ],
)
def test_task_preemptable_parsing(
    annotations: dict[str, Any], labels: dict[str, Any], expected: bool
) -> None:
    t = only_task(snap(podgroup(), pod("p", annotations=annotations, labels=labels)))
    assert t.preemptable is expected


def test_task_role_from_annotation_then_label() -> None:
    s = snap(
        podgroup(),
        pod("a", annotations={"volcano.sh/task-spec": "ps"}, labels={"volcano.sh/task-spec": "worker"}),
        pod("b", labels={"volcano.sh/task-spec": "worker"}),
    )
    assert {t.name: t.role for t in s.jobs["ns1/pg1"].tasks.values()} == {"a": "ps", "b": "worker"}


def test_pods_of_other_schedulers() -> None:
    s = snap(
        node("n1"),
        pod("unbound", group=None, spec={"schedulerName": "default-scheduler"}),
        pod(
            "bound",
            group=None,
            spec={"nodeName": "n1", "schedulerName": "default-scheduler"},
            status={"phase": "Running"},
        ),
        pod(
            "nosched", group=None, spec={"nodeName": "n1", "schedulerName": None}, status={"phase": "Running"}
        ),
    )
    assert [t.name for t in s.other_tasks] == ["bound", "nosched"]
    assert s.other_tasks[1].pod.scheduler_name == "default-scheduler"
    assert s.jobs == {}
    assert s.nodes[0].used == res(2000, pods=2)
    # Another scheduler name makes them ours.
    s = snap(
        pod("x", group=None, spec={"schedulerName": "default-scheduler"}),
        scheduler_names=["default-scheduler"],
    )
    assert s.other_tasks == [] and len(s.jobs) == 1


def test_pod_without_group_gets_the_podgroup_controllers_group() -> None:
    owner = {"ownerReferences": [{"uid": "rs-1", "controller": True}]}
    s = snap(
        pclass("mid", 50),
        pod(
            "a",
            group=None,
            meta=owner,
            spec={"priorityClassName": "mid"},
            annotations={"volcano.sh/preemptable": "true"},
        ),
        pod("b", group=None, meta=owner),
        pod("c", group=None, annotations={"scheduling.volcano.sh/queue-name": "q1"}, requests={"cpu": "2"}),
    )
    assert list(s.jobs) == ["ns1/podgroup-rs-1", "ns1/podgroup-ns1-c"]
    j = s.jobs["ns1/podgroup-rs-1"]
    assert (j.min_available, j.queue, j.status.phase, j.priority, j.has_pod_group) == (
        1,
        "default",
        "Pending",
        50,
        True,
    )
    assert j.preemptable
    assert sorted(t.name for t in j.tasks.values()) == ["a", "b"]
    assert j.min_resources == res(1000, pods=1)
    c = s.jobs["ns1/podgroup-ns1-c"]
    assert c.queue == "q1" and c.min_resources == res(2000, pods=1) and not c.preemptable
    # An explicit PodGroup of that name is used as is.
    s = snap(podgroup("podgroup-ns1-c", minMember=3), pod("c", group=None))
    assert s.jobs["ns1/podgroup-ns1-c"].min_available == 3


def test_pods_whose_podgroup_is_missing_keep_a_job_without_podgroup() -> None:
    s = snap(node("n1"), pod("p", group="ghost", spec={"nodeName": "n1"}, status={"phase": "Running"}))
    j = s.jobs["ns1/ghost"]
    assert not j.has_pod_group and j.name == "ghost" and j.namespace == "ns1"
    assert list(j.tasks) == ["ns1-p"]
    assert s.nodes[0].used == res(1000, pods=1)


# ------------------------------------------------------------------------------------ pod groups
def test_podgroup_fields() -> None:
    pg = podgroup(
        minMember=2,
        minTaskMember={"ps": 1, "worker": 1},
        queue="q1",
        minResources={"cpu": "2"},
    )
    pg["metadata"].update(
        {"annotations": {"volcano.sh/preemptable": "true"}, "creationTimestamp": "1970-01-01T00:01:00Z"}
    )
    pg["status"] = {
        "phase": "Inqueue",
        "running": 1,
        "conditions": [
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "transitionID": "s1"}
        ],
    }
    j = snap(pg).jobs["ns1/pg1"]
    assert (j.uid, j.name, j.namespace, j.queue) == ("ns1/pg1", "pg1", "ns1", "q1")
    assert (j.min_available, j.task_min_available, j.task_min_total) == (2, {"ps": 1, "worker": 1}, 2)
    assert j.min_resources == res(2000)
    assert (j.status.phase, j.status.running, j.creation, j.preemptable) == ("Inqueue", 1, 60.0, True)
    assert j.status.conditions[0].reason == "NotEnoughResources"
    assert j.status.conditions[0].transition_id == "s1"


def test_podgroup_defaults() -> None:
    j = snap(podgroup()).jobs["ns1/pg1"]
    assert (j.min_available, j.queue, j.status.phase, j.priority, j.preemptable) == (
        0,
        "default",
        "",
        0,
        False,
    )
    assert j.min_resources is None
    assert snap(podgroup(minResources={})).jobs["ns1/pg1"].min_resources == Resource()


def test_job_priority_from_priority_class_and_global_default() -> None:
    s = snap(
        pclass("low", 10),
        pclass("dflt", 5, True),
        podgroup("a", priorityClassName="low"),
        podgroup("b"),
        podgroup("c", priorityClassName="missing"),
        podgroup("d", priorityClassName="system-cluster-critical"),
    )
    assert {j.name: j.priority for j in s.jobs.values()} == {"a": 10, "b": 5, "c": 5, "d": 2000000000}
    assert s.jobs["ns1/a"].priority_class_name == "low"
    assert s.priority_classes["dflt"].global_default
    assert snap(podgroup("b")).jobs["ns1/b"].priority == 0


def test_namespaces_and_quotas() -> None:
    s = snap(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1", "labels": {"team": "a"}}},
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "rq", "namespace": "ns2"},
            "spec": {"hard": {"cpu": "10", "pods": 5}},
            "status": {"used": {"cpu": "500m"}},
        },
    )
    assert s.namespaces["ns1"].labels == {"team": "a"}
    q = s.namespaces["ns2"].quotas[0]
    assert (q.name, q.namespace, q.hard, q.used) == ("rq", "ns2", {"cpu": "10", "pods": "5"}, {"cpu": "500m"})


# ------------------------------------------------------------------------------------ Volcano Jobs
def test_volcano_job_expansion() -> None:
    job = vcjob(
        metadata={"uid": "j-uid", "labels": {"volcano.sh/preemptable": "true"}, "annotations": {"x": "y"}},
        queue="q1",
        priorityClassName="high",
        tasks=[
            task_spec("ps", 1, {"cpu": "1", "memory": "1Gi"}),
            task_spec(None, 2, {"cpu": "2"}, minAvailable=1),
        ],
    )
    s = snap(pclass("high", 100), queue("q1"), job)
    assert list(s.jobs) == ["ns1/job-j-uid"]
    j = s.jobs["ns1/job-j-uid"]
    assert (j.queue, j.min_available, j.priority, j.priority_class_name) == ("q1", 2, 100, "high")
    assert j.task_min_available == {"default1": 1, "ps": 1}
    assert j.preemptable and j.annotations == {"x": "y"}
    assert j.min_resources == res(3000, GI, pods=2)
    assert j.status.phase == ""
    names = sorted(t.name for t in j.tasks.values())
    assert names == ["job-default1-0", "job-default1-1", "job-ps-0"]
    t = j.tasks["ns1-job-default1-1"]
    assert (t.status, t.node_name, t.role, t.priority, t.job) == (
        TaskStatus.PENDING,
        "",
        "default1",
        100,
        j.uid,
    )
    assert t.resreq == res(2000, pods=1)
    assert t.preemptable
    assert t.pod.scheduler_name == "volcano" and t.pod.priority_class_name == "high"
    assert t.pod.owner_uid == "j-uid"
    assert t.pod.annotations["scheduling.k8s.io/group-name"] == "job-j-uid"
    assert t.pod.annotations["volcano.sh/task-index"] == "1"
    assert t.pod.labels["volcano.sh/job-name"] == "job"
    assert t.pod.labels["volcano.sh/preemptable"] == "true"


def test_volcano_job_defaults() -> None:
    job = vcjob(tasks=[task_spec("w", 3, {"cpu": "1"}), task_spec("m", 1, {"cpu": "2"}, minAvailable=0)])
    s = snap(job)
    j = s.jobs["ns1/job"]  # no uid: the controller's legacy PodGroup name
    assert (j.queue, j.min_available, j.task_min_available) == ("default", 3, {"m": 0, "w": 3})
    assert j.min_resources == res(3000, pods=3)
    assert len(j.tasks) == 4
    assert all(t.pod.scheduler_name == "volcano" for t in j.tasks.values())
    s = snap(job, scheduler_names=("mine",))
    assert all(t.pod.scheduler_name == "mine" for t in s.jobs["ns1/job"].tasks.values())


def test_volcano_job_min_resources_first_count_by_priority() -> None:
    # minAvailable (2) < sum of task minAvailable (4): the first 2 pods, higher-priority task first.
    job = vcjob(
        minAvailable=2,
        tasks=[
            task_spec("low", 2, {"cpu": "1"}),
            task_spec("high", 1, {"cpu": "4"}, template_spec={"priorityClassName": "hi"}),
            task_spec("mid", 1, {"cpu": "8"}),
        ],
    )
    j = snap(pclass("hi", 10), job).jobs["ns1/job"]
    assert j.min_resources == res(5000, pods=2)
    assert j.min_available == 2


def test_volcano_job_min_resources_fill_up_with_spare_replicas() -> None:
    # minAvailable 3 > sum(task minAvailable) 1: the min pods, then spare replicas in priority order.
    job = vcjob(
        minAvailable=3,
        tasks=[
            task_spec("a", 2, {"cpu": "1"}, minAvailable=1),
            task_spec("b", 2, {"cpu": "10"}, minAvailable=0),
        ],
    )
    j = snap(job).jobs["ns1/job"]
    assert j.min_resources == res(12000, pods=3)


def test_volcano_job_template_limits_do_not_count_for_min_resources() -> None:
    t = task_spec("w", 1, {})
    t["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    j = snap(vcjob(tasks=[t])).jobs["ns1/job"]
    assert j.min_resources == res(pods=1)
    assert only_task(snap(vcjob(tasks=[t]))).resreq == res(2000, pods=1)


def test_volcano_job_errors() -> None:
    msg = error_of(vcjob(tasks=[]))
    assert "document 1 (Job ns1/job): spec.tasks: no task specified" in msg
    msg = error_of(vcjob(tasks=[task_spec("a", 1, {"cpu": "1"}, minAvailable=2)]))
    assert "spec.tasks[0].minAvailable" in msg
    msg = error_of(vcjob(minAvailable=5, tasks=[task_spec("a", 1, {"cpu": "1"})]))
    assert "spec.minAvailable" in msg
    msg = error_of(vcjob(tasks=[task_spec("a", 1, {"cpu": "1"}), task_spec("a", 1, {"cpu": "1"})]))
    assert "spec.tasks[1].name: duplicated task name" in msg
    msg = error_of(vcjob(tasks=[task_spec("a", 1, {"cpu": "lots"})]))
    assert "spec.tasks[0].template.spec.containers[0].resources.requests.cpu: bad quantity" in msg
    msg = error_of(vcjob(tasks=[task_spec("a", 1, {"cpu": "1"})]), pod("job-a-0"))
    assert "document 1 (Job ns1/job): spec.tasks[0]: duplicate Pod ns1/job-a-0" in msg


# ------------------------------------------------------------------------------------ loading
CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
# an empty document is skipped
---
apiVersion: v1
kind: List
items:
- apiVersion: scheduling.volcano.sh/v1beta1
  kind: PodGroup
  metadata: {name: pg1, namespace: ns1}
  spec: {minMember: 1}
- apiVersion: v1
  kind: Pod
  metadata:
    name: p1
    namespace: ns1
    annotations: {scheduling.k8s.io/group-name: pg1}
    creationTimestamp: 2024-01-01T00:00:00Z
  spec:
    schedulerName: volcano
    containers: [{name: c, resources: {requests: {cpu: 1}}}]
"""


def test_load_multi_document_file_and_list(tmp_path: Path) -> None:
    p = write(tmp_path, "cluster.yaml", CLUSTER)
    objs = load_objects(p)
    assert [(Path(f).name, i, o["kind"]) for f, i, o in objs] == [
        ("cluster.yaml", 0, "Node"),
        ("cluster.yaml", 2, "PodGroup"),
        ("cluster.yaml", 2, "Pod"),
    ]
    s = load_snapshot(p)
    t = s.jobs["ns1/pg1"].tasks["ns1-p1"]
    assert t.creation == 1704067200.0


def test_typed_list_items_get_their_kind(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "NodeList",
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
    }
    p = write(tmp_path, "nodes.json", json.dumps(doc))
    objs = load_objects(p)
    assert [(o["apiVersion"], o["kind"], o["metadata"]["name"]) for _, _, o in objs] == [
        ("v1", "Node", "a"),
        ("v1", "Node", "b"),
    ]


def test_load_directory_recursively_sorted(tmp_path: Path) -> None:
    write(tmp_path, "b/nodes.yml", "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\n")
    write(tmp_path, "a.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    write(tmp_path, "c.json", json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}}))
    write(tmp_path, "notes.txt", "not a manifest")
    write(tmp_path, ".hidden/x.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: hidden}\n")
    objs = load_objects(tmp_path)
    assert [o["metadata"]["name"] for _, _, o in objs] == ["n1", "n2", "n3"]
    assert [n.name for n in load_snapshot(tmp_path).nodes] == ["n1", "n2", "n3"]


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file"):
        load_objects(tmp_path / "nope.yaml")


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, "bad.yaml", "kind: Node\n---\nkind: Pod\nmetadata: {name: x\n")
    with pytest.raises(ManifestError) as ei:
        load_objects(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}: document 2")
    assert "line " in msg and "YAML syntax error" in msg


def test_json_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, "bad.json", '{"kind": "Node",\n "metadata": }')
    with pytest.raises(ManifestError, match=r"bad\.json: line 2, column \d+: JSON syntax error"):
        load_objects(p)


def test_non_mapping_document(tmp_path: Path) -> None:
    p = write(tmp_path, "x.yaml", "just text\n")
    with pytest.raises(ManifestError, match=r"x\.yaml: document 1: expected a mapping"):
        load_objects(p)


# ------------------------------------------------------------------------------------ errors
def test_error_names_file_document_object_and_field(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "cluster.yaml",
        """\
        apiVersion: v1
        kind: Node
        metadata: {name: n1}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p1, namespace: c1}
        spec:
          containers:
          - name: c
            resources: {requests: {cpu: 1x}}
        """,
    )
    with pytest.raises(ManifestError) as ei:
        load_snapshot(p)
    e = ei.value
    assert str(e).startswith(
        f'{p}: document 2 (Pod c1/p1): spec.containers[0].resources.requests.cpu: bad quantity "1x": '
    )
    assert (e.file, e.document, e.obj, e.field) == (
        str(p),
        1,
        "Pod c1/p1",
        "spec.containers[0].resources.requests.cpu",
    )


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            pod("p", requests=["cpu"]),
            "(Pod ns1/p): spec.containers[0].resources.requests: expected a mapping, got a list",
        ),
        (pod("p", requests={"cpu": True}), "requests.cpu: bad quantity true"),
        (pod("p", requests={"memory": "-1Gi"}), 'requests.memory: bad quantity "-1Gi": must not be negative'),
        (
            podgroup(minMember="2"),
            '(PodGroup ns1/pg1): spec.minMember: expected an integer, got a string "2"',
        ),
        (podgroup(minMember=-1), "spec.minMember: -1 is out of range"),
        (podgroup(minTaskMember={"a": "x"}), "spec.minTaskMember.a: expected an integer"),
        (queue("q", {"weight": -1}), "(Queue q): spec.weight: -1 is out of range"),
        (queue("q", {"reclaimable": "yes"}), "spec.reclaimable: expected true or false"),
        (queue("q", status={"state": "open"}), 'status.state: unknown state "open"'),
        (node("n", cpu="lots"), '(Node n): status.allocatable.cpu: bad quantity "lots"'),
        (pclass("x", "high"), "(PriorityClass x): value: expected an integer"),
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a"}},
            "document 1 (Pod): metadata.name: required",
        ),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": []}, "document 1: metadata: expected a mapping"),
        (
            pod("p", meta={"creationTimestamp": "yesterday"}),
            'metadata.creationTimestamp: bad timestamp "yesterday"',
        ),
        (pod("p", spec={"tolerations": {"key": "k"}}), "spec.tolerations: expected a list, got a mapping"),
        (pod("p", labels={"a": {"b": 1}}), "metadata.labels.a: expected a string, got a mapping"),
    ],
)
def test_type_errors_name_the_field(obj: dict[str, Any], expected: str) -> None:
    msg = error_of(obj)
    assert msg.startswith("t.yaml: document 1")
    assert expected in msg


def test_unknown_kind_lists_supported_kinds() -> None:
    msg = error_of(node("n"), {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})
    assert msg.startswith('t.yaml: document 2: kind: unsupported kind "batch/v1 Job"; supported kinds: ')
    for kind in (
        "v1 Node",
        "v1 Pod",
        "scheduling.volcano.sh/v1beta1 PodGroup",
        "batch.volcano.sh/v1alpha1 Job",
    ):
        assert kind in msg


def test_duplicates_are_errors() -> None:
    msg = error_of(pod("p"), pod("p"))
    assert msg.startswith(
        "t.yaml: document 2 (Pod ns1/p): metadata.name: duplicate Pod ns1/p (first in t.yaml document 1)"
    )
    # Same name in another namespace or of another kind is fine.
    snap(podgroup("x"), pod("x", group="x"), pod("x", ns="ns2", group="x"))
    msg = error_of(pod("a", meta={"uid": "u"}), pod("b", meta={"uid": "u"}))
    assert 'document 2 (Pod ns1/b): metadata.uid: duplicate pod uid "u"' in msg


def test_determinism() -> None:
    objs = [
        node("n2"),
        node("n1"),
        podgroup("b"),
        podgroup("a"),
        pod("p2", group="b", labels={"z": "1", "a": "2"}),
        pod("p1", group="a"),
    ]
    s1, s2 = snap(*objs), snap(*objs)
    assert [n.name for n in s1.nodes] == [n.name for n in s2.nodes] == ["n2", "n1"]
    assert list(s1.jobs) == list(s2.jobs) == ["ns1/b", "ns1/a"]
    assert list(s1.jobs["ns1/b"].tasks["ns1-p2"].pod.labels) == ["a", "z"]
