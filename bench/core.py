"""Benchmark of the scheduling core: one session of Volcano's default configuration.

Builds a synthetic cluster (nodes of 32 cpu / 128Gi / 110 pods) and pending gang jobs across
20 weighted queues, runs one session, and prints one JSON object per size with pods placed per
second, session latency (wall and process CPU seconds: the machine may be shared) and a sha256
digest of the decisions (binds in order, pipelined pods, evictions), so that a faster core can
be checked to decide exactly as before.  Usage:

    python bench/core.py                 # 1k/10k, 5k/50k, 10k/100k (nodes/pending pods)
    python bench/core.py --sizes 1000x10000 --repeat 3
    python bench/core.py --collector on  # Python's cyclic GC running during the session

By default the session runs with the cyclic garbage collector paused, as the daemon runs its
sessions (daemon/runtime/heap.py) and `fumarole schedule` runs them; `--collector on` leaves it
running (the method of the figures before issue 11: its collections of the large heap cost
~20% at 1k nodes, more at 10k).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, parse_conf
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

GIB = 2**30
JOB_SIZES = (1, 2, 4, 8, 16, 32)  # gang sizes cycled through (minMember = size)
POD_SHAPES = ((1000, 2 * GIB), (2000, 4 * GIB), (4000, 8 * GIB), (500, 1 * GIB))


def build(nodes: int, pods: int, queues: int = 20) -> ClusterSnapshot:
    node_list = [NodeInfo(f"node-{i:05d}", Resource(32000, 128 * GIB, {"pods": 110})) for i in range(nodes)]
    qs = {f"q{i:02d}": QueueInfo(f"q{i:02d}", weight=i + 1) for i in range(queues)}
    qs["default"] = QueueInfo("default", weight=1)
    qs["root"] = QueueInfo("root", weight=1, reclaimable=False)
    jobs: dict[str, JobInfo] = {}
    made = 0
    j = 0
    while made < pods:
        size = min(JOB_SIZES[j % len(JOB_SIZES)], pods - made)
        cpu, mem = POD_SHAPES[j % len(POD_SHAPES)]
        queue = f"q{j % queues:02d}"
        uid = f"bench/job-{j:06d}"
        job = JobInfo(
            uid=uid,
            name=f"job-{j:06d}",
            namespace="bench",
            queue=queue,
            min_available=size,
            phase="Inqueue",
            creation=float(j),
        )
        for t in range(size):
            name = f"job-{j:06d}-worker-{t}"
            job.add_task(
                TaskInfo(
                    uid=f"bench-{name}",
                    name=name,
                    namespace="bench",
                    job=uid,
                    resreq=Resource(cpu, mem, {"pods": 1}),
                    status=TaskStatus.PENDING,
                    creation=float(j),
                )
            )
        jobs[uid] = job
        made += size
        j += 1
    return ClusterSnapshot(nodes=node_list, jobs=jobs, queues=qs)


def decisions_digest(result: SessionResult) -> str:
    """sha256 over the session's binds in bind order, pipelined pods and evictions (to compare runs)."""
    h = hashlib.sha256()
    for key in result.bind_order:
        h.update(f"bind {key} {result.binds[key]}\n".encode())
    for key, node in sorted(result.pipelined.items()):
        h.update(f"pipeline {key} {node}\n".encode())
    for ev in result.evictions:
        h.update(f"evict {ev.task} {ev.node}\n".encode())
    return h.hexdigest()


def run(nodes: int, pods: int, repeat: int, collector: str = "paused") -> dict[str, object]:
    conf = parse_conf(DEFAULT_SCHEDULER_CONF)
    t0 = time.perf_counter()
    snap = build(nodes, pods)
    build_s = time.perf_counter() - t0
    best = None
    best_cpu = None
    binds = 0
    digest = ""
    for _ in range(repeat):
        gc.collect()
        if collector == "paused":
            gc.disable()
        t1 = time.perf_counter()
        c1 = time.process_time()
        result = run_session(snap, conf, explain=False)
        cpu = time.process_time() - c1
        elapsed = time.perf_counter() - t1
        gc.enable()
        binds = len(result.binds)
        digest = decisions_digest(result)
        best = elapsed if best is None else min(best, elapsed)
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
    assert best is not None and best_cpu is not None
    return {
        "nodes": nodes,
        "pending_pods": pods,
        "jobs": len(snap.jobs),
        "queues": 20,
        "binds": binds,
        "session_seconds": round(best, 3),
        "session_cpu_seconds": round(best_cpu, 3),
        "pods_per_second": round(binds / best, 1) if best > 0 else None,
        "decisions_sha256": digest,
        "collector": collector,
        "build_seconds": round(build_s, 3),
        "conf": "volcano default: enqueue, allocate, backfill; priority gang conformance | "
        "overcommit drf predicates proportion nodeorder",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=["1000x10000", "5000x50000", "10000x100000"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--collector", choices=("paused", "on"), default="paused")
    a = ap.parse_args()
    for s in a.sizes:
        n, p = (int(x) for x in s.lower().split("x"))
        print(json.dumps(run(n, p, a.repeat, a.collector)), flush=True)


if __name__ == "__main__":
    main()
