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

While fgd is configured it also chooses the card of a pod sharing one GPU: deviceshare's Allocate
asks `card_order` (the card that grows fragmentation least, `shared_card_fragmentation`, the fast
study placer's FGD card too), so the pod gets the card its node was scored for. The FGD policy
(examples/study/vgpu-fgd.yaml) also turns deviceshare's device score off and scores every node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daemon.scheduler.framework import combinators as cb
from daemon.scheduler.framework.conf import arg_int
from daemon.scheduler.framework.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from daemon.scheduler.framework.session import Session
from daemon.scheduler.model.node import NodeInfo
from daemon.scheduler.model.task import TaskInfo, TaskStatus
from daemon.scheduler.plugins.deviceshare_vgpu import (
    ASSIGNED_IDS,
    REGISTER,
    VGPU_CORES,
    VGPU_NUMBER,
    VCard,
    VGpuPool,
    decode_node_devices,
    decode_pod_devices,
)
from daemon.scheduler.plugins.fgd_fragmentation import (
    PodShape,
    fragmentation_and_card_table,
    node_fragmentation,
    shared_card_fragmentation,
    typical_workload,
)

NAME = "fgd"
DEVICESHARE = "deviceshare"
WEIGHT = "fgd.weight"
KEPT_KEY = "fgd.cards"
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


class CardRows:
    """Per node row: milli left on each card (zero-padded), whether the node has vGPU cards, and the
    stamp they were read at (-1: never); `source` is what the stamps count (deviceshare's kept
    pools for the rows kept between sessions, None for one session's node table versions)."""

    __slots__ = ("has", "left", "source", "stamp")

    def __init__(self, n: int, source: object = None) -> None:
        self.left: IntArray = np.zeros((n, 1), dtype=np.int64)
        self.has: BoolArray = np.zeros(n, dtype=np.bool_)
        self.stamp: IntArray = np.full(n, -1, dtype=np.int64)
        self.source = source

    def reset(self, n: int, source: object) -> None:
        """Forget every row: stamps counted by `source` from now on."""
        self.left = np.zeros((n, 1), dtype=np.int64)
        self.has = np.zeros(n, dtype=np.bool_)
        self.stamp = np.full(n, -1, dtype=np.int64)
        self.source = source

    def put(self, row: int, left: list[int] | None, stamp: int) -> None:
        """The row's cards as read at `stamp` (None: the node has no vGPU cards)."""
        if left is not None and len(left) > self.left.shape[1]:
            wider = np.zeros((len(self.left), len(left)), dtype=np.int64)
            wider[:, : self.left.shape[1]] = self.left
            self.left = wider
        self.left[row] = 0
        if left is not None:
            self.left[row, : len(left)] = left
        self.has[row] = left is not None
        self.stamp[row] = stamp


class FgdPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight = arg_int(arguments, WEIGHT, 1)
        self.typical: Any = None
        self.table: NodeTable | None = None
        self.nodes: dict[str, NodeInfo] = {}
        self.plugins: dict[str, object] = {}
        # Per row: milli left on each card, whether the node has vGPU cards, the stamp read at.
        self.rows = CardRows(0)
        self.kept: CardRows | None = None  # the rows kept across sessions (deviceshare's stamps)

    def node_cards(self, node: NodeInfo) -> list[int] | None:
        """Milli left on each registered card of the node, None for a node without vGPU cards.

        deviceshare's cards when it is configured (they count this session's allocations, which
        the node's copies of the tasks do not carry), else read from the tasks' annotations."""
        pools = getattr(self.plugins.get(DEVICESHARE), "pools", None)
        if pools is not None:
            for pool in pools(node.name):
                if isinstance(pool, VGpuPool):
                    return [1000 - pool.cards[i].used_core * 10 for i in sorted(pool.cards)]
            return None
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
        """The node's score alone (the batch score on its row)."""
        return float(self.score_batch(task, np.array([node.index], dtype=np.int64))[0])

    def _cards(self, rows: IntArray) -> tuple[IntArray, BoolArray]:
        """Milli left on each card of the rows (zero-padded) and which rows have vGPU cards.

        A row's cards are read again (`node_cards`) only when its stamp moved since: deviceshare's
        kept pools' stamp when it keeps them between sessions (then what was read is kept in the
        session's NodeDerived view for the next session), else the node table's row version."""
        table = self.table
        assert table is not None
        pools = getattr(self.plugins.get(DEVICESHARE), "kept", None)
        if pools is not None and self.kept is not None:
            cache = self.kept
            if cache.source is not pools:
                cache.reset(len(table.nodes), pools)
            version = pools.stamp[rows]
        else:
            cache = self.rows
            version = table.version[rows]
        stale = np.flatnonzero(cache.stamp[rows] != version)
        for k in stale:
            row = int(rows[k])
            cache.put(row, self.node_cards(table.nodes[row]), int(version[k]))
        return cache.left[rows], cache.has[rows]

    def score_batch(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """Scores of the node rows: floor(100 * sigmoid((before - after) / 1000)) x weight, after
        the best card for a shared GPU (the first `cards` cards with room for whole GPUs)."""
        out: FloatArray = np.zeros(len(rows))
        cards, milli = task_gpu(task)
        if cards == 0 or self.typical is None or self.table is None or len(rows) == 0:
            return out
        left, has = self._cards(rows)
        cpu_col = self.table.col["cpu"]
        cpu = self.table.idle[rows, cpu_col].astype(np.int64)
        cpu_after = cpu - int(task.resreq.cpu)
        if cards == 1 and milli < 1000:
            zeros = np.zeros(len(rows), dtype=np.int64)
            frag, table = fragmentation_and_card_table(cpu, cpu_after, left, milli, zeros, self.typical)
            assert frag is not None
            before = frag
            after = table.min(axis=1)
            scored = np.isfinite(after)
        else:
            before = self._frag(cpu, left)
            fits = left >= milli
            take = fits & (np.cumsum(fits, axis=1) <= cards)
            after = self._frag(cpu_after, left - milli * take)
            scored = has
        growth = np.where(scored, after - before, 0.0)
        score = np.floor(100.0 / (1.0 + np.exp(growth / 1000.0))) * self.weight
        out[scored] = score[scored]
        return out

    def card_order(self, task: TaskInfo, node_name: str, cards: dict[int, VCard]) -> list[int] | None:
        """FGD's card choice, which deviceshare's Allocate uses while fgd is configured: for a pod
        sharing one card, the cards by the node's fragmentation after the pod lands on each (least
        first, then by index; cards without room last); None (the policy's order) otherwise."""
        n_cards, milli = task_gpu(task)
        node = self.nodes.get(node_name)
        if n_cards != 1 or milli >= 1000 or self.typical is None or node is None:
            return None
        idx = sorted(cards)
        left = np.array([[1000 - cards[i].used_core * 10 for i in idx]], dtype=np.int64)
        cpu = int(node.idle.cpu) - (0 if task.uid in node.tasks else int(task.resreq.cpu))
        after = shared_card_fragmentation(
            np.array([cpu], dtype=np.int64), left, milli, np.zeros(1, dtype=np.int64), self.typical
        )[0]
        return [idx[k] for k in sorted(range(len(idx)), key=lambda k: (after[k], idx[k]))]

    def _frag(self, cpu: IntArray, gpu: IntArray) -> FloatArray:
        n = len(cpu)
        return node_fragmentation(cpu, gpu, np.zeros(n, dtype=np.int64), self.typical)

    def on_session_open(self, ssn: Session) -> None:
        shapes = []
        for job in ssn.jobs.values():
            for t in job.peek_tasks().values():  # read only: never copies the session's jobs
                cards, milli = task_gpu(t)
                shapes.append(PodShape(int(t.resreq.cpu), cards, milli if cards else 0))
        self.typical = typical_workload(shapes, 1.0).arrays({}) if shapes else None
        table = ssn.table
        self.table = table
        self.nodes = ssn.nodes
        self.plugins = ssn.plugins
        self.rows = CardRows(len(table.nodes))
        kept: CardRows | None = ssn.derived.current(KEPT_KEY)
        self.kept = kept if kept is not None else CardRows(0)
        ssn.derived.keep(KEPT_KEY, self.kept)
        if self.weight != 0:
            ssn.register(cb.NODE_ORDER, NAME, self.score, self.score_batch)

    def on_session_close(self, ssn: Session) -> None:
        self.typical = None
        self.table = None
        self.nodes = {}
        self.plugins = {}
        self.kept = None


def new(arguments: dict[str, Any]) -> FgdPlugin:
    return FgdPlugin(arguments)
