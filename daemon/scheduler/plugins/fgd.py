"""The fgd plugin (beyond Volcano, opt-in): fragmentation gradient descent node scoring for GPU pods.

From "Beware of Fragmentation" (Weng et al., USENIX ATC 2023). A node is scored for a task by how
much placing the task there changes the node's GPU fragmentation against the session's typical
workload (`fgd_fragmentation`): score = floor(100 * sigmoid((before - after) / 1000)) * fgd.weight,
taking for a shared-GPU task the card that grows fragmentation least. Tasks that ask no vGPU score
0 everywhere (Volcano's other scorers decide). The node's cards are the deviceshare vGPU cards
(`volcano.sh/node-vgpu-register`); their use is read from the tasks on the node
(`volcano.sh/vgpu-ids-new`, on the pod or recorded by this session's allocations), so the plugin
needs `deviceshare.VGPUEnable` and the predicates plugin to allocate cards. The typical workload is
every task of the session's jobs (shape: cpu, cards, cores x 10 milli; GPU-model constraints are
not read). Arguments: `fgd.weight` (default 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daemon.scheduler.framework import combinators as cb
from daemon.scheduler.framework.conf import arg_int
from daemon.scheduler.framework.session import Session
from daemon.scheduler.model.node import NodeInfo
from daemon.scheduler.model.task import TaskInfo, TaskStatus
from daemon.scheduler.plugins.deviceshare_vgpu import (
    ASSIGNED_IDS,
    REGISTER,
    VGPU_CORES,
    VGPU_NUMBER,
    decode_node_devices,
    decode_pod_devices,
)
from daemon.scheduler.plugins.fgd_fragmentation import PodShape, node_fragmentation, typical_workload

NAME = "fgd"
WEIGHT = "fgd.weight"
_IDLE_STATUSES = (TaskStatus.PIPELINED, TaskStatus.RELEASING)


def task_gpu(task: TaskInfo) -> tuple[int, int]:
    """(cards, milli per card) the task asks through vGPU limits; (0, 0) for none."""
    cards = 0
    milli = 0
    for c in task.pod.extended_resources:
        if c.init:
            continue
        n = c.limit(VGPU_NUMBER)
        if n is None:
            continue
        cards += int(n)
        milli = int(c.limit_or_request(VGPU_CORES) or 100) * 10
    return cards, milli


class FgdPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight = arg_int(arguments, WEIGHT, 1)
        self.typical: Any = None

    def node_cards(self, node: NodeInfo) -> list[int] | None:
        """Milli left on each registered card of the node, None for a node without vGPU cards."""
        text = node.facts.annotations.get(REGISTER)
        decoded = decode_node_devices(text) if text else None
        if decoded is None or not decoded[0]:
            return None
        cards = decoded[0]
        order = sorted(cards)
        uuids = [cards[i].uuid for i in order]
        left = [1000] * len(order)
        for t in node.tasks.values():
            if t.status in _IDLE_STATUSES:
                continue
            ids = t.bind_annotations.get(ASSIGNED_IDS) or t.pod.annotations.get(ASSIGNED_IDS)
            for devs in decode_pod_devices(ids or ""):
                for d in devs:
                    for k, u in enumerate(uuids):
                        if u in d.uuid:
                            left[k] -= d.usedcores * 10
                            break
        return left

    def score(self, task: TaskInfo, node: NodeInfo) -> float:
        cards, milli = task_gpu(task)
        if cards == 0 or self.typical is None:
            return 0.0
        left = self.node_cards(node)
        if left is None:
            return 0.0
        cpu = int(node.idle.cpu)
        before = self._frag(cpu, [left])[0]
        options: list[list[int]] = []
        if cards == 1 and milli < 1000:
            for k in range(len(left)):
                if left[k] >= milli:
                    options.append([*left[:k], left[k] - milli, *left[k + 1 :]])
        else:
            free = [k for k in range(len(left)) if left[k] >= milli][:cards]
            options.append([v - milli if k in free else v for k, v in enumerate(left)])
        if not options:
            return 0.0
        after = self._frag(cpu - int(task.resreq.cpu), options).min()
        return float(np.floor(100.0 / (1.0 + np.exp((after - before) / 1000.0)))) * self.weight

    def _frag(self, cpu: int, states: list[list[int]]) -> Any:
        gpu = np.array(states, dtype=np.int64)
        n = len(states)
        return node_fragmentation(
            np.full(n, cpu, dtype=np.int64), gpu, np.zeros(n, dtype=np.int64), self.typical
        )

    def on_session_open(self, ssn: Session) -> None:
        shapes = []
        for job in ssn.jobs.values():
            for t in job.tasks.values():
                cards, milli = task_gpu(t)
                shapes.append(PodShape(int(t.resreq.cpu), cards, milli if cards else 0))
        self.typical = typical_workload(shapes, 1.0).arrays({}) if shapes else None
        if self.weight != 0:
            ssn.register(cb.NODE_ORDER, NAME, self.score)

    def on_session_close(self, ssn: Session) -> None:
        self.typical = None


def new(arguments: dict[str, Any]) -> FgdPlugin:
    return FgdPlugin(arguments)
