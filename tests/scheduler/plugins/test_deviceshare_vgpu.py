"""deviceshare with vGPU (hami-core): registration, requests, card choice, scores (Go cases ported)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, open_session, run_actions

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.session import EventError, Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.devices import ContainerResources
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins import deviceshare
from fumarole.daemon.scheduler.plugins import deviceshare_vgpu as vg
from fumarole.daemon.scheduler.plugins.deviceshare_vgpu import (
    ContainerDevice,
    ContainerRequest,
    UUIDFilter,
    VCard,
    VGpuPool,
    check_gpu_type,
    container_requests,
    decode_node_devices,
    decode_pod_devices,
    gpu_score,
    pod_group_key,
)

NUM, MEM, CORES = vg.VGPU_NUMBER, vg.VGPU_MEMORY, vg.VGPU_CORES


def pool(n: int, mem: int = 16384, sharing: int = 4, name: str = "node-1") -> VGpuPool:
    cards = {i: VCard(i, "GPU-0000" + chr(ord("A") + i), sharing, mem, "NVIDIA", True) for i in range(n)}
    return VGpuPool(name, cards, vg.HAMI_CORE)


def vpod(
    mem: int | None = 4096,
    *,
    num: int | None = 1,
    cores: int | None = 25,
    uid: str = "uid",
    annotations: dict[str, str] | None = None,
    ns: str = "default",
    containers: tuple[ContainerResources, ...] | None = None,
) -> TaskInfo:
    limits: dict[str, int] = {}
    if num is not None:
        limits[NUM] = num
    if mem is not None:
        limits[MEM] = mem
    if cores is not None:
        limits[CORES] = cores
    cs = containers if containers is not None else (ContainerResources(False, limits),)
    return TaskInfo(
        uid=uid,
        name=uid,
        namespace=ns,
        job=f"{ns}/j",
        resreq=Resource(),
        status=TaskStatus.PENDING,
        pod=PodFacts(annotations=annotations or {}, extended_resources=cs),
    )


def first_uuid(devs: list[list[ContainerDevice]]) -> str:
    return devs[0][0].uuid if devs and devs[0] else ""


def place(p: VGpuPool, t: TaskInfo, policy: str = vg.BINPACK) -> str | None:
    """Allocate (counters raised and the pod recorded), as spread_integration_test.go's simulateAllocate."""
    res = p.allocate(t, policy, 0)
    if isinstance(res, str):
        return None
    return decode_pod_devices(res[vg.ASSIGNED_IDS])[0][0].uuid


# ------------------------------------------------------------------------------- decoding
def test_decode_node_devices() -> None:
    text = "GPU-a,10,16384,NVIDIA-Tesla T4,true,hami-core:GPU-b,4,32768,NVIDIA-A100,false,mig:"
    decoded = decode_node_devices(text)
    assert decoded is not None
    cards, mode = decoded
    assert mode == vg.HAMI_CORE  # mig falls back: Volcano's default device config names no geometry
    assert [(c.index, c.uuid, c.number, c.memory, c.type, c.health) for c in cards.values()] == [
        (0, "GPU-a", 10, 16384, "NVIDIA-Tesla T4", True),
        (1, "GPU-b", 4, 32768, "NVIDIA-A100", False),
    ]
    assert decode_node_devices("GPU-a,10,16384,NVIDIA,true") is None  # no ':' at all
    assert decode_node_devices("GPU-a,10,16384,NVIDIA,true:") is None  # five fields: rejected


