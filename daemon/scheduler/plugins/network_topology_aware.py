"""The network-topology-aware plugin (plugins/network-topology-aware): HyperNode gradients and scores.

* HyperNodeGradientForJob / ForSubJob: for a job (sub-job) in hard mode, the HyperNodes at or
  below the search root, breadth first, whose tier is at most highestTierAllowed and which can
  hold the job's minResources (the sub-job's: its pending tasks' requests) on their idle or
  future-idle resources — any size once the job has an allocated HyperNode — grouped by tier,
  lowest first.  The search root is the given HyperNode, narrowed to the highest ancestor of the
  job's allocated HyperNode within the allowed tier.  Not hard: the given HyperNode alone.
* HyperNodeOrder: binpack of the sub-job's tasks over each candidate HyperNode (weighted mean of
  `(used + request) / allocatable`, 0 when a resource would overflow); the best-scored ties get
  the share of the job's tasks already in the HyperNode added; × 100 × weight.
* BatchNodeOrder: a task of a job with a network topology scores a node 1 when the node's
  lowest-tier HyperNode is the job's allocated one, else `(maxTier − tier(LCA)) / (maxTier −
  minTier)` (0 without an allocated HyperNode), with the same task-share tie-break; other tasks
  (`hypernode.binpack.normal-pod.enable`) score the tier-weighted (`fading^(tier−1)`) binpack of
  the node's HyperNodes; × 100 × weight.
* Allocate/deallocate events move the HyperNodes' `used`; their idle and future-idle stay as at
  session open (the gradients read those), as in Volcano.

Determinism: where Volcano takes the first HyperNode of a tier found in a Go set (a node's
HyperNode, the normal-pod binpack), this takes the first by name; resource sums go in name order.
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_bool, arg_float, arg_int
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.framework.topology import session_topology
from fumarole.daemon.scheduler.model.hypernode import Topology
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import CPU, MEMORY, Resource
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "network-topology-aware"
MAX_NODE_SCORE = 100
PURPOSE_ALLOCATE = "allocate"
PURPOSE_EVICT = "evict"
DEFAULT_FADING = 0.8
DEFAULT_EVICT_MAX = 8


class _Status:
    __slots__ = ("allocatable", "future_idle", "idle", "used")

    def __init__(self) -> None:
        self.allocatable = Resource()
        self.used = Resource()
        self.idle = Resource()
        self.future_idle = Resource()


class NetworkTopologyAware:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight = arg_int(arguments, "weight", 1)
        if self.weight < 0:
            self.weight = 1
        cpu = arg_int(arguments, "hypernode.binpack.cpu", 1)
        mem = arg_int(arguments, "hypernode.binpack.memory", 1)
        self.binpack: dict[str, int] = {CPU: 1 if cpu < 0 else cpu, MEMORY: 1 if mem < 0 else mem}
        raw = arguments.get("hypernode.binpack.resources")
        for res in (raw if isinstance(raw, str) else "").split(","):
            res = res.strip()
            if not res or res in (CPU, MEMORY):
                continue
            w = arg_int(arguments, "hypernode.binpack.resources." + res, 1)
            self.binpack[res] = 1 if w < 0 else w
        self.normal_pod = arg_bool(arguments, "hypernode.binpack.normal-pod.enable", True)
        self.fading = arg_float(arguments, "hypernode.binpack.normal-pod.fading", DEFAULT_FADING)
        if self.fading < 0:
            self.fading = DEFAULT_FADING
        self.evict_max = arg_int(arguments, "hypernode.gradient.evict.max-hypernodes", DEFAULT_EVICT_MAX)
        if self.evict_max <= 0:
            self.evict_max = DEFAULT_EVICT_MAX
        self.status: dict[str, _Status] = {}
        self.min_tier = 0
        self.max_tier = 0

    # ----------------------------------------------------------------- session
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        topo = self.topo = session_topology(ssn)
        if topo.tiers:
            self.min_tier, self.max_tier = topo.tiers[0], topo.tiers[-1]
        self.status = {}
        for hn in sorted(topo.hypernodes):
            st = self.status[hn] = _Status()
            for node in topo.real_nodes.get(hn, ()):
                n = ssn.nodes[node]
                st.allocatable.add(n.allocatable)
                st.used.add(n.used)
                st.idle.add(n.idle)
                st.future_idle.add(n.future_idle())
        # The HyperNodes holding each node (for the events), in name order.
        self.of_node: dict[str, list[str]] = {}
        for hn in sorted(topo.hypernodes):
            for node in topo.real_nodes.get(hn, ()):
                self.of_node.setdefault(node, []).append(hn)
        ssn.register(cb.HYPERNODE_ORDER, NAME, self.hypernode_order)
        ssn.register(cb.BATCH_NODE_ORDER, NAME, self.batch_node_order)
        ssn.register(cb.HYPERNODE_GRADIENT_JOB, NAME, self.gradient_for_job)
        ssn.register(cb.HYPERNODE_GRADIENT_SUBJOB, NAME, self.gradient_for_subjob)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    def on_session_close(self, ssn: Session) -> None:
        self.status = {}

    def _on_allocate(self, task: TaskInfo) -> None:
        for hn in self.of_node.get(task.node_name, ()):
            self.status[hn].used.add(task.resreq)

    def _on_deallocate(self, task: TaskInfo) -> None:
        for hn in self.of_node.get(task.node_name, ()):
            self.status[hn].used.sub(task.resreq)

    # ----------------------------------------------------------------- gradients
    def gradient_for_job(self, job: JobInfo, hypernode: str, purpose: str) -> list[list[str]]:
        nt = job.network_topology
        tier = nt.hard_tier() if nt is not None else None
        if tier is None:
            return [[hypernode]]
        need = job.min_resources if job.min_resources is not None else Resource()
        return self._gradient(hypernode, tier, job.allocated_hypernode, need, purpose)

    def gradient_for_subjob(self, job: JobInfo, hypernode: str, purpose: str) -> list[list[str]]:
        nt = job.network_topology
        tier = nt.hard_tier() if nt is not None else None
        if tier is None:
            return [[hypernode]]
        need = Resource()
        for t in job.peek_in(TaskStatus.PENDING).values():
            need.add(t.init_resreq)
        return self._gradient(hypernode, tier, job.subjob_allocated_hypernode, need, purpose)

    def _gradient(
        self, hypernode: str, tier: int, allocated: str, need: Resource, purpose: str
    ) -> list[list[str]]:
        topo = self.topo
        root = search_root(topo, hypernode, tier, allocated)
        if root is None:
            return []
        by_tier: dict[int, list[str]] = {}
        for hn in topo.descendants_bfs(root):
            if self._eligible(hn, tier, allocated, need, purpose):
                by_tier.setdefault(topo.tier_of(hn), []).append(hn)
        out = [by_tier[t] for t in sorted(by_tier)]
        if purpose != PURPOSE_EVICT:
            return out
        return self._reverse_and_cap(out)

    def _eligible(self, hn: str, tier: int, allocated: str, need: Resource, purpose: str) -> bool:
        if self.topo.tier_of(hn) > tier:
            return False
        if allocated:
            return True
        st = self.status.get(hn)
        if st is None:
            return True
        if purpose == PURPOSE_EVICT:
            return need.less_equal(st.allocatable)
        return need.less_equal(st.idle) or need.less_equal(st.future_idle)

    def _reverse_and_cap(self, gradients: list[list[str]]) -> list[list[str]]:
        remaining = self.evict_max
        out: list[list[str]] = []
        for g in reversed(gradients):
            if remaining == 0:
                break
            if len(g) <= remaining:
                out.append(g)
                remaining -= len(g)
            else:
                out.append(g[len(g) - remaining :])
                remaining = 0
        return out

    # ----------------------------------------------------------------- HyperNode order
    def hypernode_order(self, job: JobInfo, candidates: dict[str, list[NodeInfo]]) -> dict[str, float]:
        request: dict[str, float] = {}
        for t in job.peek_tasks().values():
            for rn in t.resreq.resource_names():
                if rn in self.binpack:
                    request[rn] = request.get(rn, 0.0) + float(t.resreq.get(rn))
        scores: dict[str, float] = {}
        for hn in candidates:
            st = self.status.get(hn)
            total, wsum, over = 0.0, 0, False
            for rn in sorted(request):
                if st is None:
                    continue
                alloc = float(st.allocatable.get(rn))
                used = float(st.used.get(rn))
                if used + request[rn] > alloc:
                    over = True
                    break
                w = self.binpack[rn]
                total += w * ((used + request[rn]) / alloc)
                wsum += w
            scores[hn] = 0.0 if over or wsum <= 0 else total / wsum
        if scores:
            best = max(scores.values())
            tied = [hn for hn, s in scores.items() if s == best]
            if len(tied) > 1:
                for hn in tied:
                    scores[hn] += self._task_share(hn, job)
        return self._scaled(scores)

    def _task_share(self, hn: str, job: JobInfo) -> float:
        tasks = job.peek_tasks()
        if not tasks:
            return 0.0
        nodes = self.topo.real_sets.get(hn, frozenset())
        n = sum(1 for t in tasks.values() if t.node_name in nodes)
        return n / len(tasks)

    def _scaled(self, scores: dict[str, float]) -> dict[str, float]:
        k = float(MAX_NODE_SCORE * self.weight)
        return {name: k * s for name, s in scores.items()}

    # ----------------------------------------------------------------- node order
    def batch_node_order(self, task: TaskInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return {}
        if job.network_topology is not None:
            scores = self._network_aware(task, job, nodes)
        else:
            scores = self._normal_pod(task, nodes)
        return self._scaled(scores)

    def _network_aware(self, task: TaskInfo, job: JobInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        allocated = self.ssn.task_allocated_hypernode.get(task.uid, "")
        if not allocated:
            return {}
        topo = self.topo
        scores: dict[str, float] = {}
        for n in nodes:
            scores[n.name] = self._lca_score(topo.hypernode_of_node(n.name), allocated)
        best = max(scores.values(), default=0.0)
        tied = [name for name, s in scores.items() if s == best]
        if len(tied) > 1:
            for name in tied:
                hn = topo.hypernode_of_node(name)
                scores[name] += self._task_share(hn, job) if hn else 0.0
        return scores

    def _lca_score(self, hn: str, allocated: str) -> float:
        if not hn or not allocated:
            return 0.0
        if hn == allocated:
            return 1.0
        lca = self.topo.lca(hn, allocated)
        if lca not in self.topo.hypernodes:
            return 0.0
        tier = self.topo.tier_of(lca)
        if self.min_tier == self.max_tier:
            return 1.0
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return 0.0

    def _normal_pod(self, task: TaskInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        if not self.normal_pod:
            return {}
        weights: dict[int, float] = {}
        for tier in range(self.min_tier, self.max_tier + 1):
            weights[tier] = _power(self.fading, tier - 1)
        total_weight = sum(weights.values())
        if not total_weight > 0:
            return {}
        topo = self.topo
        scores: dict[str, float] = {}
        for n in nodes:
            total = 0.0
            for tier in range(self.min_tier, self.max_tier + 1):
                tier_score = 1.0
                for hn in topo.by_tier.get(tier, ()):
                    if n.name in topo.real_sets.get(hn, ()):
                        tier_score = self._pod_binpack(task, hn)
                        break
                total += weights[tier] * tier_score
            scores[n.name] = total / total_weight
        return scores

    def _pod_binpack(self, task: TaskInfo, hn: str) -> float:
        total, wsum = 0.0, 0
        st = self.status.get(hn)
        for rn in task.resreq.resource_names():
            w = self.binpack.get(rn)
            if w is None or st is None:
                continue
            alloc = float(st.allocatable.get(rn))
            used = float(st.used.get(rn))
            req = float(task.resreq.get(rn))
            if used + req > alloc:
                return 0.0
            total += w * ((used + req) / alloc)
            wsum += w
        return total / wsum if wsum > 0 else 0.0


def _power(base: float, exp: int) -> float:
    """math.Pow for the tier weights (0^0 = 1; 0 to a negative power is +Inf, as in Go)."""
    if base == 0.0:
        return 1.0 if exp == 0 else (0.0 if exp > 0 else float("inf"))
    return float(base**exp)


def search_root(topo: Topology, hypernode: str, tier: int, allocated: str) -> str | None:
    """getSearchRoot: `hypernode` narrowed by the job's allocated HyperNode (None: no overlap)."""
    if not allocated:
        return hypernode
    highest = ""
    for anc in topo.ancestors(allocated):
        if anc not in topo.hypernodes:
            return None
        if topo.tier_of(anc) > tier:
            break
        highest = anc
    if not highest:
        return None
    lca = topo.lca(hypernode, highest)
    if lca == highest:
        return hypernode
    if lca == hypernode:
        return highest
    return None


def new(arguments: dict[str, Any]) -> NetworkTopologyAware:
    return NetworkTopologyAware(arguments)
