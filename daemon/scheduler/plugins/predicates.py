"""The predicates plugin: Volcano's PrePredicateFn/PredicateFn over the Kubernetes filter plugins.

Order and outcome follow `pkg/scheduler/plugins/predicates/predicates.go` (Volcano at the
reference commit, vendoring Kubernetes v1.36):

1. pod count: `allocatable pods <= pods on the node` gives `node(s) pod number exceeded`
   (Unschedulable) and does not stop the other checks;
2. stable filters NodeUnschedulable (always on), NodeAffinity (nodeSelector and required node
   affinity), TaintToleration (NoSchedule / NoExecute): the first failure is
   UnschedulableAndUnresolvable and ends the check;
3. NodePorts (Unschedulable), then InterPodAffinity: pod affinity mismatch is
   UnschedulableAndUnresolvable (ends the check), anti-affinity and existing pods'
   anti-affinity are Unschedulable; then PodTopologySpread for DoNotSchedule constraints
   (missing topology label: UnschedulableAndUnresolvable; skew: Unschedulable).
The FitError carries every collected reason.  PrePredicate runs the PreFilters: NodeAffinity
(`pod affinity terms conflict` when required `metadata.name` terms cannot all hold),
NodePorts, InterPodAffinity and PodTopologySpread (pre-computed counts; a PreFilter that
answers Skip keeps its filter off for that task for the rest of the session, as Volcano's
cycle state does).  Topology spread constraints are read from a `topology_spread_constraints`
attribute of PodFacts (the raw `spec.topologySpreadConstraints` list) when the model has one.

Volcano keeps a Kubernetes NodeInfo snapshot per session and updates it from its allocate and
deallocate event handlers (pipeline and evict included); `NodeMirror` is that snapshot here:
pod count, requested resources, host ports and inter-pod affinity indexes per node.  It is
shared with the nodeorder plugin (Volcano's `ssn.NodeMap`).  As in Volcano, the lists of nodes
holding pods with (required anti-)affinity are taken at session open: existing pods'
anti-affinity is only looked for on nodes that held such a pod when the session opened.

Arguments (Volcano names): `predicate.NodeAffinityEnable`, `predicate.NodePortsEnable`,
`predicate.TaintTolerationEnable`, `predicate.PodAffinityEnable`,
`predicate.PodTopologySpreadEnable` (default true) switch the filters; `predicate.CacheEnable`
(default false, as in Volcano) turns on the equivalence cache of stable filter results keyed by
node and pod annotation `volcano.sh/template-uid` (a cached failure reads `plugin equivalence
cache predicates failed`, code Error).  `predicate.NodeVolumeLimitsEnable`,
`predicate.VolumeZoneEnable`, `predicate.VolumeBindingEnable` and
`predicate.DynamicResourceAllocationEnable` are accepted but their filters have nothing to
check: the model has no volumes or resource claims.  Pods without explicit spread constraints
only get ScheduleAnyway system defaults, which never filter.  Device sharing and Reserve/PreBind
are not implemented.  The Simulate* hooks (topology-aware preemption) follow Volcano: only
InterPodAffinity is simulated (AddPod/RemovePod update a copy of the preemptor's PreFilter
counts; SimulatePredicate runs just that filter).
"""

from __future__ import annotations

import json
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.scheduler.framework import combinators as cb
from daemon.scheduler.framework.conf import arg_bool
from daemon.scheduler.framework.nodetable import BoolArray, IntArray
from daemon.scheduler.framework.session import EventHandler, Session
from daemon.scheduler.model.fit import NODE_POD_NUMBER_EXCEEDED, Code, FitError
from daemon.scheduler.model.node import NodeInfo
from daemon.scheduler.model.task import HostPort, PodFacts, Taint, TaskInfo, Toleration
from daemon.scheduler.plugins.k8s_affinity import (
    DEFAULT_BIND_ALL_HOST_IP,
    DO_NOT_SCHEDULE,
    NO_POD_AFFINITY,
    NOTHING,
    OP_EQUALS,
    OP_IN,
    AffinityTerm,
    NodeLabelTable,
    PodAffinity,
    RequiredNodeAffinity,
    SelectorError,
    SpreadConstraint,
    UsedPorts,
    find_untolerated_taint,
    matches_all_terms,
    merge_pod_affinity,
    node_names_conflict,
    parse_pod_affinity,
    port_conflict,
    raw_spread_constraints,
    required_node_affinity,
    required_node_selector_raw,
    sanitize_port,
    spread_constraints,
    tolerates_unschedulable,
)

NAME = "predicates"

NODE_AFFINITY_ENABLE = "predicate.NodeAffinityEnable"
NODE_PORTS_ENABLE = "predicate.NodePortsEnable"
TAINT_TOLERATION_ENABLE = "predicate.TaintTolerationEnable"
POD_AFFINITY_ENABLE = "predicate.PodAffinityEnable"
NODE_VOLUME_LIMITS_ENABLE = "predicate.NodeVolumeLimitsEnable"
VOLUME_ZONE_ENABLE = "predicate.VolumeZoneEnable"
POD_TOPOLOGY_SPREAD_ENABLE = "predicate.PodTopologySpreadEnable"
VOLUME_BINDING_ENABLE = "predicate.VolumeBindingEnable"
DRA_ENABLE = "predicate.DynamicResourceAllocationEnable"
CACHE_ENABLE = "predicate.CacheEnable"

TEMPLATE_UID_KEY = "volcano.sh/template-uid"
GPU = "nvidia.com/gpu"
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TAINT = "node(s) had untolerated taint(s)"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_CACHE = "plugin equivalence cache predicates failed"
NODE_AFFINITY_CONFLICT = "pod affinity terms conflict"

# Stable-filter outcome codes per node (int8); 0 passes.
STABLE_UNSCHEDULABLE = 1
STABLE_NODE_AFFINITY = 2
STABLE_TAINT = 3
STABLE_CACHED = 4
STABLE_REASONS: dict[int, tuple[Code, str]] = {
    STABLE_UNSCHEDULABLE: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_UNSCHEDULABLE),
    STABLE_NODE_AFFINITY: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_NODE_AFFINITY),
    STABLE_TAINT: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_TAINT),
    STABLE_CACHED: (Code.ERROR, REASON_CACHE),
}
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = REASON_SPREAD + " (missing required label)"
SPREAD_MISSING_LABEL = 1
SPREAD_SKEW = 2
SPREAD_REASONS: dict[int, tuple[Code, str]] = {
    SPREAD_MISSING_LABEL: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_SPREAD_LABEL),
    SPREAD_SKEW: (Code.UNSCHEDULABLE, REASON_SPREAD),
}
MAX_INT32 = (1 << 31) - 1
# Inter-pod affinity outcome codes; 0 passes.
IPA_AFFINITY = 1
IPA_ANTI_AFFINITY = 2
IPA_EXISTING_ANTI = 3
IPA_REASONS: dict[int, tuple[Code, str]] = {
    IPA_AFFINITY: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_POD_AFFINITY),
    IPA_ANTI_AFFINITY: (Code.UNSCHEDULABLE, REASON_POD_ANTI_AFFINITY),
    IPA_EXISTING_ANTI: (Code.UNSCHEDULABLE, REASON_EXISTING_ANTI_AFFINITY),
}
SIGNATURE_CACHE_SIZE = 1024
WATCH_LIMIT = 512
ROW_WATCH_LIMIT = 128
IPA_STATE_LIMIT = 4096
SPREAD_STATE_LIMIT = 256