def test_pool_needs_annotation_and_allocatable() -> None:
    reg = "GPU-a,10,16384,NVIDIA-T4,true,hami-core:"
    alloc = {"cpu": "8", "memory": "8Gi", "pods": "110", NUM: "10", CORES: "100", MEM: "16384"}

    def node(annotations: dict[str, str], allocatable: dict[str, str]) -> Any:
        obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "annotations": annotations},
            "status": {"capacity": allocatable, "allocatable": allocatable},
        }
        return build_snapshot([("t", 0, obj)]).nodes[0]

    assert VGpuPool.from_node(node({vg.REGISTER: reg}, alloc)) is not None
    assert VGpuPool.from_node(node({}, alloc)) is None
    assert VGpuPool.from_node(node({vg.REGISTER: reg}, {**alloc, CORES: "0"})) is None
    no_mem = {k: v for k, v in alloc.items() if k != MEM}
    assert VGpuPool.from_node(node({vg.REGISTER: reg}, no_mem)) is None


def test_container_requests_volcano_case() -> None:
    """vgpu device_info_test.go TestGetGPUMemoryOfPod."""
    t = vpod(
        containers=(
            ContainerResources(False, {NUM: 1, MEM: 3000}),
            ContainerResources(False, {NUM: 3, MEM: 5000}),
        )
    )
    assert [(r.nums, r.memreq) for r in container_requests(t)] == [(1, 3000), (3, 5000)]


def test_container_requests_defaults() -> None:
    # Memory alone means one card; no memory means the whole card (100%); memory/cores fall back to requests.
    only_mem = vpod(containers=(ContainerResources(False, {MEM: 2000}),))
    assert container_requests(only_mem) == [ContainerRequest(1, 2000, 101, 0)]
    only_num = vpod(containers=(ContainerResources(False, {NUM: 2}, {CORES: 30}),))
    assert container_requests(only_num) == [ContainerRequest(2, 0, 100, 30)]
    # A container asking cores only (no number, no memory limit) asks nothing.
    assert container_requests(vpod(containers=(ContainerResources(False, {CORES: 30}),))) == []
    assert not vg.has_vgpu_request(vpod(containers=(ContainerResources(False, {}, {MEM: 5}),)))


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("GPU-0,NVIDIA,4096,30:", [ContainerDevice("GPU-0", "NVIDIA", 4096, 30)]),
        ("GPU-0,NVIDIA,-5,30:", []),
        ("GPU-0,NVIDIA,4096,-1:", []),
        ("GPU-0,NVIDIA,abc,30:", []),
        ("GPU-0,NVIDIA:", []),
        ("GPU-0,NVIDIA,-5,30:GPU-1,NVIDIA,2048,10:", [ContainerDevice("GPU-1", "NVIDIA", 2048, 10)]),
    ],
)
def test_decode_container_devices_rejects_invalid_usage(text: str, want: list[ContainerDevice]) -> None:
    """utils_test.go TestDecodeContainerDevicesRejectsInvalidUsage."""
    assert decode_pod_devices(text) == [want]


# ------------------------------------------------------------------------------- filters
@pytest.mark.parametrize(
    ("annos", "want"),
    [
        ({vg.GPU_IN_USE: "NVIDIA"}, True),
        ({vg.GPU_IN_USE: "nvidia"}, True),
        ({vg.GPU_IN_USE: "AMD,NVIDIA,INTEL"}, True),
        ({vg.GPU_IN_USE: "AMD,INTEL,MLU"}, False),
        ({vg.GPU_NO_USE: "NVIDIA"}, False),
        ({vg.GPU_NO_USE: "nvidia"}, False),
        ({vg.GPU_NO_USE: "AMD,NVIDIA,INTEL"}, False),
        ({vg.GPU_NO_USE: "AMD,INTEL,MLU"}, True),
        ({}, True),
    ],
)
def test_check_gpu_type(annos: dict[str, str], want: bool) -> None:
    """utils_test.go TestCheckGPUtype."""
    assert check_gpu_type(annos, "NVIDIA") is want


