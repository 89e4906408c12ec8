"""Benchmark of the usage plugin's cost in one session; prints one JSON object.

`--nodes` nodes (32 cpu, 128Gi) with fresh usage samples (CPU (7i mod 90)%, memory (3i mod 90)%:
some over the 80% limits) and `--jobs` jobs of `--tasks` 1-cpu pods, scheduled in one session with
priority, gang, predicates and nodeorder, without and with usage. Reported per variant: the
session's seconds (best of `--repeat`) and binds.

Usage: python bench/usage.py [--nodes 500] [--jobs 50] [--tasks 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.model.node_usage import NodeUsage

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
"""


def objects(nodes: int, jobs: int, tasks: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i:05d}"},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        }
        for i in range(nodes)
    ]
    for j in range(jobs):
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"j{j}", "namespace": "b"},
                "spec": {"minMember": 1},
                "status": {"phase": "Inqueue"},
            }
        )
        for t in range(tasks):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"j{j}-t{t}",
                        "namespace": "b",
                        "annotations": {"scheduling.k8s.io/group-name": f"j{j}"},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                        ],
                    },
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    objs = objects(a.nodes, a.jobs, a.tasks)
    result: dict[str, Any] = {"nodes": a.nodes, "tasks": a.jobs * a.tasks}
    for variant, extra in (("without", ""), ("with_usage", "  - name: usage\n")):
        conf = parse_conf(CONF + extra)
        best, binds = float("inf"), 0
        for _ in range(a.repeat):
            snap = build_snapshot([("bench", i, o) for i, o in enumerate(objs)])
            snap.now = 1000.0
            snap.node_usage = {
                n.name: NodeUsage(cpu={"10m": (i * 7) % 90}, memory={"10m": (i * 3) % 90}, metrics_time=990.0)
                for i, n in enumerate(snap.nodes)
            }
            t0 = time.perf_counter()
            res = run_session(snap, conf)
            best = min(best, time.perf_counter() - t0)
            binds = len(res.binds)
        result[variant] = {"seconds": round(best, 4), "binds": binds}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
