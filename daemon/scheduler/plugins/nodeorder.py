"""The nodeorder plugin: node scores from the Kubernetes score plugins, as Volcano's nodeorder.go wires them.

Every scorer returns an integer in 0..100 computed with Go's int64 arithmetic, is normalised
over the candidate nodes it is given, multiplied by its weight and summed (float64):

- NodeResourcesLeastAllocated (`leastrequested.weight`, 1) and MostAllocated
  (`mostrequested.weight`, 0): cpu:memory weights 50:50 and 1:1; requested = the node's
  *non-zero* requested (pods without a cpu / memory request count 100m / 200Mi) plus the
  pod's non-zero request;
- NodeResourcesBalancedAllocation (`balancedresource.weight`, 1), as Kubernetes 1.36 (vendored
  by Volcano at ed72c7c, kubernetes/kubernetes#135573) computes it: the *change in balance* the
  pod makes.  Balance = (1 - std of the requested/allocatable fractions of cpu, memory and
  nvidia.com/gpu) × 100, truncated (GPU only when the pod asks for it and the node has it), on
  actual requests, once with the pod and once without; score = 50 + (50 + with - without) / 2
  (75: unchanged, up to 100: improved, down to 50: worsened); skipped for best-effort pods.
  Kubernetes ≤ 1.35 scored the balance after the pod alone; that formula made 21 random
  differential cases bind to other nodes than Volcano;
- NodeAffinity (`nodeaffinity.weight`, 2): sum of matching preferred terms' weights,
  DefaultNormalizeScore;
- TaintToleration (`tainttoleration.weight`, 3): untolerated PreferNoSchedule taints,
  reversed DefaultNormalizeScore;
- InterPodAffinity (`podaffinity.weight`, 2): preferred (anti-)affinity of the pod towards
  existing pods and of existing pods towards the pod, per topology pair, min-max normalised
  (hard pod affinity weight 0, as Volcano passes empty args);
- ImageLocality (`imagelocality.weight`, 1): Volcano's per-node NodeOrderFn (no
  normalisation), from node image sizes and the share of nodes holding each image.

- PodTopologySpread (`podtopologyspread.weight`, 2): the pod's ScheduleAnyway constraints
  (read from a `topology_spread_constraints` attribute of PodFacts when the model has one):
  matching pods per topology domain × log(domains + 2) + maxSkew - 1, rounded, reversed
  min/max normalisation; nodes lacking a constraint's key score 0.  Pods without explicit
  constraints get nothing: the system default constraints need the Services / ReplicaSets /
  StatefulSets selecting the pod, which the model does not carry.

A weight of 0 disables its scorer.

Node "requested" figures are those of Volcano's k8s NodeInfo snapshot (`k8s.node_mirror.NodeMirror`,
kept in step by the predicates plugin's event handlers, pipelined pods included and evicted
pods removed), not `NodeInfo.used`.

Approximations, because the model keeps less than a pod manifest: a zero cpu (memory) request
counts as a missing one for the non-zero defaults (Kubernetes defaults each container whose
request is absent; the model keeps per-pod totals); ImageLocality counts the nodes holding an
image over the session's nodes (Volcano's cache counts them as each node was added) and takes
the pod's images as its containers.  Preferred terms that fail to parse are ignored where
Kubernetes would fail PreScore (and Volcano would drop every score of that task).
"""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_int
from fumarole.daemon.scheduler.framework.nodetable import BoolArray, FloatArray, IntArray
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, Toleration
from fumarole.daemon.scheduler.plugins.k8s.labels import SelectorError
from fumarole.daemon.scheduler.plugins.k8s.node_affinity import preferred_node_terms, required_node_affinity
from fumarole.daemon.scheduler.plugins.k8s.node_label_table import NodeLabelTable
from fumarole.daemon.scheduler.plugins.k8s.node_mirror import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    GPU,
    NodeMirror,
    namespace_labels,
    node_mirror,
)
from fumarole.daemon.scheduler.plugins.k8s.pod_affinity_terms import merge_pod_affinity
from fumarole.daemon.scheduler.plugins.k8s.spread_constraints import (
    HOSTNAME_LABEL,
    SCHEDULE_ANYWAY,
    SpreadConstraint,
    raw_spread_constraints,
    spread_constraints,
)
from fumarole.daemon.scheduler.plugins.k8s.taint_toleration import (
    PREFER_NO_SCHEDULE,
    count_intolerable_prefer_no_schedule,
    prefer_no_schedule_tolerations,
)

NAME = "nodeorder"

