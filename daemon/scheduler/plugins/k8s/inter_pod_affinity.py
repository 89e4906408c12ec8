"""The InterPodAffinity filter: PreFilter state, Filter (one node and vectorised), Simulate* updates.

Pod affinity mismatch is UnschedulableAndUnresolvable; anti-affinity and existing pods'
anti-affinity are Unschedulable.  The Simulate* hooks (topology-aware preemption) update a copy
of the preemptor's PreFilter counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fumarole.daemon.scheduler.framework.nodetable import Int8Array, IntArray
from fumarole.daemon.scheduler.model.fit import Code
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.k8s.node_label_table import NodeLabelTable
from fumarole.daemon.scheduler.plugins.k8s.node_mirror import NodeMirror, PairCounts, bump_pair, merge_pairs
from fumarole.daemon.scheduler.plugins.k8s.pod_affinity_terms import PodAffinity, matches_all_terms

REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
# Inter-pod affinity outcome codes; 0 passes.
IPA_AFFINITY = 1
IPA_ANTI_AFFINITY = 2
IPA_EXISTING_ANTI = 3
IPA_REASONS: dict[int, tuple[Code, str]] = {
    IPA_AFFINITY: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_POD_AFFINITY),
    IPA_ANTI_AFFINITY: (Code.UNSCHEDULABLE, REASON_POD_ANTI_AFFINITY),
    IPA_EXISTING_ANTI: (Code.UNSCHEDULABLE, REASON_EXISTING_ANTI_AFFINITY),
}


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
            bump_pair(counts, (key, v), sign)

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
