"""Generated input for `fumarole schedule` at issue 11's size: nodes, queues, PodGroups and pods.

`schedule_objects(nodes, gangs, pods, seed)` builds the manifests of the "whole process" figure
of issue 11 (defaults: 1,000 nodes, 2,000 gangs holding 10,552 pending pods, ~3.9 MB of YAML):
nodes of 32 cpu / 128Gi / 110 pods in 4 zones, 4 weighted queues (weights 1–4), and per gang a
PodGroup (minMember = its size, 1–16 pods) with its pods, each asking 500m–4 cpu and 1–8Gi from
one container.  Everything is drawn from a seeded `random.Random`, so the same arguments give
byte-identical files.  The scheduler configuration is Volcano's default plus binpack
(`SCHEDULER_CONF`).

    python bench/schedule_input.py OUT_DIR [--nodes 1000] [--gangs 2000] [--pods 10552] [--seed 11]

writes OUT_DIR/cluster.yaml (multi-document YAML), OUT_DIR/cluster.json (the same objects as one
JSON List) and OUT_DIR/scheduler.yaml.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import yaml

QUEUES = (("q1", 1), ("q2", 2), ("q3", 3), ("q4", 4))
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")
CPU_MILLIS = (500, 1000, 1500, 2000, 3000, 4000)
MEMORY_GI = (1, 2, 4, 8)
NAMESPACE = "bench"

SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def gang_sizes(gangs: int, pods: int, rng: random.Random) -> list[int]:
    """`gangs` sizes in 1..16 summing to `pods` (drawn, then evened out from the first gang on)."""
    if not gangs <= pods <= 16 * gangs:
        raise ValueError(f"{pods} pods cannot make {gangs} gangs of 1-16")
    sizes = [rng.randint(1, 9) for _ in range(gangs)]
    i = 0
    while sum(sizes) != pods:
        step = 1 if sum(sizes) < pods else -1
        if 1 <= sizes[i] + step <= 16:
            sizes[i] += step
        i = (i + 1) % gangs
    return sizes


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:04d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]},
        },
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }


def queue(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }


def pod_group(name: str, queue_name: str, size: int, created: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "creationTimestamp": created},
        "spec": {"minMember": size, "queue": queue_name},
        "status": {"phase": "Inqueue"},
    }


def pod(group: str, index: int, cpu_m: int, mem_gi: int, created: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{index}",
            "namespace": NAMESPACE,
            "creationTimestamp": created,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_gi}Gi"}},
                }
            ],
        },
    }


def schedule_objects(nodes: int = 1000, gangs: int = 2000, pods: int = 10552, seed: int = 11) -> list[Any]:
    rng = random.Random(seed)
    out: list[Any] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    out.extend(queue(q, w) for q, w in QUEUES)
    out.extend(node(i) for i in range(nodes))
    for g, size in enumerate(gang_sizes(gangs, pods, rng)):
        name = f"gang-{g:05d}"
        created = f"2026-01-01T{g // 3600 % 24:02d}:{g // 60 % 60:02d}:{g % 60:02d}Z"
        qname = QUEUES[rng.randrange(len(QUEUES))][0]
        cpu_m, mem_gi = rng.choice(CPU_MILLIS), rng.choice(MEMORY_GI)
        out.append(pod_group(name, qname, size, created))
        out.extend(pod(name, i, cpu_m, mem_gi, created) for i in range(size))
    return out


def write_inputs(out_dir: Path, nodes: int, gangs: int, pods: int, seed: int) -> dict[str, Path]:
    """Write cluster.yaml, cluster.json and scheduler.yaml under `out_dir`; return their paths."""
    objects = schedule_objects(nodes, gangs, pods, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "yaml": out_dir / "cluster.yaml",
        "json": out_dir / "cluster.json",
        "conf": out_dir / "scheduler.yaml",
    }
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    paths["yaml"].write_text(yaml.dump_all(objects, Dumper=dumper, sort_keys=False))
    paths["json"].write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    paths["conf"].write_text(SCHEDULER_CONF)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gangs", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=10552)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    paths = write_inputs(a.out_dir, a.nodes, a.gangs, a.pods, a.seed)
    print(json.dumps({k: {"path": str(p), "bytes": p.stat().st_size} for k, p in paths.items()}))


if __name__ == "__main__":
    main()
