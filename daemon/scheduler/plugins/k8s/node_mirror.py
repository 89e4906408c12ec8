"""`NodeMirror`: Volcano's Kubernetes NodeInfo snapshot for one session (`ssn.NodeMap`).

Volcano keeps it per session and updates it from its allocate and deallocate event handlers
(pipeline and evict included): pod count, requested resources, host ports and inter-pod affinity
indexes per node.  The predicates plugin keeps it in step; the nodeorder plugin reads it.  As in
Volcano, the lists of nodes holding pods with (required anti-)affinity are taken at session open:
existing pods' anti-affinity is only looked for on nodes that held such a pod when the session
opened.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework.nodetable import BoolArray, IntArray
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.node import NodeFacts, NodeInfo
from fumarole.daemon.scheduler.model.node_derived import DerivedView
from fumarole.daemon.scheduler.model.task import HostPort, PodFacts, Taint, TaskInfo, Toleration
from fumarole.daemon.scheduler.plugins.k8s.labels import NOTHING, OP_EQUALS, OP_IN
from fumarole.daemon.scheduler.plugins.k8s.node_label_table import NodeLabelTable
from fumarole.daemon.scheduler.plugins.k8s.node_ports import (
    DEFAULT_BIND_ALL_HOST_IP,
    UsedPorts,
    sanitize_port,
)
from fumarole.daemon.scheduler.plugins.k8s.pod_affinity_terms import (
    NO_POD_AFFINITY,
    AffinityTerm,
    PodAffinity,
    parse_pod_affinity,
)
from fumarole.daemon.scheduler.plugins.k8s.spread_constraints import SpreadConstraint
from fumarole.daemon.scheduler.plugins.k8s.taint_toleration import find_untolerated_taint

GPU = "nvidia.com/gpu"
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
WATCH_LIMIT = 512
ROW_WATCH_LIMIT = 128
MIRROR_KEY = "node_mirror"
_NO_PODS: dict[str, TaskInfo] = {}  # never written: `add` replaces it by a row's own dict
Pair = tuple[str, str]
PairCounts = dict[Pair, int]
PortTriple = tuple[str, str, int]


def _index_set(index: dict[Any, set[str]], key: Any, uid: str, add: bool) -> None:
    if add:
        index.setdefault(key, set()).add(uid)
        return
    s = index.get(key)
    if s is not None:
        s.discard(uid)
        if not s:
            del index[key]


def bump_pair(counts: PairCounts, pair: Pair, delta: int) -> None:
    """topologyToMatchedTermCount.update: add, and drop a pair that reaches zero."""
    v = counts.get(pair, 0) + delta
    if v:
        counts[pair] = v
    else:
        counts.pop(pair, None)


def _add_count(counts: dict[Any, PairCounts], key: Any, pair: Pair, delta: int) -> None:
    c = counts.setdefault(key, {})
    bump_pair(c, pair, delta)
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


@dataclass(slots=True)
class _Static:
    """What the mirror reads of the nodes' facts (names, labels, unschedulable, taints)."""

    facts: list[NodeFacts]
    node_names: list[str]
    node_labels: list[Mapping[str, str]]
    labels: NodeLabelTable
    unschedulable: BoolArray
    any_unschedulable: bool
    taint_gid: IntArray
    taint_sets: list[tuple[Taint, ...]]


def _static_of(nodes: list[NodeInfo]) -> _Static:
    node_names = [nd.name for nd in nodes]
    node_labels: list[Mapping[str, str]] = [nd.facts.labels for nd in nodes]
    unschedulable = np.fromiter((nd.facts.unschedulable for nd in nodes), dtype=np.bool_, count=len(nodes))
    group_of: dict[tuple[Taint, ...], int] = {}
    taint_gid = np.fromiter(
        (group_of.setdefault(nd.facts.taints, len(group_of)) for nd in nodes),
        dtype=np.int64,
        count=len(nodes),
    )
    return _Static(
        [nd.facts for nd in nodes],
        node_names,
        node_labels,
        NodeLabelTable(node_labels, node_names),
        unschedulable,
        bool(unschedulable.any()),
        taint_gid,
        list(group_of),
    )