Int8Array = npt.NDArray[np.int8]
Pair = tuple[str, str]
PairCounts = dict[Pair, int]
PortTriple = tuple[str, str, int]


class PrePredicateError(Exception):
    """A PreFilter that failed: `plugin <name> pre-predicates failed <message>`."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"plugin {plugin} pre-predicates failed {message}")
        self.plugin = plugin


# =============================================================================================
# the session's Kubernetes NodeInfo snapshot


def _index_set(index: dict[Any, set[str]], key: Any, uid: str, add: bool) -> None:
    if add:
        index.setdefault(key, set()).add(uid)
        return
    s = index.get(key)
    if s is not None:
        s.discard(uid)
        if not s:
            del index[key]


def _bump(counts: PairCounts, pair: Pair, delta: int) -> None:
    """topologyToMatchedTermCount.update: add, and drop a pair that reaches zero."""
    v = counts.get(pair, 0) + delta
    if v:
        counts[pair] = v
    else:
        counts.pop(pair, None)


def _add_count(counts: dict[Any, PairCounts], key: Any, pair: Pair, delta: int) -> None:
    c = counts.setdefault(key, {})
    _bump(c, pair, delta)
    if not c:
        del counts[key]


def merge_pairs(into: PairCounts, other: Mapping[Pair, int], factor: int = 1) -> None:
    for pair, c in other.items():
        into[pair] = into.get(pair, 0) + c * factor


TermKey = tuple[AffinityTerm, ...]


def _anchors(term: AffinityTerm) -> list[Pair] | None:
    """Label pairs one of which every pod matching `term` carries (None: no such equality)."""
    for r in term.selector.requirements:
        if r.op in (OP_IN, OP_EQUALS):
            return [(r.key, v) for v in r.values]
    return None


class NodeMirror:
    """Volcano's k8s NodeInfo snapshot (`ssn.NodeMap`) for one session, with static node facts.

    Static: node labels (`NodeLabelTable`), unschedulable flags, taint sets.  Dynamic, updated by
    `add`/`remove` (the predicates plugin's event handlers): pods per node (the TaskInfo given at
    add time), pod count, requested and non-zero-requested cpu/memory, requested GPUs, host
    ports, existing pods' inter-pod affinity terms counted per topology pair, and "watches":
    per incoming term tuple, the topology pairs of the pods matching all of its terms, computed at
    first use and then kept in step, so that PreFilter / PreScore cost O(pairs), not O(pods).
    """

    def __init__(self, nodes: list[NodeInfo], stamp: IntArray | None = None) -> None:
        n = self.n = len(nodes)
        # Per-row change stamps, bumped on every add/remove (the session's NodeTable.version, so
        # per-row memos see mirror changes as row changes).
        self.stamp: IntArray = np.zeros(n, dtype=np.int64) if stamp is None else stamp
        self.node_names = [nd.name for nd in nodes]
        self.node_labels: list[Mapping[str, str]] = [nd.facts.labels for nd in nodes]
        self.labels = NodeLabelTable(self.node_labels, self.node_names)
        self.unschedulable: BoolArray = np.fromiter(
            (nd.facts.unschedulable for nd in nodes), dtype=np.bool_, count=n
        )
        self.any_unschedulable = bool(self.unschedulable.any())
        group_of: dict[tuple[Taint, ...], int] = {}
        self.taint_gid: IntArray = np.fromiter(
            (group_of.setdefault(nd.facts.taints, len(group_of)) for nd in nodes), dtype=np.int64, count=n
        )
        self.taint_sets: list[tuple[Taint, ...]] = list(group_of)
        self.pods: list[dict[str, TaskInfo]] = [dict(nd.tasks) for nd in nodes]
        self.row_of: dict[str, int] = {}
        self.affinity_of: dict[str, PodAffinity] = {}
        self.ports_of: dict[str, tuple[PortTriple, ...]] = {}
        self.ports: dict[int, UsedPorts] = {}
        self.port_rows: BoolArray = np.zeros(n, dtype=np.bool_)
        # (protocol, port) -> host IP -> nodes whose HostPortInfo holds that entry.
        self.port_index: dict[tuple[str, int], dict[str, set[int]]] = {}
        # Existing pods' required anti-affinity terms on nodes listed at open -> topology pair counts.
        self.anti_terms: dict[AffinityTerm, PairCounts] = {}
        # Existing pods' preferred terms, keyed (term, signed weight): on all nodes / on nodes
        # that held a pod with affinity at open.
        self.pref_all: dict[tuple[AffinityTerm, int], PairCounts] = {}
        self.pref_open: dict[tuple[AffinityTerm, int], PairCounts] = {}
        self.version = 0
        self._by_ns: dict[str, set[str]] | None = None
        self._by_label: dict[Pair, set[str]] | None = None
        self._affinity_cache: dict[tuple[str, int], tuple[Mapping[str, Any], PodAffinity]] = {}
        self._watches: OrderedDict[TermKey, PairCounts] = OrderedDict()
        self._watch_index = _AnchorIndex()
        self._row_watches: OrderedDict[AffinityTerm, IntArray] = OrderedDict()
        self._row_index = _AnchorIndex()
        sums = np.zeros((6, n), dtype=np.int64)
        affinity_rows = np.zeros(n, dtype=np.bool_)
        anti_rows = np.zeros(n, dtype=np.bool_)
        for row, pods in enumerate(self.pods):
            cpu = mem = gpu = nz_cpu = nz_mem = 0
            for uid, t in pods.items():
                self.row_of[uid] = row
                c, m, g = _requests(t)
                cpu += c
                mem += m
                gpu += g
                nz_cpu += c or DEFAULT_MILLI_CPU_REQUEST
                nz_mem += m or DEFAULT_MEMORY_REQUEST
                pod = t.pod
                if pod.host_ports:
                    self._add_ports(uid, row, pod)
                pa = self.pod_affinity(t.namespace, pod)
                if pa.with_affinity:
                    self.affinity_of[uid] = pa
                    affinity_rows[row] = True
                    anti_rows[row] |= pa.with_required_anti
            sums[:, row] = (len(pods), cpu, mem, gpu, nz_cpu, nz_mem)
        self.count, self.req_cpu, self.req_memory, self.req_gpu, self.nz_cpu, self.nz_memory = sums
        # HavePodsWithAffinityList / HavePodsWithRequiredAntiAffinityList, frozen at session open.
        self.affinity_rows_at_open: BoolArray = affinity_rows
        self.anti_rows_at_open: BoolArray = anti_rows
        for uid, pa in self.affinity_of.items():
            self._count_terms(self.row_of[uid], pa, 1)

    # ----------------------------------------------------------------- pods
    def pod_affinity(self, namespace: str, pod: PodFacts) -> PodAffinity:
        aff = pod.affinity
        if not aff or ("podAffinity" not in aff and "podAntiAffinity" not in aff):
            return NO_POD_AFFINITY
        key = (namespace, id(aff))
        hit = self._affinity_cache.get(key)
        if hit is None or hit[0] is not aff:
            hit = (aff, parse_pod_affinity(namespace, aff))
            self._affinity_cache[key] = hit
        return hit[1]

    def add(self, task: TaskInfo, row: int) -> None:
        """NodeInfo.AddPodInfo (a pod already on the node is left as it is)."""
        uid = task.uid
        if uid in self.pods[row]:
            return
        self.pods[row][uid] = task
        self.row_of[uid] = row
        self._account(row, task, 1)
        pod = task.pod
        if pod.host_ports:
            self._add_ports(uid, row, pod)
        pa = self.pod_affinity(task.namespace, pod)
        if pa.with_affinity:
            self.affinity_of[uid] = pa
            self._count_terms(row, pa, 1)
        if self._by_ns is not None:
            self._index_labels(task, True)
        self._update_watches(task, row, 1)
        self.version += 1
        self.stamp[row] += 1

    def remove(self, task: TaskInfo, row: int) -> None:
        """NodeInfo.RemovePod: unknown pods are ignored (Kubernetes returns an error)."""
        held = self.pods[row].pop(task.uid, None)
        if held is None:
            return
        uid = held.uid
        self.row_of.pop(uid, None)
        self._account(row, held, -1)
        ports = self.ports_of.pop(uid, None)
        if ports:
            self._remove_ports(row, ports)
        pa = self.affinity_of.pop(uid, None)
        if pa is not None:
            self._count_terms(row, pa, -1)
        if self._by_ns is not None:
            self._index_labels(held, False)
        self._update_watches(held, row, -1)
        self.version += 1
        self.stamp[row] += 1

    def _add_ports(self, uid: str, row: int, pod: PodFacts) -> None:
        """HostPortInfo.Add for each host port of the pod (a set per node: ip -> protocol/port)."""
        ports = tuple(sanitize_port(p.ip, p.protocol, p.port) for p in pod.host_ports if p.port > 0)
        if not ports:
            return
        self.ports_of[uid] = ports
        used = self.ports.setdefault(row, {})
        for ip, proto, port in ports:
            used.setdefault((proto, port), set()).add(ip)
            self.port_index.setdefault((proto, port), {}).setdefault(ip, set()).add(row)
        self.port_rows[row] = True

    def _remove_ports(self, row: int, ports: tuple[PortTriple, ...]) -> None:
        """HostPortInfo.Remove: the entry goes even if another pod on the node used it too."""
        used = self.ports.get(row, {})
        for ip, proto, port in ports:
            ips = used.get((proto, port))
            if ips is None or ip not in ips:
                continue
            ips.discard(ip)
            if not ips:
                del used[(proto, port)]
            by_ip = self.port_index[(proto, port)]
            by_ip[ip].discard(row)
            if not by_ip[ip]:
                del by_ip[ip]
                if not by_ip:
                    del self.port_index[(proto, port)]
        if not used:
            self.ports.pop(row, None)
            self.port_rows[row] = False

    def port_conflict_rows(self, wanted: Iterable[HostPort]) -> BoolArray:
        """Per node: some wanted host port conflicts with the node's used ports (CheckConflict)."""
        out = np.zeros(self.n, dtype=np.bool_)
        for p in wanted:
            ip, proto, port = sanitize_port(p.ip, p.protocol, p.port)
            by_ip = self.port_index.get((proto, port)) if port > 0 else None
            if not by_ip:
                continue
            ips = by_ip if ip == DEFAULT_BIND_ALL_HOST_IP else (ip, DEFAULT_BIND_ALL_HOST_IP)
            for one in ips:
                rows = by_ip.get(one)
                if rows:
                    out[np.fromiter(rows, dtype=np.int64, count=len(rows))] = True
        return out

    def _account(self, row: int, task: TaskInfo, sign: int) -> None:
        c, m, g = _requests(task)
        self.count[row] += sign
        self.req_cpu[row] += sign * c
        self.req_memory[row] += sign * m
        self.req_gpu[row] += sign * g
        self.nz_cpu[row] += sign * (c or DEFAULT_MILLI_CPU_REQUEST)
        self.nz_memory[row] += sign * (m or DEFAULT_MEMORY_REQUEST)

    def _count_terms(self, row: int, pa: PodAffinity, sign: int) -> None:
        labels = self.node_labels[row]
        if self.anti_rows_at_open[row]:
            for t in pa.required_anti:
                v = labels.get(t.topology_key)
                if v is not None:
                    _add_count(self.anti_terms, t, (t.topology_key, v), sign)
        for weighted, mult in ((pa.preferred_affinity, 1), (pa.preferred_anti, -1)):
            for w in weighted:
                v = labels.get(w.term.topology_key)
                if v is None:
                    continue
                key = (w.term, w.weight * mult)
                pair = (w.term.topology_key, v)
                _add_count(self.pref_all, key, pair, sign)
                if self.affinity_rows_at_open[row]:
                    _add_count(self.pref_open, key, pair, sign)

    def untolerated_rows(self, tolerations: tuple[Toleration, ...]) -> BoolArray:
        """Per node: a NoSchedule / NoExecute taint the tolerations do not tolerate."""
        bad = np.fromiter(
            (find_untolerated_taint(ts, tolerations) is not None for ts in self.taint_sets),
            dtype=np.bool_,
            count=len(self.taint_sets),
        )
        out: BoolArray = bad[self.taint_gid]
        return out

    def spread_row_counts(self, namespace: str, c: SpreadConstraint) -> IntArray:
        """Per node: pods matching a spread constraint (countPodsMatchSelector); read only."""
        if c.selector.empty or c.selector.nothing:
            return np.zeros(self.n, dtype=np.int64)
        return self.row_watch(AffinityTerm(frozenset((namespace,)), NOTHING, c.selector, ""))

    def spread_included(
        self,
        constraints: tuple[SpreadConstraint, ...],
        c: SpreadConstraint,
        affinity_ok: BoolArray,
        untolerated: BoolArray | None,
    ) -> BoolArray:
        """Nodes counted for `c`: all topology keys present, then the node inclusion policies."""
        out = np.ones(self.n, dtype=np.bool_)
        for k in {x.topology_key for x in constraints}:
            out &= self.labels.has(k)
        if c.honor_node_affinity:
            out &= affinity_ok
        if c.honor_node_taints and untolerated is not None:
            out &= ~untolerated
        return out

    def topology_pair(self, row: int, key: str) -> Pair | None:
        v = self.node_labels[row].get(key)
        return None if v is None else (key, v)

    # ----------------------------------------------------------------- label index
    def _index_labels(self, task: TaskInfo, add: bool) -> None:
        assert self._by_ns is not None and self._by_label is not None
        _index_set(self._by_ns, task.namespace, task.uid, add)
        for kv in task.pod.labels.items():
            _index_set(self._by_label, kv, task.uid, add)

    def _ensure_label_index(self) -> tuple[dict[str, set[str]], dict[Pair, set[str]]]:
        if self._by_ns is None or self._by_label is None:
            self._by_ns = {}
            self._by_label = {}
            for pods in self.pods:
                for t in pods.values():
                    self._index_labels(t, True)
        return self._by_ns, self._by_label

    def _task(self, uid: str) -> TaskInfo:
        return self.pods[self.row_of[uid]][uid]

    def candidates(self, term: AffinityTerm) -> list[TaskInfo]:
        """Pods on any node that match an incoming (namespace-merged) term."""
        if term.selector.nothing:
            return []
        by_ns, by_label = self._ensure_label_index()
        pools: list[list[str]] = []
        for r in term.selector.requirements:
            if r.op in (OP_IN, OP_EQUALS):
                pools.append([u for v in r.values for u in by_label.get((r.key, v), ())])
        if not pools and term.ns_selector.nothing:
            pools.append([u for ns in term.namespaces for u in by_ns.get(ns, ())])
        if pools:
            found: Iterable[TaskInfo] = (self._task(u) for u in min(pools, key=len))
        else:
            found = (t for pods in self.pods for t in pods.values())
        return [t for t in found if term.matches(t.namespace, t.pod.labels, None)]

    # ----------------------------------------------------------------- watches
    def watch(self, key: TermKey) -> PairCounts:
        """Topology pairs (each term's key on the pod's node) of pods matching every term of `key`.

        The returned mapping is live (kept in step by add/remove): read it, do not keep it.
        """
        counts = self._watches.get(key)
        if counts is not None:
            self._watches.move_to_end(key)
            return counts
        counts = {}
        rest = key[1:]
        for t in self.candidates(key[0]):
            if all(r.matches(t.namespace, t.pod.labels, None) for r in rest):
                row = self.row_of[t.uid]
                for term in key:
                    pair = self.topology_pair(row, term.topology_key)
                    if pair is not None:
                        _bump(counts, pair, 1)
        self._watches[key] = counts
        self._watch_index.add(key, _anchors(key[0]))
        if len(self._watches) > WATCH_LIMIT:
            old = next(iter(self._watches))
            del self._watches[old]
            self._watch_index.remove(old, _anchors(old[0]))
        return counts

    def row_watch(self, term: AffinityTerm) -> IntArray:
        """Per node: live pods matching `term` (not terminating); live array, read only."""
        counts = self._row_watches.get(term)
        if counts is not None:
            self._row_watches.move_to_end(term)
            return counts
        rows = [self.row_of[t.uid] for t in self.candidates(term) if not t.pod.deleting]
        counts = np.bincount(np.asarray(rows, dtype=np.int64), minlength=self.n).astype(np.int64)
        self._row_watches[term] = counts
        self._row_index.add(term, _anchors(term))
        if len(self._row_watches) > ROW_WATCH_LIMIT:
            old = next(iter(self._row_watches))
            del self._row_watches[old]
            self._row_index.remove(old, _anchors(old))
        return counts

    def _update_watches(self, task: TaskInfo, row: int, sign: int) -> None:
        labels = task.pod.labels
        if self._watches:
            for key in self._watch_index.keys_for(labels):
                if all(t.matches(task.namespace, labels, None) for t in key):
                    counts = self._watches[key]
                    for term in key:
                        pair = self.topology_pair(row, term.topology_key)
                        if pair is not None:
                            _bump(counts, pair, sign)
        if self._row_watches and not task.pod.deleting:
            for term in self._row_index.keys_for(labels):
                if term.matches(task.namespace, labels, None):
                    self._row_watches[term][row] += sign