@pytest.mark.parametrize(
    ("annos", "uuid", "want"),
    [
        ({}, "GPU-0", True),
        ({vg.USE_UUID: "  "}, "GPU-0", True),
        ({vg.USE_UUID: ", ,"}, "GPU-0", True),
        ({vg.USE_UUID: "GPU-0, GPU-1"}, "GPU-1", True),
        ({vg.USE_UUID: "GPU-0,, GPU-1,"}, "GPU-1", True),
        ({vg.USE_UUID: "GPU-10"}, "GPU-1", False),
        ({vg.USE_UUID: "GPU-0,"}, "", False),
        ({vg.NO_USE_UUID: "GPU-0, GPU-1"}, "GPU-1", False),
        ({vg.NO_USE_UUID: "GPU-0,"}, "", False),
        ({vg.USE_UUID: "GPU-1", vg.NO_USE_UUID: "GPU-1"}, "GPU-1", False),
    ],
)
def test_uuid_filter(annos: dict[str, str], uuid: str, want: bool) -> None:
    """utils_test.go TestCheckGPUUUID."""
    assert UUIDFilter.of(annos).matches(uuid) is want


@pytest.mark.parametrize(
    ("annos", "fit", "uuid_or_error"),
    [
        ({vg.USE_UUID: "GPU-0000A"}, True, "GPU-0000A"),
        ({vg.NO_USE_UUID: "GPU-0000B"}, True, "GPU-0000A"),
        ({vg.USE_UUID: "GPU-unknown"}, False, vg.USE_UUID),
        ({vg.NO_USE_UUID: "GPU-0000A,GPU-0000B"}, False, vg.NO_USE_UUID),
    ],
)
def test_gpu_uuid_constraints(annos: dict[str, str], fit: bool, uuid_or_error: str) -> None:
    """utils_test.go TestGPUUUIDConstraints (unset policy: highest index first)."""
    res = pool(2).fit(vpod(annotations=annos), "", replicate=True)
    if fit:
        assert not isinstance(res, str) and first_uuid(res[0]) == uuid_or_error
    else:
        assert isinstance(res, str) and uuid_or_error in res


@pytest.mark.parametrize(
    ("annos", "want"),
    [
        ({}, ""),
        ({vg.KUBE_GROUP_NAME: "my-pg"}, "default/my-pg"),
        ({vg.VOLCANO_GROUP_NAME: "job-pg"}, "default/job-pg"),
        ({vg.KUBE_GROUP_NAME: "k8s-pg", vg.VOLCANO_GROUP_NAME: "volcano-pg"}, "default/k8s-pg"),
    ],
)
def test_pod_group_key(annos: dict[str, str], want: str) -> None:
    """utils_test.go TestGetPodGroupKey."""
    assert pod_group_key(vpod(annotations=annos)) == want


# ------------------------------------------------------------------------------- choice and score
@pytest.mark.parametrize(
    ("n", "seed", "policy", "want"),
    [(2, True, vg.BINPACK, 0), (2, True, vg.SPREAD, 1), (3, False, "", 2)],
)
def test_policy_picks_expected_device(n: int, seed: bool, policy: str, want: int) -> None:
    """utils_test.go TestSortedDeviceIndicesByPolicy_PicksExpectedDevice."""
    p = pool(n)
    if seed:
        p.cards[0].used_mem, p.cards[0].used_num = 4096, 1
    res = p.fit(vpod(), policy, replicate=True)
    assert not isinstance(res, str) and first_uuid(res[0]) == p.cards[want].uuid


@pytest.mark.parametrize(
    ("policy", "used_num", "used_mem", "want"),
    [
        (vg.SPREAD, 0, 0, 100.0),
        (vg.SPREAD, 1, 4096, 0.0),
        (vg.SPREAD, 4, 16384, 0.0),
        (vg.BINPACK, 4, 16384, 100.0),
        (vg.BINPACK, 0, 0, 0.0),
        ("", 1, 4096, 0.0),
    ],
)
def test_gpu_score(policy: str, used_num: int, used_mem: int, want: float) -> None:
    """utils_test.go TestGPUScore."""
    card = VCard(0, "GPU", 4, 16384, "NVIDIA", True, used_num=used_num, used_mem=used_mem)
    assert gpu_score(policy, card) == want


