"""A run log folded into the series a report draws: utilisation, pending pods, queue shares, waits,
evictions, GPU fragmentation over time, and for inflation runs the allocation-vs-arrived curve.

Works on any run log (a daemon run or a study run). Pods are counted from their manifests
(`pod.upserted`), placed by `decision.bind`, freed by a Succeeded/Failed upsert, a deletion or an
eviction; one sample is taken at every `cycle.closed` (time: the cycle's virtual now).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fumarole.daemon.scheduler.model.quantity import milli_value, whole_value
from fumarole.daemon.scheduler.plugins.fgd_fragmentation import PodShape, node_fragmentation, typical_workload
from fumarole.daemon.study.manifests import QOS_KEY, gpu_milli_of
from fumarole.store.events import (
    BindDecided,
    ConfigurationRecorded,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    NodeUpserted,
    PodDeleted,
    PodUpserted,
    QueueFiguresRecorded,
)

__all__ = ["RunData", "fold_run", "read_events"]

ASSIGNED_IDS = "volcano.sh/vgpu-ids-new"
MIB = 2**20


@dataclass(slots=True)
class PodFacts:
    cpu: int
    mem: int
    gpu: int
    num_gpu: int
    gpu_each: int
    models: tuple[str, ...]
    queue: str
    qos: str
    created_ms: int
    bound_ms: int | None = None
    node: str = ""
    cards: tuple[int, ...] = ()
    gone: bool = False


@dataclass(slots=True)
class RunData:
    name: str
    params: dict[str, Any]
    cpu_cap: int = 0
    mem_cap: int = 0
    gpu_cap: int = 0
    samples: list[tuple[float, float, float, float, int, int, float]] = field(default_factory=list)
    """(time s, cpu %, memory %, GPU %, pending pods, evictions so far, fragmentation % of GPU capacity)"""
    queues: list[tuple[float, str, float, float]] = field(default_factory=list)
    """(time s, queue, allocated cpu cores, deserved cpu cores)"""
    waits: list[tuple[str, str, str, float]] = field(default_factory=list)
    """(pod, queue, qos, wait s) for every pod bound"""
    inflation: list[tuple[float, float]] = field(default_factory=list)
    """(arrived GPU % of capacity, allocated GPU %) after each decided pod"""
    evictions: int = 0
    unplaced: int = 0
    makespan_s: float = 0.0
    """Virtual time of the last cycle."""

    @property
    def mode(self) -> str:
        return str(self.params.get("mode", "daemon"))

    @property
    def label(self) -> str:
        if self.mode == "inflation":
            return f"{self.params.get('policy')} seed {self.params.get('seed')}"
        return f"{self.name} ({self.params.get('policy', self.mode)})"


def read_events(db: Path) -> list[Any]:
    """Every event of a log, in order."""
    import anyio

    async def go() -> list[Any]:
        from fumarole.store.sqlite import SqliteEventLog

        log = await SqliteEventLog.open(db, readonly=True, readers=1)
        try:
            last = await log.last_seq()
            return [s.event async for s in log.read_range(1, last, batch=20000)]
        finally:
            await log.close()

    return anyio.run(go)


def _pod_facts(m: dict[str, Any], at_ms: int) -> PodFacts:
    meta = m.get("metadata") or {}
    ann = meta.get("annotations") or {}
    spec = m.get("spec") or {}
    cpu = mem = 0
    num_gpu = gpu_each = 0
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += milli_value(req.get("cpu", 0))
        mem += whole_value(req.get("memory", 0)) // MIB
        lim = {**req, **((c.get("resources") or {}).get("limits") or {})}
        if "volcano.sh/vgpu-number" in lim:
            num_gpu += int(lim["volcano.sh/vgpu-number"])
            gpu_each = int(lim.get("volcano.sh/vgpu-cores", 100)) * 10
        elif "nvidia.com/gpu" in lim:
            num_gpu += int(lim["nvidia.com/gpu"])
            gpu_each = 1000
    models: tuple[str, ...] = ()
    aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    for term in (aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []:
        for ex in term.get("matchExpressions") or []:
            models = tuple(ex.get("values") or ())
    queue = (
        ann.get("scheduling.volcano.sh/queue-name")
        or ann.get("scheduling.k8s.io/group-name", "")
        or "default"
    )
    return PodFacts(cpu, mem, gpu_milli_of(m), num_gpu, gpu_each, models, queue, ann.get(QOS_KEY, ""), at_ms)


def _created_ms(m: dict[str, Any], fallback: int) -> int:
    from datetime import datetime

    text = (m.get("metadata") or {}).get("creationTimestamp")
    if not text:
        return fallback
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _cards(ann: dict[str, str]) -> tuple[int, ...]:
    out: list[int] = []
    for dev in (ann.get(ASSIGNED_IDS) or "").split(":"):
        uuid = dev.split(",")[0]
        if "-gpu" in uuid:
            out.append(int(uuid.rsplit("-gpu", 1)[1]))
    return tuple(out)


def fold_run(name: str, events: list[Any]) -> RunData:
    params: dict[str, Any] = {}
    nodes: dict[str, tuple[int, int, int, str]] = {}  # cpu milli, mem MiB, cards, model
    shapes: list[PodShape] = []
    for e in events:
        if isinstance(e, ConfigurationRecorded) and e.source == "study" and not params:
            params = json.loads(e.text)
        elif isinstance(e, NodeUpserted):
            a = (e.manifest.get("status") or {}).get("allocatable") or {}
            labels = (e.manifest.get("metadata") or {}).get("labels") or {}
            cards = int(a.get("volcano.sh/vgpu-memory", 0)) // 1000 or int(a.get("nvidia.com/gpu", 0))
            nodes[e.name] = (
                milli_value(a.get("cpu", 0)),
                whole_value(a.get("memory", 0)) // MIB,
                cards,
                labels.get("alibaba.com/gpu-model", ""),
            )
        elif isinstance(e, PodUpserted) and not (e.manifest.get("spec") or {}).get("nodeName"):
            f = _pod_facts(e.manifest, e.at_ms)
            shapes.append(PodShape(f.cpu, f.num_gpu, f.gpu_each if f.num_gpu else 0, f.models))
    run = RunData(name, params)
    names = sorted(nodes)
    index = {n: i for i, n in enumerate(names)}
    models = sorted({v[3] for v in nodes.values() if v[3]} | {m for s in shapes for m in s.models})
    model_ids = {m: i + 1 for i, m in enumerate(models)}
    typical = typical_workload(shapes, 1.0).arrays(model_ids)
    width = max([v[2] for v in nodes.values()] + [1])
    cpu_left = np.array([nodes[n][0] for n in names], dtype=np.int64)
    gpu_left = np.zeros((len(names), width), dtype=np.int64)
    for i, n in enumerate(names):
        gpu_left[i, : nodes[n][2]] = 1000
    model = np.array([model_ids.get(nodes[n][3], 0) for n in names], dtype=np.int64)
    frag = node_fragmentation(cpu_left, gpu_left, model, typical) if names else np.zeros(0)
    run.cpu_cap = sum(v[0] for v in nodes.values())
    run.mem_cap = sum(v[1] for v in nodes.values())
    run.gpu_cap = sum(v[2] for v in nodes.values()) * 1000
    pods: dict[str, PodFacts] = {}
    used = [0, 0, 0]
    now_ms = 0
    arrived = 0
    touched: set[int] = set()

    def account(f: PodFacts, sign: int) -> None:
        used[0] += sign * f.cpu
        used[1] += sign * f.mem
        used[2] += sign * f.gpu
        i = index.get(f.node)
        if i is None:
            return
        cpu_left[i] -= sign * f.cpu
        for k in f.cards:
            gpu_left[i, k] -= sign * f.gpu_each
        touched.add(i)

    def release(key: str, gone: bool) -> None:
        f = pods.get(key)
        if f is None or f.gone:
            return
        if f.bound_ms is not None:
            account(f, -1)
        elif gone and run.mode == "inflation":
            run.unplaced += 1
        f.gone = True

    for e in events:
        if isinstance(e, PodUpserted):
            key = f"{e.namespace}/{e.name}"
            phase = (e.manifest.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                release(key, True)
            elif key not in pods or pods[key].gone:
                pods[key] = _pod_facts(e.manifest, _created_ms(e.manifest, e.at_ms))
        elif isinstance(e, CycleOpened):
            now_ms = e.now_ms
            run.makespan_s = max(run.makespan_s, now_ms / 1000)
        elif isinstance(e, BindDecided):
            bound = pods.get(f"{e.namespace}/{e.name}")
            if bound is None or bound.bound_ms is not None:
                continue
            f = bound
            f.bound_ms, f.node, f.cards = now_ms, e.node, _cards(e.annotations)
            row = index.get(e.node)
            if not f.cards and f.num_gpu and row is not None:
                # No card record (whole GPUs as nvidia.com/gpu): the first cards with room.
                f.cards = tuple(int(k) for k in np.flatnonzero(gpu_left[row] >= f.gpu_each)[: f.num_gpu])
            account(f, +1)
            run.waits.append((f"{e.namespace}/{e.name}", f.queue, f.qos, (now_ms - f.created_ms) / 1000))
        elif isinstance(e, EvictDecided):
            run.evictions += 1
            release(f"{e.namespace}/{e.name}", False)
            pods.pop(f"{e.namespace}/{e.name}", None)
        elif isinstance(e, PodDeleted):
            release(f"{e.namespace}/{e.name}", True)
        elif isinstance(e, QueueFiguresRecorded):
            for q, fig in sorted(e.queues.items()):
                run.queues.append(
                    (
                        now_ms / 1000,
                        q,
                        milli_value(fig.allocated.get("cpu", "0")) / 1000,
                        milli_value(fig.deserved.get("cpu", "0")) / 1000,
                    )
                )
        elif isinstance(e, CycleClosed):
            if touched:
                rows = np.array(sorted(touched), dtype=np.int64)
                frag[rows] = node_fragmentation(cpu_left[rows], gpu_left[rows], model[rows], typical)
                touched.clear()
            pending = sum(1 for f in pods.values() if f.bound_ms is None and not f.gone)
            run.samples.append(
                (
                    now_ms / 1000,
                    100 * used[0] / max(run.cpu_cap, 1),
                    100 * used[1] / max(run.mem_cap, 1),
                    100 * used[2] / max(run.gpu_cap, 1),
                    pending,
                    run.evictions,
                    100 * float(frag.sum()) / max(run.gpu_cap, 1),
                )
            )
    if run.mode == "inflation":
        # Pods never leave: after the k-th arrival, allocated = the bound among the first k.
        allocated = 0
        for f in pods.values():
            arrived += f.gpu
            allocated += f.gpu if f.bound_ms is not None else 0
            run.inflation.append((100 * arrived / max(run.gpu_cap, 1), 100 * allocated / max(run.gpu_cap, 1)))
    else:
        run.unplaced = sum(1 for f in pods.values() if f.bound_ms is None and not f.gone)
    return run