def _row_sums(pods: Mapping[str, TaskInfo]) -> tuple[tuple[int, int, int, int, int, int], bool]:
    """A row's (pods, cpu, memory, gpu, non-zero cpu, non-zero memory) and whether one of its pods
    has host ports or pod (anti-)affinity (registered one by one at every open)."""
    cpu = mem = gpu = nz_cpu = nz_mem = 0
    special = False
    for t in pods.values():
        r = t.resreq
        c = round(r.cpu)
        m = round(r.memory)
        cpu += c
        mem += m
        if r.scalars:
            gpu += round(r.scalars.get(GPU, 0))
        nz_cpu += c or DEFAULT_MILLI_CPU_REQUEST
        nz_mem += m or DEFAULT_MEMORY_REQUEST
        pod = t.pod
        aff = pod.affinity
        if pod.host_ports or (aff and ("podAffinity" in aff or "podAntiAffinity" in aff)):
            special = True
    return (len(pods), cpu, mem, gpu, nz_cpu, nz_mem), special


@dataclass(slots=True)
class _Kept:
    """The mirror's state at open derived from the snapshot's nodes, kept across sessions
    (`NodeDerived`): facts, per-row pod sums, rows with pods, rows with special pods."""

    static: _Static
    sums: IntArray  # (6, rows)
    occupied: list[int]
    special: list[int]


def _kept_at_open(nodes: list[NodeInfo], derived: DerivedView | None) -> _Kept:
    """The previous session's state patched at the rows whose node changed, or built whole."""
    prev: _Kept | None = derived.current(MIRROR_KEY) if derived is not None else None
    if prev is None:
        sums = np.zeros((6, len(nodes)), dtype=np.int64)
        occupied: list[int] = []
        special: list[int] = []
        for row, nd in enumerate(nodes):
            if not nd.peek_tasks():
                continue
            occupied.append(row)
            values, odd = _row_sums(nd.peek_tasks())
            sums[:, row] = values
            if odd:
                special.append(row)
        kept = _Kept(_static_of(nodes), sums, occupied, special)
    else:
        assert derived is not None and derived.changed is not None
        kept = prev
        changed = derived.changed
        facts = kept.static.facts
        if any(nodes[row].facts is not facts[row] for row in changed):
            kept.static = _static_of(nodes)
        if changed:
            occ = set(kept.occupied)
            spec = set(kept.special)
            for row in changed:
                tasks = nodes[row].peek_tasks()
                values, odd = _row_sums(tasks)
                kept.sums[:, row] = values
                (occ.add if tasks else occ.discard)(row)
                (spec.add if odd else spec.discard)(row)
            kept.occupied = sorted(occ)
            kept.special = sorted(spec)
    if derived is not None:
        derived.keep(MIRROR_KEY, kept)
    return kept


