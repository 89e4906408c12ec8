"""The numa-aware plugin (plugins/numaaware): NUMA-aligned CPU assignment for Guaranteed pods.

* Node state at session open: for each node with a Numatopology, its allocatable CPU set per
  resource (`numares`), less the CPUs of pods bound earlier with an assignment that the
  Numatopology does not list yet (Volcano's NodeInfo.UnassignedNumaPods; here carried on the
  pod as the `fumarole.io/numa-cpus` annotation — and, as in Volcano, while any such pod is
  unlisted every such pod's CPUs stay taken).
* Predicate, for Guaranteed pods only.  A pod whose `volcano.sh/numa-topology-policy` names a
  policy (not "" nor "none") needs a Numatopology ("numa info is empty"), CPUManagerPolicy
  static ("cpu manager policy isn't static"), the same TopologyManagerPolicy ("task topology
  policy[p] is different with node[q]") and free CPUs ("cpu allocatable map is empty") — each an
  Error-code fit error.  Any other Guaranteed pod is checked only on nodes with a Numatopology,
  static CPU manager and a topology policy other than none/"" (elsewhere it passes unchecked).
  Checked pods get per container the CPU manager's hints merged by the node's policy
  (numa_policy.py); a refused container fails the node UnschedulableAndUnresolvable "container
  <c> cannot be assigned by numa"; admitted ones are assigned CPUs (numa_cpumanager.py), and
  the task's assignment on that node is remembered for the session.
* BatchNodeOrder, for a task with a policy and an assignment: per node the number of NUMA nodes
  its assigned CPUs span (0 where it has none), normalised reversed to 0..100 (fewest best; all
  0 → all 100), × weight (integer arithmetic, as Volcano's NormalizeScore).
* Allocate / deallocate: the node's CPU sets lose / regain the task's assignment on that node.
* Session close: Volcano hands the bound tasks' assignments to its cache; here each such task's
  bind annotations carry `fumarole.io/numa-cpus` (a cpuset string), read back next sessions.

Arguments: `weight` (int, default 1).
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.conf import arg_int
from fumarole.daemon.scheduler.framework.session import EventHandler, Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.numa import (
    CPU_MANAGER_POLICY,
    NUMA_CPUS_ANNOTATION,
    TOPOLOGY_MANAGER_POLICY,
    CPUSetError,
    NumaTopology,
    format_cpuset,
    parse_cpuset,
)
from fumarole.daemon.scheduler.model.task import ALLOCATED_STATUSES, TaskInfo
from fumarole.daemon.scheduler.plugins import numa_cpumanager, numa_policy

NAME = "numa-aware"
POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
MAX_NODE_SCORE = 100

ResSets = dict[str, frozenset[int]]


def task_policy(task: TaskInfo) -> str:
    return task.pod.annotations.get(POLICY_ANNOTATION, "")


def normalize_reversed(counts: list[int], max_priority: int = MAX_NODE_SCORE) -> list[int]:
    """util.NormalizeScore(max, reverse=true, scores) on integers."""
    top = max(counts, default=0)
    if top == 0:
        return [max_priority for _ in counts]
    return [max_priority - max_priority * c // top for c in counts]


def numa_count(cpus: frozenset[int], topo: NumaTopology) -> int:
    """getNumaNodeCntForCPUID: distinct NUMA nodes of `cpus` (absent CPUs read as NUMA 0)."""
    details = topo.details()
    return len({details.get(c).numa for c in cpus})


class NumaAware:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.weight = arg_int(arguments, "weight", 1)
        self.topos: dict[str, NumaTopology] = {}
        self.node_sets: dict[str, ResSets] = {}
        # task uid -> node -> assignment (assignRes)
        self.assign: dict[str, dict[str, ResSets]] = {}
        self.bound: dict[str, str] = {}

    # ------------------------------------------------------------------ session
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.topos = {
            n.name: ssn.numatopologies[n.name] for n in ssn.node_list if n.name in ssn.numatopologies
        }
        for node in ssn.node_list:
            topo = self.topos.get(node.name)
            if topo is not None:
                self.node_sets[node.name] = _scheduler_sets(node, topo)
        ssn.register(cb.PREDICATE, NAME, self.predicate)
        ssn.register(cb.BATCH_NODE_ORDER, NAME, self.batch_node_order)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    def on_session_close(self, ssn: Session) -> None:
        return None

    # ------------------------------------------------------------------ events
    def _on_allocate(self, task: TaskInfo) -> None:
        sets = self.assign.get(task.uid, {}).get(task.node_name)
        if sets is None:
            return
        node = self.node_sets.get(task.node_name)
        if node is not None:
            for res, cpus in sets.items():
                if res in node:
                    node[res] = node[res] - cpus
        self.bound[task.uid] = task.node_name
        cpus_text = format_cpuset(sets.get(numa_cpumanager.CPU, frozenset()))
        task.bind_annotations = {**task.bind_annotations, NUMA_CPUS_ANNOTATION: cpus_text}

    def _on_deallocate(self, task: TaskInfo) -> None:
        sets = self.assign.get(task.uid, {}).get(task.node_name)
        if sets is None:
            return
        node = self.node_sets.get(task.node_name)
        if node is not None:
            for res, cpus in sets.items():
                if res in node:
                    node[res] = node[res] | cpus
        self.bound.pop(task.uid, None)
        if NUMA_CPUS_ANNOTATION in task.bind_annotations:
            kept = {k: v for k, v in task.bind_annotations.items() if k != NUMA_CPUS_ANNOTATION}
            task.bind_annotations = kept

    # ------------------------------------------------------------------ predicate
    def _filter(self, task: TaskInfo, node: NodeInfo) -> tuple[bool, str]:
        topo = self.topos.get(node.name)
        policy = task_policy(task)
        if policy not in ("", numa_policy.NONE):
            if topo is None:
                return False, "numa info is empty"
            if topo.policies.get(CPU_MANAGER_POLICY, "") != "static":
                return False, "cpu manager policy isn't static"
            node_policy = topo.policies.get(TOPOLOGY_MANAGER_POLICY, "")
            if policy != node_policy:
                return False, f"task topology policy[{policy}] is different with node[{node_policy}]"
            if node.name not in self.node_sets:
                return False, "no topo information"
            if not self.node_sets[node.name].get(numa_cpumanager.CPU):
                return False, "cpu allocatable map is empty"
            return True, ""
        if topo is None or topo.policies.get(CPU_MANAGER_POLICY, "") != "static":
            return False, ""
        if topo.policies.get(TOPOLOGY_MANAGER_POLICY, "") in ("", numa_policy.NONE):
            return False, ""
        return True, ""

    def predicate(self, task: TaskInfo, node: NodeInfo) -> FitError | None:
        if not task.pod.guaranteed:
            return None
        fit, err = self._filter(task, node)
        if not fit:
            return fit_error(task.namespace, task.name, node.name, Code.ERROR, err) if err else None
        topo = self.topos[node.name]
        details = topo.details()
        sets = dict(self.node_sets[node.name])
        node_policy = topo.policies.get(TOPOLOGY_MANAGER_POLICY, "")
        numa_nodes = details.numa_nodes()
        assigned: ResSets = {}
        for cname, request in task.pod.cpu_containers:
            hints = numa_cpumanager.topology_hints(request, details, topo.reserved_cpu_milli, sets)
            best, admit = numa_policy.predicate(node_policy, numa_nodes, [hints])
            if not admit:
                return fit_error(
                    task.namespace,
                    task.name,
                    node.name,
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    f"container {cname} cannot be assigned by numa",
                )
            got = numa_cpumanager.allocate(request, best, details, topo.reserved_cpu_milli, sets)
            for res, cpus in got.items():
                assigned[res] = assigned.get(res, frozenset()) | cpus
                sets[res] = sets.get(res, frozenset()) - cpus
        self.assign.setdefault(task.uid, {})[node.name] = assigned
        return None

    # ------------------------------------------------------------------ scoring
    def batch_node_order(self, task: TaskInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        if task.uid not in self.assign or task_policy(task) in ("", numa_policy.NONE):
            return {}
        mine = self.assign[task.uid]
        counts = []
        for n in nodes:
            cpus = mine.get(n.name, {}).get(numa_cpumanager.CPU, frozenset())
            topo = self.topos.get(n.name)
            counts.append(numa_count(cpus, topo) if topo is not None else 0)
        scores = normalize_reversed(counts)
        return {n.name: float(s * self.weight) for n, s in zip(nodes, scores, strict=True)}


def _scheduler_sets(node: NodeInfo, topo: NumaTopology) -> ResSets:
    """RefreshNumaSchedulerInfoByCrd + GenerateNodeResNumaSets for one node."""
    sets: ResSets = {res: cpus for res, (cpus, _cap) in sorted(topo.numa_res.items())}
    held: list[frozenset[int]] = []
    unassigned = 0
    for uid in sorted(node.tasks):
        t = node.tasks[uid]
        text = t.bind_annotations.get(NUMA_CPUS_ANNOTATION) or t.pod.annotations.get(NUMA_CPUS_ANNOTATION)
        if text is None or t.status not in ALLOCATED_STATUSES:
            continue
        try:
            held.append(parse_cpuset(text))
        except CPUSetError:
            continue
        if not topo.assigned(t.uid, t.namespace, t.name):
            unassigned += 1
    if unassigned:
        for cpus in held:
            if numa_cpumanager.CPU in sets:
                sets[numa_cpumanager.CPU] = sets[numa_cpumanager.CPU] - cpus
    return sets


def new(arguments: dict[str, Any]) -> NumaAware:
    return NumaAware(arguments)