class _AnchorIndex:
    """Watch keys by a label pair every matching pod carries, so an event checks only likely keys."""

    def __init__(self) -> None:
        self.by_label: dict[Pair, set[Any]] = {}
        self.generic: set[Any] = set()

    def add(self, key: Any, anchors: list[Pair] | None) -> None:
        if anchors is None:
            self.generic.add(key)
            return
        for a in anchors:
            self.by_label.setdefault(a, set()).add(key)

    def remove(self, key: Any, anchors: list[Pair] | None) -> None:
        if anchors is None:
            self.generic.discard(key)
            return
        for a in anchors:
            _index_set(self.by_label, a, key, False)

    def keys_for(self, labels: Mapping[str, str]) -> set[Any]:
        keys = set(self.generic)
        for kv in labels.items():
            found = self.by_label.get(kv)
            if found:
                keys |= found
        return keys


def _requests(task: TaskInfo) -> tuple[int, int, int]:
    """A pod's cpu (milli), memory (bytes) and nvidia.com/gpu (milli) requests as integers."""
    r = task.resreq
    return round(r.cpu), round(r.memory), round(r.scalars.get(GPU, 0))


_MIRRORS: weakref.WeakKeyDictionary[Session, NodeMirror] = weakref.WeakKeyDictionary()


