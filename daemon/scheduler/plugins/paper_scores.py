"""The baselines of "Beware of Fragmentation" (Weng et al., ATC'23) as node-order plugins (beyond
Volcano, opt-in): `paper-random`, `paper-dotprod`, `paper-gpuclustering`, `paper-gpupacking`,
`paper-bestfit`.

Each is the score of the paper's simulator (hkust-adsl/kubernetes-scheduler-simulator,
pkg/simulator/plugin/<name>_score.go, as its experiments configure them), written anew over
deviceshare's vGPU cards (read as the fgd plugin reads them). Per node: cpu left (milli), each
card's milli left, the card count; per pod: cpu, cards n and milli m per card. Integer arithmetic
follows the simulator's (Go's int64 truncation).
  * paper-random (random_score.go): every feasible node scores the same, so the seeded tie-break
    (SearchOptions.tie_seed, framework/ties.py) draws one uniformly; a shared pod's card is drawn
    among the cards with room by the same keyed hash (the experiments' `-gpusel random`).
  * paper-dotprod (dot_product_score.go, `-dimext merge -norm max`, Tetris's alignment):
    trunc(100 * (1 - (cpu_left/128000 * cpu/128000 + gpu_left/8000 * n*m/8000) / 2)),
    gpu_left the node's total milli left: the least aligned node wins.
  * paper-gpuclustering (gpu_clustering_score.go): a pod's kind is "share" (one card, m < 1000),
    "n-gpu" (whole cards) or none (0 everywhere); b = 25 * (8000 - gpu_left) // 8000; the node
    scores b + 75 when its GPU pods are all of the pod's kind, b + 50 when some are, b + 25 when it
    has no GPU pod, b otherwise.
  * paper-gpupacking (gpu_packing_score.go): a CPU pod scores 0; a node with every card idle
    max(33 - idle cards, idle cards); else the pod's cards taken least room first: if some are
    idle max(50 - those, 33), else max(100 - (sum of their milli left * 100 // 1000) // 10, 50).
  * paper-bestfit (best_fit_score.go): trunc(100 * (1 - ((cpu_left - cpu)/128000 * 0.5 +
    (gpu_left - n*m)/8000 * 0.5))), then min-max normalised to 0-100 over the scored nodes
    (integer; all equal: 0), its NormalizeScore.
The simulator's constants: 128000 milli cpu and 8000 milli GPU (MaxSpecCpu, MaxSpecGpu). The
cards of the four others are deviceshare's binpack order (most used card with room first, then
by index), the simulator's `-gpusel best` (least room that fits, first index on ties); their
presets turn deviceshare's device score off. Arguments: `<name>.weight` (default 1).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_int
from fumarole.daemon.scheduler.framework.nodetable import FloatArray, IntArray
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.ties import least_key, node_keys, task_key
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.deviceshare_vgpu import VCard
from fumarole.daemon.scheduler.plugins.fgd import FgdPlugin, task_gpu

__all__ = [
    "NAMES",
    "bestfit_scores",
    "dotprod_scores",
    "gpuclustering_scores",
    "gpupacking_scores",
    "new_bestfit",
    "new_dotprod",
    "new_gpuclustering",
    "new_gpupacking",
    "new_random",
    "random_card",
]

MAX_CPU = 128000
MAX_GPU = 8000
MILLI = 1000
NAMES = ("paper-random", "paper-dotprod", "paper-gpuclustering", "paper-gpupacking", "paper-bestfit")
_IDLE_STATUSES = (TaskStatus.PIPELINED, TaskStatus.RELEASING)


def kind_of(cards: int, milli: int) -> str:
    """The simulator's GPU affinity tag of a pod: "" (no GPU), "share" or "<n>-gpu"."""
    if cards == 0:
        return ""
    return "share" if cards == 1 and milli < MILLI else f"{cards}-gpu"


# The scores as pure functions of the node rows (cpu left, each card's milli left zero-padded, the
# card count) and the pod (cpu, n cards of m milli): the plugins below and the fast study placer
# (daemon/study/placement.py) both call them, so the two engines score alike by construction.


