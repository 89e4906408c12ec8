"""The PodTopologySpread filter for DoNotSchedule constraints: PreFilter state and Filter.

A missing topology label is UnschedulableAndUnresolvable; too much skew is Unschedulable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fumarole.daemon.scheduler.framework.nodetable import Int8Array, IntArray
from fumarole.daemon.scheduler.model.fit import Code
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.k8s.node_affinity import RequiredNodeAffinity
from fumarole.daemon.scheduler.plugins.k8s.node_label_table import NodeLabelTable
from fumarole.daemon.scheduler.plugins.k8s.node_mirror import NodeMirror
from fumarole.daemon.scheduler.plugins.k8s.spread_constraints import SpreadConstraint

REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = REASON_SPREAD + " (missing required label)"
SPREAD_MISSING_LABEL = 1
SPREAD_SKEW = 2
SPREAD_REASONS: dict[int, tuple[Code, str]] = {
    SPREAD_MISSING_LABEL: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_SPREAD_LABEL),
    SPREAD_SKEW: (Code.UNSCHEDULABLE, REASON_SPREAD),
}
MAX_INT32 = (1 << 31) - 1


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