def node_mirror(ssn: Session) -> NodeMirror:
    """The session's k8s NodeInfo snapshot, built at first use (session open)."""
    m = _MIRRORS.get(ssn)
    if m is None:
        m = NodeMirror(ssn.node_list, ssn.table.version)
        _MIRRORS[ssn] = m
    return m


def namespace_labels(ssn: Session) -> dict[str, Mapping[str, str]]:
    return {name: ns.labels for name, ns in ssn.namespaces.items()}


# =============================================================================================
# inter-pod affinity PreFilter state


def _by_key(counts: PairCounts) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (k, v), c in counts.items():
        out.setdefault(k, {})[v] = c
    return out


@dataclass(slots=True)
class InterPodState:
    """preFilterState of InterPodAffinity for one task."""

    affinity: PodAffinity
    affinity_counts: PairCounts
    anti_counts: PairCounts
    existing_anti: PairCounts
    matches_own: bool
    by_key_affinity: dict[str, dict[str, int]] = field(default_factory=dict)
    by_key_anti: dict[str, dict[str, int]] = field(default_factory=dict)
    by_key_existing: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_key_affinity = _by_key(self.affinity_counts)
        self.by_key_anti = _by_key(self.anti_counts)
        self.by_key_existing = _by_key({p: c for p, c in self.existing_anti.items() if c > 0})


