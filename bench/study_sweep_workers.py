"""Benchmark of `fumarole study sweep` on a local Dask cluster of 1, 2 and 4 workers (issue 26).

The same small grid each time (default: the fast engine's binpack, spread and fgd on the trace's
default pod list, seeds 42-45: 12 inflation experiments on the 1,523 nodes), each time in a fresh
results folder (nothing resumed), through the same client code as the command
(`fumarole.daemon.study.sweep.sweep` on a `distributed.LocalCluster` of one-thread worker processes on
127.0.0.1). Prints one JSON object: per worker count the wall seconds of the sweep (cluster start
excluded, reported apart), experiments per second and the speed-up over one worker, and the CPUs
this process may use. The machine may be shared: run it niced and alone, and read the speed-up
against `cpus` (workers beyond the cores available cannot add speed).

Usage: python bench/study_sweep_workers.py [--trace ../shared/traces/alibaba-gpu-v2023]
       [--workers 1,2,4] [--policies binpack,spread,fgd] [--seeds 42-45] [--engine fast]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.daemon.study.sweep import grid, sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", default="../shared/traces/alibaba-gpu-v2023")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--policies", default="binpack,spread,fgd")
    ap.add_argument("--seeds", default="42-45")
    ap.add_argument("--engine", default="fast", choices=("fast", "core"))
    args = ap.parse_args()
    import distributed

    trace = Path(args.trace)
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    ties = "seeded" if args.engine == "core" else "first"
    policies = [
        (p, "seeded" if p == "fgd" else ties, 100 if p == "fgd" else 0) for p in args.policies.split(",")
    ]
    experiments = grid(
        [str(trace / "openb_pod_list_default.csv")],
        str(trace / "openb_node_list_all_node.csv"),
        policies,
        seeds,
        engine=args.engine,
        ratio=1.3,
        tune="both",
    )
    cases = []
    base: float | None = None
    for n in (int(w) for w in args.workers.split(",")):
        began = time.monotonic()
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        )
        client = distributed.Client(cluster)
        started = time.monotonic() - began
        try:
            with tempfile.TemporaryDirectory() as d:
                t0 = time.monotonic()
                sweep(client, experiments, Path(d) / "sweep")
                wall = time.monotonic() - t0
        finally:
            client.close()
            cluster.close()
        base = base or wall
        cases.append(
            {
                "workers": n,
                "experiments": len(experiments),
                "wall_s": round(wall, 2),
                "cluster_start_s": round(started, 2),
                "experiments_per_s": round(len(experiments) / wall, 3),
                "speedup": round(base / wall, 2),
            }
        )
        print(json.dumps(cases[-1]), file=sys.stderr, flush=True)
    out = {
        "bench": "study_sweep_workers",
        "engine": args.engine,
        "policies": args.policies,
        "seeds": args.seeds,
        "cpus": len(os.sched_getaffinity(0)),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "cases": cases,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
