"""GPU sharing by memory and whole GPUs by number on one node's cards (Volcano's nvidia/gpushare).

A node takes part when its capacity names both `volcano.sh/gpu-memory` (the total over its
cards) and `volcano.sh/gpu-number`; each card gets total // number of memory, and cards listed
in the node annotation `volcano.sh/gpu-unhealthy-ids` are dropped.  A pod's card indices are
read from (and written to) its annotation `volcano.sh/gpu-index`.  Card choice is by index:
the lowest card with room (memory), the lowest idle cards (number) -- Volcano takes the idle
cards in Go map order there, Fumarole in index order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.node import NodeInfo
    from fumarole.daemon.scheduler.model.task import TaskInfo

DEVICE_NAME = "GpuShare"
LOCK_NAME = "gpu"
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
PREDICATE_TIME = "volcano.sh/predicate-time"
GPU_INDEX = "volcano.sh/gpu-index"
UNHEALTHY_GPU_IDS = "volcano.sh/gpu-unhealthy-ids"
_ATOI = re.compile(r"^[+-]?\d+$")
_FINISHED = frozenset({"Succeeded", "Failed"})


def atoi(text: str) -> int | None:
    """strconv.Atoi: an optional sign and decimal digits, nothing else."""
    return int(text) if _ATOI.match(text) else None


def _pod_figure(task: TaskInfo, name: str) -> int:
    """Sum over app containers' limits, or the largest init container's limit if bigger."""
    app = 0
    init = 0
    for c in task.pod.extended_resources:
        v = c.limit(name) or 0
        if c.init:
            init = max(init, v)
        else:
            app += v
    return max(app, init)


def gpu_memory_of(task: TaskInfo) -> int:
    """getGPUMemoryOfPod: from `limits` only."""
    return _pod_figure(task, GPU_MEMORY)


def gpu_number_of(task: TaskInfo) -> int:
    """getGPUNumberOfPod: from `limits` only."""
    return _pod_figure(task, GPU_NUMBER)


def gpu_indices(annotations: Mapping[str, str]) -> list[int] | None:
    """GetGPUIndex: the comma-separated card indices, None when absent or not all integers."""
    value = annotations.get(GPU_INDEX)
    if value is None:
        return None
    ids: list[int] = []
    for part in value.split(","):
        i = atoi(part)
        if i is None:
            return None
        ids.append(i)
    return ids


@dataclass(slots=True)
class ShareCard:
    """One physical card: its memory and the pods placed on it (uid -> (gpu memory, phase))."""

    index: int
    memory: int
    pods: dict[str, tuple[int, str]] = field(default_factory=dict)

    def used_memory(self) -> int:
        return sum(mem for mem, phase in self.pods.values() if phase not in _FINISHED)

    def idle_memory(self) -> int:
        # Volcano clamps at zero: a card can be over-subscribed by pods naming it themselves.
        return max(self.memory - self.used_memory(), 0)

    def is_idle(self) -> bool:
        return not self.pods


class GpuSharePool:
    """The gpushare cards of one node (GPUDevices) and Volcano's operations on them."""

    device_name = DEVICE_NAME
    lock_name = LOCK_NAME

    def __init__(self, node_name: str, cards: dict[int, ShareCard], *, sharing: bool, number: bool) -> None:
        self.node_name = node_name
        self.cards = dict(sorted(cards.items()))
        self.sharing = sharing
        self.number = number

    @classmethod
    def from_node(cls, node: NodeInfo, *, sharing: bool, number: bool) -> GpuSharePool | None:
        cap = node.capability.scalars
        if GPU_MEMORY not in cap or GPU_NUMBER not in cap:
            return None
        total = -(-int(cap[GPU_MEMORY]) // 1000)
        count = -(-int(cap[GPU_NUMBER]) // 1000)
        if count == 0:
            return None
        per_card = total // count
        cards = {i: ShareCard(i, per_card) for i in range(count)}
        unhealthy = node.facts.annotations.get(UNHEALTHY_GPU_IDS)
        if unhealthy is not None:
            for part in unhealthy.split(","):
                i = atoi(part)
                if i is not None:
                    cards.pop(i, None)
        return cls(node.name, cards, sharing=sharing, number=number)

    # ----------------------------------------------------------------- accounting
    def has_request(self, task: TaskInfo) -> bool:
        return (self.sharing and gpu_memory_of(task) > 0) or (self.number and gpu_number_of(task) > 0)

    def add_resource(self, task: TaskInfo, annotations: Mapping[str, str]) -> None:
        """AddResource: a pod naming cards in its annotation occupies them."""
        mem = gpu_memory_of(task)
        if mem <= 0 and gpu_number_of(task) <= 0:
            return
        for i in gpu_indices(annotations) or []:
            if i in self.cards:
                self.cards[i].pods[task.uid] = (mem, task.pod.phase)

    def sub_resource(self, task: TaskInfo, annotations: Mapping[str, str]) -> None:
        if gpu_memory_of(task) <= 0 and gpu_number_of(task) <= 0:
            return
        self._remove(task.uid, gpu_indices(annotations))

    def _remove(self, uid: str, ids: list[int] | None) -> None:
        if not ids:
            for card in self.cards.values():
                card.pods.pop(uid, None)
            return
        for i in ids:
            if i in self.cards:
                self.cards[i].pods.pop(uid, None)

    # ----------------------------------------------------------------- choice
    def cards_by_memory(self, task: TaskInfo) -> list[int]:
        """predicateGPUbyMemory: every card whose idle memory covers the request, by index."""
        want = gpu_memory_of(task)
        return [i for i, c in self.cards.items() if c.idle_memory() >= want]

    def cards_by_number(self, task: TaskInfo) -> list[int]:
        """predicateGPUbyNumber: the first `n` idle cards (empty when fewer are idle)."""
        want = gpu_number_of(task)
        idle = [i for i, c in self.cards.items() if c.is_idle()]
        if len(idle) < want:
            return []
        return idle[:want]

    def filter(self, task: TaskInfo, policy: str) -> str | None:
        """FilterNode: None when the pod fits, else the status message."""
        if self.sharing and gpu_memory_of(task) > 0 and not self.cards_by_memory(task):
            return f"GpuShare no enough gpu memory on node {self.node_name}"
        if self.number and gpu_number_of(task) > 0 and not self.cards_by_number(task):
            return f"GpuNumber no enough gpu number on node {self.node_name}"
        return None

    def score(self, task: TaskInfo) -> float:
        return 0.0

    def needs_lock(self, task: TaskInfo) -> bool:
        """Only the memory path of Allocate takes the node lock."""
        return gpu_memory_of(task) > 0

    def allocate(self, task: TaskInfo, policy: str, now: float) -> dict[str, str] | str:
        """Allocate: put the pod on its card(s); the annotations to carry, or an error text."""
        if gpu_memory_of(task) > 0:
            ids = self.cards_by_memory(task)[:1]
        elif gpu_number_of(task) > 0:
            ids = self.cards_by_number(task)
        else:
            return {}
        if not ids:
            return f"the node {self.node_name} can't place the pod {task.name} in ns {task.namespace}"
        mem = gpu_memory_of(task)
        for i in ids:
            self.cards[i].pods[task.uid] = (mem, task.pod.phase)
        return {PREDICATE_TIME: str(int(now * 1_000_000_000)), GPU_INDEX: ",".join(str(i) for i in ids)}

    def release(self, task: TaskInfo) -> list[str]:
        """Release: drop the pod from its cards (all cards when its own annotation names none)."""
        self._remove(task.uid, gpu_indices(task.pod.annotations))
        return [PREDICATE_TIME, GPU_INDEX]