LEAST_REQUESTED_WEIGHT = "leastrequested.weight"
MOST_REQUESTED_WEIGHT = "mostrequested.weight"
NODE_AFFINITY_WEIGHT = "nodeaffinity.weight"
POD_AFFINITY_WEIGHT = "podaffinity.weight"
BALANCED_RESOURCE_WEIGHT = "balancedresource.weight"
TAINT_TOLERATION_WEIGHT = "tainttoleration.weight"
IMAGE_LOCALITY_WEIGHT = "imagelocality.weight"
POD_TOPOLOGY_SPREAD_WEIGHT = "podtopologyspread.weight"

MAX_NODE_SCORE = 100
LEAST_ALLOCATED_WEIGHTS = (50, 50)  # cpu, memory
MOST_ALLOCATED_WEIGHTS = (1, 1)
MB = 1024 * 1024
IMAGE_MIN_THRESHOLD = 23 * MB
IMAGE_MAX_CONTAINER_THRESHOLD = 1000 * MB
SIGNATURE_CACHE_SIZE = 256
# Stale rows up to this many are scored in plain Python (`scalar_local_scores`), below this bound.
SCALAR_ROWS = 4
_EXACT_LIMIT = 2**53

TopologyScore = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class Weights:
    least_requested: int = 1
    most_requested: int = 0
    node_affinity: int = 2
    pod_affinity: int = 2
    balanced_resource: int = 1
    taint_toleration: int = 3
    image_locality: int = 1
    pod_topology_spread: int = 2

    @property
    def any_batch(self) -> bool:
        return any(
            (
                self.least_requested,
                self.most_requested,
                self.node_affinity,
                self.pod_affinity,
                self.balanced_resource,
                self.taint_toleration,
                self.pod_topology_spread,
            )
        )


def weights_from(arguments: dict[str, Any]) -> Weights:
    """calculateWeight: integer arguments override the defaults."""
    d = Weights()
    return Weights(
        least_requested=arg_int(arguments, LEAST_REQUESTED_WEIGHT, d.least_requested),
        most_requested=arg_int(arguments, MOST_REQUESTED_WEIGHT, d.most_requested),
        node_affinity=arg_int(arguments, NODE_AFFINITY_WEIGHT, d.node_affinity),
        pod_affinity=arg_int(arguments, POD_AFFINITY_WEIGHT, d.pod_affinity),
        balanced_resource=arg_int(arguments, BALANCED_RESOURCE_WEIGHT, d.balanced_resource),
        taint_toleration=arg_int(arguments, TAINT_TOLERATION_WEIGHT, d.taint_toleration),
        image_locality=arg_int(arguments, IMAGE_LOCALITY_WEIGHT, d.image_locality),
        pod_topology_spread=arg_int(arguments, POD_TOPOLOGY_SPREAD_WEIGHT, d.pod_topology_spread),
    )


# =============================================================================================
# Go integer arithmetic and the score formulas (vectorised)


def go_div(a: IntArray, b: IntArray | int) -> IntArray:
    """int64 division truncating toward zero, as Go's `/` (b must be non-zero)."""
    q = np.abs(a) // np.abs(b)
    out: IntArray = np.where((a < 0) != (np.asarray(b) < 0), -q, q)
    return out


