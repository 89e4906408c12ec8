"""Generated simulator inputs for bench/daemon.py: the cluster file and the workload file.

`issue_workload(nodes, jobs, ...)` is the 2,000-node workload of issue 11 (scaled by its
arguments): nodes of 32 cpu / 128Gi / 110 pods, 4 weighted queues (weights 1–4), Volcano Jobs
with gangs of 1–16 pods (minAvailable = replicas) asking 500m–4 cpu each, submitted uniformly
over `submit_over_s` virtual seconds and running 1–30 minutes.  Everything is drawn from a
seeded `random.Random`, so the same arguments give the same files.

    python bench/workload.py OUT_DIR [--nodes 2000] [--jobs 2700] [--seed 0]

writes OUT_DIR/cluster.yaml and OUT_DIR/workload.yaml (the format of docs/simulator.md).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

QUEUES = (("q1", 1), ("q2", 2), ("q3", 3), ("q4", 4))
CPU_MILLIS = (500, 1000, 1500, 2000, 3000, 4000)


def node(name: str, cpu: int = 32, memory_gi: int = 128, pods: int = 110) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": str(pods)}},
    }


def cluster_objects(nodes: int) -> list[dict[str, Any]]:
    """`nodes` nodes of 32 cpu, the four queues and namespace `bench`."""
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}},
    ]
    for q, w in QUEUES:
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"weight": w, "reclaimable": True},
            }
        )
    out.extend(node(f"node-{i:05d}") for i in range(nodes))
    return out


def volcano_job(
    name: str, queue: str, size: int, cpu_m: int, submit_s: float, duration_s: int
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "annotations": {"fumarole.io/submit-at": f"{round(submit_s * 1000)}ms"},
        },
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": size,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": size,
                    "template": {
                        "metadata": {"annotations": {"fumarole.io/duration": f"{duration_s}s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {
                                        "requests": {"cpu": f"{cpu_m}m", "memory": f"{cpu_m * 2}Mi"}
                                    },
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def issue_workload(
    jobs: int = 2700,
    *,
    seed: int = 0,
    submit_over_s: float = 600.0,
    min_duration_s: int = 60,
    max_duration_s: int = 1800,
    max_gang: int = 16,
) -> list[dict[str, Any]]:
    """The Volcano Jobs of the workload, in submission order."""
    rng = random.Random(seed)
    submits = sorted(rng.uniform(0.0, submit_over_s) for _ in range(jobs))
    out = []
    for i, at in enumerate(submits):
        q, _ = QUEUES[rng.randrange(len(QUEUES))]
        out.append(
            volcano_job(
                f"job-{i:05d}",
                q,
                rng.randint(1, max_gang),
                rng.choice(CPU_MILLIS),
                at,
                rng.randint(min_duration_s, max_duration_s),
            )
        )
    return out


def write_yaml(path: Path, objects: Iterable[dict[str, Any]]) -> None:
    """Multi-document YAML written as JSON documents (JSON is YAML; much faster to write and read)."""
    with path.open("w") as f:
        for obj in objects:
            f.write("---\n")
            f.write(json.dumps(obj, separators=(",", ":")))
            f.write("\n")


def write(out_dir: Path, *, nodes: int, jobs: int, seed: int = 0, **kw: Any) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    cluster, workload = out_dir / "cluster.yaml", out_dir / "workload.yaml"
    write_yaml(cluster, cluster_objects(nodes))
    write_yaml(workload, issue_workload(jobs, seed=seed, **kw))
    return cluster, workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2700)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    c, w = write(a.out_dir, nodes=a.nodes, jobs=a.jobs, seed=a.seed)
    print(c, w)


if __name__ == "__main__":
    main()