def interpod_state(
    mirror: NodeMirror, task: TaskInfo, pa: PodAffinity, ns_labels: Mapping[str, str] | None
) -> InterPodState | None:
    """InterPodAffinity.PreFilter over the snapshot; None means Skip."""
    existing: PairCounts = {}
    for term, counts in mirror.anti_terms.items():
        if term.matches(task.namespace, task.pod.labels, ns_labels):
            merge_pairs(existing, counts)
    if not existing and not pa.required_affinity and not pa.required_anti:
        return None
    affinity_counts = dict(mirror.watch(pa.required_affinity)) if pa.required_affinity else {}
    anti_counts: PairCounts = {}
    for t in pa.required_anti:
        merge_pairs(anti_counts, mirror.watch((t,)))
    own = matches_all_terms(pa.required_affinity, task.namespace, task.pod.labels)
    return InterPodState(pa, affinity_counts, anti_counts, existing, own)


def interpod_filter(state: InterPodState, labels: Mapping[str, str]) -> int:
    """InterPodAffinity.Filter on one node: 0, or the IPA_* code of the first failing rule."""
    pods_exist = True
    for t in state.affinity.required_affinity:
        v = labels.get(t.topology_key)
        if v is None:
            return IPA_AFFINITY
        if state.affinity_counts.get((t.topology_key, v), 0) <= 0:
            pods_exist = False
    if not pods_exist and not (not state.affinity_counts and state.matches_own):
        return IPA_AFFINITY
    if state.anti_counts:
        for t in state.affinity.required_anti:
            v = labels.get(t.topology_key)
            if v is not None and state.anti_counts.get((t.topology_key, v), 0) > 0:
                return IPA_ANTI_AFFINITY
    if state.existing_anti:
        for k, v in labels.items():
            if state.existing_anti.get((k, v), 0) > 0:
                return IPA_EXISTING_ANTI
    return 0


def interpod_filter_rows(state: InterPodState, table: NodeLabelTable, rows: IntArray) -> Int8Array:
    """Vectorised `interpod_filter` over node rows."""
    codes = np.zeros(len(rows), dtype=np.int8)
    terms = state.affinity.required_affinity
    if terms:
        has_all = np.ones(len(rows), dtype=np.bool_)
        exist = np.ones(len(rows), dtype=np.bool_)
        for t in terms:
            key = t.topology_key
            has_all &= table.has(key)[rows]
            exist &= table.pair_counts(key, state.by_key_affinity.get(key, {}))[rows] > 0
        first_pod = not state.affinity_counts and state.matches_own
        allowed = has_all & (exist | first_pod)
        codes[~allowed] = IPA_AFFINITY
    if state.anti_counts:
        hit = np.zeros(len(rows), dtype=np.bool_)
        for t in state.affinity.required_anti:
            key = t.topology_key
            hit |= table.pair_counts(key, state.by_key_anti.get(key, {}))[rows] > 0
        codes[(codes == 0) & hit] = IPA_ANTI_AFFINITY
    if state.by_key_existing:
        hit = np.zeros(len(rows), dtype=np.bool_)
        for key, values in state.by_key_existing.items():
            hit |= table.lookup(key, values)[rows]
        codes[(codes == 0) & hit] = IPA_EXISTING_ANTI
    return codes


SIM_INTERPOD_KEY = "predicates/InterPodAffinity"


def copy_interpod(st: InterPodState) -> InterPodState:
    return InterPodState(
        st.affinity, dict(st.affinity_counts), dict(st.anti_counts), dict(st.existing_anti), st.matches_own
    )


class SimInterPod:
    """A task's InterPodAffinity PreFilter state held in a dry-run cycle state."""

    __slots__ = ("state",)

    def __init__(self, state: InterPodState) -> None:
        self.state = state

    def clone(self) -> SimInterPod:
        return SimInterPod(copy_interpod(self.state))


def update_interpod(
    st: InterPodState,
    other: TaskInfo,
    other_pa: PodAffinity,
    node_labels: Mapping[str, str],
    incoming_ns_labels: Mapping[str, str] | None,
    incoming: TaskInfo,
    sign: int,
) -> None:
    """preFilterState.updateWithPod: count `other` (+1 added, -1 removed) on a node with these labels."""

    def bump(counts: PairCounts, key: str) -> None:
        v = node_labels.get(key)
        if v is not None:
            _bump(counts, (key, v), sign)

    for t in other_pa.required_anti:
        if t.matches(incoming.namespace, incoming.pod.labels, incoming_ns_labels):
            bump(st.existing_anti, t.topology_key)
    terms = st.affinity.required_affinity
    if matches_all_terms(terms, other.namespace, other.pod.labels):
        for t in terms:
            bump(st.affinity_counts, t.topology_key)
    for t in st.affinity.required_anti:
        if t.matches(other.namespace, other.pod.labels, None):
            bump(st.anti_counts, t.topology_key)
    st.__post_init__()


# =============================================================================================
# the plugin


@dataclass(slots=True)
class PredicateSwitches:
    node_affinity: bool = True
    node_ports: bool = True
    taint_toleration: bool = True
    pod_affinity: bool = True
    topology_spread: bool = True
    cache: bool = False


def switches_from(arguments: dict[str, Any]) -> PredicateSwitches:
    return PredicateSwitches(
        node_affinity=arg_bool(arguments, NODE_AFFINITY_ENABLE, True),
        node_ports=arg_bool(arguments, NODE_PORTS_ENABLE, True),
        taint_toleration=arg_bool(arguments, TAINT_TOLERATION_ENABLE, True),
        pod_affinity=arg_bool(arguments, POD_AFFINITY_ENABLE, True),
        topology_spread=arg_bool(arguments, POD_TOPOLOGY_SPREAD_ENABLE, True),
        cache=arg_bool(arguments, CACHE_ENABLE, False),
    )


def stable_signature(pod: PodFacts) -> tuple[Any, ...]:
    """What the stable filters read from a pod: nodeSelector, required node affinity, tolerations."""
    required = required_node_selector_raw(pod.affinity)
    req_key = None if required is None else json.dumps(required, sort_keys=True, default=str)
    return (tuple(sorted(pod.node_selector.items())), req_key, pod.tolerations)


