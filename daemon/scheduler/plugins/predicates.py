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

The Kubernetes filter plugins' own rules live in plugins/k8s/, one module per filter plugin
(node_affinity, taint_toleration, node_ports, inter_pod_affinity, pod_topology_spread) beside
the helpers they share (labels, pod_affinity_terms, spread_constraints, node_label_table);
`k8s/node_mirror.py` is Volcano's per-session Kubernetes NodeInfo snapshot, which this plugin
keeps in step from its allocate/deallocate event handlers.  This module holds the plugin: the
order of the filters, the stable-filter and equivalence caches, and the PreFilter states per task.

Arguments (Volcano names): `predicate.NodeAffinityEnable`, `predicate.NodePortsEnable`,
`predicate.TaintTolerationEnable`, `predicate.PodAffinityEnable`,
`predicate.PodTopologySpreadEnable` (default true) switch the filters; `predicate.CacheEnable`
(default false, as in Volcano) turns on the equivalence cache of stable filter results keyed by
node and pod annotation `volcano.sh/template-uid` (a cached failure reads `plugin equivalence
cache predicates failed`, code Error).  `predicate.NodeVolumeLimitsEnable`,
`predicate.VolumeZoneEnable`, `predicate.VolumeBindingEnable` and
`predicate.DynamicResourceAllocationEnable` are accepted but their filters have nothing to
check: the model has no volumes or resource claims.  Pods without explicit spread constraints
only get ScheduleAnyway system defaults, which never filter.  Device sharing and PreBind are not
implemented.

