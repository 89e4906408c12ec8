"""The study placer: a cluster's free cpu, memory and GPU cards as numpy columns, and one-pod-at-a-time
placement by a named policy (Volcano's binpack or spread configuration, FGD, or one of the paper's
baselines).

It is the allocate action reduced to what the trace studies need, vectorised over nodes so that a
whole trace runs in seconds: single-pod jobs, no gangs, no preemption. A pod fits a node when the
node's free cpu and memory cover its requests, its GPU model is acceptable, and enough cards have
room for its per-card share (the deviceshare vGPU predicate: a whole GPU needs an untouched card).
Policies (see docs/studies.md):
  * `binpack`: Volcano's binpack plugin (binpack.weight 1; cpu, memory and the GPU resource, weight
    1 each, only resources the pod asks for) and deviceshare's `binpack` card order (most used card
    that fits first);
  * `spread`: Volcano's nodeorder leastrequested (mean free share of cpu and memory, GPU counted
    when asked) and deviceshare's `spread` card order (least used card first);
  * `fgd`: the paper's fragmentation gradient descent: the node whose fragmentation grows least, by
    the paper's integer score, and on it the simulator's card (the first card of the highest
    integer score, `fumarole.daemon.scheduler.plugins.fgd_fragmentation.fgd_card_order`);
  * `random`, `dotprod`, `gpuclustering`, `gpupacking`, `bestfit`: the paper's baselines, scored by
    the very functions of the core's `paper-<name>` plugins
    (`fumarole.daemon.scheduler.plugins.paper_scores`), cards in deviceshare's binpack order (the
    simulator's best fit), a shared pod's card drawn by `random_card` under `random`.
Each of fgd and the baselines decides as the core preset of the same name with every node scored
(tests/study/test_study_fast_engine.py compares every pod's node and cards).
Equal scores go to the node listed first (Fumarole's deterministic rule; Volcano picks at random),
or with a `tie_seed` to the node the seeded rule of `fumarole.daemon.scheduler.framework.ties` draws (the
core engine's rule for the paper's policies: the same whatever order the nodes are listed in).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fumarole.daemon.scheduler.framework.ties import least_key, node_keys, task_key
from fumarole.daemon.scheduler.plugins import paper_scores as paper
from fumarole.daemon.scheduler.plugins.fgd_fragmentation import (
    TypicalWorkload,
    fgd_card_order,
    fgd_score,
    node_fragmentation,
    shared_card_fragmentation,
)
from fumarole.daemon.study.manifests import NAMESPACE, card_uuid
from fumarole.daemon.study.trace import MILLI, TraceNode, TracePod

__all__ = ["BASELINES", "POLICIES", "Cluster", "Placement"]

BASELINES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit")
POLICIES = ("binpack", "spread", "fgd", *BASELINES)
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Placement:
    node: int
    cards: tuple[int, ...]


class Cluster:
    """Free resources of every node; `place` chooses, `bind` and `release` account."""

    def __init__(
        self,
        nodes: Sequence[TraceNode],
        policy: str,
        typical: TypicalWorkload | None = None,
        tie_seed: int | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
        self.policy = policy
        self.names = [n.name for n in nodes]
        self.tie_seed = tie_seed
        self.keys = node_keys(self.names) if tie_seed is not None else None
        models = sorted({n.model for n in nodes if n.model})
        if typical is not None:
            models = sorted(set(models) | {m for s in typical.shapes for m in s.models})
        self.model_ids = {m: i + 1 for i, m in enumerate(models)}
        width = max([n.gpus for n in nodes] + [1])
        self.cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.cards = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.gpu_cap = self.cards * MILLI
        self.model = np.array([self.model_ids.get(n.model, 0) for n in nodes], dtype=np.int64)
        self.cpu_left = self.cpu_cap.copy()
        # vgpu-cores asked by the pods on each node, as Volcano's node accounting counts them
        # (a pod's per-card cores once, however many cards it takes).
        self.cores_used = np.zeros(len(nodes), dtype=np.int64)
        self.mem_left = self.mem_cap.copy()
        self.gpu_left = np.zeros((len(nodes), width), dtype=np.int64)
        for i, n in enumerate(nodes):
            self.gpu_left[i, : n.gpus] = MILLI
        # The kinds of the GPU pods on each node (paper_scores.kind_of), counted: gpuclustering's input.
        self.kinds: list[dict[str, int]] = [{} for _ in nodes]
        self.typical = typical.arrays(self.model_ids) if typical is not None else None
        self.frag = self._frag(np.arange(len(nodes)))

    # ----------------------------------------------------------------- totals
    @property
    def gpu_capacity(self) -> int:
        return int(self.gpu_cap.sum())

    def gpu_allocated(self) -> int:
        return self.gpu_capacity - int(self.gpu_left.sum())

    def fragmentation(self) -> float:
        """The cluster's GPU fragmentation (milli) against the typical workload."""
        return float(self.frag.sum())

    def _frag(self, rows: IntArray) -> npt.NDArray[np.float64]:
        if self.typical is None:
            return np.zeros(len(rows))
        return node_fragmentation(self.cpu_left[rows], self.gpu_left[rows], self.model[rows], self.typical)

    # ----------------------------------------------------------------- choice
    def feasible(self, pod: TracePod) -> IntArray:
        ok = (self.cpu_left >= pod.cpu_milli) & (self.mem_left >= pod.memory_mib)
        if pod.num_gpu:
            ok &= (self.gpu_left >= pod.gpu_milli).sum(axis=1) >= pod.num_gpu
            if pod.gpu_spec:
                allowed = [self.model_ids[m] for m in pod.gpu_spec if m in self.model_ids]
                ok &= np.isin(self.model, allowed)
        return np.flatnonzero(ok)

    def _card_order(self, row: IntArray, milli: int) -> list[int]:
        """Cards with room for `milli`, in the policy's order (binpack: most used first; spread and
        whole-GPU requests: by index, idle cards being alike)."""
        fit = [i for i in range(len(row)) if row[i] >= milli]
        if self.policy == "binpack" or self.policy in BASELINES:
            return sorted(fit, key=lambda i: (int(row[i]), i))
        if self.policy == "spread":
            return sorted(fit, key=lambda i: (-int(row[i]), i))
        return fit

    def place(self, pod: TracePod) -> Placement | None:
        """Where the policy puts the pod now, or None when no node fits."""
        rows = self.feasible(pod)
        if len(rows) == 0:
            return None
        if self.policy == "fgd":
            return self._place_fgd(pod, rows)
        if self.policy in BASELINES:
            score = self._baseline_score(pod, rows)
        else:
            score = self._resource_score(pod, rows)
        best = int(rows[self._best(score, rows, pod)])
        n = pod.num_gpu
        if not n:
            return Placement(best, ())
        order = self._card_order(self.gpu_left[best], pod.gpu_milli)
        if self.policy == "random" and self.tie_seed is not None and n == 1 and pod.gpu_milli < MILLI:
            room = [k for k in range(int(self.cards[best])) if self.gpu_left[best, k] >= pod.gpu_milli]
            uuids = [card_uuid(self.names[best], k) for k in room]
            order = [room[paper.random_card(uuids, self.tie_seed, f"{NAMESPACE}/{pod.name}")]]
        return Placement(best, tuple(order[:n]))

    def _baseline_score(self, pod: TracePod, rows: IntArray) -> npt.NDArray[np.float64]:
        """The core `paper-<policy>` plugin's score of the rows (the same functions)."""
        cpu, left, n, m = (
            self.cpu_left[rows],
            self.gpu_left[rows],
            pod.num_gpu,
            pod.gpu_milli if pod.num_gpu else 0,
        )
        if self.policy == "random":
            out = np.zeros(len(rows), dtype=np.int64)
        elif self.policy == "dotprod":
            out = paper.dotprod_scores(cpu, left, pod.cpu_milli, n, m)
        elif self.policy == "gpuclustering":
            out = paper.gpuclustering_scores(left, [self.kinds[int(r)] for r in rows], n, m)
        elif self.policy == "gpupacking":
            out = paper.gpupacking_scores(left, self.cards[rows], n, m)
        else:
            out = paper.bestfit_scores(cpu, left, pod.cpu_milli, n, m)
        return out.astype(np.float64)

    def _resource_score(self, pod: TracePod, rows: IntArray) -> npt.NDArray[np.float64]:
        if self.policy == "binpack":
            return self._binpack_score(pod, rows)
        parts = [
            (self.cpu_cap[rows] - self.cpu_left[rows] + pod.cpu_milli) / np.maximum(self.cpu_cap[rows], 1),
            (self.mem_cap[rows] - self.mem_left[rows] + pod.memory_mib) / np.maximum(self.mem_cap[rows], 1),
        ]
        if pod.num_gpu:
            used = self.gpu_cap[rows] - self.gpu_left[rows].sum(axis=1) + pod.total_gpu_milli
            parts.append(used / np.maximum(self.gpu_cap[rows], 1))
        used_share: npt.NDArray[np.float64] = np.mean(parts, axis=0)
        return used_share if self.policy in ("binpack", "fgd") else 1.0 - used_share

    def _binpack_score(self, pod: TracePod, rows: IntArray) -> npt.NDArray[np.float64]:
        """Volcano's binpack plugin with binpack.resources vgpu-cores (weights 1), float for float:
        the sum of (used + request) / capacity over cpu, memory and, for a GPU pod, vgpu-cores
        (a pod asks its per-card cores once, however many cards), over the weight sum, times 10."""
        cpu_cap = self.cpu_cap[rows].astype(np.float64)
        mem_cap = self.mem_cap[rows].astype(np.float64)
        score = (cpu_cap - self.cpu_left[rows] + pod.cpu_milli) * 1 / cpu_cap
        score += (mem_cap - self.mem_left[rows] + pod.memory_mib) * 1 / mem_cap
        wsum = 2
        if pod.num_gpu:
            cap = (self.cards[rows] * 100).astype(np.float64)
            used = self.cores_used[rows] + pod.gpu_milli // 10
            score += np.where(cap != 0, used * 1 / np.where(cap == 0, 1, cap), 0.0)
            wsum += 1
        out: npt.NDArray[np.float64] = score / wsum * 10.0
        return out

    def _place_fgd(self, pod: TracePod, rows: IntArray) -> Placement:
        """FGD: every feasible node and, for a shared pod, every card with room; least growth wins.

        Nodes alike for fragmentation (GPU model, free cpu, free milli of their cards as a multiset)
        are scored once; equal scores by `_best`; on the chosen node a shared pod takes the
        simulator's card (`fgd_card_order`), whole GPUs the idle cards in index order."""
        left = np.sort(self.gpu_left[rows], axis=1)[:, ::-1]
        key = np.column_stack([self.model[rows], self.cpu_left[rows], left])
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        reps = rows[first]
        before = self.frag[reps]
        if pod.shared:
            assert self.typical is not None
            cpu_after = self.cpu_left[reps] - pod.cpu_milli
            after = shared_card_fragmentation(
                cpu_after, self.gpu_left[reps], pod.gpu_milli, self.model[reps], self.typical
            )
            growth_u = (after - before[:, None]).min(axis=1)
            j = self._pick(growth_u[inverse], rows, pod)
            row = int(rows[j])
            # The card on the chosen row itself: the simulator's (the first of the highest integer
            # score), which depends on the row's own card order, not only on its multiset.
            after = shared_card_fragmentation(
                self.cpu_left[row : row + 1] - pod.cpu_milli,
                self.gpu_left[row : row + 1],
                pod.gpu_milli,
                self.model[row : row + 1],
                self.typical,
            )[0]
            card = fgd_card_order(float(self.frag[row]), after)[0]
            return Placement(row, (card,))
        gpu = self.gpu_left[reps].copy()
        if pod.num_gpu:
            for r in range(len(reps)):
                free = np.flatnonzero(gpu[r] >= pod.gpu_milli)[: pod.num_gpu]
                gpu[r, free] -= pod.gpu_milli
        growth_u = self._frag_after(reps, gpu, pod) - before
        j = self._pick(growth_u[inverse], rows, pod)
        row = int(rows[j])
        if not pod.num_gpu:
            return Placement(row, ())
        free_cards = np.flatnonzero(self.gpu_left[row] >= pod.gpu_milli)[: pod.num_gpu]
        return Placement(row, tuple(int(k) for k in free_cards))

    def _pick(self, growth: npt.NDArray[np.float64], rows: IntArray, pod: TracePod) -> int:
        """The node to take: the highest integer FGD score, floor(100 * sigmoid(-growth / 1000)) (the
        paper's simulator's score: fragmentation drop in GPUs through a sigmoid, times 100); equal
        scores by `_best`."""
        return self._best(fgd_score(growth), rows, pod)

    def _best(self, score: npt.NDArray[np.float64], rows: IntArray, pod: TracePod) -> int:
        """Index of the best score; ties: the first, or with a tie seed the seeded draw."""
        if self.keys is None or self.tie_seed is None:
            return int(np.argmax(score))
        tied = np.flatnonzero(score == score.max())
        if len(tied) == 1:
            return int(tied[0])
        return int(tied[least_key(self.keys[rows[tied]], task_key(self.tie_seed, f"{NAMESPACE}/{pod.name}"))])

    def _frag_after(self, rows: IntArray, gpu: IntArray, pod: TracePod) -> npt.NDArray[np.float64]:
        assert self.typical is not None
        return node_fragmentation(self.cpu_left[rows] - pod.cpu_milli, gpu, self.model[rows], self.typical)

    # ----------------------------------------------------------------- accounting
    def bind(self, pod: TracePod, where: Placement) -> None:
        i = where.node
        self.cpu_left[i] -= pod.cpu_milli
        self.mem_left[i] -= pod.memory_mib
        for k in where.cards:
            self.gpu_left[i, k] -= pod.gpu_milli
        if pod.num_gpu:
            self.cores_used[i] += pod.gpu_milli // 10
            kind = paper.kind_of(pod.num_gpu, pod.gpu_milli)
            self.kinds[i][kind] = self.kinds[i].get(kind, 0) + 1
        self.frag[i] = self._frag(np.array([i]))[0]

    def release(self, pod: TracePod, where: Placement) -> None:
        i = where.node
        self.cpu_left[i] += pod.cpu_milli
        self.mem_left[i] += pod.memory_mib
        for k in where.cards:
            self.gpu_left[i, k] += pod.gpu_milli
        if pod.num_gpu:
            self.cores_used[i] -= pod.gpu_milli // 10
            kind = paper.kind_of(pod.num_gpu, pod.gpu_milli)
            self.kinds[i][kind] -= 1
            if not self.kinds[i][kind]:
                del self.kinds[i][kind]
        self.frag[i] = self._frag(np.array([i]))[0]