def stable_code(switches: PredicateSwitches, pod: PodFacts, aff: RequiredNodeAffinity, node: NodeInfo) -> int:
    """The stable filters on one node, in Volcano's order; the first failure ends the check."""
    facts = node.facts
    if facts.unschedulable and not tolerates_unschedulable(pod.tolerations):
        return STABLE_UNSCHEDULABLE
    if switches.node_affinity and not aff.matches(facts.labels, node.name):
        return STABLE_NODE_AFFINITY
    if switches.taint_toleration and find_untolerated_taint(facts.taints, pod.tolerations) is not None:
        return STABLE_TAINT
    return 0


@dataclass(slots=True)
class TemplateCache:
    """predicateCache entries of one pod template: per node, evaluated? and fit?"""

    seen: BoolArray
    fit: BoolArray


class PredicatesPlugin:
    """Registers PrePredicateFn, PredicateFn (scalar and vectorised) and the snapshot's event handlers.

    InterPodAffinity PreFilter states are kept per task as Volcano's cycle state keeps them (a
    later Predicate without a new PrePredicate sees the counts of the last PrePredicate); only
    the `IPA_STATE_LIMIT` most recent are held, an older one is recomputed when needed.
    """

    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.switches = switches_from(arguments)
        self.ssn: Session | None = None
        self.mirror: NodeMirror | None = None
        self._sig_by_pod: dict[int, tuple[PodFacts, tuple[Any, ...]]] = {}
        self._stable: OrderedDict[tuple[Any, ...], Int8Array] = OrderedDict()
        self._affinity_by_sig: OrderedDict[tuple[Any, ...], RequiredNodeAffinity] = OrderedDict()
        self._templates: dict[str, TemplateCache] = {}
        self._ipa: OrderedDict[str, InterPodState] = OrderedDict()
        self._ipa_skipped: set[str] = set()
        self._spread: OrderedDict[str, SpreadState] = OrderedDict()
        self._spread_skipped: set[str] = set()
        self._ns_labels: dict[str, Mapping[str, str]] = {}

    # ----------------------------------------------------------------- session hooks
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        mirror = node_mirror(ssn)
        self.mirror = mirror
        self._ns_labels = namespace_labels(ssn)
        nodes = ssn.nodes

        def on_allocate(task: TaskInfo) -> None:
            nd = nodes.get(task.node_name)
            if nd is not None:
                mirror.add(task, nd.index)

        def on_deallocate(task: TaskInfo) -> None:
            nd = nodes.get(task.node_name)
            if nd is not None:
                mirror.remove(task, nd.index)

        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))
        ssn.register(cb.PRE_PREDICATE, NAME, self.pre_predicate)
        ssn.register(cb.PREDICATE, NAME, self.predicate, self.predicate_batch)
        ssn.table.row_local[NAME] = self.row_local_key
        ssn.register(cb.SIMULATE_ADD_TASK, NAME, self.simulate_add_task)
        ssn.register(cb.SIMULATE_REMOVE_TASK, NAME, self.simulate_remove_task)
        ssn.register(cb.SIMULATE_PREDICATE, NAME, self.simulate_predicate)

    def on_session_close(self, ssn: Session) -> None:
        self._ipa.clear()
        self._spread.clear()
        self._stable.clear()
        self._templates.clear()

    def row_local_key(self, task: TaskInfo) -> Hashable | None:
        """What the filters read from `task` when each node's verdict depends on that node alone.

        The node-local filters (pod count, stable filters, host ports) qualify; InterPodAffinity
        and PodTopologySpread read counts over other nodes, and the template cache (predicate
        cache) depends on which nodes earlier pods examined: a task using any of them gets None.
        The skip sets are read as PrePredicate left them (it runs before the search).
        """
        sw = self.switches
        if sw.pod_affinity and task.uid not in self._ipa_skipped:
            return None
        if sw.topology_spread and task.uid not in self._spread_skipped:
            return None
        pod = task.pod
        if sw.cache and pod.annotations.get(TEMPLATE_UID_KEY, ""):
            return None
        return (self._signature(pod), pod.host_ports if sw.node_ports else ())

    # ----------------------------------------------------------------- PrePredicate
    def pre_predicate(self, task: TaskInfo) -> Exception | None:
        """PreFilters in Volcano's order: NodeAffinity, NodePorts, InterPodAffinity."""
        if self.switches.node_affinity and node_names_conflict(task.pod.affinity):
            return PrePredicateError("NodeAffinity", NODE_AFFINITY_CONFLICT)
        if self.switches.pod_affinity:
            err = self._prefilter_interpod(task)
            if err is not None:
                return err
        if self.switches.topology_spread:
            return self._prefilter_spread(task)
        return None

    def _prefilter_spread(self, task: TaskInfo) -> Exception | None:
        if task.uid in self._spread_skipped:
            return None
        raw = raw_spread_constraints(task.pod)
        try:
            hard = spread_constraints(raw, task.pod.labels, DO_NOT_SCHEDULE) if raw else ()
        except SelectorError as e:
            return PrePredicateError(
                "PodTopologySpread", f"obtaining pod's hard topology spread constraints: {e}"
            )
        if not hard:
            self._spread_skipped.add(task.uid)
            return None
        self._spread[task.uid] = spread_state(self._mirror(), task, hard, self._node_affinity(task.pod))
        self._spread.move_to_end(task.uid)
        if len(self._spread) > SPREAD_STATE_LIMIT:
            self._spread.popitem(last=False)
        return None

    def _spread_state(self, task: TaskInfo) -> SpreadState | None:
        """The task's PodTopologySpread PreFilter state; computed here if PrePredicate was not run."""
        if not self.switches.topology_spread or task.uid in self._spread_skipped:
            return None
        state = self._spread.get(task.uid)
        if state is None:
            self._prefilter_spread(task)
            state = self._spread.get(task.uid)
        return state

    def _prefilter_interpod(self, task: TaskInfo) -> Exception | None:
        if task.uid in self._ipa_skipped:
            return None  # Skip is sticky: the filter stays off, the state is never read
        mirror = self._mirror()
        pa = mirror.pod_affinity(task.namespace, task.pod)
        if pa.error:
            return PrePredicateError("InterPodAffinity", f"parsing pod: {pa.error}")
        if not pa.required_affinity and not pa.required_anti and not mirror.anti_terms:
            self._ipa_skipped.add(task.uid)
            return None
        merged = merge_pod_affinity(pa, self._ns_labels)
        state = interpod_state(mirror, task, merged, self._ns_labels.get(task.namespace))
        if state is None:
            self._ipa_skipped.add(task.uid)
            self._ipa.pop(task.uid, None)
        else:
            self._ipa[task.uid] = state
            self._ipa.move_to_end(task.uid)
            if len(self._ipa) > IPA_STATE_LIMIT:
                self._ipa.popitem(last=False)
        return None

    def _interpod(self, task: TaskInfo) -> InterPodState | None:
        """The task's PreFilter state; computed here if PrePredicate was not run for it."""
        if not self.switches.pod_affinity or task.uid in self._ipa_skipped:
            return None
        state = self._ipa.get(task.uid)
        if state is None:
            self._prefilter_interpod(task)
            state = self._ipa.get(task.uid)
        return state

    # ----------------------------------------------------------------- Simulate* (preemption dry runs)
    def _sim_interpod(self, state: dict[str, Any], task: TaskInfo) -> InterPodState | None:
        """The InterPodAffinity PreFilter state of `task` inside a dry-run cycle state (copied once)."""
        if not self.switches.pod_affinity or task.uid in self._ipa_skipped:
            return None
        held = state.get(SIM_INTERPOD_KEY)
        if held is None:
            base = self._interpod(task)
            if base is None:
                return None
            held = state[SIM_INTERPOD_KEY] = SimInterPod(copy_interpod(base))
        assert isinstance(held, SimInterPod)
        return held.state

    def _sim_update(
        self, state: dict[str, Any], task: TaskInfo, other: TaskInfo, node: NodeInfo, sign: int
    ) -> None:
        ipa = self._sim_interpod(state, task)
        if ipa is None:
            return
        mirror = self._mirror()
        other_pa = mirror.pod_affinity(other.namespace, other.pod)
        update_interpod(
            ipa, other, other_pa, node.facts.labels, self._ns_labels.get(task.namespace), task, sign
        )

    def simulate_add_task(
        self, state: dict[str, Any], task: TaskInfo, other: TaskInfo, node: NodeInfo
    ) -> None:
        """SimulateAddTaskFn: InterPodAffinity.AddPod on the dry-run state (other filters unchanged)."""
        self._sim_update(state, task, other, node, 1)

    def simulate_remove_task(
        self, state: dict[str, Any], task: TaskInfo, other: TaskInfo, node: NodeInfo
    ) -> None:
        """SimulateRemoveTaskFn: InterPodAffinity.RemovePod on the dry-run state."""
        self._sim_update(state, task, other, node, -1)

    def simulate_predicate(self, state: dict[str, Any], task: TaskInfo, node: NodeInfo) -> FitError | None:
        """SimulatePredicateFn: only the InterPodAffinity filter, on the dry-run counts (as Volcano)."""
        ipa = self._sim_interpod(state, task)
        if ipa is None:
            return None
        code = interpod_filter(ipa, node.facts.labels)
        if code:
            return FitError(task.namespace, task.name, node.name, [IPA_REASONS[code]])
        return None

    # ----------------------------------------------------------------- stable filters
    def _mirror(self) -> NodeMirror:
        assert self.mirror is not None, "predicates: session not open"
        return self.mirror

    def _signature(self, pod: PodFacts) -> tuple[Any, ...]:
        hit = self._sig_by_pod.get(id(pod))
        if hit is None or hit[0] is not pod:
            hit = (pod, stable_signature(pod))
            self._sig_by_pod[id(pod)] = hit
        return hit[1]

    def _node_affinity(self, pod: PodFacts) -> RequiredNodeAffinity:
        key = self._signature(pod)
        aff = self._affinity_by_sig.get(key)
        if aff is None:
            aff = required_node_affinity(pod.node_selector, pod.affinity)
            self._affinity_by_sig[key] = aff
            if len(self._affinity_by_sig) > SIGNATURE_CACHE_SIZE:
                self._affinity_by_sig.popitem(last=False)
        return aff

    def stable_codes(self, pod: PodFacts) -> Int8Array:
        """Stable-filter outcome for every node of the session (cached per pod signature)."""
        key = self._signature(pod)
        codes = self._stable.get(key)
        if codes is not None:
            self._stable.move_to_end(key)
            return codes
        m = self._mirror()
        codes = np.zeros(m.n, dtype=np.int8)
        if m.any_unschedulable and not tolerates_unschedulable(pod.tolerations):
            codes[m.unschedulable] = STABLE_UNSCHEDULABLE
        if self.switches.node_affinity:
            aff = self._node_affinity(pod)
            if not aff.trivial:
                codes[(codes == 0) & ~m.labels.required_node_affinity(aff)] = STABLE_NODE_AFFINITY
        if self.switches.taint_toleration:
            bad = np.fromiter(
                (find_untolerated_taint(ts, pod.tolerations) is not None for ts in m.taint_sets),
                dtype=np.bool_,
                count=len(m.taint_sets),
            )
            if bad.any():
                codes[(codes == 0) & bad[m.taint_gid]] = STABLE_TAINT
        self._stable[key] = codes
        if len(self._stable) > SIGNATURE_CACHE_SIZE:
            self._stable.popitem(last=False)
        return codes

    def _template(self, task: TaskInfo) -> TemplateCache | None:
        if not self.switches.cache:
            return None
        uid = task.pod.annotations.get(TEMPLATE_UID_KEY, "")
        if not uid:
            return None
        tc = self._templates.get(uid)
        if tc is None:
            n = self._mirror().n
            tc = TemplateCache(np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_))
            self._templates[uid] = tc
        return tc

    # ----------------------------------------------------------------- Predicate (one node)
    def predicate(self, task: TaskInfo, node: NodeInfo) -> FitError | None:
        m = self._mirror()
        row = node.index
        statuses: list[tuple[Code, str]] = []
        if node.max_task_num <= int(m.count[row]):
            statuses.append((Code.UNSCHEDULABLE, NODE_POD_NUMBER_EXCEEDED))
        tc = self._template(task)
        if tc is not None and tc.seen[row]:
            stable = 0 if tc.fit[row] else STABLE_CACHED
        else:
            stable = stable_code(self.switches, task.pod, self._node_affinity(task.pod), node)
            if tc is not None:
                tc.seen[row] = True
                tc.fit[row] = stable == 0
        if stable:
            statuses.append(STABLE_REASONS[stable])
            return FitError(task.namespace, task.name, node.name, statuses)
        if self.switches.node_ports and task.pod.host_ports:
            used = m.ports.get(row)
            if used and any(port_conflict(used, p.ip, p.protocol, p.port) for p in task.pod.host_ports):
                statuses.append((Code.UNSCHEDULABLE, REASON_PORTS))
        state = self._interpod(task)
        if state is not None:
            code = interpod_filter(state, node.facts.labels)
            if code:
                statuses.append(IPA_REASONS[code])
                if code == IPA_AFFINITY:
                    return FitError(task.namespace, task.name, node.name, statuses)
        spread = self._spread_state(task)
        if spread is not None:
            code = spread_filter(spread, m.labels, node.facts.labels)
            if code:
                statuses.append(SPREAD_REASONS[code])
        if statuses:
            return FitError(task.namespace, task.name, node.name, statuses)
        return None

    # ----------------------------------------------------------------- Predicate (vectorised)
    def predicate_batch(
        self, task: TaskInfo, rows: IntArray
    ) -> tuple[BoolArray, list[tuple[str, BoolArray]], BoolArray | None]:
        """The same verdicts and reasons as `predicate`, for many node rows at once."""
        m = self._mirror()
        ssn = self.ssn
        assert ssn is not None
        n = len(rows)
        ok = np.ones(n, dtype=np.bool_)
        reasons: list[tuple[str, BoolArray]] = []
        if n == 0:
            return ok, reasons, None
        unresolvable = np.zeros(n, dtype=np.bool_)
        too_many = ssn.table.max_pods[rows] <= m.count[rows]
        if too_many.any():
            ok &= ~too_many
            reasons.append((NODE_POD_NUMBER_EXCEEDED, too_many))
        codes = self._stable_rows(task, rows)
        stable_fail = codes != 0
        if stable_fail.any():
            ok &= ~stable_fail
            for code, (status, text) in STABLE_REASONS.items():
                mask = codes == code
                if mask.any():
                    reasons.append((text, mask))
                    if status is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        unresolvable |= mask
        live = ~stable_fail
        out = (ok, reasons, unresolvable)
        if self.switches.node_ports and task.pod.host_ports:
            clash = live & m.port_conflict_rows(task.pod.host_ports)[rows]
            if clash.any():
                ok &= ~clash
                reasons.append((REASON_PORTS, clash))
        state = self._interpod(task)
        if state is not None and live.any():
            idx = np.flatnonzero(live)
            live &= self._apply(interpod_filter_rows(state, m.labels, rows[idx]), idx, IPA_REASONS, out)
        spread = self._spread_state(task)
        if spread is not None and live.any():
            idx = np.flatnonzero(live)
            self._apply(spread_filter_rows(spread, m.labels, rows[idx]), idx, SPREAD_REASONS, out)
        return ok, reasons, (unresolvable if unresolvable.any() else None)

    @staticmethod
    def _apply(
        sub: Int8Array,
        idx: IntArray,
        table: dict[int, tuple[Code, str]],
        out: tuple[BoolArray, list[tuple[str, BoolArray]], BoolArray],
    ) -> BoolArray:
        """Fold a filter's per-row codes into (ok, reasons, unresolvable); returns rows still live."""
        ok, reasons, unresolvable = out
        still = np.ones(len(ok), dtype=np.bool_)
        for code, (status, text) in table.items():
            hit = sub == code
            if hit.any():
                mask = np.zeros(len(ok), dtype=np.bool_)
                mask[idx[hit]] = True
                ok &= ~mask
                reasons.append((text, mask))
                if status is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    unresolvable |= mask
                    still &= ~mask
        return still

    def _stable_rows(self, task: TaskInfo, rows: IntArray) -> Int8Array:
        full = self.stable_codes(task.pod)
        tc = self._template(task)
        if tc is None:
            codes: Int8Array = full[rows]
            return codes
        seen = tc.seen[rows]
        codes = full[rows].copy()
        codes[seen] = np.where(tc.fit[rows[seen]], 0, STABLE_CACHED)
        fresh = rows[~seen]
        tc.seen[fresh] = True
        tc.fit[fresh] = full[fresh] == 0
        return codes