def test_binpack_stacks_sequential_pods() -> None:
    p = pool(3)
    uuids = [place(p, vpod(uid=u)) for u in "abc"]
    assert uuids[0] == uuids[1] == uuids[2] is not None


def test_vgpu_score_is_taken_after_the_pod_is_added() -> None:
    """deviceshare_test.go TestVgpuScore: binpack (3000+1000)/30000; spread is 0 once the pod is counted."""
    p = VGpuPool(
        "node1", {0: VCard(0, "GPU-0", 10, 30000, "NVIDIA", True, used_num=1, used_mem=3000)}, vg.HAMI_CORE
    )
    t = vpod(1000, cores=None)
    assert p.filter(t, vg.BINPACK) is None
    assert p.score(t) == pytest.approx(4000 * 100 / 30000)
    idle = VGpuPool("node2", {0: VCard(0, "GPU-0", 10, 30000, "NVIDIA", True)}, vg.HAMI_CORE)
    assert idle.filter(t, vg.SPREAD) is None
    assert idle.score(t) == 0.0  # the card's UsedNum is 1 by the time GPUScore looks (Volcano quirk)
    assert idle.cards[0].used_num == 0  # filtering works on a copy


def test_filter_node_three_exclusive_cards_of_different_memory() -> None:
    """deviceshare_test.go Test_FilterNode: 3 cards with cores 100 each fit a 3-card pod."""
    cards = {
        0: VCard(0, "GPU-0", 10, 30000, "NVIDIA", True),
        1: VCard(1, "GPU-1", 10, 20000, "NVIDIA", True),
        2: VCard(2, "GPU-2", 10, 30000, "NVIDIA", True),
    }
    p = VGpuPool("node1", cards, vg.HAMI_CORE)
    assert p.filter(vpod(None, num=3, cores=100), vg.BINPACK) is None
    assert p.filter(vpod(None, num=4, cores=100), vg.BINPACK) == "hami-vgpuDeviceSharing error"


def test_exclusive_and_full_cards() -> None:
    p = pool(1)
    assert place(p, vpod(1000, cores=100, uid="x")) is not None
    assert p.fit(vpod(1000, cores=0, uid="y"), "", replicate=True) == "not enough gpu fitted on this node"
    q = pool(1)
    assert place(q, vpod(1000, cores=10, uid="a")) is not None
    assert isinstance(
        q.fit(vpod(1000, cores=100, uid="b"), "", replicate=True), str
    )  # card in use: no exclusivity
    assert isinstance(pool(1, sharing=0).fit(vpod(), "", replicate=True), str)  # sharing count exhausted
    assert isinstance(pool(1).fit(vpod(20000), "", replicate=True), str)  # memory
    assert isinstance(pool(1).fit(vpod(num=2), "", replicate=True), str)  # more cards than the node has


def test_mode_annotation_must_match_the_node() -> None:
    res = pool(1).fit(vpod(annotations={vg.MODE_ANNOTATION: "mig"}), "", replicate=True)
    assert res == "pod required sharing mode mig is not the same as the node mode hami-core"
    assert not isinstance(
        pool(1).fit(vpod(annotations={vg.MODE_ANNOTATION: "hami-core"}), "", replicate=True), str
    )


# ------------------------------------------------------------------------------- spread by pod group
def spread_pod(uid: str, spread: bool, group: str) -> TaskInfo:
    annos = {vg.KUBE_GROUP_NAME: group}
    if spread:
        annos[vg.PODGROUP_POLICY] = vg.SPREAD
    return vpod(uid=uid, annotations=annos)


def test_spread_prevents_co_location() -> None:
    p = pool(2)
    assert place(p, spread_pod("a", True, "job-1")) != place(p, spread_pod("b", True, "job-1"))


def test_binpack_allows_co_location() -> None:
    p = pool(2)
    assert place(p, spread_pod("a", False, "job-1")) == place(p, spread_pod("b", False, "job-1"))


def test_spread_different_groups_can_share() -> None:
    p = pool(1)
    assert place(p, spread_pod("a", True, "job-1")) == place(p, spread_pod("b", True, "job-2")) is not None


