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

from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.daemon.study.core_engine import CoreCluster, CoreStep
from fumarole.daemon.study.inflation import TUNE_BOTH, inflation_workload, typical_of
from fumarole.daemon.study.manifests import QOS_CLASSES
from fumarole.daemon.study.placement import Cluster, Placement
from fumarole.daemon.study.runlog import RunLog
from fumarole.daemon.study.trace import TraceNode, TracePod

__all__ = ["CORE", "FAST", "Engine", "RunSummary", "inflation_log", "timeline_log"]

Progress = Callable[[str], None]
BATCH = 500
TIMELINE_TIE_SEED = 0  # a timeline has no experiment seed: seeded ties draw with seed 0
FAST = "fast"
CORE = "core"


@dataclass(frozen=True, slots=True)
class Engine:
    """The core engine's scheduler configuration (parsed) and where it came from."""

    conf: SchedulerConf
    conf_name: str
    conf_text: str
    percentage_nodes_to_find: int = 0
    # Equal scores: False, the first candidate; True, drawn by the experiment's seed (ties.py).
    seeded_ties: bool = False

    def params(self) -> dict[str, object]:
        """What a run log records of the engine (beside the mode's own parameters)."""
        out: dict[str, object] = {
            "engine": CORE,
            "conf": self.conf_name,
            "conf_text": self.conf_text,
            "percentage_nodes_to_find": self.percentage_nodes_to_find,
        }
        if self.seeded_ties:  # absent: the first candidate (the logs written before it was a choice)
            out["tie_break"] = "seeded"
        return out


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
    engine: Engine | None = None,
    fast_seeded_ties: bool = False,
    tune: str = TUNE_BOTH,
) -> RunLog:
    """One inflation experiment as a log: per batch of BATCH arrivals, the arrivals, a cycle with
    the binds in arrival order, and a deletion for each pod that fit nowhere.

    With a core `engine` every pod goes through one real session (daemon.study.core_engine);
    the log groups its decisions per batch of arrivals all the same. `tune`: the paper's
    TunePodsByNodeTotalResource both ways (draws added up to the target, or a list above it
    trimmed), or only up (`inflation.TUNE_UP`, the list kept whole)."""
    fast_ties = seed if engine is None and fast_seeded_ties else None
    cluster = Cluster(nodes, "fgd" if engine is not None else policy, typical_of(pods), tie_seed=fast_ties)
    workload = inflation_workload(pods, cluster.gpu_capacity, ratio, seed, tune=tune)
    params: dict[str, object] = {
        "mode": "inflation",
        "policy": policy,
        "seed": seed,
        "ratio": ratio,
        "trace": trace_name,
        "tune": tune,
        "workload_pods": len(workload),
    }
    if engine is None:
        params["tie_break"] = "seeded" if fast_seeded_ties else "first"
    core: CoreStep | None = None
    if engine is not None:
        params.update(engine.params())
        if progress is not None:
            progress(f"{policy} seed {seed}: one core session over {len(workload)} pods")
        core = CoreCluster(
            nodes,
            engine.conf,
            arrival_order=True,
            percentage_nodes_to_find=engine.percentage_nodes_to_find,
            tie_seed=seed if engine.seeded_ties else None,
            typical=pods,
        ).run([(p, i * 1000) for i, p in enumerate(workload)], float(len(workload)))
    log = RunLog(params, nodes)
    for start in range(0, len(workload), BATCH):
        batch = workload[start : start + BATCH]
        at_ms = (start + len(batch)) * 1000
        for k, pod in enumerate(batch):
            log.arrive(pod, (start + k) * 1000)
        log.open_cycle(at_ms)
        failed: list[TracePod] = []
        for pod in batch:
            where = core.placed.get(pod.name) if core is not None else cluster.place(pod)
            if where is None:
                failed.append(pod)
                continue
            cluster.bind(pod, where)
            if core is not None:
                log.bind(pod, where, at_ms, core.annotations[pod.name], core.queues[pod.name])
            else:
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
    engine: Engine | None = None,
) -> tuple[RunLog, RunSummary]:
    """The timeline as a log; with a core `engine` each cycle is one real session over the pods
    that wait (Volcano's enqueue, queue and job order decide), the cluster carried between them."""
    cluster = Cluster(nodes, policy if engine is None else "binpack", typical_of(pods))
    params: dict[str, object] = {
        "mode": "timeline",
        "policy": policy,
        "period_s": period_s,
        "trace": trace_name,
    }
    core: CoreCluster | None = None
    if engine is not None:
        params.update(engine.params())
        core = CoreCluster(
            nodes,
            engine.conf,
            arrival_order=False,
            percentage_nodes_to_find=engine.percentage_nodes_to_find,
            tie_seed=TIMELINE_TIE_SEED if engine.seeded_ties else None,
        )
    log = RunLog(params, nodes)
    arrived: list[tuple[TracePod, int]] = []
    t0 = min(p.creation for p in pods)
    arrivals = sorted(pods, key=lambda p: (p.creation, p.name))
    by_name = {p.name: p for p in pods}
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
            if core is not None:
                core.finish(pod)
            log.finish(pod, now * 1000)
        while nxt < len(arrivals) and arrivals[nxt].creation - t0 <= now:
            pod = arrivals[nxt]
            log.arrive(pod, (pod.creation - t0) * 1000)
            heapq.heappush(pending, (_order(pod), pod))
            arrived.append((pod, (pod.creation - t0) * 1000))
            nxt += 1
        if core is not None and not pending:
            # Only completions: with nothing waiting, a session could decide nothing.
            idle = True
            now += period_s
            continue
        log.open_cycle(now * 1000)
        bound_now = 0
        waiting: list[tuple[tuple[int, int, str], TracePod]] = []
        failed_shapes: set[tuple[int, int, int, int, tuple[str, ...]]] = set()
        if core is not None:
            step = core.run(arrived, float(now))
            arrived = []
            for name, where_core in step.placed.items():
                pod = by_name[name]
                cluster.bind(pod, where_core)
                log.bind(pod, where_core, now * 1000, step.annotations[name], step.queues[name])
                heapq.heappush(running, (now + pod.lifetime_s(), pod.name, pod, where_core))
                placed += 1
                bound_now += 1
            waiting = [(k, p) for k, p in pending if p.name not in step.placed]
            pending = []
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
        # Nothing bound, or (core engine: a session costs ~0.1 s on 1,523 nodes) nothing waits:
        # the next cycle that can change anything is at the next arrival or completion.
        idle = bound_now == 0 or (core is not None and not waiting)
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
