"""A study run as an event log: the events a daemon would append for the same arrivals and binds.

`RunLog` collects events in memory (pods as manifests, one cycle per batch of arrivals with its
binds) and `write(path)` appends them to a new SQLite event log in large batches, so `fumarole
report`, `events` and `serve` read a study run like any daemon run. The first event records the
study's parameters (`config.recorded`, source `study`, the text a JSON object).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fumarole.daemon.adapters.simulator.workload import iso_time
from fumarole.daemon.study.manifests import (
    NAMESPACE,
    QOS_CLASSES,
    QOS_KEY,
    card_uuid,
    cluster_objects,
    node_manifest,
    pod_affinity,
    pod_container,
)
from fumarole.daemon.study.placement import Placement
from fumarole.daemon.study.trace import TraceNode, TracePod
from fumarole.store.events import (
    BindDecided,
    ConfigurationRecorded,
    CycleClosed,
    CycleOpened,
    NodeUpserted,
    PodDeleted,
    PodUpserted,
    PriorityClassUpserted,
    QueueUpserted,
)
from fumarole.store.events.base import EventBase

__all__ = ["STUDY_SOURCE", "RunLog"]

STUDY_SOURCE = "study"
ASSIGNED_IDS = "volcano.sh/vgpu-ids-new"


def pod_manifest(pod: TracePod, at_ms: int, *, phase: str = "Pending", node: str = "") -> dict[str, Any]:
    queue, _, pc, value = QOS_CLASSES[pod.qos]
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "priorityClassName": pc,
        "priority": value,
        "containers": [pod_container(pod)],
    }
    affinity = pod_affinity(pod)
    if affinity is not None:
        spec["affinity"] = affinity
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": NAMESPACE,
            "uid": f"{NAMESPACE}-{pod.name}",
            "creationTimestamp": iso_time(at_ms),
            "annotations": {QOS_KEY: pod.qos, "scheduling.volcano.sh/queue-name": queue},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


class RunLog:
    """The events of one study run, in log order."""

    def __init__(self, params: dict[str, Any], nodes: Sequence[TraceNode]) -> None:
        text = json.dumps(params, sort_keys=True)
        self.conf_hash = hashlib.sha256(text.encode()).hexdigest()
        self.nodes = list(nodes)
        self.events: list[EventBase] = [ConfigurationRecorded(self.conf_hash, text, STUDY_SOURCE)]
        for n in nodes:
            self.events.append(NodeUpserted(n.name, node_manifest(n)))
        for obj in cluster_objects():
            name = obj["metadata"]["name"]
            if obj["kind"] == "Queue":
                self.events.append(QueueUpserted(name, obj))
            else:
                self.events.append(PriorityClassUpserted(name, obj))
        self.cycle = 0
        self._bound: dict[str, tuple[TracePod, str]] = {}

    def arrive(self, pod: TracePod, at_ms: int) -> None:
        self.events.append(PodUpserted(NAMESPACE, pod.name, pod_manifest(pod, at_ms), at_ms))

    def open_cycle(self, at_ms: int) -> None:
        self.cycle += 1
        self.events.append(CycleOpened(self.cycle, len(self.events), at_ms, self.conf_hash))
        self._binds = 0

    def bind(
        self,
        pod: TracePod,
        where: Placement,
        at_ms: int,
        annotations: dict[str, str] | None = None,
        queue: str | None = None,
    ) -> None:
        """A bind decision; `annotations` and `queue` as a core session gave them, else the
        placer's card choice and the pod's QoS queue."""
        node = self.nodes[where.node].name
        ann: dict[str, str] = dict(annotations) if annotations is not None else {}
        if where.cards and annotations is None:
            ann[ASSIGNED_IDS] = "".join(
                f"{card_uuid(node, k)},NVIDIA,{pod.gpu_milli},{pod.gpu_milli // 10}:" for k in where.cards
            )
        queue = queue or QOS_CLASSES[pod.qos][0]
        self.events.append(
            BindDecided(
                self.cycle, NAMESPACE, pod.name, f"{NAMESPACE}-{pod.name}", node, pod.name, queue, "", ann
            )
        )
        self._binds += 1
        self._bound[pod.name] = (pod, node)

    def close_cycle(self, pending: int) -> None:
        self.events.append(CycleClosed(self.cycle, binds=self._binds, pending_tasks=pending))

    def fail(self, pod: TracePod, at_ms: int) -> None:
        """The pod could not be placed and leaves (inflation: each pod is placed at once or fails)."""
        self.events.append(PodDeleted(NAMESPACE, pod.name, at_ms))

    def finish(self, pod: TracePod, at_ms: int) -> None:
        """The pod ran its course: Succeeded on its node."""
        _, node = self._bound.pop(pod.name)
        self.events.append(
            PodUpserted(NAMESPACE, pod.name, pod_manifest(pod, at_ms, phase="Succeeded", node=node), at_ms)
        )

    def write(self, path: Path, batch: int = 20000) -> int:
        """Append every event to a new SQLite log at `path`; the number of events."""
        import anyio

        anyio.run(self._write, path, batch)
        return len(self.events)

    async def _write(self, path: Path, batch: int) -> None:
        from fumarole.store.sqlite import SqliteEventLog

        log = await SqliteEventLog.open(path)
        try:
            for i in range(0, len(self.events), batch):
                await log.append(self.events[i : i + batch])  # type: ignore[arg-type]
        finally:
            await log.close()