# =============================================================================================
# pod topology spread (DoNotSchedule constraints)


@dataclass(slots=True)
class SpreadState:
    """PodTopologySpread preFilterState: per constraint, matching pods per domain (by label code)."""

    constraints: tuple[SpreadConstraint, ...]
    match: list[IntArray]  # per constraint: label code -> matching pods (extra trailing slot 0)
    min_match: list[int]
    self_match: list[int]


def spread_state(
    mirror: NodeMirror, task: TaskInfo, constraints: tuple[SpreadConstraint, ...], aff: RequiredNodeAffinity
) -> SpreadState:
    """calPreFilterState over every node of the snapshot."""
    affinity_ok = mirror.labels.required_node_affinity(aff)
    honor_taints = any(c.honor_node_taints for c in constraints)
    untolerated = mirror.untolerated_rows(task.pod.tolerations) if honor_taints else None
    match: list[IntArray] = []
    min_match: list[int] = []
    for c in constraints:
        included = mirror.spread_included(constraints, c, affinity_ok, untolerated)
        codes, vocab = mirror.labels.column(c.topology_key)
        counts = mirror.spread_row_counts(task.namespace, c)
        size = len(vocab) + 1
        sel = codes[included]
        per_code = np.bincount(sel, weights=counts[included], minlength=size).astype(np.int64)
        domains = np.bincount(sel, minlength=size) > 0
        lowest = int(per_code[domains].min()) if domains.any() else MAX_INT32
        if int(domains.sum()) < c.min_domains:
            lowest = 0
        match.append(per_code)
        min_match.append(lowest)
    self_match = [1 if c.selector.matches(task.pod.labels) else 0 for c in constraints]
    return SpreadState(constraints, match, min_match, self_match)


