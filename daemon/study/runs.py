"""The two study modes, each writing a run log: `inflation` (the paper's method) and `timeline`
(the trace's own arrivals and lifetimes on its own nodes).

Timeline: pods arrive at their creation time (seconds from the first); every `period_s` of virtual
time one cycle places what waits, highest priority first, then oldest, then by name (Volcano's
allocate order for single-pod jobs of one priority class per queue), each on the policy's node;
a pod that fits nowhere waits for the next cycle; a bound pod runs `deletion - scheduled` seconds,
then Succeeds and frees its node. No preemption or reclaim (the study placer does not evict).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from daemon.study.inflation import inflation_workload, typical_of
from daemon.study.manifests import QOS_CLASSES
from daemon.study.placement import Cluster, Placement
from daemon.study.runlog import RunLog
from daemon.study.trace import TraceNode, TracePod

__all__ = ["RunSummary", "inflation_log", "timeline_log"]

Progress = Callable[[str], None]
BATCH = 500


@dataclass(frozen=True, slots=True)
class RunSummary:
    pods: int
    placed: int
    unplaced: int
    events: int
    gpu_allocated_pct: float


def inflation_log(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policy: str,
    *,
    seed: int,
    ratio: float,
    trace_name: str,
    progress: Progress | None = None,
) -> RunLog:
    """One inflation experiment as a log: per batch of BATCH arrivals, the arrivals, a cycle with
    the binds in arrival order, and a deletion for each pod that fit nowhere."""
    cluster = Cluster(nodes, policy, typical_of(pods))
    workload = inflation_workload(pods, cluster.gpu_capacity, ratio, seed)
    params = {"mode": "inflation", "policy": policy, "seed": seed, "ratio": ratio, "trace": trace_name}
    log = RunLog(params, nodes)
    for start in range(0, len(workload), BATCH):
        batch = workload[start : start + BATCH]
        at_ms = (start + len(batch)) * 1000
        for k, pod in enumerate(batch):
            log.arrive(pod, (start + k) * 1000)
        log.open_cycle(at_ms)
        failed: list[TracePod] = []
        for pod in batch:
            where = cluster.place(pod)
            if where is None:
                failed.append(pod)
                continue
            cluster.bind(pod, where)
            log.bind(pod, where, at_ms)
        log.close_cycle(len(failed))
        for pod in failed:
            log.fail(pod, at_ms)
        if progress is not None:
            pct = 100 * cluster.gpu_allocated() / cluster.gpu_capacity
            progress(
                f"{policy} seed {seed}: {start + len(batch)}/{len(workload)} pods, GPU allocated {pct:.1f}%"
            )
    return log


def _order(pod: TracePod) -> tuple[int, int, str]:
    return (-QOS_CLASSES[pod.qos][3], pod.creation, pod.name)


def timeline_log(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policy: str,
    *,
    period_s: int,
    trace_name: str,
    progress: Progress | None = None,
) -> tuple[RunLog, RunSummary]:
    cluster = Cluster(nodes, policy, typical_of(pods))
    log = RunLog({"mode": "timeline", "policy": policy, "period_s": period_s, "trace": trace_name}, nodes)
    t0 = min(p.creation for p in pods)
    arrivals = sorted(pods, key=lambda p: (p.creation, p.name))
    nxt = 0
    pending: list[tuple[tuple[int, int, str], TracePod]] = []
    running: list[tuple[int, str, TracePod, Placement]] = []  # (end s, name, pod, where)
    placed = 0
    now = 0
    cycles = 0
    idle = True
    while nxt < len(arrivals) or pending or running:
        if idle:
            # Nothing can change before the next arrival or completion: jump there.
            due = [arrivals[nxt].creation - t0] if nxt < len(arrivals) else []
            if running:
                due.append(running[0][0])
            if not due:
                break  # what waits can never fit: the cluster will not change any more
            now = max(now, -(-min(due) // period_s) * period_s)
        while running and running[0][0] <= now:
            _, _, pod, where = heapq.heappop(running)
            cluster.release(pod, where)
            log.finish(pod, now * 1000)
        while nxt < len(arrivals) and arrivals[nxt].creation - t0 <= now:
            pod = arrivals[nxt]
            log.arrive(pod, (pod.creation - t0) * 1000)
            heapq.heappush(pending, (_order(pod), pod))
            nxt += 1
        log.open_cycle(now * 1000)
        bound_now = 0
        waiting: list[tuple[tuple[int, int, str], TracePod]] = []
        failed_shapes: set[tuple[int, int, int, int, tuple[str, ...]]] = set()
        while pending:
            key, pod = heapq.heappop(pending)
            shape = (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, pod.gpu_spec)
            spot = None if shape in failed_shapes else cluster.place(pod)
            if spot is None:
                failed_shapes.add(shape)
                waiting.append((key, pod))
                continue
            cluster.bind(pod, spot)
            log.bind(pod, spot, now * 1000)
            heapq.heappush(running, (now + pod.lifetime_s(), pod.name, pod, spot))
            placed += 1
            bound_now += 1
        log.close_cycle(len(waiting))
        idle = bound_now == 0
        pending = waiting
        heapq.heapify(pending)
        cycles += 1
        if progress is not None and cycles % 500 == 0:
            progress(
                f"timeline {policy}: t={now}s, {nxt}/{len(arrivals)} arrived, {placed} placed, "
                f"{len(pending)} wait"
            )
        now += period_s
    summary = RunSummary(
        len(pods), placed, len(pending), len(log.events), 100 * cluster.gpu_allocated() / cluster.gpu_capacity
    )
    return log, summary
