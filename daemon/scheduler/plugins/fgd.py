"""The fgd plugin (beyond Volcano, opt-in): fragmentation gradient descent node scoring.

From "Beware of Fragmentation" (Weng et al., USENIX ATC 2023). A node is scored for a task by how
much placing the task there changes the node's GPU fragmentation against the session's typical
workload (`fgd_fragmentation`): score = floor(100 * sigmoid((before - after) / 1000)) * fgd.weight,
taking for a shared-GPU task the card that grows fragmentation least. Every task is scored, as in
the paper's simulator (its FGDScore): a task asking no vGPU still takes cpu, which can leave a GPU
node's idle cards unusable to the typical shapes (a node without cards scores 50, sigmoid(0)).
The node's cards are the deviceshare vGPU cards (`volcano.sh/node-vgpu-register`); their use is
read from deviceshare's pools, or from the tasks on the node (`volcano.sh/vgpu-ids-new`), so the
plugin needs `deviceshare.VGPUEnable` and the predicates plugin to allocate cards. The typical
workload is every task of the session's jobs (shape: cpu, cards, cores x 10 milli, acceptable GPU
models). GPU models: a node's model is its label `fgd.modelLabel` (default `alibaba.com/gpu-model`,
the study importer's label); a task's acceptable models are the values of a required node-affinity
`In` expression on that label (none: any model), so a shape counts as unable to run on a node of
another model. Arguments: `fgd.weight` (default 1), `fgd.modelLabel`.

While fgd is configured it also chooses the card of a pod sharing one GPU: deviceshare's Allocate
asks `card_order` (the card that grows fragmentation least, `shared_card_fragmentation`, the fast
study placer's FGD card too), so the pod gets the card its node was scored for. The FGD policy
(examples/study/vgpu-fgd.yaml) also turns deviceshare's device score off and scores every node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_int
from fumarole.daemon.scheduler.framework.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.deviceshare_vgpu import (
    ASSIGNED_IDS,
    REGISTER,
    VGPU_CORES,
    VGPU_NUMBER,
    VCard,
    VGpuPool,
    decode_node_devices,
    decode_pod_devices,
)
from fumarole.daemon.scheduler.plugins.fgd_fragmentation import (
    PodShape,
    fgd_card_order,
    fgd_score,
    fragmentation_and_card_table,
    node_fragmentation,
    shared_card_fragmentation,
    typical_workload,
)

NAME = "fgd"
DEVICESHARE = "deviceshare"
WEIGHT = "fgd.weight"
MODEL_LABEL = "fgd.modelLabel"
DEFAULT_MODEL_LABEL = "alibaba.com/gpu-model"
KEPT_KEY = "fgd.cards"
_IDLE_STATUSES = (TaskStatus.PIPELINED, TaskStatus.RELEASING)


def task_models(task: TaskInfo, label: str) -> tuple[str, ...]:
    """GPU models the task accepts: the values of a required node-affinity `In` expression on
    `label` (several terms: any of their values), () for any model."""
    na = task.pod.affinity.get("nodeAffinity") if isinstance(task.pod.affinity, dict) else None
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(na, dict) else None
    terms = req.get("nodeSelectorTerms") if isinstance(req, dict) else None
    models: set[str] = set()
    for term in terms or []:
        for expr in (term.get("matchExpressions") or []) if isinstance(term, dict) else []:
            if isinstance(expr, dict) and expr.get("key") == label and expr.get("operator") == "In":
                models.update(str(v) for v in expr.get("values") or [])
    return tuple(sorted(models))


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

    __slots__ = ("count", "has", "left", "source", "stamp")

    def __init__(self, n: int, source: object = None) -> None:
        self.left: IntArray = np.zeros((n, 1), dtype=np.int64)
        self.count: IntArray = np.zeros(n, dtype=np.int64)  # registered cards
        self.has: BoolArray = np.zeros(n, dtype=np.bool_)
        self.stamp: IntArray = np.full(n, -1, dtype=np.int64)
        self.source = source

    def reset(self, n: int, source: object) -> None:
        """Forget every row: stamps counted by `source` from now on."""
        self.left = np.zeros((n, 1), dtype=np.int64)
        self.count = np.zeros(n, dtype=np.int64)
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
        self.count[row] = len(left) if left is not None else 0
        self.stamp[row] = stamp


class FgdPlugin:
    name = NAME
    kept_key = KEPT_KEY  # where the card rows are kept between sessions (one key per plugin)

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight = arg_int(arguments, WEIGHT, 1)
        self.model_label = str(arguments.get(MODEL_LABEL, DEFAULT_MODEL_LABEL))
        self.model_ids: dict[str, int] = {}
        self.row_model: IntArray | None = None  # per node row: its model's column (0: none)
        self.typical: Any = None
        self.table: NodeTable | None = None
        self.nodes: dict[str, NodeInfo] = {}
        self.plugins: dict[str, object] = {}
        # Per row: milli left on each card, whether the node has vGPU cards, the stamp read at.
        self.rows = CardRows(0)
        self.kept: CardRows | None = None  # the rows kept across sessions (deviceshare's stamps)
        self.last_count: IntArray = np.zeros(0, dtype=np.int64)  # cards of the rows `_cards` read last

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
        self.last_count = cache.count[rows]
        return cache.left[rows], cache.has[rows]

    def _models(self, rows: IntArray) -> IntArray:
        """Each row's GPU model column in the typical workload's access table (0: none known)."""
        if self.row_model is None:
            return np.zeros(len(rows), dtype=np.int64)
        return self.row_model[rows]

    def score_batch(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """Scores of the node rows: floor(100 * sigmoid((before - after) / 1000)) x weight, after
        the best card for a shared GPU (the first `cards` cards with room for whole GPUs; no card
        for a task asking no vGPU: only its cpu is taken)."""
        out: FloatArray = np.zeros(len(rows))
        cards, milli = task_gpu(task)
        if self.typical is None or self.table is None or len(rows) == 0:
            return out
        left, has = self._cards(rows)
        model = self._models(rows)
        cpu_col = self.table.col["cpu"]
        cpu = self.table.idle[rows, cpu_col].astype(np.int64)
        cpu_after = cpu - int(task.resreq.cpu)
        if cards == 1 and milli < 1000:
            frag, table = fragmentation_and_card_table(cpu, cpu_after, left, milli, model, self.typical)
            assert frag is not None
            before = frag
            after = table.min(axis=1)
            scored = np.isfinite(after)
        elif cards == 0:
            before = self._frag(cpu, left, model)
            after = self._frag(cpu_after, left, model)
            scored = np.ones(len(rows), dtype=np.bool_)
        else:
            before = self._frag(cpu, left, model)
            fits = left >= milli
            take = fits & (np.cumsum(fits, axis=1) <= cards)
            after = self._frag(cpu_after, left - milli * take, model)
            scored = has
        growth = np.where(scored, after - before, 0.0)
        score = fgd_score(growth) * self.weight
        out[scored] = score[scored]
        return out

    def card_order(self, task: TaskInfo, node_name: str, cards: dict[int, VCard]) -> list[int] | None:
        """FGD's card choice, which deviceshare's Allocate uses while fgd is configured: for a pod
        sharing one card, the paper simulator's card (`fgd_card_order`: the first card of the
        highest integer score, the cards without room last); None (the policy's order) otherwise."""
        n_cards, milli = task_gpu(task)
        node = self.nodes.get(node_name)
        if n_cards != 1 or milli >= 1000 or self.typical is None or node is None:
            return None
        idx = sorted(cards)
        left = np.array([[1000 - cards[i].used_core * 10 for i in idx]], dtype=np.int64)
        cpu = int(node.idle.cpu) - (0 if task.uid in node.tasks else int(task.resreq.cpu))
        model = (
            self._models(np.array([node.index], dtype=np.int64))
            if node.index >= 0
            else np.zeros(1, dtype=np.int64)
        )
        before = self._frag(np.array([cpu + int(task.resreq.cpu)], dtype=np.int64), left, model)[0]
        after = shared_card_fragmentation(np.array([cpu], dtype=np.int64), left, milli, model, self.typical)[
            0
        ]
        return [idx[k] for k in fgd_card_order(float(before), after)]

    def _frag(self, cpu: IntArray, gpu: IntArray, model: IntArray) -> FloatArray:
        return node_fragmentation(cpu, gpu, model, self.typical)

    def on_session_open(self, ssn: Session) -> None:
        shapes: list[PodShape] = []
        if ssn.typical_shapes is not None:  # given by the caller (a study: its pod list's shapes)
            shapes = list(ssn.typical_shapes)
        else:
            for job in ssn.jobs.values():
                for t in job.peek_tasks().values():  # read only: never copies the session's jobs
                    cards, milli = task_gpu(t)
                    models = task_models(t, self.model_label) if cards else ()
                    shapes.append(PodShape(int(t.resreq.cpu), cards, milli if cards else 0, models))
        table = ssn.table
        wanted = sorted({m for s in shapes for m in s.models})
        self.model_ids = {m: i + 1 for i, m in enumerate(wanted)}
        self.row_model = None
        if self.model_ids:
            label = self.model_label
            self.row_model = np.array(
                [self.model_ids.get(n.facts.labels.get(label, ""), 0) for n in table.nodes], dtype=np.int64
            )
        self.typical = typical_workload(shapes, 1.0).arrays(self.model_ids) if shapes else None
        self.open_cards(ssn)
        if self.weight != 0:
            ssn.register(cb.NODE_ORDER, NAME, self.score, self.score_batch)

    def open_cards(self, ssn: Session) -> None:
        """Read the session's vGPU cards through deviceshare (rows kept under `kept_key`)."""
        table = ssn.table
        self.table = table
        self.nodes = ssn.nodes
        self.plugins = ssn.plugins
        self.rows = CardRows(len(table.nodes))
        kept: CardRows | None = ssn.derived.current(self.kept_key)
        self.kept = kept if kept is not None else CardRows(0)
        ssn.derived.keep(self.kept_key, self.kept)

    def on_session_close(self, ssn: Session) -> None:
        self.typical = None
        self.table = None
        self.row_model = None
        self.nodes = {}
        self.plugins = {}
        self.kept = None


def new(arguments: dict[str, Any]) -> FgdPlugin:
    return FgdPlugin(arguments)