def spread_filter(state: SpreadState, table: NodeLabelTable, labels: Mapping[str, str]) -> int:
    """PodTopologySpread.Filter on one node: 0 or the SPREAD_* code of the first failing constraint."""
    for i, c in enumerate(state.constraints):
        v = labels.get(c.topology_key)
        if v is None:
            return SPREAD_MISSING_LABEL
        code = table.column(c.topology_key)[1].get(v, -1)
        matched = int(state.match[i][code]) if code >= 0 else 0
        if matched + state.self_match[i] - state.min_match[i] > c.max_skew:
            return SPREAD_SKEW
    return 0


def spread_filter_rows(state: SpreadState, table: NodeLabelTable, rows: IntArray) -> Int8Array:
    codes = np.zeros(len(rows), dtype=np.int8)
    for i, c in enumerate(state.constraints):
        col = table.column(c.topology_key)[0][rows]
        missing = col < 0
        skew = state.match[i][col] + state.self_match[i] - state.min_match[i]
        codes[(codes == 0) & missing] = SPREAD_MISSING_LABEL
        codes[(codes == 0) & ~missing & (skew > c.max_skew)] = SPREAD_SKEW
    return codes


def new(arguments: dict[str, Any]) -> PredicatesPlugin:
    return PredicatesPlugin(arguments)
