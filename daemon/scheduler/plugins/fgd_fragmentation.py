"""GPU fragmentation as "Beware of Fragmentation" (Weng et al., USENIX ATC 2023) defines it.

A node's idle GPU capacity is judged against a *typical workload*: a distribution of pod shapes
(cpu, number of GPUs, share of each GPU, acceptable GPU models) with popularities p_s summing to 1.
For one shape, the node's fragment is
  * all its idle GPU milli, if the shape cannot run there at all (lacks cpu, lacks GPU room, wrong
    GPU model) or asks for no GPU (idle GPUs are useless to a CPU-only pod);
  * else the idle milli of the cards too small for the shape's per-GPU share.
The node's fragmentation is the popularity-weighted sum; the cluster's is the sum over nodes.
This is the paper's simulator's `NodeGpuShareFragAmountScore` (kubernetes-scheduler-simulator
pkg/utils/frag.go): fragment amount except the "Q3 satisfied" part.

FGD scores a node for a pod by how much placing the pod lowers (or least raises) the node's
fragmentation. Everything here is pure: numpy over nodes, no session, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "MILLI",
    "PodShape",
    "TypicalWorkload",
    "fgd_card_order",
    "fgd_score",
    "fragmentation_and_card_table",
    "node_fragmentation",
    "shared_card_fragmentation",
    "shared_card_states",
    "typical_workload",
]

MILLI = 1000
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, order=True)
class PodShape:
    """What fragmentation looks at in a pod: cpu milli, GPUs, milli of each GPU, acceptable models."""

    cpu_milli: int
    num_gpu: int
    gpu_milli: int
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TypicalWorkload:
    """Pod shapes with their popularity (summing to 1), most popular first."""

    shapes: tuple[PodShape, ...]
    popularity: tuple[float, ...]

    def arrays(
        self, model_ids: dict[str, int]
    ) -> tuple[IntArray, IntArray, IntArray, FloatArray, npt.NDArray[np.bool_]]:
        """cpu, gpus, milli, popularity (S) and access (S x models+1: column 0 = a node without model)."""
        s = len(self.shapes)
        access = np.ones((s, len(model_ids) + 1), dtype=bool)
        for i, sh in enumerate(self.shapes):
            if sh.models:
                access[i, :] = False
                for m in sh.models:
                    if m in model_ids:
                        access[i, model_ids[m]] = True
        return (
            np.array([x.cpu_milli for x in self.shapes], dtype=np.int64),
            np.array([x.num_gpu for x in self.shapes], dtype=np.int64),
            np.array([x.gpu_milli for x in self.shapes], dtype=np.int64),
            np.array(self.popularity, dtype=np.float64),
            access,
        )


def typical_workload(
    shapes: Iterable[PodShape], popularity_threshold: float = 0.95, step: int = 10
) -> TypicalWorkload:
    """The paper's simulator's GetTypicalPods: the most frequent shapes, taken `step` at a time
    until they cover `popularity_threshold` of the pods, renormalised to sum to 1.

    Ties in frequency are ordered by the shape itself (the simulator's order there is Go's sort of
    a map's entries, not stable); CPU-only pods are included (its default, isInvolvedCpuPods)."""
    counts = Counter(shapes)
    total = sum(counts.values())
    if total == 0:
        return TypicalWorkload((), ())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    taken = 0
    covered = 0
    while covered < popularity_threshold * total and taken < len(ranked):
        nxt = min(len(ranked), taken + step)
        covered += sum(c for _, c in ranked[taken:nxt])
        taken = nxt
    kept = ranked[:taken]
    return TypicalWorkload(tuple(s for s, _ in kept), tuple(c / covered for _, c in kept))


_last_shares: list[tuple[IntArray, IntArray, IntArray]] = []


def _distinct_shares(milli: IntArray) -> tuple[IntArray, IntArray]:
    """The distinct per-GPU shares of the shapes and each shape's column among them; the answer
    for the last array asked is kept (the same typical workload is asked many times)."""
    last = _last_shares[0] if _last_shares else None  # one read: safe if sessions run in threads
    if last is not None and last[0] is milli:
        return last[1], last[2]
    shares, of_shape = np.unique(milli, return_inverse=True)
    of_shape = of_shape.reshape(-1)
    _last_shares[:] = [(milli, shares, of_shape)]
    return shares, of_shape


Typical = tuple[IntArray, IntArray, IntArray, FloatArray, npt.NDArray[np.bool_]]


def _per_share(gpu_left: IntArray, shares: IntArray) -> tuple[IntArray, IntArray]:
    """Per node and distinct share (N x U): how many cards can take it, idle milli of those that cannot."""
    fits = gpu_left[:, :, None] >= shares[None, None, :]  # N x C x U
    count: IntArray = fits.sum(axis=1)
    small: IntArray = np.where(fits, 0, gpu_left[:, :, None]).sum(axis=1)
    return count, small


def _weighted(
    cpu_left: IntArray,
    count: IntArray,
    small: IntArray,
    total: IntArray,
    model: IntArray,
    typical: Typical,
    of_shape: IntArray,
) -> FloatArray:
    """The popularity-weighted fragment of N node states from their per-share counts (N x U)."""
    cpu, ngpu, milli, pop, access = typical
    satisfied = (
        (milli[None, :] > 0)
        & access[:, model].T
        & (cpu_left[:, None] >= cpu[None, :])
        & (count[:, of_shape] >= ngpu[None, :])
    )
    per_shape = np.where(satisfied, small[:, of_shape].astype(np.float64), total.astype(np.float64)[:, None])
    out: FloatArray = per_shape @ pop
    return out


def node_fragmentation(
    cpu_left: IntArray,
    gpu_left: IntArray,
    model: IntArray,
    typical: Typical,
) -> FloatArray:
    """Fragmentation (GPU milli) of N nodes: cpu_left (N), gpu_left (N x cards, 0 for a missing
    card), model (N, column of the access table), typical = TypicalWorkload.arrays(...)."""
    if len(typical[3]) == 0:
        return np.zeros(len(gpu_left))
    # For each shape: how many cards can take its share, and the idle milli of those that cannot
    # (worked out once per distinct share, U <= S, then spread to the shapes).
    shares, of_shape = _distinct_shares(typical[2])
    count, small = _per_share(gpu_left, shares)
    return _weighted(cpu_left, count, small, gpu_left.sum(axis=1), model, typical, of_shape)


def shared_card_fragmentation(
    cpu_after: IntArray,
    gpu_left: IntArray,
    milli: int,
    model: IntArray,
    typical: Typical,
) -> FloatArray:
    """FGD's card choice for a pod sharing one GPU: the fragmentation of each of N nodes (N x cards)
    after `milli` lands on that card, inf where the card has too little room (a missing card: 0 left).
    cpu_after is each node's free cpu once the pod is placed. The card to take is the row's least."""
    return fragmentation_and_card_table(None, cpu_after, gpu_left, milli, model, typical)[1]


def fragmentation_and_card_table(
    cpu_before: IntArray | None,
    cpu_after: IntArray,
    gpu_left: IntArray,
    milli: int,
    model: IntArray,
    typical: Typical,
) -> tuple[FloatArray | None, FloatArray]:
    """`node_fragmentation` of the nodes as they are (with cpu_before; None: not asked) and
    `shared_card_fragmentation`'s table, from one pass over the cards.

    The table holds the same numbers as `node_fragmentation` over every (node, card) state
    (`shared_card_states`), worked out from each node's per-share card counts and small-card milli,
    corrected for the one card that changes."""
    n, c = gpu_left.shape
    r_idx, k_idx = np.nonzero(gpu_left >= milli)
    out = np.full((n, c), np.inf)
    if len(typical[3]) == 0:
        out[r_idx, k_idx] = 0.0
        return (np.zeros(n) if cpu_before is not None else None), out
    shares, of_shape = _distinct_shares(typical[2])
    count_n, small_n = _per_share(gpu_left, shares)
    total_n = gpu_left.sum(axis=1)
    before = (
        _weighted(cpu_before, count_n, small_n, total_n, model, typical, of_shape)
        if cpu_before is not None
        else None
    )
    if len(r_idx) == 0:
        return before, out
    old = gpu_left[r_idx, k_idx]  # M: the card taken, before
    new = old - milli
    fit_old = old[:, None] >= shares[None, :]  # M x U
    fit_new = new[:, None] >= shares[None, :]
    count = count_n[r_idx] - fit_old + fit_new
    small = small_n[r_idx] - np.where(fit_old, 0, old[:, None]) + np.where(fit_new, 0, new[:, None])
    total = total_n[r_idx] - milli
    out[r_idx, k_idx] = _weighted(cpu_after[r_idx], count, small, total, model[r_idx], typical, of_shape)
    return before, out


def shared_card_states(
    cpu_after: IntArray,
    gpu_left: IntArray,
    milli: int,
    model: IntArray,
    typical: tuple[IntArray, IntArray, IntArray, FloatArray, npt.NDArray[np.bool_]],
) -> FloatArray:
    """`shared_card_fragmentation` by its definition: `node_fragmentation` of every state (the
    reference the faster form is tested against)."""
    n, c = gpu_left.shape
    r_idx, k_idx = np.nonzero(gpu_left >= milli)
    states = gpu_left[r_idx].copy()
    states[np.arange(len(r_idx)), k_idx] -= milli
    out = np.full((n, c), np.inf)
    out[r_idx, k_idx] = node_fragmentation(cpu_after[r_idx], states, model[r_idx], typical)
    return out


def fragmentation_of(
    nodes: Sequence[tuple[int, Sequence[int], str]], typical: TypicalWorkload
) -> list[float]:
    """Fragmentation of nodes given as (cpu milli left, milli left of each card, GPU model): a
    convenience over `node_fragmentation` for small hand-made cases."""
    models = sorted({m for _, _, m in nodes if m} | {m for s in typical.shapes for m in s.models})
    ids = {m: i + 1 for i, m in enumerate(models)}
    width = max([len(g) for _, g, _ in nodes] + [1])
    gpu = np.zeros((len(nodes), width), dtype=np.int64)
    for i, (_, g, _) in enumerate(nodes):
        gpu[i, : len(g)] = g
    cpu = np.array([c for c, _, _ in nodes], dtype=np.int64)
    model = np.array([ids.get(m, 0) for _, _, m in nodes], dtype=np.int64)
    return [float(x) for x in node_fragmentation(cpu, gpu, model, typical.arrays(ids))]


def fgd_score(growth: FloatArray) -> FloatArray:
    """FGD's integer node score for a fragmentation growth (milli): floor(100 * sigmoid(-growth /
    1000)), the simulator's int64(sigmoid((before - after) / 1000) * 100).

    The growth is first rounded to 1e-6 milli: the fragmentation of a node summed in another batch
    of rows can differ in the last bits (~1e-13), and a pod that leaves the fragmentation unchanged
    (growth 0, score 50, as in the simulator, which computes both sides alike) must not score 49 in
    one engine and 50 in the other."""
    out: FloatArray = np.floor(100.0 / (1.0 + np.exp(np.round(growth, 6) / 1000.0)))
    return out


def fgd_card_order(before: float, after: FloatArray) -> list[int]:
    """The cards of one node in FGD's order for a pod sharing one GPU, `after` the node's
    fragmentation with the pod on each card (inf: no room): the simulator's card first — its
    `calculateGpuShareFragExtendScore` walks the cards by index and moves to a later card only when
    that card's integer score is higher, so the first card of the highest integer score, not the
    card of least fragmentation (two cards a fraction of a point apart score alike) —, then the
    other cards with room by score and index, the cards without room last."""
    score = fgd_score(after - before)
    room = np.isfinite(after)
    return sorted(range(len(after)), key=lambda k: (not room[k], -score[k], k))