def default_normalize(scores: IntArray, reverse: bool) -> IntArray:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)."""
    max_count = max(int(scores.max(initial=0)), 0)
    if max_count == 0:
        return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64) if reverse else scores
    out = go_div(MAX_NODE_SCORE * scores, max_count)
    return MAX_NODE_SCORE - out if reverse else out


def least_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """leastRequestedScore: (capacity - requested) * 100 / capacity; 0 when over capacity."""
    safe = np.where(capacity == 0, 1, capacity)
    out: IntArray = np.where(
        (capacity == 0) | (requested > capacity), 0, (capacity - requested) * 100 // safe
    )
    return out


def most_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """mostRequestedScore: min(requested, capacity) * 100 / capacity."""
    safe = np.where(capacity == 0, 1, capacity)
    out: IntArray = np.where(capacity == 0, 0, np.minimum(requested, capacity) * 100 // safe)
    return out


def weighted_resource_score(
    requested: Sequence[IntArray],
    allocatable: Sequence[IntArray],
    weights: Sequence[int],
    per_resource: Callable[[IntArray, IntArray], IntArray],
) -> IntArray:
    """leastResourceScorer / mostResourceScorer: weighted mean over resources with allocatable > 0."""
    total = np.zeros(len(requested[0]), dtype=np.int64)
    weight_sum = np.zeros(len(requested[0]), dtype=np.int64)
    for req, alloc, w in zip(requested, allocatable, weights, strict=True):
        valid = alloc != 0
        total += np.where(valid, per_resource(req, alloc) * w, 0)
        weight_sum += np.where(valid, w, 0)
    out: IntArray = np.where(weight_sum == 0, 0, total // np.where(weight_sum == 0, 1, weight_sum))
    return out


def balanced_score(requested: Sequence[IntArray], allocatable: Sequence[IntArray]) -> IntArray:
    """balancedResourceScorer: (1 - std of the capped fractions) * 100, fractions in resource order."""
    m = len(requested[0])
    fracs = []
    valid = []
    for req, alloc in zip(requested, allocatable, strict=True):
        ok = alloc != 0
        f = req.astype(np.float64) / np.where(ok, alloc, 1).astype(np.float64)
        fracs.append(np.minimum(f, 1.0))
        valid.append(ok)
    k = np.sum(valid, axis=0) if valid else np.zeros(m, dtype=np.int64)
    std = np.zeros(m)
    if len(fracs) >= 2:
        # The first two included fractions, in resource order, for the two-resource formula.
        first = np.where(
            valid[0], fracs[0], fracs[1] if len(fracs) == 2 else np.where(valid[1], fracs[1], fracs[2])
        )
        if len(fracs) == 2:
            second = fracs[1]
        else:
            second = np.where(valid[0], np.where(valid[1], fracs[1], fracs[2]), fracs[2])
        two = np.abs((first - second) / 2)
        std = np.where(k == 2, two, std)
    if len(fracs) == 3:
        mean = (fracs[0] + fracs[1] + fracs[2]) / 3
        dev = (fracs[0] - mean) * (fracs[0] - mean) + (fracs[1] - mean) * (fracs[1] - mean)
        dev = dev + (fracs[2] - mean) * (fracs[2] - mean)
        std = np.where(k == 3, np.sqrt(dev / 3), std)
    out: IntArray = ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
    return out


def two_resource_balance(cpu: IntArray, mem: IntArray, alloc_cpu: IntArray, alloc_mem: IntArray) -> IntArray:
    """``balanced_score`` for cpu and memory on nodes whose allocatable of both is positive."""
    f0 = np.minimum(cpu / alloc_cpu, 1.0)
    f1 = np.minimum(mem / alloc_mem, 1.0)
    out: IntArray = ((1 - np.abs((f0 - f1) / 2)) * float(MAX_NODE_SCORE)).astype(np.int64)
    return out


def _balance(cpu: int, mem: int, alloc_cpu: int, alloc_mem: int) -> int:
    """`two_resource_balance` of one node (float64 steps as numpy takes them, truncated)."""
    f0 = min(float(cpu) / float(alloc_cpu), 1.0)
    f1 = min(float(mem) / float(alloc_mem), 1.0)
    return int((1 - abs((f0 - f1) / 2)) * float(MAX_NODE_SCORE))


def balance_change_score(with_pod: IntArray, without_pod: IntArray) -> IntArray:
    """Kubernetes 1.36 BalancedAllocation: MaxNodeScore/2 + (MaxNodeScore/2 + with - without) / 2.

    Both inputs are in 50..100, so the dividend is never negative and Go's truncating
    division equals floor division.
    """
    half = MAX_NODE_SCORE // 2
    out: IntArray = half + (half + with_pod - without_pod) // 2
    return out


def interpod_normalize(scores: IntArray) -> IntArray:
    """InterPodAffinity.NormalizeScore: min-max scaling to 0..100 (float64, truncated)."""
    if len(scores) == 0:
        return scores
    lo, hi = int(scores.min()), int(scores.max())
    diff = hi - lo
    if diff <= 0:
        return np.zeros(len(scores), dtype=np.int64)
    out: IntArray = (float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(diff))).astype(
        np.int64
    )
    return out


def go_round(x: FloatArray) -> IntArray:
    """math.Round for non-negative values: halves go up."""
    whole = np.trunc(x)
    out: IntArray = (whole + ((x - whole) >= 0.5)).astype(np.int64)
    return out


def spread_weights(
    constraints: Sequence[SpreadConstraint], table: NodeLabelTable, kept: IntArray
) -> list[float]:
    """topologyNormalizingWeight: log(domains + 2) per constraint over the scored nodes.

    A domain is counted for the first constraint that introduces its (key, value) pair; hostname
    constraints count the scored nodes that are not ignored.
    """
    seen: set[str] = set()
    out = []
    for c in constraints:
        if c.topology_key == HOSTNAME_LABEL:
            size = len(kept)
        elif c.topology_key in seen:
            size = 0
        else:
            seen.add(c.topology_key)
            codes, vocab = table.column(c.topology_key)
            size = int(np.count_nonzero(np.bincount(codes[kept], minlength=len(vocab) + 1)))
        out.append(math.log(float(size + 2)))
    return out


def spread_normalize(scores: IntArray) -> IntArray:
    """PodTopologySpread.NormalizeScore over the nodes that are not ignored."""
    if len(scores) == 0:
        return scores
    lo, hi = int(scores.min()), int(scores.max())
    if hi == 0:
        return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
    return go_div(MAX_NODE_SCORE * (hi + lo - scores), hi)


def normalized_image_name(name: str) -> str:
    """ImageLocality: an image without a tag means `:latest`."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def image_priority(sum_scores: IntArray, num_containers: int) -> IntArray:
    """calculatePriority: clamp to [23MB, 1000MB × containers] and scale to 0..100."""
    max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.where(
        sum_scores < IMAGE_MIN_THRESHOLD,
        IMAGE_MIN_THRESHOLD,
        np.where(sum_scores > max_threshold, max_threshold, sum_scores),
    )
    return go_div(MAX_NODE_SCORE * (clamped - IMAGE_MIN_THRESHOLD), max_threshold - IMAGE_MIN_THRESHOLD)


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """scaledImageScore: size × (nodes with the image / all nodes), truncated."""
    return int(float(size) * (float(num_nodes) / float(total_nodes)))