def test_spread_with_no_room_fails() -> None:
    p = pool(1)
    assert place(p, spread_pod("a", True, "job-1")) is not None
    assert place(p, spread_pod("b", True, "job-1")) is None


def test_mixed_annotations() -> None:
    p = pool(2)
    assert place(p, spread_pod("a", True, "job-1")) is not None
    assert place(p, spread_pod("b", False, "job-1")) is not None


# ------------------------------------------------------------------------------- accounting
@pytest.mark.parametrize(
    ("annos", "added"),
    [
        ({vg.ASSIGNED_IDS: "GPU-1234,NVIDIA,16384,0"}, True),
        ({vg.ASSIGNED_IDS: "GPU-5678,NVIDIA,16384,0"}, False),
        ({}, False),
    ],
)
def test_add_resource(annos: dict[str, str], added: bool) -> None:
    """device_info_test.go TestAddResource."""
    p = VGpuPool("n", {0: VCard(0, "GPU-1234", 10, 16384, "NVIDIA", True)}, vg.HAMI_CORE)
    p.add_resource(vpod(uid="pod-abc"), annos)
    assert ("pod-abc" in p.cards[0].pods) is added
    assert p.cards[0].used_mem == (16384 if added else 0)


def test_add_resource_sets_pod_group_key_and_is_idempotent() -> None:
    p = VGpuPool("n", {0: VCard(0, "GPU-1234", 10, 16384, "NVIDIA", True)}, vg.HAMI_CORE)
    t = vpod(uid="pod-with-group", annotations={vg.KUBE_GROUP_NAME: "my-job-pg"})
    annos = {vg.ASSIGNED_IDS: "GPU-1234,NVIDIA,4096,0"}
    p.add_resource(t, annos)
    p.add_resource(t, annos)
    card = p.cards[0]
    assert card.pods["pod-with-group"].group == "default/my-job-pg"
    assert (card.used_num, card.used_mem) == (1, 4096)
    p.sub_resource(t, annos)
    assert (card.used_num, card.used_mem, card.pods) == (0, 0, {})


def test_release_keys_unless_bound() -> None:
    """device_info_test.go TestReleaseReturnsSpeculativeAnnotationKeys and TestReleaseKeepsCommitted..."""
    base = {vg.ASSIGNED_NODE: "node-a", vg.ASSIGNED_IDS: "GPU-aaaa,NVIDIA,80,0:", "keep-me": "yes"}
    allocating = vpod(uid="w", annotations={**base, vg.BIND_PHASE: "allocating"})
    assert set(VGpuPool("node-a", {}, vg.HAMI_CORE).release(allocating)) == set(vg.RELEASE_KEYS)
    committed = vpod(uid="w", annotations={**base, vg.BIND_PHASE: "success"})
    assert VGpuPool("node-a", {}, vg.HAMI_CORE).release(committed) == []


def test_release_of_a_fresh_allocation_keeps_the_counters_raised() -> None:
    """Volcano quirk kept: Release subtracts by the pod's own annotations, which a fresh allocation lacks."""
    p = pool(1)
    t = vpod(uid="fresh")
    assert place(p, t) is not None
    p.release(t)
    assert (p.cards[0].used_num, p.cards[0].used_mem) == (1, 4096)


# ------------------------------------------------------------------------------- in a session
REG = "GPU-n{n}-0,10,16384,NVIDIA-T4,true,hami-core:GPU-n{n}-1,10,16384,NVIDIA-T4,true,hami-core:"