Reserve, and a Volcano quirk kept: Volcano's allocate event handler runs the Reserve plugins
(VolumeBinding, DynamicResources — both on by default) before it adds the pod to the session's
Kubernetes NodeInfo snapshot, and returns early when Reserve fails.  Reserve fails for a pod
whose PreFilter state this session never wrote: a Running victim put back when a preempt or
reclaim Statement is discarded (`Statement.unevict`).  Its eviction had removed it from the
snapshot, so for the rest of the session that node looks emptier to everything reading the
snapshot (nodeorder's resource scores, pod counts, ports, pod (anti-)affinity, topology spread),
while Volcano's own resource accounting has it back.  Fumarole does the same: the mirror takes
back only tasks whose PrePredicate passed in this session (when VolumeBinding or
DynamicResources is enabled).  Found with a random differential against Volcano's code: 6 of
2,381 cases differed until this was modelled.  `fumarole.scoreRestoredVictims: true` (not a
Volcano argument) puts restored victims back in the snapshot instead.

The Simulate* hooks (topology-aware preemption) follow Volcano: only
InterPodAffinity is simulated (AddPod/RemovePod update a copy of the preemptor's PreFilter
counts; SimulatePredicate runs just that filter).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_bool
from fumarole.daemon.scheduler.framework.nodetable import BoolArray, Int8Array, IntArray
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.fit import NODE_POD_NUMBER_EXCEEDED, Code, FitError
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo
from fumarole.daemon.scheduler.plugins.k8s.inter_pod_affinity import (
    IPA_AFFINITY,
    IPA_REASONS,
    SIM_INTERPOD_KEY,
    InterPodState,
    SimInterPod,
    copy_interpod,
    interpod_filter,
    interpod_filter_rows,
    interpod_state,
    update_interpod,
)
from fumarole.daemon.scheduler.plugins.k8s.labels import SelectorError
from fumarole.daemon.scheduler.plugins.k8s.node_affinity import (
    RequiredNodeAffinity,
    node_names_conflict,
    required_node_affinity,
    required_node_selector_raw,
)
from fumarole.daemon.scheduler.plugins.k8s.node_mirror import NodeMirror, namespace_labels, node_mirror
from fumarole.daemon.scheduler.plugins.k8s.node_ports import port_conflict
from fumarole.daemon.scheduler.plugins.k8s.pod_affinity_terms import merge_pod_affinity
from fumarole.daemon.scheduler.plugins.k8s.pod_topology_spread import (
    SPREAD_REASONS,
    SpreadState,
    spread_filter,
    spread_filter_rows,
    spread_state,
)
from fumarole.daemon.scheduler.plugins.k8s.spread_constraints import (
    DO_NOT_SCHEDULE,
    raw_spread_constraints,
    spread_constraints,
)
from fumarole.daemon.scheduler.plugins.k8s.taint_toleration import (
    find_untolerated_taint,
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
SCORE_RESTORED_VICTIMS = "fumarole.scoreRestoredVictims"

TEMPLATE_UID_KEY = "volcano.sh/template-uid"

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TAINT = "node(s) had untolerated taint(s)"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
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
SIGNATURE_CACHE_SIZE = 1024
IPA_STATE_LIMIT = 4096
SPREAD_STATE_LIMIT = 256


class PrePredicateError(Exception):
    """A PreFilter that failed: `plugin <name> pre-predicates failed <message>`."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"plugin {plugin} pre-predicates failed {message}")
        self.plugin = plugin


@dataclass(slots=True)
class PredicateSwitches:
    node_affinity: bool = True
    node_ports: bool = True
    taint_toleration: bool = True
    pod_affinity: bool = True
    topology_spread: bool = True
    cache: bool = False
    reserve: bool = True  # a Reserve plugin runs (VolumeBinding or DynamicResources)
    score_restored_victims: bool = False  # Fumarole's option: undo Volcano's restored-victim quirk


def switches_from(arguments: dict[str, Any]) -> PredicateSwitches:
    return PredicateSwitches(
        node_affinity=arg_bool(arguments, NODE_AFFINITY_ENABLE, True),
        node_ports=arg_bool(arguments, NODE_PORTS_ENABLE, True),
        taint_toleration=arg_bool(arguments, TAINT_TOLERATION_ENABLE, True),
        pod_affinity=arg_bool(arguments, POD_AFFINITY_ENABLE, True),
        topology_spread=arg_bool(arguments, POD_TOPOLOGY_SPREAD_ENABLE, True),
        cache=arg_bool(arguments, CACHE_ENABLE, False),
        reserve=arg_bool(arguments, VOLUME_BINDING_ENABLE, True) or arg_bool(arguments, DRA_ENABLE, True),
        score_restored_victims=arg_bool(arguments, SCORE_RESTORED_VICTIMS, False),
    )


def stable_signature(pod: PodFacts) -> tuple[Any, ...]:
    """What the stable filters read from a pod: nodeSelector, required node affinity, tolerations."""
    if not pod.affinity and not pod.node_selector:  # the common pod: nothing to normalise
        return ((), None, pod.tolerations)
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
        self._prefiltered: set[str] = set()  # tasks whose PreFilter state this session wrote

    # ----------------------------------------------------------------- session hooks
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        mirror = node_mirror(ssn)
        self.mirror = mirror
        self._ns_labels = namespace_labels(ssn)
        nodes = ssn.nodes

        self._prefiltered = set()
        takes_back = self.reserve_succeeds

        def on_allocate(task: TaskInfo) -> None:
            nd = nodes.get(task.node_name)
            if nd is not None and takes_back(task):
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

    def reserve_succeeds(self, task: TaskInfo) -> bool:
        """Whether Volcano's Reserve plugins accept `task`, so its allocation reaches the snapshot.

        VolumeBinding's (and DynamicResources') Reserve reads the state their PreFilter wrote for
        the task in this session; without it Reserve fails and the allocate handler returns before
        NodeInfo.AddPodInfo.
        """
        return self.switches.score_restored_victims or self.volcano_reserve_succeeds(task)

    def volcano_reserve_succeeds(self, task: TaskInfo) -> bool:
        """Whether Volcano's Reserve step passes for `task`, whatever `fumarole.scoreRestoredVictims`
        says: the allocate handler goes on to the device allocation (deviceshare) only then."""
        return not self.switches.reserve or task.uid in self._prefiltered

    def on_session_close(self, ssn: Session) -> None:
        self._prefiltered.clear()
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
        """PreFilters in Volcano's order: NodeAffinity, NodePorts, InterPodAffinity,
        PodTopologySpread, then VolumeBinding and DynamicResources, whose state Reserve needs."""
        affinity = task.pod.affinity
        if self.switches.node_affinity and affinity and node_names_conflict(affinity):
            return PrePredicateError("NodeAffinity", NODE_AFFINITY_CONFLICT)
        if self.switches.pod_affinity:
            err = self._prefilter_interpod(task)
            if err is not None:
                return err
        if self.switches.topology_spread:
            err = self._prefilter_spread(task)
            if err is not None:
                return err
        self._prefiltered.add(task.uid)
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
            idx = live.nonzero()[0]
            live &= self._apply(interpod_filter_rows(state, m.labels, rows[idx]), idx, IPA_REASONS, out)
        spread = self._spread_state(task)
        if spread is not None and live.any():
            idx = live.nonzero()[0]
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


def new(arguments: dict[str, Any]) -> PredicatesPlugin:
    return PredicatesPlugin(arguments)
