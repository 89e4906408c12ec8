"""Import the Alibaba GPU cluster trace (v2023, "openb") as a simulator workload and cluster.

`convert_alibaba(trace, out_path, limit=None, seed=...)` reads a pod list (`openb_pod_list_*.csv`
or any file with its columns; a folder means its default list) and `openb_node_list_all_node.csv`
and writes a workload file (one single-pod Volcano Job per trace pod: every pod unless `limit`)
and, when asked, a cluster file. Command line: `python -m fumarole.daemon.adapters.simulator.alibaba TRACE
OUT.yaml [--limit N] [--seed S] [--cluster-out CLUSTER.yaml] [--nodes N] [--max-duration 2h]`.

The object mapping (GPUs as deviceshare vGPU resources, gpu_spec as node affinity, QoS as queues
and priority classes) is `fumarole.daemon.study.manifests`; documented in docs/studies.md. Here:
* `limit` pods: a window of consecutive pods (by creation time) starting at a seeded random
  position (all pods, from the first, when no limit); submit-at = creation_time - the window's first;
* duration = deletion_time - scheduled_time (deletion_time - creation_time for pods never
  scheduled), at least 1 s, capped at `max_duration` when given;
* nodes: `nodes` of them (default: all, or the trace's count scaled by limit / pods in the file),
  sampled with the same seed.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from fumarole.daemon.adapters.simulator.workload import format_duration, parse_duration
from fumarole.daemon.study.manifests import (
    NAMESPACE,
    QOS_CLASSES,
    QOS_KEY,
    cluster_objects,
    node_manifest,
    pod_affinity,
    pod_container,
)
from fumarole.daemon.study.trace import TraceError, TracePod, pod_file, read_nodes, read_pods

__all__ = ["QOS_CLASSES", "TraceError", "convert_alibaba", "main"]

Obj = dict[str, Any]


def _job(pod: TracePod, at_s: int, dur_ms: int) -> Obj:
    queue, _, pc, _ = QOS_CLASSES[pod.qos]
    spec: Obj = {"restartPolicy": "Never", "containers": [pod_container(pod)]}
    affinity = pod_affinity(pod)
    if affinity is not None:
        spec["affinity"] = affinity
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": pod.name,
            "namespace": NAMESPACE,
            "annotations": {"fumarole.io/submit-at": f"{at_s}s", QOS_KEY: pod.qos},
        },
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": 1,
            "priorityClassName": pc,
            "tasks": [
                {
                    "name": "pod",
                    "replicas": 1,
                    "template": {
                        "metadata": {"annotations": {"fumarole.io/duration": format_duration(dur_ms)}},
                        "spec": spec,
                    },
                }
            ],
        },
    }


def _cluster(trace: Path, count: int | None, rng: random.Random) -> list[Obj]:
    path = (trace if trace.is_dir() else trace.parent) / "openb_node_list_all_node.csv"
    nodes = read_nodes(path)
    if count is not None and count < len(nodes):
        nodes = [nodes[i] for i in sorted(rng.sample(range(len(nodes)), count))]
    return [node_manifest(n) for n in nodes] + cluster_objects()


def convert_alibaba(
    trace_dir: str | Path,
    out_path: str | Path,
    *,
    limit: int | None = None,
    seed: int = 0,
    cluster_out: str | Path | None = None,
    nodes: int | None = None,
    max_duration: str | None = None,
) -> dict[str, int]:
    """Write a simulator workload (and optionally a cluster) from the trace; return counts.

    Deterministic for the same trace, limit, seed, nodes and max_duration.
    """
    if limit is not None and limit <= 0:
        raise TraceError(f"limit must be positive, got {limit}")
    cap_ms = parse_duration(max_duration) if max_duration is not None else None
    trace = Path(trace_dir)
    path = pod_file(trace)
    # The importer replays the trace's times: a list without them (the multi-GPU ones) is refused.
    pods = sorted(read_pods(path, need_times=True), key=lambda p: p.creation)  # stable at equal times
    rng = random.Random(seed)
    take = len(pods) if limit is None else limit
    start = rng.randrange(0, max(1, len(pods) - take + 1)) if limit is not None else 0
    window = pods[start : start + take]
    t0 = window[0].creation
    jobs: list[Obj] = []
    for pod in window:
        dur_ms = pod.lifetime_s() * 1000
        if cap_ms is not None:
            dur_ms = min(cap_ms, dur_ms)
        jobs.append(_job(pod, pod.creation - t0, dur_ms))
    header = (
        f"# Alibaba GPU trace v2023 ({path.name}): {len(jobs)} pods from position {start}, seed {seed},\n"
        f"# durations capped at {max_duration or 'nothing'}; converted by daemon.adapters.simulator.alibaba\n"
    )
    Path(out_path).write_text(header + yaml.safe_dump_all(jobs, sort_keys=False, width=110), encoding="utf-8")
    counts = {"pods": len(jobs), "start": start}
    if cluster_out is not None:
        count = nodes
        if count is None and limit is not None:
            count = max(4, round(1523 * len(jobs) / max(1, len(pods))))
        cluster = _cluster(trace, count, random.Random(seed))
        n_nodes = sum(1 for o in cluster if o["kind"] == "Node")
        Path(cluster_out).write_text(
            f"# Alibaba GPU trace v2023: {n_nodes} nodes (seed {seed}); queues, priority classes.\n"
            + yaml.safe_dump_all(cluster, sort_keys=False, width=110),
            encoding="utf-8",
        )
        counts["nodes"] = n_nodes
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fumarole.daemon.adapters.simulator.alibaba",
        description="Convert the Alibaba GPU trace v2023 into a Fumarole simulator workload.",
    )
    p.add_argument("trace_dir")
    p.add_argument("out")
    p.add_argument("--limit", type=int, help="a seeded window of N pods (default: every pod)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cluster-out")
    p.add_argument("--nodes", type=int)
    p.add_argument("--max-duration", help="cap on pod durations, e.g. 2h (default: none)")
    args = p.parse_args(argv)
    try:
        counts = convert_alibaba(
            args.trace_dir,
            args.out,
            limit=args.limit,
            seed=args.seed,
            cluster_out=args.cluster_out,
            nodes=args.nodes,
            max_duration=args.max_duration,
        )
    except (TraceError, ValueError) as e:
        print(f"alibaba: error: {e}", file=sys.stderr)
        return 2
    print(", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
