"""The session's HyperNode topology and the jobs' network-topology state at session open.

framework/session.go OpenSession: the HyperNodes are resolved against the session's nodes
(model/hypernode.py, the cluster top added); `adjustNetworkTopologySpec` turns a job's
highestTierName into highestTierAllowed (a name no HyperNode has is left as is, with a warning:
the job then has no hard tier) and a soft job into a hard one allowed up to the cluster top's
tier; then, when the topology is ready, each job's allocated HyperNode is recovered from its
placed tasks (`recoverAllocatedHyperNode`: the lowest-tier HyperNode holding every node its
Allocated/Binding/Bound/Running tasks are on).

Fumarole's snapshot carries no memory between sessions, so the allocated HyperNode is always
recovered this way — what Volcano does after a restart; a running Volcano keeps the LCA of the
HyperNodes allocate chose, which can be a higher tier than the tasks' own spread.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from fumarole.daemon.scheduler.model.hypernode import (
    MODE_HARD,
    MODE_SOFT,
    HyperNodeSpec,
    Topology,
    build_topology,
)
from fumarole.daemon.scheduler.model.task import TaskStatus

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.job import JobInfo
    from fumarole.daemon.scheduler.model.node import NodeInfo


class Session(Protocol):
    """What this module reads and writes of the session (framework/session.py)."""

    hypernode_specs: tuple[HyperNodeSpec, ...]
    hypernode_topology: Topology | None
    node_list: list[NodeInfo]
    warnings: list[str]


ALLOCATED_ORDER = (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)


def session_topology(ssn: Session) -> Topology:
    """Build the session's topology (once)."""
    topo = ssn.hypernode_topology
    if topo is None:
        topo = build_topology(ssn.hypernode_specs, [(n.name, n.facts.labels) for n in ssn.node_list])
        ssn.hypernode_topology = topo
        if not topo.ready:
            ssn.warnings.append(
                f"hypernodes are not ready for scheduling ({topo.problem}): jobs with a network "
                "topology are not allocated"
            )
    return topo


def open_network_topologies(ssn: Session, jobs: list[JobInfo]) -> None:
    """adjustNetworkTopologySpec and recoverAllocatedHyperNode for the jobs that have a topology."""
    topo = session_topology(ssn)
    top_tier = topo.top.tier
    for job in jobs:
        nt = job.network_topology
        if nt is None:
            continue
        if nt.highest_tier_allowed is None and nt.highest_tier_name:
            tier = topo.tier_names.get(nt.highest_tier_name)
            if tier is None:
                ssn.warnings.append(
                    f"job {job.uid}: failed to find hypernode tier name {nt.highest_tier_name}, "
                    "its highestTierName is not translated"
                )
            else:
                nt = replace(nt, highest_tier_allowed=tier, highest_tier_name="")
        if nt.mode == MODE_SOFT:
            nt = replace(nt, mode=MODE_HARD, highest_tier_allowed=top_tier, highest_tier_name="")
        job.network_topology = nt
        if topo.ready:
            job.allocated_hypernode = recover_allocated_hypernode(topo, job)
            job.subjob_allocated_hypernode = job.allocated_hypernode


def recover_allocated_hypernode(topo: Topology, job: JobInfo) -> str:
    """The lowest-tier HyperNode holding the nodes of all the job's placed tasks ("" if none)."""
    search: list[str] | None = None
    for status in ALLOCATED_ORDER:
        for task in job.peek_in(status).values():
            if not task.node_name:
                continue
            pool = search if search is not None else sorted(topo.hypernodes)
            search = [hn for hn in pool if task.node_name in topo.real_sets.get(hn, ())]
            if not search:
                return ""
    if not search:
        return ""
    return min(search, key=lambda hn: (topo.tier_of(hn), hn))
