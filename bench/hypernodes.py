"""Benchmark of allocate's HyperNode search; prints one JSON object.

A cluster of `--racks` racks of `--nodes-per-rack` nodes (4 cpu each), a HyperNode per rack
(tier 1, regexMatch) and one per `--racks-per-spine` racks (tier 2), and `--jobs` gangs of
`--gang` pods (2 cpu each), each hard-limited to tier 2 (`topology`) or without a topology
(`plain`), scheduled in one session with gang, predicates, nodeorder and network-topology-aware.
Reported per variant: the session's seconds (best of `--repeat`), binds, and how many gangs
landed within one rack or one spine.

Usage: python bench/hypernodes.py [--racks 16] [--nodes-per-rack 8] [--racks-per-spine 4]
                                  [--jobs 24] [--gang 6] [--repeat 3]
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

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
"""


def objects(a: argparse.Namespace, topology: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"weight": 1},
        }
    ]
    for r in range(a.racks):
        for n in range(a.nodes_per_rack):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"r{r:02d}-n{n:02d}"},
                    "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
                }
            )
        out.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"rack{r:02d}"},
                "spec": {
                    "tier": 1,
                    "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^r{r:02d}-"}}}],
                },
            }
        )
    for s in range(0, a.racks, a.racks_per_spine):
        members = [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack{r:02d}"}}}
            for r in range(s, min(s + a.racks_per_spine, a.racks))
        ]
        out.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"spine{s // a.racks_per_spine:02d}"},
                "spec": {"tier": 2, "members": members},
            }
        )
    for j in range(a.jobs):
        spec: dict[str, Any] = {"queue": "q", "minMember": a.gang}
        if topology:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"j{j:03d}", "namespace": "b"},
                "spec": spec,
                "status": {"phase": "Inqueue"},
            }
        )
        for p in range(a.gang):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"j{j:03d}-p{p}",
                        "namespace": "b",
                        "annotations": {"scheduling.k8s.io/group-name": f"j{j:03d}"},
                        "labels": {"volcano.sh/task-spec": f"t{p}"},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
                        ],
                    },
                    "status": {"phase": "Pending"},
                }
            )
    return out


def variant(a: argparse.Namespace, topology: bool) -> dict[str, Any]:
    snap = build_snapshot([("bench", i, o) for i, o in enumerate(objects(a, topology))])
    conf = parse_conf(CONF)
    best = float("inf")
    binds: dict[str, str] = {}
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        binds = run_session(snap, conf, explain=False).binds
        best = min(best, time.perf_counter() - t0)
    racks: dict[str, set[str]] = {}
    for pod, node in binds.items():
        racks.setdefault(pod.rsplit("-", 1)[0], set()).add(node.split("-")[0])
    one_rack = sum(1 for rs in racks.values() if len(rs) == 1)
    one_spine = sum(1 for rs in racks.values() if len({int(r[1:]) // a.racks_per_spine for r in rs}) == 1)
    return {
        "session_s": round(best, 4),
        "binds": len(binds),
        "gangs_in_one_rack": one_rack,
        "gangs_in_one_spine": one_spine,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=16)
    ap.add_argument("--nodes-per-rack", type=int, default=8)
    ap.add_argument("--racks-per-spine", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=24)
    ap.add_argument("--gang", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    out = {
        "nodes": a.racks * a.nodes_per_rack,
        "jobs": a.jobs,
        "gang": a.gang,
        "plain": variant(a, False),
        "topology": variant(a, True),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
