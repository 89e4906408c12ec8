"""deviceshare with gpushare: per-card accounting, card choice, release, node lock (Go cases ported)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, open_session, run_actions

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.conf import ConfError
from fumarole.daemon.scheduler.framework.explain import pending_reasons
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.devices import ContainerResources
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins import deviceshare
from fumarole.daemon.scheduler.plugins.deviceshare_gpushare import (
    GPU_INDEX,
    GPU_MEMORY,
    GPU_NUMBER,
    PREDICATE_TIME,
    GpuSharePool,
    ShareCard,
    gpu_memory_of,
    gpu_number_of,
)

SHARING = {"deviceshare.GPUSharingEnable": True}
NUMBER = {"deviceshare.GPUNumberEnable": True}


# ------------------------------------------------------------------------------- manifests
def gpu_node(
    name: str,
    cards: int = 2,
    per_card: int = 16384,
    annotations: dict[str, str] | None = None,
    cpu: str = "16",
) -> dict[str, Any]:
    res = {
        "cpu": cpu,
        "memory": "64Gi",
        "pods": "110",
        GPU_MEMORY: str(cards * per_card),
        GPU_NUMBER: str(cards),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations or {}},
        "status": {"capacity": dict(res), "allocatable": dict(res)},
    }


def queue() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q1"},
        "spec": {"weight": 1},
    }


def job(
    name: str,
    *,
    replicas: int = 1,
    min_member: int | None = None,
    mem: int | None = None,
    number: int | None = None,
    cpu: str = "1",
    node: str = "",
    phase: str = "Pending",
    annotations: dict[str, str] | None = None,
    at: int = 0,
) -> list[dict[str, Any]]:
    """A PodGroup and `replicas` pods name-0.. limiting gpu-memory / gpu-number."""
    ts = f"2024-01-01T00:00:{at:02d}Z"
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": ts},
            "spec": {"queue": "q1", "minMember": replicas if min_member is None else min_member},
            "status": {"phase": "Running" if node else "Pending"},
        }
    ]
    limits: dict[str, str] = {}
    if mem is not None:
        limits[GPU_MEMORY] = str(mem)
    if number is not None:
        limits[GPU_NUMBER] = str(number)
    for i in range(replicas):
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits}}
            ],
        }
        if node:
            spec["nodeName"] = node
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": "ns",
                    "uid": f"ns-{name}-{i}",
                    "creationTimestamp": ts,
                    "annotations": {"scheduling.k8s.io/group-name": name, **(annotations or {})},
                },
                "spec": spec,
                "status": {"phase": phase},
            }
        )
    return objs


def snapshot(objs: list[dict[str, Any]], now: float = 1704067200.0 + 60) -> ClusterSnapshot:
    snap = build_snapshot([("t.yaml", i, o) for i, o in enumerate(objs)])
    snap.now = now
    return snap


def conf(args: dict[str, Any], *, predicates: bool = True) -> Any:
    tier2: list[Any] = ["drf"]
    if predicates:
        tier2.append("predicates")
    tier2 += ["proportion", "nodeorder", {"name": "deviceshare", "arguments": args}]
    return mk_conf("enqueue, allocate", ["priority", "gang", "conformance"], tier2)


def allocate(objs: list[dict[str, Any]], args: dict[str, Any], **kw: Any) -> Session:
    now = kw.pop("now", None)
    snap = snapshot(objs) if now is None else snapshot(objs, now)
    ssn = open_session(snap, conf(args, **kw))
    run_actions(ssn, "enqueue", "allocate")
    return ssn


def tasks(ssn: Session) -> dict[str, TaskInfo]:
    return {t.name: t for j in ssn.jobs.values() for t in j.tasks.values()}


def card_of(t: TaskInfo) -> str | None:
    return t.bind_annotations.get(GPU_INDEX)


def plugin(ssn: Session) -> deviceshare.DeviceSharePlugin:
    p = ssn.plugins["deviceshare"]
    assert isinstance(p, deviceshare.DeviceSharePlugin)
    return p


# ------------------------------------------------------------------------------- pod figures (Go tests)
def pod_with(*containers: ContainerResources) -> TaskInfo:
    return TaskInfo(
        uid="u",
        name="p",
        namespace="ns",
        job="ns/j",
        resreq=Resource(),
        status=TaskStatus.PENDING,
        pod=PodFacts(extended_resources=containers),
    )


def test_gpu_memory_of_pod_volcano_cases() -> None:
    """device_info_test.go TestGetGPUMemoryOfPod: containers add up, init containers take the max."""
    only_app = pod_with(
        ContainerResources(False, {GPU_MEMORY: 1}), ContainerResources(False, {GPU_MEMORY: 3})
    )
    assert gpu_memory_of(only_app) == 4
    with_init = pod_with(
        ContainerResources(True, {GPU_MEMORY: 1}),
        ContainerResources(True, {GPU_MEMORY: 3}),
        ContainerResources(False, {GPU_MEMORY: 2}),
    )
    assert gpu_memory_of(with_init) == 3


def test_gpu_number_of_pod_volcano_cases() -> None:
    """device_info_test.go TestGetGPUNumberOfPod."""
    assert (
        gpu_number_of(
            pod_with(ContainerResources(False, {GPU_NUMBER: 1}), ContainerResources(False, {GPU_NUMBER: 3}))
        )
        == 4
    )
    assert (
        gpu_number_of(
            pod_with(
                ContainerResources(True, {GPU_NUMBER: 1}),
                ContainerResources(True, {GPU_NUMBER: 3}),
                ContainerResources(False, {GPU_NUMBER: 2}),
            )
        )
        == 3
    )


def test_requests_alone_do_not_count() -> None:
    # getGPUMemoryOfContainer reads limits only.
    assert gpu_memory_of(pod_with(ContainerResources(False, {}, {GPU_MEMORY: 5}))) == 0


def test_manifest_limits_reach_the_pod_facts() -> None:
    snap = snapshot([gpu_node("n1"), queue(), *job("a", mem=5000)])
    (t,) = [t for j in snap.jobs.values() for t in j.tasks.values()]
    assert gpu_memory_of(t) == 5000
    # requests default to limits for extended resources, so the scalar request is there too
    assert t.resreq.scalars[GPU_MEMORY] == 5000 * 1000


# ------------------------------------------------------------------------------- the pool
def test_cards_from_capacity_and_unhealthy_ids() -> None:
    n = NodeInfo("n1", Resource(), Resource(scalars={GPU_MEMORY: 48000 * 1000, GPU_NUMBER: 3000}))
    pool = GpuSharePool.from_node(n, sharing=True, number=False)
    assert pool is not None
    assert {i: c.memory for i, c in pool.cards.items()} == {0: 16000, 1: 16000, 2: 16000}
    snap = snapshot([gpu_node("n1", 3, annotations={"volcano.sh/gpu-unhealthy-ids": "1,x"})])
    pool2 = GpuSharePool.from_node(snap.nodes[0], sharing=True, number=False)
    assert pool2 is not None and sorted(pool2.cards) == [0, 2]
    assert (
        GpuSharePool.from_node(
            NodeInfo("n", Resource(), Resource(scalars={GPU_MEMORY: 1000})), sharing=True, number=False
        )
        is None
    )
    zero = NodeInfo("n", Resource(), Resource(scalars={GPU_MEMORY: 1000, GPU_NUMBER: 0}))
    assert GpuSharePool.from_node(zero, sharing=True, number=False) is None


def test_over_subscribed_card_reports_zero_and_is_not_offered() -> None:
    """share_test.go: a card whose pods exceed its memory is full, not almost empty."""
    pool = GpuSharePool("n1", {0: ShareCard(0, 1000, {"p1": (3000, "Running")})}, sharing=True, number=False)
    assert pool.cards[0].idle_memory() == 0
    assert pool.cards_by_memory(pod_with(ContainerResources(False, {GPU_MEMORY: 500}))) == []


def test_release_drops_the_pod_and_names_the_annotations() -> None:
    """device_info_test.go TestReleaseReturnsRemovedAnnotationKeys."""
    t = pod_with(ContainerResources(False, {GPU_MEMORY: 10}))
    t.pod = PodFacts(
        annotations={PREDICATE_TIME: "1700000000", GPU_INDEX: "0"},
        extended_resources=t.pod.extended_resources,
    )
    pool = GpuSharePool("node-a", {0: ShareCard(0, 100, {"u": (10, "Running")})}, sharing=True, number=False)
    assert set(pool.release(t)) == {GPU_INDEX, PREDICATE_TIME}
    assert "u" not in pool.cards[0].pods


def test_finished_pods_free_their_memory() -> None:
    card = ShareCard(0, 100, {"a": (60, "Succeeded"), "b": (30, "Failed"), "c": (20, "Running")})
    assert card.idle_memory() == 80
    assert not card.is_idle()  # whole-card mode counts any pod on the card


# ------------------------------------------------------------------------------- in a session
def test_four_half_card_pods_two_per_card_fifth_pending() -> None:
    objs = [gpu_node("n1"), queue()]
    for i in range(5):
        objs += job(f"j{i}", mem=8192, at=i)
    ssn = allocate(objs, SHARING)
    ts = tasks(ssn)
    assert {n: card_of(ts[n]) for n in ("j0-0", "j1-0", "j2-0", "j3-0")} == {
        "j0-0": "0",
        "j1-0": "0",
        "j2-0": "1",
        "j3-0": "1",
    }
    assert all(ssn.binds.get(f"ns/j{i}-0") == "n1" for i in range(4))
    assert "ns/j4-0" not in ssn.binds
    assert ts["j0-0"].bind_annotations[PREDICATE_TIME] == str(int(ssn.now * 1_000_000_000))
    pool = plugin(ssn).pools("n1")[0]
    assert isinstance(pool, GpuSharePool)
    assert {i: c.used_memory() for i, c in pool.cards.items()} == {0: 16384, 1: 16384}


def test_card_fragmentation_is_a_fit_error() -> None:
    """Two 10000 MiB pods take one card each; a third cannot share either (20000 > 16384)."""
    objs = [gpu_node("n1"), queue()]
    for i in range(3):
        objs += job(f"j{i}", mem=10000, at=i)
    ssn = allocate(objs, SHARING)
    ts = tasks(ssn)
    assert [card_of(ts[f"j{i}-0"]) for i in range(3)] == ["0", "1", None]
    fe = ssn.jobs["ns/j2"].nodes_fit_errors[ts["j2-0"].uid]
    assert "1 GpuShare no enough gpu memory on node n1" in fe.message()


def test_bound_pods_occupy_the_cards_their_annotation_names() -> None:
    objs = [gpu_node("n1"), queue()]
    objs += job("old", mem=16384, node="n1", phase="Running", annotations={GPU_INDEX: "0"})
    objs += job("new", mem=16384, at=5)
    ssn = allocate(objs, SHARING)
    assert card_of(tasks(ssn)["new-0"]) == "1"


def test_bound_pod_without_card_annotation_is_not_accounted() -> None:
    """Volcano's AddResource only knows a pod's cards from volcano.sh/gpu-index."""
    objs = [gpu_node("n1"), queue()]
    objs += job("old", mem=16384, node="n1", phase="Running")
    objs += job("new", mem=16384, at=5)
    ssn = allocate(objs, SHARING)
    assert card_of(tasks(ssn)["new-0"]) == "0"


def test_gang_discard_releases_the_card() -> None:
    """A gang that cannot complete gives its card back within the session."""
    objs = [gpu_node("n1", cards=1), queue()]
    objs += job("gang", replicas=2, mem=8000, cpu="10", at=0)  # the second pod lacks cpu
    objs += job("solo", mem=16384, at=5)
    ssn = allocate(objs, SHARING)
    ts = tasks(ssn)
    assert card_of(ts["gang-0"]) is None and card_of(ts["gang-1"]) is None
    assert card_of(ts["solo-0"]) == "0"
    assert ssn.binds == {"ns/solo-0": "n1"}


def test_whole_gpus_by_number() -> None:
    objs = [gpu_node("n1", cards=3), queue()]
    objs += job("old", number=1, node="n1", phase="Running", annotations={GPU_INDEX: "1"})
    objs += job("a", number=2, at=1)
    objs += job("b", number=1, at=2)
    ssn = allocate(objs, NUMBER)
    ts = tasks(ssn)
    assert card_of(ts["a-0"]) == "0,2"
    assert card_of(ts["b-0"]) is None
    # (the scalar volcano.sh/gpu-number is used up as well; ask the device filter directly)
    err = plugin(ssn).predicate(ts["b-0"], ssn.nodes["n1"])
    assert err is not None and err.reasons() == ["GpuNumber no enough gpu number on node n1"]


def test_without_predicates_cards_are_filtered_but_not_allocated() -> None:
    objs = [gpu_node("n1"), queue()]
    for i in range(3):
        objs += job(f"j{i}", mem=16384, at=i)
    ssn = allocate(objs, SHARING, predicates=False)
    ts = tasks(ssn)
    # No card is ever taken, so every pod fits the device filter; the scalar request still limits binds.
    assert all(card_of(t) is None for t in ts.values())
    assert len(ssn.binds) == 2
    assert any("predicates plugin is not configured" in w for w in ssn.warnings)


def test_node_lock_allows_one_allocation_per_node_per_session() -> None:
    objs = [gpu_node("n1"), gpu_node("n2"), queue()]
    for i in range(3):
        objs += job(f"j{i}", mem=4096, at=i)
    ssn = allocate(objs, {**SHARING, "deviceshare.NodeLockEnable": True})
    assert sorted(ssn.binds.values()) == ["n1", "n2"]
    # Both nodes pass the filter (the lock is not a filter in Volcano); the allocation on the
    # best one fails in LockNode and the task is skipped, with no fit error.
    assert tasks(ssn)["j2-0"].uid not in ssn.jobs["ns/j2"].nodes_fit_errors
    assert any(
        w.startswith("deviceshare: allocating GpuShare to ns/j2-0 on ")
        and w.endswith("is locked (deviceshare.NodeLockEnable)")
        for w in ssn.warnings
    )


def test_a_locked_node_that_scores_best_fails_the_allocation() -> None:
    """Volcano checks the lock in the devices' Allocate (gpushare/device_info.go, called from the
    predicates plugin's allocate handler), not in FilterNode: a locked node that wins the scoring
    makes the allocation fail and the task wait, though another node would take it."""
    fresh = {"gpu": "2024-01-01T00:00:30Z"}  # 30 s before the session's now: locked
    objs = [gpu_node("n1", annotations=fresh, cpu="32"), gpu_node("n2"), queue(), *job("j", mem=4096)]
    ssn = allocate(objs, {**SHARING, "deviceshare.NodeLockEnable": True})
    assert "ns/j-0" not in ssn.binds
    assert card_of(tasks(ssn)["j-0"]) is None
    why = pending_reasons(ssn)["ns/j-0"]
    assert why.endswith(
        "the allocation on n1 failed: deviceshare: allocating GpuShare to ns/j-0 on n1: "
        "node n1 is locked (deviceshare.NodeLockEnable)"
    )
    assert (
        "deviceshare: allocating GpuShare to ns/j-0 on n1: node n1 is locked (deviceshare.NodeLockEnable)"
        in (ssn.warnings)
    )
    # A lock older than 5 minutes is renewed: the best-scored node takes the pod.
    stale = {"gpu": "2023-12-31T23:50:00Z"}
    objs = [gpu_node("n1", annotations=stale, cpu="32"), gpu_node("n2"), queue(), *job("j", mem=4096)]
    ssn = allocate(objs, {**SHARING, "deviceshare.NodeLockEnable": True})
    assert ssn.binds["ns/j-0"] == "n1"


@pytest.mark.parametrize(
    ("lock", "bound"),
    [("2024-01-01T00:00:30Z", False), ("2023-12-31T23:50:00Z", True), ("not-a-time", False)],
)
def test_node_lock_annotation(lock: str, bound: bool) -> None:
    objs = [gpu_node("n1", annotations={"gpu": lock}), queue(), *job("j", mem=4096)]
    ssn = allocate(objs, {**SHARING, "deviceshare.NodeLockEnable": True})  # now = 2024-01-01T00:01:00Z
    assert ("ns/j-0" in ssn.binds) is bound


# ------------------------------------------------------------------------------- arguments
def test_arguments_and_defaults() -> None:
    """deviceshare_test.go TestArguments, plus the defaults."""
    a = deviceshare.parse_arguments(
        {
            "deviceshare.VGPUEnable": True,
            "deviceshare.SchedulePolicy": "binpack",
            "deviceshare.ScheduleWeight": 10,
        }
    )
    assert (a.vgpu, a.schedule_policy, a.schedule_weight) == (True, "binpack", 10)
    d = deviceshare.parse_arguments({})
    assert d == deviceshare.DeviceShareArgs()
    assert (d.known_geometries_cm_name, d.known_geometries_cm_namespace) == (
        "volcano-vgpu-device-config",
        "kube-system",
    )
    assert deviceshare.parse_arguments({"deviceshare.GPUSharingEnable": "true"}).gpu_sharing


@pytest.mark.parametrize(
    "args",
    [
        {"deviceshare.GPUSharingEnable": True, "deviceshare.GPUNumberEnable": True},
        {"deviceshare.GPUSharingEnable": True, "deviceshare.VGPUEnable": True},
        {"deviceshare.GPUNumberEnable": True, "deviceshare.VGPUEnable": True},
    ],
)
def test_exclusive_modes_are_configuration_errors(args: dict[str, Any]) -> None:
    with pytest.raises(ConfError, match="deviceshare"):
        deviceshare.new(args)


def test_unimplemented_devices_warn() -> None:
    args = {
        "deviceshare.AscendMindClusterVNPUEnable": True,
        "deviceshare.AscendHAMiVNPUEnable": True,
        "deviceshare.GPUExclusiveRules": [{"team": "a"}],
    }
    ssn = allocate([gpu_node("n1"), queue()], args)
    text = "\n".join(ssn.warnings)
    for key in args:
        assert key in text


def test_device_score_is_zero_for_gpushare_and_without_weight() -> None:
    objs = [gpu_node("n1"), queue(), *job("j", mem=100)]
    ssn = open_session(snapshot(objs), conf({**SHARING, "deviceshare.ScheduleWeight": 5}))
    p = plugin(ssn)
    t = tasks(ssn)["j-0"]
    assert p.device_score(t, ssn.nodes["n1"]) == 0.0


def test_eviction_frees_the_card_and_discard_restores_it() -> None:
    from fumarole.daemon.scheduler.framework.statement import Statement

    objs = [gpu_node("n1", cards=1), queue()]
    objs += job("old", mem=16384, node="n1", phase="Running", annotations={GPU_INDEX: "0"})
    ssn = open_session(snapshot(objs), conf(SHARING))
    pool = plugin(ssn).pools("n1")[0]
    assert isinstance(pool, GpuSharePool)
    t = tasks(ssn)["old-0"]
    assert set(pool.cards[0].pods) == {"ns-old-0"}
    stmt = Statement(ssn)
    stmt.evict(t, "test")
    assert pool.cards[0].pods == {}  # Releasing tasks hold no card
    stmt.discard()
    assert set(pool.cards[0].pods) == {"ns-old-0"}


def test_pipelined_task_gets_a_card_but_no_node_level_count() -> None:
    from fumarole.daemon.scheduler.framework.statement import Statement

    objs = [gpu_node("n1", cards=2), queue(), *job("j", mem=4000)]
    ssn = open_session(snapshot(objs), conf(SHARING))
    p = plugin(ssn)
    t = tasks(ssn)["j-0"]
    # Every action runs PrePredicate first; without it Volcano's Reserve step fails and no card
    # is allocated (the restored-victim rule).
    assert ssn.pre_predicate_fn(t) is None
    stmt = Statement(ssn)
    stmt.pipeline(t, "n1")
    assert card_of(t) == "0"
    assert t.uid not in p.on_node
    stmt.discard()
    assert card_of(t) is None
    pool = p.pools("n1")[0]
    assert isinstance(pool, GpuSharePool)
    assert all(not c.pods for c in pool.cards.values())