def vgpu_objects(
    pods: int, mem: int, nodes: int = 1, running: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    alloc = {"cpu": "16", "memory": "64Gi", "pods": "110", NUM: "20", CORES: "200", MEM: "32768"}
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q1"},
            "spec": {"weight": 1},
        }
    ]
    for i in range(nodes):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}", "annotations": {vg.REGISTER: REG.format(n=i)}},
                "status": {"capacity": alloc, "allocatable": alloc},
            }
        )
    specs = [(f"p{i}", "", "Pending", {}) for i in range(pods)]
    for name, ids in (running or {}).items():
        specs.append(
            (name, ids.split(",")[0].split("-")[1].replace("n", "n"), "Running", {vg.ASSIGNED_IDS: ids})
        )
    for i, (name, node, phase, annos) in enumerate(specs):
        objs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": f"pg-{name}",
                    "namespace": "ns",
                    "creationTimestamp": f"2024-01-01T00:00:{i:02d}Z",
                },
                "spec": {"queue": "q1", "minMember": 1},
                "status": {"phase": "Running" if node else "Pending"},
            }
        )
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {NUM: "1", MEM: str(mem), CORES: "10"},
                    },
                }
            ],
        }
        if node:
            spec["nodeName"] = node
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "ns",
                    "uid": f"ns-{name}",
                    "creationTimestamp": f"2024-01-01T00:00:{i:02d}Z",
                    "annotations": {"scheduling.k8s.io/group-name": f"pg-{name}", **annos},
                },
                "spec": spec,
                "status": {"phase": phase},
            }
        )
    return objs


def run_vgpu(objs: list[dict[str, Any]], args: dict[str, Any]) -> Session:
    snap = build_snapshot([("t", i, o) for i, o in enumerate(objs)])
    snap.now = 1704067300.0
    c = mk_conf(
        "enqueue, allocate",
        ["priority", "gang", "conformance"],
        [
            "drf",
            "predicates",
            "proportion",
            {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True, **args}},
        ],
    )
    ssn = open_session(snap, c)
    run_actions(ssn, "enqueue", "allocate")
    return ssn


def ids_of(ssn: Session, name: str) -> str:
    t = ssn.jobs[f"ns/pg-{name}"].tasks[f"ns-{name}"]
    return t.bind_annotations.get(vg.ASSIGNED_IDS, "")


def test_session_binpack_shares_one_card_and_writes_the_annotations() -> None:
    ssn = run_vgpu(vgpu_objects(3, 4000), {"deviceshare.SchedulePolicy": "binpack"})
    assert [ids_of(ssn, f"p{i}") for i in range(3)] == ["GPU-n0-0,NVIDIA,4000,10:"] * 3
    t = ssn.jobs["ns/pg-p0"].tasks["ns-p0"]
    assert t.bind_annotations[vg.ASSIGNED_NODE] == "n0"
    assert t.bind_annotations[vg.BIND_PHASE] == "allocating"
    assert t.bind_annotations[vg.ASSIGNED_TIME] == "1704067300"
    assert t.bind_annotations[vg.ASSIGNED_IDS_TO_ALLOCATE] == t.bind_annotations[vg.ASSIGNED_IDS]


def test_session_spread_and_default_policies() -> None:
    spread = run_vgpu(vgpu_objects(2, 4000), {"deviceshare.SchedulePolicy": "spread"})
    assert [ids_of(spread, "p0"), ids_of(spread, "p1")] == [
        "GPU-n0-0,NVIDIA,4000,10:",
        "GPU-n0-1,NVIDIA,4000,10:",
    ]
    default = run_vgpu(vgpu_objects(2, 4000), {})
    # No policy: highest card index first, and it stays first while it has room.
    assert [ids_of(default, "p0"), ids_of(default, "p1")] == ["GPU-n0-1,NVIDIA,4000,10:"] * 2


def test_session_running_pods_hold_their_cards() -> None:
    objs = vgpu_objects(1, 10000, running={"old": "GPU-n0-0,NVIDIA,10000,10:"})
    ssn = run_vgpu(objs, {"deviceshare.SchedulePolicy": "binpack"})
    # binpack prefers the busier card, but 10000 more does not fit its 16384 MiB
    assert ids_of(ssn, "p0") == "GPU-n0-1,NVIDIA,10000,10:"