def dotprod_scores(cpu: IntArray, left: IntArray, req_cpu: int, n: int, m: int) -> IntArray:
    gpu_left = left.sum(axis=1)
    dot = (cpu / MAX_CPU) * (req_cpu / MAX_CPU) + (gpu_left / MAX_GPU) * (n * m / MAX_GPU)
    out: IntArray = np.trunc(100.0 * (1.0 - dot / 2.0)).astype(np.int64)
    out[cpu < req_cpu] = 0
    return out


def gpuclustering_scores(left: IntArray, kinds: Sequence[Collection[str]], n: int, m: int) -> IntArray:
    """`kinds`: per row, the kinds of the GPU pods on the node."""
    kind = kind_of(n, m)
    if not kind:
        return np.zeros(len(left), dtype=np.int64)
    base = 25 * (MAX_GPU - left.sum(axis=1)) // MAX_GPU
    out = np.empty(len(left), dtype=np.int64)
    for k, held in enumerate(kinds):
        if kind in held:  # the node holds pods of the pod's kind (only those: 75)
            out[k] = base[k] + (75 if len(held) == 1 else 50)
        else:  # an idle node (no GPU pod) before one holding other kinds
            out[k] = base[k] + (25 if not held else 0)
    return out


def gpupacking_scores(left: IntArray, count: IntArray, n: int, m: int) -> IntArray:
    if n == 0 or m <= 0:
        return np.zeros(len(left), dtype=np.int64)
    valid = np.arange(left.shape[1])[None, :] < count[:, None]
    idle = ((left == MILLI) & valid).sum(axis=1)
    # The pod's cards, least room first (missing cards sort first but have no room).
    ordered = np.sort(np.where(valid, left, -1), axis=1, kind="stable")
    fits = ordered >= m
    take = fits & (np.cumsum(fits, axis=1) <= n)
    enough = take.sum(axis=1) == n
    idle_used = (take & (ordered == MILLI)).sum(axis=1)
    room = np.where(take, ordered * 100 // MILLI, 0).sum(axis=1)
    out = np.maximum(100 - room // 10, 50)
    out = np.where(idle_used > 0, np.maximum(50 - idle_used, 33), out)
    out = np.where(enough, out, 0)
    out = np.where(idle == count, np.maximum(33 - idle, idle), out)
    result: IntArray = out.astype(np.int64)
    return result


def bestfit_scores(cpu: IntArray, left: IntArray, req_cpu: int, n: int, m: int) -> IntArray:
    spare = (cpu - req_cpu) / MAX_CPU * 0.5 + (left.sum(axis=1) - n * m) / MAX_GPU * 0.5
    raw = np.trunc((1.0 - spare) * 100.0).astype(np.int64)
    lo, hi = int(raw.min()), int(raw.max())
    if hi == lo:
        return np.zeros(len(left), dtype=np.int64)
    out: IntArray = (raw - lo) * 100 // (hi - lo)
    return out


def random_card(uuids: Sequence[str], seed: int, key: str) -> int:
    """Index (into `uuids`, the cards with room) of the card paper-random draws for task `key`."""
    return least_key(node_keys(list(uuids)), task_key(seed, key))


class PaperScore(FgdPlugin):
    """A baseline: the fgd plugin's card reading, another score (subclasses' `scores`)."""

    name = "paper"

    def __init__(self, arguments: dict[str, Any]) -> None:
        super().__init__({})
        self.weight = arg_int(arguments, f"{self.name}.weight", 1)
        self.kept_key = f"{self.name}.cards"
        self.seed: int | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.open_cards(ssn)
        self.seed = ssn.tie_seed
        if self.weight != 0:
            ssn.register(cb.NODE_ORDER, self.name, self.score, self.score_batch)

    def on_session_close(self, ssn: Session) -> None:
        super().on_session_close(ssn)
        self.seed = None

    def score_batch(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        if self.table is None or len(rows) == 0:
            return np.zeros(len(rows))
        left, _ = self._cards(rows)
        count = self.last_count
        cpu = self.table.idle[rows, self.table.col["cpu"]].astype(np.int64)
        cards, milli = task_gpu(task)
        out = self.scores(task, rows, cpu, left, count, cards, milli).astype(np.float64)
        result: FloatArray = out * self.weight
        return result

    def card_order(self, task: TaskInfo, node_name: str, cards: dict[int, VCard]) -> list[int] | None:
        return None  # deviceshare's policy order (binpack: the simulator's best fit)

    def scores(
        self, task: TaskInfo, rows: IntArray, cpu: IntArray, left: IntArray, count: IntArray, n: int, m: int
    ) -> IntArray:
        raise NotImplementedError


class RandomScore(PaperScore):
    name = "paper-random"

    def scores(
        self, task: TaskInfo, rows: IntArray, cpu: IntArray, left: IntArray, count: IntArray, n: int, m: int
    ) -> IntArray:
        return np.zeros(len(rows), dtype=np.int64)

    def card_order(self, task: TaskInfo, node_name: str, cards: dict[int, VCard]) -> list[int] | None:
        """A shared pod's card drawn among those with room (keyed by seed, pod and card uuid)."""
        n_cards, milli = task_gpu(task)
        if n_cards != 1 or milli >= MILLI or self.seed is None:
            return None
        idx = sorted(cards)
        room = [i for i in idx if MILLI - cards[i].used_core * 10 >= milli]
        if not room:
            return None
        pick = room[random_card([cards[i].uuid for i in room], self.seed, task.key)]
        return [pick] + [i for i in idx if i != pick]


class DotProdScore(PaperScore):
    name = "paper-dotprod"

    def scores(
        self, task: TaskInfo, rows: IntArray, cpu: IntArray, left: IntArray, count: IntArray, n: int, m: int
    ) -> IntArray:
        return dotprod_scores(cpu, left, int(task.resreq.cpu), n, m)


class GpuClusteringScore(PaperScore):
    name = "paper-gpuclustering"

    def __init__(self, arguments: dict[str, Any]) -> None:
        super().__init__(arguments)
        # per node name: (node object seen, its GPU pods' kinds)
        self.kinds: dict[str, tuple[object, frozenset[str]]] = {}

    def _kinds(self, row: int) -> frozenset[str]:
        assert self.table is not None
        node = self.table.nodes[row]
        hit = self.kinds.get(node.name)
        version = int(self.table.version[row])
        if hit is not None and hit[0] == (id(node), version):
            return hit[1]
        kinds = set()
        for t in node.tasks.values():
            if t.status in _IDLE_STATUSES:
                continue
            k = kind_of(*task_gpu(t))
            if k:
                kinds.add(k)
        out = frozenset(kinds)
        self.kinds[node.name] = ((id(node), version), out)
        return out

    def scores(
        self, task: TaskInfo, rows: IntArray, cpu: IntArray, left: IntArray, count: IntArray, n: int, m: int
    ) -> IntArray:
        if not kind_of(n, m):
            return np.zeros(len(rows), dtype=np.int64)
        return gpuclustering_scores(left, [self._kinds(int(row)) for row in rows], n, m)

    def on_session_close(self, ssn: Session) -> None:
        super().on_session_close(ssn)
        self.kinds = {}


class GpuPackingScore(PaperScore):
    name = "paper-gpupacking"

    def scores(
        self, task: TaskInfo, rows: IntArray, cpu: IntArray, left: IntArray, count: IntArray, n: int, m: int
    ) -> IntArray:
        return gpupacking_scores(left, count, n, m)


class BestFitScore(PaperScore):
    name = "paper-bestfit"

    def scores(
        self, task: TaskInfo, rows: IntArray, cpu: IntArray, left: IntArray, count: IntArray, n: int, m: int
    ) -> IntArray:
        return bestfit_scores(cpu, left, int(task.resreq.cpu), n, m)


def new_random(arguments: dict[str, Any]) -> PaperScore:
    return RandomScore(arguments)


def new_dotprod(arguments: dict[str, Any]) -> PaperScore:
    return DotProdScore(arguments)


def new_gpuclustering(arguments: dict[str, Any]) -> PaperScore:
    return GpuClusteringScore(arguments)


def new_gpupacking(arguments: dict[str, Any]) -> PaperScore:
    return GpuPackingScore(arguments)


def new_bestfit(arguments: dict[str, Any]) -> PaperScore:
    return BestFitScore(arguments)