class NodeMirror:
    """Volcano's k8s NodeInfo snapshot (`ssn.NodeMap`) for one session, with static node facts.

    Static: node labels (`NodeLabelTable`), unschedulable flags, taint sets.  Dynamic, updated by
    `add`/`remove` (the predicates plugin's event handlers): pods per node (the TaskInfo given at
    add time), pod count, requested and non-zero-requested cpu/memory, requested GPUs, host
    ports, existing pods' inter-pod affinity terms counted per topology pair, and "watches":
    per incoming term tuple, the topology pairs of the pods matching all of its terms, computed at
    first use and then kept in step, so that PreFilter / PreScore cost O(pairs), not O(pods).
    """

    def __init__(
        self, nodes: list[NodeInfo], stamp: IntArray | None = None, derived: DerivedView | None = None
    ) -> None:
        n = self.n = len(nodes)
        # Per-row change stamps, bumped on every add/remove (the session's NodeTable.version, so
        # per-row memos see mirror changes as row changes).
        self.stamp: IntArray = np.zeros(n, dtype=np.int64) if stamp is None else stamp
        kept = _kept_at_open(nodes, derived)
        static = kept.static
        self.node_names = static.node_names
        self.node_labels: list[Mapping[str, str]] = static.node_labels
        self.labels = static.labels
        self.unschedulable: BoolArray = static.unschedulable
        self.any_unschedulable = static.any_unschedulable
        self.taint_gid: IntArray = static.taint_gid
        self.taint_sets: list[tuple[Taint, ...]] = static.taint_sets
        # A row reads its node's task dict while that is still the snapshot's, which nothing
        # changes during the session (`NodeInfo.frozen_tasks`; rows without pods share one empty
        # dict), until `add` or `remove` gives the row its own copy (`_own_rows`): opening a
        # session's mirror costs no per-pod work.  A node with its own dict is copied now.
        self.pods: list[Mapping[str, TaskInfo]] = [_NO_PODS] * n
        self._own_rows: set[int] = set()
        for row in kept.occupied:
            node = nodes[row]
            frozen = node.frozen_tasks()
            if frozen is None:
                self.pods[row] = dict(node.peek_tasks())
                self._own_rows.add(row)
            else:
                self.pods[row] = frozen
        # Pod uid -> row, built at first use (`rows_of`) and then kept in step by add/remove.
        self._row_of: dict[str, int] | None = None
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
        affinity_rows = np.zeros(n, dtype=np.bool_)
        anti_rows = np.zeros(n, dtype=np.bool_)
        affinity_at: list[tuple[int, PodAffinity]] = []
        # Rows holding a pod with host ports or pod (anti-)affinity register those pods one by one.
        for row in kept.special:
            for uid, t in self.pods[row].items():
                pod = t.pod
                if pod.host_ports:
                    self._add_ports(uid, row, pod)
                aff = pod.affinity
                if not aff or ("podAffinity" not in aff and "podAntiAffinity" not in aff):
                    continue
                pa = self.pod_affinity(t.namespace, pod)
                if pa.with_affinity:
                    self.affinity_of[uid] = pa
                    affinity_at.append((row, pa))
                    affinity_rows[row] = True
                    anti_rows[row] |= pa.with_required_anti
        self.count, self.req_cpu, self.req_memory, self.req_gpu, self.nz_cpu, self.nz_memory = (
            kept.sums.copy()
        )
        # HavePodsWithAffinityList / HavePodsWithRequiredAntiAffinityList, frozen at session open.
        self.affinity_rows_at_open: BoolArray = affinity_rows
        self.anti_rows_at_open: BoolArray = anti_rows
        for row, pa in affinity_at:
            self._count_terms(row, pa, 1)

    def rows_of(self) -> dict[str, int]:
        """Pod uid -> row of every pod in the mirror (built at first use, then kept in step)."""
        row_of = self._row_of
        if row_of is None:
            row_of = self._row_of = {}
            for row, pods in enumerate(self.pods):
                if pods:
                    row_of.update(dict.fromkeys(pods, row))
        return row_of

    def _own(self, row: int) -> dict[str, TaskInfo]:
        """The row's pods as a dict of its own (copied from the node's at the first change)."""
        pods = self.pods[row]
        if row not in self._own_rows:
            pods = self.pods[row] = dict(pods)
            self._own_rows.add(row)
        assert isinstance(pods, dict)
        return pods

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
        self._own(row)[uid] = task
        if self._row_of is not None:
            self._row_of[uid] = row
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
        if task.uid not in self.pods[row]:
            return
        held = self._own(row).pop(task.uid)
        uid = held.uid
        if self._row_of is not None:
            self._row_of.pop(uid, None)
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
        return self.pods[self.rows_of()[uid]][uid]

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
        row_of = self.rows_of()
        for t in self.candidates(key[0]):
            if all(r.matches(t.namespace, t.pod.labels, None) for r in rest):
                row = row_of[t.uid]
                for term in key:
                    pair = self.topology_pair(row, term.topology_key)
                    if pair is not None:
                        bump_pair(counts, pair, 1)
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
        row_of = self.rows_of()
        rows = [row_of[t.uid] for t in self.candidates(term) if not t.pod.deleting]
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
                            bump_pair(counts, pair, sign)
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
        # What earlier sessions derived is for nodes as the snapshot has them: only before actions.
        m = NodeMirror(ssn.node_list, ssn.table.version, None if ssn.current_action else ssn.derived)
        _MIRRORS[ssn] = m
    return m


def namespace_labels(ssn: Session) -> dict[str, Mapping[str, str]]:
    return {name: ns.labels for name, ns in ssn.namespaces.items()}