def test_session_device_score_prefers_the_fuller_node() -> None:
    objs = vgpu_objects(1, 4000, nodes=2, running={"old": "GPU-n1-0,NVIDIA,8000,10:"})
    args = {"deviceshare.SchedulePolicy": "binpack", "deviceshare.ScheduleWeight": 10}
    ssn = run_vgpu(objs, args)
    assert ssn.binds["ns/p0"] == "n1"
    assert ids_of(ssn, "p0") == "GPU-n1-0,NVIDIA,4000,10:"
    p = ssn.plugins["deviceshare"]
    assert isinstance(p, deviceshare.DeviceSharePlugin)
    without_weight = run_vgpu(objs, {"deviceshare.SchedulePolicy": "binpack"})
    assert without_weight.binds["ns/p0"] == "n0"  # no score: first node in the list


# ------------------------------------------------------------------------------- statements (issue 25)
def test_session_node_lock_fails_the_allocation_on_the_best_node() -> None:
    """Volcano's vGPU Allocate (vgpu/device_info.go) checks the card fit, then LockNode: the
    node the first pod took stays the best-scored one and passes the filter, so the second
    pod's allocation fails there and it waits (it used to go to n0); no card counter moves."""
    objs = vgpu_objects(2, 4000, nodes=2, running={"old": "GPU-n1-0,NVIDIA,8000,10:"})
    args = {
        "deviceshare.SchedulePolicy": "binpack",
        "deviceshare.ScheduleWeight": 10,
        "deviceshare.NodeLockEnable": True,
    }
    ssn = run_vgpu(objs, args)
    assert ssn.binds == {"ns/p0": "n1"}
    assert ids_of(ssn, "p1") == ""
    assert (
        "deviceshare: allocating hamivgpu to ns/p1 on n1: node n1 is locked (deviceshare.NodeLockEnable)"
        in (ssn.warnings)
    )
    assert (card(ssn, "n1", 0).used_num, card(ssn, "n1", 0).used_mem) == (2, 12000)  # old + p0


def open_vgpu(objs: list[dict[str, Any]], predicates: dict[str, Any] | None = None) -> Session:
    snap = build_snapshot([("t", i, o) for i, o in enumerate(objs)])
    snap.now = 1704067300.0
    c = mk_conf(
        "enqueue, allocate",
        ["priority", "gang", "conformance"],
        [
            {"name": "predicates", "arguments": predicates or {}},
            "proportion",
            {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}},
        ],
    )
    return open_session(snap, c)


def card(ssn: Session, node: str, index: int) -> VCard:
    p = ssn.plugins["deviceshare"]
    assert isinstance(p, deviceshare.DeviceSharePlugin)
    vpool = p.pools(node)[0]
    assert isinstance(vpool, VGpuPool)
    return vpool.cards[index]


def test_victim_put_back_by_a_discarded_statement_is_counted_once() -> None:
    """Statement.unevict re-adds the victim from its annotation; the predicates handler's Reserve
    fails (no PreFilter this session), so deviceshare allocates it no second card share."""
    objs = vgpu_objects(0, 0, running={"old": "GPU-n0-0,NVIDIA,10000,10:"})
    ssn = open_vgpu(objs)
    victim = ssn.jobs["ns/pg-old"].tasks["ns-old"]
    assert (card(ssn, "n0", 0).used_num, card(ssn, "n0", 0).used_mem) == (1, 10000)
    stmt = Statement(ssn)
    stmt.evict(victim, "preempt")
    assert (card(ssn, "n0", 0).used_num, card(ssn, "n0", 0).used_mem) == (0, 0)
    stmt.discard()
    assert (card(ssn, "n0", 0).used_num, card(ssn, "n0", 0).used_mem) == (1, 10000)
    assert [card(ssn, "n0", i).used_num for i in (0, 1)] == [1, 0]
    assert vg.ASSIGNED_IDS not in victim.bind_annotations