# =============================================================================================
# pod-side request figures


@dataclass(frozen=True, slots=True)
class PodRequests:
    cpu: int
    memory: int
    gpu: int

    @property
    def nz_cpu(self) -> int:
        return self.cpu or DEFAULT_MILLI_CPU_REQUEST

    @property
    def nz_memory(self) -> int:
        return self.memory or DEFAULT_MEMORY_REQUEST

    @property
    def best_effort(self) -> bool:
        return self.cpu == 0 and self.memory == 0 and self.gpu == 0


def pod_requests(task: TaskInfo) -> PodRequests:
    r = task.resreq
    return PodRequests(round(r.cpu), round(r.memory), round(r.scalars.get(GPU, 0)))


class ScoreMemo:
    """Per-node integer scores of one request, each valid while its node's mirror stamp is unchanged."""

    __slots__ = ("stamp", "value")

    def __init__(self, n: int) -> None:
        self.stamp: IntArray = np.full(n, -1, dtype=np.int64)
        self.value: IntArray = np.zeros(n, dtype=np.int64)


# =============================================================================================
# the plugin


class NodeOrderPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.weights = weights_from(arguments)
        self.ssn: Session | None = None
        self.mirror: NodeMirror | None = None
        self._alloc: tuple[IntArray, IntArray, IntArray] | None = None
        # The cpu and memory columns of `_alloc` as Python ints, for the few-row scores.
        self._alloc_lists: tuple[list[int], list[int]] | None = None
        self._ns_labels: dict[str, Any] = {}
        self._affinity_scores: OrderedDict[str, IntArray | None] = OrderedDict()
        self._taint_counts: OrderedDict[tuple[Toleration, ...], IntArray | None] = OrderedDict()
        # Per image list: the weighted score of every node, None when it is 0 on every node.
        self._image_scores: OrderedDict[tuple[str, ...], FloatArray | None] = OrderedDict()
        self._image_cols: dict[str, tuple[IntArray, BoolArray]] = {}
        self._image_nodes: Counter[str] = Counter()
        self._local_scores: OrderedDict[PodRequests, ScoreMemo] = OrderedDict()
        self._requests: dict[int, tuple[Resource, PodRequests]] = {}
        # Per task object: (task, `_static_local_key`), for the session.
        self._local_keys: dict[int, tuple[TaskInfo, Hashable | None]] = {}
        self._any_prefer_taints = False
        self._cpu_mem_positive = False

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        mirror = node_mirror(ssn)
        self.mirror = mirror
        table = ssn.table
        gpu_col = table.col.get(GPU)

        def column(c: int | None) -> IntArray:
            if c is None:
                return np.zeros(len(table.nodes), dtype=np.int64)
            col: IntArray = np.rint(table.allocatable[:, c]).astype(np.int64)
            return col

        self._alloc = (column(0), column(1), column(gpu_col))
        self._alloc_lists = (self._alloc[0].tolist(), self._alloc[1].tolist())
        self._cpu_mem_positive = bool((self._alloc[0] > 0).all() and (self._alloc[1] > 0).all())
        self._ns_labels = namespace_labels(ssn)
        self._any_prefer_taints = any(t.effect == PREFER_NO_SCHEDULE for ts in mirror.taint_sets for t in ts)
        for nd in ssn.node_list:
            self._image_nodes.update(nd.facts.images.keys())
        if self.weights.any_batch:
            ssn.register(cb.BATCH_NODE_ORDER, NAME, self.batch_node_order, self.batch_scores)
            ssn.register_local_score(cb.BATCH_NODE_ORDER, NAME, self.local_key, self.local_batch_scores)
        if self.weights.image_locality != 0:
            ssn.register(cb.NODE_ORDER, NAME, self.node_order, self.image_batch)
            ssn.register_local_score(cb.NODE_ORDER, NAME, self.image_key, self.image_batch)

    def on_session_close(self, ssn: Session) -> None:
        self._affinity_scores.clear()
        self._taint_counts.clear()
        self._image_scores.clear()
        self._local_scores.clear()
        self._local_keys.clear()

    def _mirror(self) -> NodeMirror:
        assert self.mirror is not None, "nodeorder: session not open"
        return self.mirror

    # ----------------------------------------------------------------- BatchNodeOrderFn
    def batch_node_order(self, task: TaskInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        """Volcano's BatchNodeOrderFn signature: node name -> score over the given nodes."""
        rows = np.fromiter((nd.index for nd in nodes), dtype=np.int64, count=len(nodes))
        scores = self.batch_scores(task, rows)
        return {nd.name: float(s) for nd, s in zip(nodes, scores, strict=True)}

    def batch_scores(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """Weighted sum of the batch scorers over `rows`, each normalised over exactly these rows."""
        w = self.weights
        if len(rows) == 0:
            return np.zeros(0, dtype=np.float64)
        req = self.requests_of(task)
        if w.least_requested or w.most_requested or (w.balanced_resource and not req.best_effort):
            total = self.node_local_scores(req, rows)  # a fresh array
        else:
            total = np.zeros(len(rows), dtype=np.int64)
        if w.node_affinity:
            raw = self.node_affinity_raw(task.pod)
            if raw is not None:
                total += default_normalize(raw[rows], reverse=False) * w.node_affinity
        if w.taint_toleration:
            if self._any_prefer_taints:
                total += self.taint_scores(task.pod, rows) * w.taint_toleration
            else:
                total += MAX_NODE_SCORE * w.taint_toleration  # every node scores 100
        if w.pod_affinity:
            topo = self.interpod_topology(task)
            if topo:
                total += interpod_normalize(self.interpod_raw(topo, rows)) * w.pod_affinity
        if w.pod_topology_spread:
            spread = self.spread_scores(task, rows)
            if spread is not None:
                total += spread * w.pod_topology_spread
        return total.astype(np.float64)

    # ----------------------------------------------------------------- node-local scores
    def local_key(self, task: TaskInfo) -> Hashable | None:
        """The task's signature when `batch_scores` is node-local for it (framework/score_memo.py):
        every scorer in force reads only the node's own figures, or gives every node the same.

        None when a scorer normalises over the candidates: preferred node affinity terms,
        PreferNoSchedule taints on some node, inter-pod affinity (the pod's preferred terms, or
        existing pods' preferred terms matching it), ScheduleAnyway spread constraints.
        """
        held = self._local_keys.get(id(task))
        if held is None or held[0] is not task:
            held = self._local_keys[id(task)] = (task, self._static_local_key(task))
        key = held[1]
        # Inter-pod affinity reads the pods placed so far (their preferred terms): asked each time.
        if (
            key is not None
            and self.weights.pod_affinity
            and (task.pod.affinity or self._mirror().pref_open)
            and self.interpod_topology(task)
        ):
            return None
        return key

    def _static_local_key(self, task: TaskInfo) -> Hashable | None:
        """`local_key` but for inter-pod affinity: what reads only the pod and the nodes' taints."""
        w = self.weights
        pod = task.pod
        if w.taint_toleration and self._any_prefer_taints:
            return None
        if w.pod_topology_spread and raw_spread_constraints(pod):
            return None
        if w.node_affinity and pod.affinity and self.node_affinity_raw(pod) is not None:
            return None
        return self.requests_of(task)

    def local_batch_scores(self, task: TaskInfo, rows: IntArray) -> FloatArray:
        """`batch_scores` of `rows` for a task `local_key` gives a signature, computed now."""
        w = self.weights
        req = self.requests_of(task)
        if w.least_requested or w.most_requested or (w.balanced_resource and not req.best_effort):
            total = self.compute_local_scores(req, rows)
        else:
            total = np.zeros(len(rows), dtype=np.int64)
        if w.taint_toleration:
            total += MAX_NODE_SCORE * w.taint_toleration  # every node scores 100
        return total.astype(np.float64)

    def image_key(self, task: TaskInfo) -> Hashable:
        """ImageLocality is node-local: a node's score reads its own images and the pod's."""
        return task.pod.images

    def requests_of(self, task: TaskInfo) -> PodRequests:
        """pod_requests, kept per request object."""
        r = task.resreq
        hit = self._requests.get(id(r))
        if hit is not None and hit[0] is r:
            return hit[1]
        req = pod_requests(task)
        self._requests[id(r)] = (r, req)
        return req

    def node_local_scores(self, req: PodRequests, rows: IntArray) -> IntArray:
        """Weighted least/most-requested and balanced scores: each node's from its own figures only.

        Kept per request in a `ScoreMemo` over all nodes; when one of `rows` is stale (its mirror
        stamp moved: the node gained or lost a pod) every stale node is recomputed in one batch,
        so equal requests share the work.
        """
        m = self._mirror()
        memo = self._local_scores.get(req)
        if memo is None:
            memo = self._local_scores[req] = ScoreMemo(m.n)
            if len(self._local_scores) > SIGNATURE_CACHE_SIZE:
                self._local_scores.popitem(last=False)
        else:
            self._local_scores.move_to_end(req)
        if (memo.stamp[rows] != m.stamp[rows]).any():
            # Recompute every stale node at once: one batch now rather than one per later call.
            sub = (memo.stamp != m.stamp).nonzero()[0]
            memo.value[sub] = self.compute_local_scores(req, sub)
            memo.stamp[sub] = m.stamp[sub]
        out: IntArray = memo.value[rows]
        return out

    def compute_local_scores(self, req: PodRequests, rows: IntArray) -> IntArray:
        if len(rows) <= SCALAR_ROWS and req.gpu == 0 and self._cpu_mem_positive:
            few = self.scalar_local_scores(req, rows)
            if few is not None:
                return few
        w = self.weights
        total = np.zeros(len(rows), dtype=np.int64)
        if w.least_requested:
            total += self.resource_scores(req, rows, most=False) * w.least_requested
        if w.most_requested:
            total += self.resource_scores(req, rows, most=True) * w.most_requested
        if w.balanced_resource and not req.best_effort:
            total += self.balanced_scores(req, rows) * w.balanced_resource
        return total

    def scalar_local_scores(self, req: PodRequests, rows: IntArray) -> IntArray | None:
        """`compute_local_scores` for a few rows in plain Python: the same integers.

        Every node has cpu and memory and the pod asks no GPU (the arrays' fast case).  Integer
        steps are floor divisions as numpy's; the balance's fractions divide the same float64
        values; None (use the arrays) when a figure reaches 2**53, where int64 products could
        overflow or a conversion to float could round.
        """
        m = self._mirror()
        assert self._alloc_lists is not None
        alloc_cpu, alloc_mem = self._alloc_lists
        nz_cpu, nz_memory, req_cpu, req_memory = (
            m.nz_cpu.item,
            m.nz_memory.item,
            m.req_cpu.item,
            m.req_memory.item,
        )
        pod_nz_cpu, pod_nz_memory, pod_cpu, pod_memory = req.nz_cpu, req.nz_memory, req.cpu, req.memory
        w = self.weights
        balanced = w.balanced_resource and not req.best_effort
        half = MAX_NODE_SCORE // 2
        lw0, lw1 = LEAST_ALLOCATED_WEIGHTS
        mw0, mw1 = MOST_ALLOCATED_WEIGHTS
        out: list[int] = []
        for row in rows.tolist():
            a_cpu, a_mem = alloc_cpu[row], alloc_mem[row]
            r_cpu, r_mem = nz_cpu(row) + pod_nz_cpu, nz_memory(row) + pod_nz_memory
            h_cpu, h_mem = req_cpu(row), req_memory(row)
            figures = (a_cpu, a_mem, r_cpu, r_mem, h_cpu + pod_cpu, h_mem + pod_memory)
            if max(figures) >= _EXACT_LIMIT or min(figures) <= -_EXACT_LIMIT:
                return None
            total = 0
            if w.least_requested:
                p0 = max((a_cpu - r_cpu) * 100 // a_cpu, 0)
                p1 = max((a_mem - r_mem) * 100 // a_mem, 0)
                total += (p0 * lw0 + p1 * lw1) // (lw0 + lw1) * w.least_requested
            if w.most_requested:
                p0 = min(r_cpu, a_cpu) * 100 // a_cpu
                p1 = min(r_mem, a_mem) * 100 // a_mem
                total += (p0 * mw0 + p1 * mw1) // (mw0 + mw1) * w.most_requested
            if balanced:
                with_pod = _balance(h_cpu + pod_cpu, h_mem + pod_memory, a_cpu, a_mem)
                without = _balance(h_cpu, h_mem, a_cpu, a_mem)
                total += (half + (half + with_pod - without) // 2) * w.balanced_resource
            out.append(total)
        return np.array(out, dtype=np.int64)

    def spread_scores(self, task: TaskInfo, rows: IntArray) -> IntArray | None:
        """PodTopologySpread PreScore + Score + NormalizeScore over `rows` (None when it would Skip)."""
        raw = raw_spread_constraints(task.pod)
        if not raw:
            return None
        try:
            soft = spread_constraints(raw, task.pod.labels, SCHEDULE_ANYWAY)
        except SelectorError:
            return None
        if not soft:
            return None
        m = self._mirror()
        table = m.labels
        has_all = np.ones(m.n, dtype=np.bool_)
        for c in soft:
            has_all &= table.has(c.topology_key)
        ignored = ~has_all[rows]
        kept = rows[~ignored]
        weights = spread_weights(soft, table, kept)
        aff = required_node_affinity(task.pod.node_selector, task.pod.affinity)
        affinity_ok = table.required_node_affinity(aff)
        honor_taints = any(c.honor_node_taints for c in soft)
        untolerated = m.untolerated_rows(task.pod.tolerations) if honor_taints else None
        row_counts = [m.spread_row_counts(task.namespace, c) for c in soft]
        pair_totals: dict[str, IntArray] = {}
        for c, counts in zip(soft, row_counts, strict=True):
            if c.topology_key == HOSTNAME_LABEL:
                continue  # per-node counts, taken in Score
            codes, vocab = table.column(c.topology_key)
            included = m.spread_included(soft, c, affinity_ok, untolerated)
            total = pair_totals.setdefault(c.topology_key, np.zeros(len(vocab) + 1, dtype=np.int64))
            total += np.bincount(codes[included], weights=counts[included], minlength=len(total)).astype(
                np.int64
            )
        score = np.zeros(len(kept))
        for c, counts, w in zip(soft, row_counts, weights, strict=True):
            if c.topology_key == HOSTNAME_LABEL:
                cnt = counts[kept]
            else:
                cnt = pair_totals[c.topology_key][table.column(c.topology_key)[0][kept]]
            score = score + (cnt.astype(np.float64) * w + float(c.max_skew - 1))
        out = np.zeros(len(rows), dtype=np.int64)
        out[~ignored] = spread_normalize(go_round(score))
        return out

    def resource_scores(self, req: PodRequests, rows: IntArray, *, most: bool) -> IntArray:
        m = self._mirror()
        assert self._alloc is not None
        alloc_cpu, alloc_mem, _ = self._alloc
        requested = [m.nz_cpu[rows] + req.nz_cpu, m.nz_memory[rows] + req.nz_memory]
        allocatable = [alloc_cpu[rows], alloc_mem[rows]]
        if self._cpu_mem_positive:
            # Every node has cpu and memory: no resource is skipped (same results, fewer passes).
            per = [
                np.minimum(r, a) * 100 // a if most else np.maximum((a - r) * 100 // a, 0)
                for r, a in zip(requested, allocatable, strict=True)
            ]
            weights = MOST_ALLOCATED_WEIGHTS if most else LEAST_ALLOCATED_WEIGHTS
            out: IntArray = (per[0] * weights[0] + per[1] * weights[1]) // (weights[0] + weights[1])
            return out
        if most:
            return weighted_resource_score(
                requested, allocatable, MOST_ALLOCATED_WEIGHTS, most_requested_score
            )
        return weighted_resource_score(requested, allocatable, LEAST_ALLOCATED_WEIGHTS, least_requested_score)

    def balanced_scores(self, req: PodRequests, rows: IntArray) -> IntArray:
        """BalancedAllocation of Kubernetes 1.36 (the version Volcano vendors): the change in balance.

        The balance with the pod and without it are each ``balanced_score`` (int64, 50..100);
        the node scores ``50 + (50 + with - without) // 2`` (75 when the pod leaves the balance
        as it was, towards 100 when it improves it, towards 50 when it worsens it).
        """
        m = self._mirror()
        assert self._alloc is not None
        alloc_cpu, alloc_mem, alloc_gpu = self._alloc
        held = [m.req_cpu[rows], m.req_memory[rows]]
        allocatable = [alloc_cpu[rows], alloc_mem[rows]]
        if req.gpu != 0:
            held.append(m.req_gpu[rows])
            allocatable.append(alloc_gpu[rows])
        pod = [req.cpu, req.memory, req.gpu][: len(held)]
        if req.gpu == 0 and self._cpu_mem_positive:
            with_pod = two_resource_balance(
                held[0] + pod[0], held[1] + pod[1], allocatable[0], allocatable[1]
            )
            without = two_resource_balance(held[0], held[1], allocatable[0], allocatable[1])
        else:
            with_pod = balanced_score([h + p for h, p in zip(held, pod, strict=True)], allocatable)
            without = balanced_score(held, allocatable)
        return balance_change_score(with_pod, without)

    def node_affinity_raw(self, pod: PodFacts) -> IntArray | None:
        """Sum of matching preferred node affinity weights for every node (None: no terms)."""
        na = pod.affinity.get("nodeAffinity")
        raw = na.get("preferredDuringSchedulingIgnoredDuringExecution") if isinstance(na, dict) else None
        if not raw:
            return None
        key = json.dumps(raw, sort_keys=True, default=str)
        if key in self._affinity_scores:
            self._affinity_scores.move_to_end(key)
            return self._affinity_scores[key]
        terms = preferred_node_terms(pod.affinity)
        scores = self._mirror().labels.preferred_node_scores(terms) if terms else None
        self._affinity_scores[key] = scores
        if len(self._affinity_scores) > SIGNATURE_CACHE_SIZE:
            self._affinity_scores.popitem(last=False)
        return scores

    def taint_scores(self, pod: PodFacts, rows: IntArray) -> IntArray:
        if not self._any_prefer_taints:
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        tolerations = prefer_no_schedule_tolerations(pod.tolerations)
        counts = self._taint_counts.get(tolerations)
        if counts is None:
            m = self._mirror()
            per_set = np.fromiter(
                (count_intolerable_prefer_no_schedule(ts, tolerations) for ts in m.taint_sets),
                dtype=np.int64,
                count=len(m.taint_sets),
            )
            counts = per_set[m.taint_gid]
            self._taint_counts[tolerations] = counts
            if len(self._taint_counts) > SIGNATURE_CACHE_SIZE:
                self._taint_counts.popitem(last=False)
        else:
            self._taint_counts.move_to_end(tolerations)
        return default_normalize(counts[rows], reverse=True)

    def interpod_topology(self, task: TaskInfo) -> TopologyScore | None:
        """InterPodAffinity.PreScore: score per topology pair (None when it would Skip)."""
        m = self._mirror()
        pa = m.pod_affinity(task.namespace, task.pod)
        if pa.error:
            return None
        has_constraints = bool(pa.preferred_affinity or pa.preferred_anti)
        existing = m.pref_all if has_constraints else m.pref_open
        if not has_constraints and not existing:
            return None
        topo: TopologyScore = {}

        def add(key: str, value: str, delta: int) -> None:
            per = topo.setdefault(key, {})
            per[value] = per.get(value, 0) + delta

        if has_constraints:
            merged = merge_pod_affinity(pa, self._ns_labels)
            for weighted, sign in ((merged.preferred_affinity, 1), (merged.preferred_anti, -1)):
                for wt in weighted:
                    for (key, value), c in m.watch((wt.term,)).items():
                        add(key, value, wt.weight * sign * c)
        ns_labels = self._ns_labels.get(task.namespace)
        for (term, signed_weight), counts in existing.items():
            if term.matches(task.namespace, task.pod.labels, ns_labels):
                for (key, value), c in counts.items():
                    add(key, value, signed_weight * c)
        return topo or None

    def interpod_raw(self, topo: TopologyScore, rows: IntArray) -> IntArray:
        labels = self._mirror().labels
        out = np.zeros(len(rows), dtype=np.int64)
        for key, per_value in topo.items():
            out += labels.pair_counts(key, per_value)[rows]
        return out

    # ----------------------------------------------------------------- NodeOrderFn (ImageLocality)
    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        """ImageLocality.Score on one node, times its weight."""
        total_nodes = len(self._mirror().node_names)
        images = [normalized_image_name(i) for i in task.pod.images]
        sizes = node.facts.images
        s = sum(scaled_image_score(sizes[i], self._image_nodes[i], total_nodes) for i in images if i in sizes)
        score = int(image_priority(np.asarray([s], dtype=np.int64), len(images))[0])
        return float(score * self.weights.image_locality)

    def image_batch(self, task: TaskInfo, rows: IntArray) -> FloatArray | None:
        """ImageLocality over `rows`; None when it scores 0 on every node (it then adds nothing)."""
        pod_images = task.pod.images
        images = tuple(normalized_image_name(i) for i in pod_images) if pod_images else ()
        if images not in self._image_scores:
            # Weighted and converted once for every node; a call gathers its rows.
            weighted = (self._image_all_nodes(images) * self.weights.image_locality).astype(np.float64)
            scores = weighted if weighted.any() else None
            self._image_scores[images] = scores
            if len(self._image_scores) > SIGNATURE_CACHE_SIZE:
                self._image_scores.popitem(last=False)
        else:
            scores = self._image_scores[images]
            if len(self._image_scores) > 1:
                self._image_scores.move_to_end(images)
        if scores is None:
            return None
        out: FloatArray = scores[rows]
        return out

    def _image_all_nodes(self, images: tuple[str, ...]) -> IntArray:
        m = self._mirror()
        total = np.zeros(m.n, dtype=np.int64)
        for name in images:
            scaled, present = self._image_column(name)
            total += np.where(present, scaled, 0)
        return image_priority(total, len(images))

    def _image_column(self, name: str) -> tuple[IntArray, BoolArray]:
        col = self._image_cols.get(name)
        if col is None:
            assert self.ssn is not None
            nodes = self.ssn.node_list
            n = len(nodes)
            present = np.fromiter((name in nd.facts.images for nd in nodes), dtype=np.bool_, count=n)
            sizes = np.fromiter((nd.facts.images.get(name, 0) for nd in nodes), dtype=np.int64, count=n)
            spread = float(self._image_nodes[name]) / float(n)
            scaled: IntArray = (sizes.astype(np.float64) * spread).astype(np.int64)
            col = (scaled, present)
            self._image_cols[name] = col
        return col


def new(arguments: dict[str, Any]) -> NodeOrderPlugin:
    return NodeOrderPlugin(arguments)
