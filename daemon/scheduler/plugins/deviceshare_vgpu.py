"""vGPU sharing by memory and core percentage on one node's cards (Volcano's nvidia/vgpu, hami-core).

A node takes part when it carries the annotation `volcano.sh/node-vgpu-register`
("uuid,count,memory,type,health,mode:" per card) and non-zero allocatable
`volcano.sh/vgpu-number`, `vgpu-cores` and `vgpu-memory`.  A pod asks per container through
limits `volcano.sh/vgpu-number` (cards), `volcano.sh/vgpu-memory` (MiB per card, limits else
requests; none means the whole card) and `volcano.sh/vgpu-cores` (percent, limits else
requests).  The chosen cards are written to `volcano.sh/vgpu-ids-new`.

Only the hami-core sharing mode exists here.  A card registered in `mig` mode falls back to
hami-core exactly as Volcano does when its device ConfigMap names no MIG geometry for the card
type -- Fumarole reads no ConfigMap, so Volcano's default device configuration is in force.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fumarole.daemon.scheduler.plugins.deviceshare_gpushare import atoi

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.task import TaskInfo

DEVICE_NAME = "hamivgpu"
LOCK_NAME = DEVICE_NAME
REGISTER = "volcano.sh/node-vgpu-register"
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_CORES = "volcano.sh/vgpu-cores"
# Volcano's default device configuration names no memory-percentage resource.
VGPU_MEMORY_PERCENTAGE: str | None = None
GPU_IN_USE = "nvidia.com/use-gputype"
GPU_NO_USE = "nvidia.com/nouse-gputype"
USE_UUID = "volcano.sh/vgpu-use-gpuuuid"
NO_USE_UUID = "volcano.sh/vgpu-nouse-gpuuuid"
ASSIGNED_TIME = "volcano.sh/vgpu-time"
ASSIGNED_IDS = "volcano.sh/vgpu-ids-new"
ASSIGNED_IDS_TO_ALLOCATE = "volcano.sh/devices-to-allocate"
ASSIGNED_NODE = "volcano.sh/vgpu-node"
BIND_TIME = "volcano.sh/bind-time"
BIND_PHASE = "volcano.sh/bind-phase"
MODE_ANNOTATION = "volcano.sh/vgpu-mode"
PODGROUP_POLICY = "volcano.sh/vgpu-podgroup-policy"
KUBE_GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME = "scheduling.volcano.sh/group-name"
NVIDIA = "NVIDIA"
HAMI_CORE = "hami-core"
MIG = "mig"
BINPACK = "binpack"
SPREAD = "spread"
DEFAULT_MEM_PERCENTAGE = 101
RELEASE_KEYS = (ASSIGNED_NODE, ASSIGNED_IDS, ASSIGNED_IDS_TO_ALLOCATE, ASSIGNED_TIME, BIND_TIME, BIND_PHASE)
_GO_BOOL_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


@dataclass(slots=True)
class Usage:
    mem: int = 0
    core: int = 0
    group: str = ""


@dataclass(slots=True)
class VCard:
    """One registered card (GPUDevice) with its sharing counters."""

    index: int
    uuid: str
    number: int
    memory: int
    type: str
    health: bool
    used_num: int = 0
    used_mem: int = 0
    used_core: int = 0
    pods: dict[str, Usage] = field(default_factory=dict)

    def copy(self) -> VCard:
        c = VCard(self.index, self.uuid, self.number, self.memory, self.type, self.health)
        c.used_num, c.used_mem, c.used_core = self.used_num, self.used_mem, self.used_core
        c.pods = {k: Usage(u.mem, u.core, u.group) for k, u in self.pods.items()}
        return c


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """devices.ContainerDeviceRequest."""

    nums: int
    memreq: int
    mem_percentage: int
    coresreq: int
    type: str = NVIDIA


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    uuid: str
    type: str
    usedmem: int
    usedcores: int


def decode_node_devices(text: str) -> tuple[dict[int, VCard], str] | None:
    """decodeNodeDevices: cards keyed by their position in the ':'-separated list, and the mode."""
    if ":" not in text:
        return None
    cards: dict[int, VCard] = {}
    mode = HAMI_CORE
    for index, val in enumerate(text.split(":")):
        if "," not in val:
            continue
        items = val.split(",")
        if len(items) < 6:
            return None
        count = atoi(items[1]) or 0
        mem = atoi(items[2]) or 0
        # A mig card needs a geometry from the device ConfigMap; without one Volcano falls back.
        mode = HAMI_CORE
        cards[index] = VCard(index, items[0], count, mem, items[3], items[4] in _GO_BOOL_TRUE)
    return cards, mode


def _parse_uint(text: str) -> int | None:
    return int(text) if text.isdigit() and text.isascii() else None


def decode_pod_devices(text: str) -> list[list[ContainerDevice]]:
    """DecodePodDevices: containers split by ';', devices by ':', fields by ','; bad entries skipped."""
    if not text:
        return []
    out: list[list[ContainerDevice]] = []
    for part in text.split(";"):
        devs: list[ContainerDevice] = []
        for val in part.split(":") if part else []:
            if "," not in val:
                continue
            f = val.split(",")
            if len(f) < 4:
                continue
            mem, cores = _parse_uint(f[2]), _parse_uint(f[3])
            if mem is None or cores is None or mem >= 1 << 32 or cores >= 1 << 32:
                continue
            devs.append(ContainerDevice(f[0], f[1], mem, cores))
        out.append(devs)
    return out


def encode_pod_devices(pd: list[list[ContainerDevice]]) -> str:
    return ";".join("".join(f"{d.uuid},{d.type},{d.usedmem},{d.usedcores}:" for d in cd) for cd in pd)


def has_vgpu_request(task: TaskInfo) -> bool:
    """checkVGPUResourcesInPod: an app container limits vgpu-memory or vgpu-number."""
    return any(
        not c.init and (VGPU_MEMORY in c.limits or VGPU_NUMBER in c.limits)
        for c in task.pod.extended_resources
    )


def container_requests(task: TaskInfo) -> list[ContainerRequest]:
    """ExtractResourceRequest over app containers (count from limits, memory/cores limits else requests)."""
    out: list[ContainerRequest] = []
    for c in task.pod.extended_resources:
        if c.init:
            continue
        n = c.limit(VGPU_NUMBER)
        if n is None:
            if c.limit(VGPU_MEMORY) is None:
                continue
            n = 1
        memnum = c.limit_or_request(VGPU_MEMORY) or 0
        mempnum = DEFAULT_MEM_PERCENTAGE
        if VGPU_MEMORY_PERCENTAGE is not None:
            p = c.limit_or_request(VGPU_MEMORY_PERCENTAGE)
            if p is not None:
                mempnum = p
        if mempnum == DEFAULT_MEM_PERCENTAGE and memnum == 0:
            mempnum = 100
        cores = c.limit_or_request(VGPU_CORES) or 0
        out.append(ContainerRequest(n, memnum, mempnum, cores))
    return out


# FilterNode's one status message (Volcano's vGPU FilterNode hides fit's own reason).
FILTER_ERROR = "hami-vgpuDeviceSharing error"
FILTER_ANNOTATIONS = (MODE_ANNOTATION, PODGROUP_POLICY, USE_UUID, NO_USE_UUID, GPU_IN_USE, GPU_NO_USE)


def filter_key(task: TaskInfo) -> Hashable:
    """Everything of the task that FilterNode (`VGpuPool.fit`) reads: requests, annotations, group."""
    ann = task.pod.annotations
    return (
        tuple(container_requests(task)),
        tuple(ann.get(k) for k in FILTER_ANNOTATIONS),
        pod_group_key(task),
    )


def pod_group_key(task: TaskInfo) -> str:
    ann = task.pod.annotations
    name = ann.get(KUBE_GROUP_NAME) or ann.get(VOLCANO_GROUP_NAME) or ""
    return f"{task.namespace}/{name}" if name else ""


def _type_listed(cardtype: str, value: str) -> bool:
    up = cardtype.upper()
    return any(v.upper() in up for v in value.split(","))


def check_gpu_type(annotations: Mapping[str, str], cardtype: str) -> bool:
    """checkGPUtype: use-gputype (any listed type contained) wins; else nouse-gputype excludes."""
    inuse = annotations.get(GPU_IN_USE)
    if inuse is not None:
        return _type_listed(cardtype, inuse)
    nouse = annotations.get(GPU_NO_USE)
    if nouse is not None:
        return not _type_listed(cardtype, nouse)
    return True


def _uuid_list(value: str | None) -> list[str]:
    return [u.strip() for u in (value or "").split(",") if u.strip()]


@dataclass(frozen=True, slots=True)
class UUIDFilter:
    allow: tuple[str, ...]
    deny: tuple[str, ...]

    @classmethod
    def of(cls, annotations: Mapping[str, str]) -> UUIDFilter:
        return cls(
            tuple(_uuid_list(annotations.get(USE_UUID))), tuple(_uuid_list(annotations.get(NO_USE_UUID)))
        )

    @property
    def enabled(self) -> bool:
        return bool(self.allow or self.deny)

    def matches(self, uuid: str) -> bool:
        if uuid == "" and self.enabled:
            return False
        if self.allow and uuid not in self.allow:
            return False
        return uuid not in self.deny


# An opt-in plugin's card choice (fgd): the node's cards in the order to try them for the task,
# or None for the policy's order (`_order`).
CardOrder = Callable[["TaskInfo", str, dict[int, "VCard"]], list[int] | None]


def gpu_score(policy: str, card: VCard) -> float:
    """GPUScore, taken right after the request was added to the card."""
    if policy == BINPACK:
        # Volcano divides by zero here for a card registered with no memory; we score 0.
        return 100.0 * card.used_mem / card.memory if card.memory else 0.0
    if policy == SPREAD:
        return 100.0 if card.used_num == 0 else 0.0
    return 0.0


def _order(cards: dict[int, VCard], policy: str) -> list[int]:
    """sortedDeviceIndicesByPolicy."""
    if policy == BINPACK:
        return sorted(cards, key=lambda i: (-cards[i].used_mem, i))
    if policy == SPREAD:
        return sorted(cards, key=lambda i: (cards[i].used_num, i))
    return [i for i in range(len(cards) - 1, -1, -1) if i in cards]


class VGpuPool:
    """The vGPU cards of one node (GPUDevices) and Volcano's operations on them."""

    device_name = DEVICE_NAME
    lock_name = LOCK_NAME

    def __init__(self, node_name: str, cards: dict[int, VCard], mode: str) -> None:
        self.node_name = node_name
        self.cards = dict(sorted(cards.items()))
        self.mode = mode
        # The score of the last FilterNode on this node, read back by ScoreNode.
        self.cached_score = 0.0
        # Bumped on every change to the cards; FilterNode's answers are kept per request key
        # (`filter_key`) with the state they were computed on (fit is a pure function of both).
        self.state = 0
        self._filtered: dict[Hashable, tuple[int, str | None, float]] = {}

    @classmethod
    def from_node(cls, node: NodeInfo) -> VGpuPool | None:
        text = node.facts.annotations.get(REGISTER)
        if text is None:
            return None
        alloc = node.allocatable.scalars
        for name in (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY):
            if alloc.get(name, 0) <= 0:
                return None
        decoded = decode_node_devices(text)
        if decoded is None or not decoded[0]:
            return None
        return cls(node.name, decoded[0], decoded[1])

    # ----------------------------------------------------------------- accounting
    def has_request(self, task: TaskInfo) -> bool:
        return has_vgpu_request(task)

    def _matching(self, uuid: str) -> VCard | None:
        for card in self.cards.values():
            if card.uuid in uuid:
                return card
        return None

    def add_resource(self, task: TaskInfo, annotations: Mapping[str, str]) -> None:
        """AddResource: each device of the pod's vgpu-ids-new lands on the first card it names."""
        ids = annotations.get(ASSIGNED_IDS)
        if ids is None:
            return
        self.state += 1
        group = pod_group_key(task)
        for cd in decode_pod_devices(ids):
            for d in cd:
                card = self._matching(d.uuid)
                if card is None:
                    continue
                if task.uid not in card.pods:  # hami-core AddPod: a second add of a pod is a no-op
                    card.pods[task.uid] = Usage(d.usedmem, d.usedcores)
                    card.used_num += 1
                    card.used_mem += d.usedmem
                    card.used_core += d.usedcores
                card.pods[task.uid].group = group

    def sub_resource(self, task: TaskInfo, annotations: Mapping[str, str]) -> None:
        ids = annotations.get(ASSIGNED_IDS)
        if ids is None:
            return
        self.state += 1
        for cd in decode_pod_devices(ids):
            for d in cd:
                card = self._matching(d.uuid)
                if card is None or task.uid not in card.pods:
                    continue
                card.used_num -= 1
                card.used_mem -= d.usedmem
                card.used_core -= d.usedcores
                del card.pods[task.uid]

    # ----------------------------------------------------------------- choice
    def fit(
        self, task: TaskInfo, policy: str, *, replicate: bool, card_order: CardOrder | None = None
    ) -> tuple[list[list[ContainerDevice]], float] | str:
        """checkNodeGPUSharingPredicateAndScore: (devices per container, score) or the error text.

        With replicate=False the counters of the chosen cards stay raised (Allocate's TryAddPod).
        `card_order` (beyond Volcano: the fgd plugin's card choice) replaces the policy's card order
        when it answers a list.
        """
        if not has_vgpu_request(task):
            return [], 0.0
        ann = task.pod.annotations
        mode = ann.get(MODE_ANNOTATION)
        if mode is not None and mode != self.mode:
            return f"pod required sharing mode {mode} is not the same as the node mode {self.mode}"
        reqs = container_requests(task)
        if not reqs:
            return [], 0.0
        cards = {i: c.copy() for i, c in self.cards.items()} if replicate else self.cards
        group = pod_group_key(task) if ann.get(PODGROUP_POLICY) == SPREAD else ""
        tentative: list[tuple[VCard, int, int]] = []
        uuid_filter = UUIDFilter.of(ann)
        score = 0.0
        out: list[list[ContainerDevice]] = []

        def rollback() -> None:
            for card, mem, core in tentative:
                card.used_num = max(card.used_num - 1, 0)
                card.used_mem = max(card.used_mem - mem, 0)
                card.used_core = max(card.used_core - core, 0)

        for req in reqs:
            nums = req.nums
            devs: list[ContainerDevice] = []
            uuid_matched = False
            if nums > len(cards):
                rollback()
                return f"no enough gpu cards on node {self.node_name}"
            order = card_order(task, self.node_name, cards) if card_order is not None else None
            for i in order if order is not None else _order(cards, policy):
                card = cards[i]
                if not uuid_filter.matches(card.uuid):
                    continue
                uuid_matched = True
                if card.number <= card.used_num:
                    continue
                if group and any(u.group == group and (u.mem > 0 or u.core > 0) for u in card.pods.values()):
                    continue
                if req.mem_percentage != DEFAULT_MEM_PERCENTAGE:
                    memreq = int(float(card.memory) * float(req.mem_percentage) / 100.0)
                else:
                    memreq = req.memreq
                if card.memory - card.used_mem < memreq:
                    continue
                if card.used_core + req.coresreq > 100:
                    continue
                if req.coresreq == 100 and card.used_num > 0:
                    continue
                if card.used_core == 100 and req.coresreq == 0:
                    continue
                if req.type not in card.type or not check_gpu_type(ann, card.type):
                    continue
                card.used_num += 1  # hami-core TryAddPod
                card.used_mem += memreq
                card.used_core += req.coresreq
                tentative.append((card, memreq, req.coresreq))
                if nums > 0:
                    nums -= 1
                    devs.append(ContainerDevice(card.uuid, req.type, memreq, req.coresreq))
                    score += gpu_score(policy, card)
                if nums == 0:
                    break
            if nums > 0:
                rollback()
                if uuid_filter.enabled and not uuid_matched:
                    return (
                        f"no GPU matches UUID constraints {USE_UUID}={ann.get(USE_UUID, '')!r}, "
                        f"{NO_USE_UUID}={ann.get(NO_USE_UUID, '')!r} on node {self.node_name}"
                    )
                return "not enough gpu fitted on this node"
            out.append(devs)
        return out, score

    def filter(self, task: TaskInfo, policy: str, key: Hashable | None = None) -> str | None:
        """FilterNode; with a `filter_key` the answer on unchanged cards is the one computed before."""
        if key is not None:
            hit = self._filtered.get(key)
            if hit is not None and hit[0] == self.state:
                if hit[1] is None:
                    self.cached_score = hit[2]
                return hit[1]
        res = self.fit(task, policy, replicate=True)
        msg = FILTER_ERROR if isinstance(res, str) else None
        if not isinstance(res, str):
            self.cached_score = res[1]
        if key is not None:
            self._filtered[key] = (self.state, msg, self.cached_score)
        return msg

    def score(self, task: TaskInfo) -> float:
        return self.cached_score

    def needs_lock(self, task: TaskInfo) -> bool:
        return True

    def allocate(
        self, task: TaskInfo, policy: str, now: float, card_order: CardOrder | None = None
    ) -> dict[str, str] | str:
        """Allocate: raise the chosen cards' counters, record the pod on them, return the annotations.

        `card_order` (the fgd plugin's, when configured) chooses the cards instead of the policy;
        FilterNode keeps the policy's order (whether a node fits does not depend on the order)."""
        self.state += 1
        res = self.fit(task, policy, replicate=False, card_order=card_order)
        if isinstance(res, str):
            return res
        encoded = encode_pod_devices(res[0])
        now_s = str(int(now))
        group = pod_group_key(task)
        for cd in res[0]:
            for d in cd:
                for card in self.cards.values():  # addToPodMap: every card the device names
                    if card.uuid in d.uuid:
                        u = card.pods.setdefault(task.uid, Usage())
                        u.mem += d.usedmem
                        u.core += d.usedcores
                        u.group = group
        return {
            ASSIGNED_NODE: self.node_name,
            ASSIGNED_TIME: now_s,
            ASSIGNED_IDS: encoded,
            ASSIGNED_IDS_TO_ALLOCATE: encoded,
            BIND_PHASE: "allocating",
            BIND_TIME: now_s,
        }

    def release(self, task: TaskInfo) -> list[str]:
        """Release: SubResource on the pod's own annotations (a fresh allocation has none, so its
        counters stay raised, as in Volcano), then the keys to drop unless the bind succeeded."""
        self.sub_resource(task, task.pod.annotations)
        if task.pod.annotations.get(BIND_PHASE) == "success":
            return []
        return list(RELEASE_KEYS)