def test_victim_put_back_without_reserve_plugins_is_allocated_again_as_in_volcano() -> None:
    """With VolumeBinding and DynamicResources off no Reserve step fails, so Volcano's handler
    reaches devices.Allocate for the restored victim and counts it a second time."""
    objs = vgpu_objects(0, 0, running={"old": "GPU-n0-0,NVIDIA,10000,10:"})
    ssn = open_vgpu(
        objs, {"predicate.VolumeBindingEnable": False, "predicate.DynamicResourceAllocationEnable": False}
    )
    victim = ssn.jobs["ns/pg-old"].tasks["ns-old"]
    stmt = Statement(ssn)
    stmt.evict(victim, "preempt")
    stmt.discard()
    used = sum(card(ssn, "n0", i).used_num for i in (0, 1))
    assert used == 2


def test_pipeline_without_a_card_rolls_back_and_fails() -> None:
    """A card that cannot be allocated fails Statement.Pipeline (Volcano's Event.Err): the task is
    Pending again, off the node, and the statement holds nothing; the session's own Pipeline
    keeps the task (Volcano ignores the handler's error there)."""
    objs = vgpu_objects(1, 20000)  # 20000 MiB: more than any 16384 MiB card
    ssn = open_vgpu(objs)
    task = ssn.jobs["ns/pg-p0"].tasks["ns-p0"]
    assert ssn.pre_predicate_fn(task) is None
    stmt = Statement(ssn)
    with pytest.raises(EventError, match="not enough gpu fitted"):
        stmt.pipeline(task, "n0", False)
    assert task.status is TaskStatus.PENDING and task.node_name == ""
    assert task.uid not in ssn.nodes["n0"].tasks and stmt.operations == []
    assert [card(ssn, "n0", i).used_num for i in (0, 1)] == [0, 0]
    ssn.pipeline(task, "n0")
    assert task.status is TaskStatus.PIPELINED and task.uid in ssn.nodes["n0"].tasks


def test_hard_topology_replay_finds_the_card_taken_by_its_own_dry_run() -> None:
    """Volcano quirk kept: allocate's HyperNode search dry-runs the job and discards it, but a
    discarded vGPU allocation keeps the card's counters raised (Release reads the pod's own
    annotations, which a fresh allocation lacks), so replaying the best dry run finds no card when
    the dry runs took the last room: RecoverOperations fails and the job waits, with a reason
    saying so.  A pod is allocated three times (the sub-job's dry run, its replay inside the job's
    dry run, the job's replay), so with cards for 10000 MiB once each it takes three cards."""
    objs = vgpu_objects(1, 10000)  # one node, two cards of 16384 MiB: 10000 leaves no room twice
    objs.append(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "rack"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}]},
        }
    )
    pg = next(o for o in objs if o["kind"] == "PodGroup")
    pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    pg["status"]["phase"] = "Inqueue"

    def run(cards: str) -> Session:
        node = next(o for o in objs if o["kind"] == "Node")
        node["metadata"]["annotations"][vg.REGISTER] = cards
        snap = build_snapshot([("t", i, o) for i, o in enumerate(objs)])
        snap.now = 1704067300.0
        c = mk_conf(
            "allocate",
            ["gang"],
            [
                "predicates",
                "network-topology-aware",
                {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}},
            ],
        )
        ssn = open_session(snap, c)
        run_actions(ssn, "allocate")
        return ssn

    one = run("GPU-n0-0,10,16384,NVIDIA-T4,true,hami-core:")
    assert one.binds == {}
    assert "failed when replayed" in one.topology_reasons["ns/pg-p0"]
    assert "not enough gpu fitted" in one.topology_reasons["ns/pg-p0"]
    assert not run(REG.format(n=0)).binds  # two cards: still not enough
    three = run(REG.format(n=0) + "GPU-n0-2,10,16384,NVIDIA-T4,true,hami-core:")
    assert three.binds == {"ns/p0": "n0"}
    # Highest index first: the dry runs' phantoms hold cards 2 and 1, the replay gets card 0.
    assert ids_of(three, "p0") == "GPU-n0-0,NVIDIA,10000,10:"
