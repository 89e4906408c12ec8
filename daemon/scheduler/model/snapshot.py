"""The cluster snapshot a session consumes: ordered nodes, jobs, queues and cluster facts."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fumarole.daemon.scheduler.model.hypernode import HyperNodeSpec
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.node_usage import NodeUsage
from fumarole.daemon.scheduler.model.numa import NumaTopology
from fumarole.daemon.scheduler.model.queue import NamespaceInfo, PriorityClassInfo, QueueInfo
from fumarole.daemon.scheduler.model.task import TaskInfo


@dataclass(slots=True)
class ClusterSnapshot:
    """Everything a session reads; `now` is virtual time in seconds (from events, never the wall clock).

    `nodes` keeps a stable order (the session's node list order); `other_tasks` are pods that
    belong to no job (other schedulers, or no PodGroup) and only occupy node resources.
    """

    nodes: list[NodeInfo] = field(default_factory=list)
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    namespaces: dict[str, NamespaceInfo] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClassInfo] = field(default_factory=dict)
    other_tasks: list[TaskInfo] = field(default_factory=list)
    # HyperNode objects (topology.volcano.sh), by name; the session resolves them (model/hypernode.py).
    hypernodes: tuple[HyperNodeSpec, ...] = ()
    # Numatopology objects (nodeinfo.volcano.sh), by name = node name (model/numa.py).
    numatopologies: dict[str, NumaTopology] = field(default_factory=dict)
    now: float = 0.0
    session_id: str = "session-0"
    # Node usage from a metrics source, by node name (model/node_usage.py; usage, rescheduling).
    node_usage: dict[str, NodeUsage] = field(default_factory=dict)
    # The previous session's now (seconds), None for the first: the rescheduling interval gate.
    previous_now: float | None = None
    # What sessions derived from each node (node table rows, node mirror, device pools), reused
    # while the node is unchanged (model/node_derived.py); handed from one snapshot to the next
    # by the daemon's cycle runner and the study engine; None: derived afresh. Shared by clones.
    derived: NodeDerived | None = None

    def clone_without_jobs(self, nodes: list[NodeInfo] | None = None) -> ClusterSnapshot:
        """A copy for a session to mutate freely, without jobs (the session clones the jobs it
        keeps itself, copy-on-write, in one pass that also filters them: Session.__init__).

        The nodes are copy-on-write (`NodeInfo.cow_clone`: each shares the snapshot's tasks and
        accounting until the session first changes it); `nodes`: such copies, if the caller has
        them (model/node_derived.py keeps untouched ones from the session before).  The snapshot
        must not change while the copy is in use; the session never writes to it
        (tests/scheduler/test_cow_session.py checks every object before and after).
        """
        return self._with([n.cow_clone() for n in self.nodes] if nodes is None else nodes, {})

    def deep_clone(self) -> ClusterSnapshot:
        """A whole copy: every job's and node's tasks cloned now (the reference the tests compare
        copy-on-write sessions against: `Session(..., whole_copy=True)`)."""
        nodes = [n.clone() for n in self.nodes]
        jobs = {uid: j.clone() for uid, j in self.jobs.items()}
        return self._with(nodes, jobs)

    def _with(self, nodes: list[NodeInfo], jobs: dict[str, JobInfo]) -> ClusterSnapshot:
        queues = {name: _clone_queue(q) for name, q in self.queues.items()}
        return ClusterSnapshot(
            nodes=nodes,
            jobs=jobs,
            queues=queues,
            namespaces=self.namespaces,
            priority_classes=self.priority_classes,
            other_tasks=list(self.other_tasks),
            hypernodes=self.hypernodes,
            numatopologies=self.numatopologies,
            now=self.now,
            session_id=self.session_id,
            node_usage=self.node_usage,
            previous_now=self.previous_now,
            derived=self.derived,
        )


def _clone_queue(q: QueueInfo) -> QueueInfo:
    return replace(q, allocated=q.allocated.clone())
