"""A small cluster with HyperNodes for the API's and the dashboard's tests: six nodes in two zones, a
running two-pod job, and HyperNodes whose members are chosen each way Volcano allows (exact name,
regular expression, labels; HyperNode members one tier up)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[1] / "e2e") not in sys.path:  # the end-to-end tests' manifests
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from fumarole_e2e_kit import _job, _node, _pc, _queue


def hypernode(name: str, tier: int, members: list[dict[str, Any]], tier_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def member(kind: str, **selector: Any) -> dict[str, Any]:
    return {"type": kind, "selector": selector}


# tier 1: rack-a by regex (node-0, node-1), rack-b by exact names (node-2, node-3 and an absent node-9),
# rack-c by label (zone-b: node-4, node-5); tier 2: spine-0 over rack-a and rack-b, spine-1 over rack-c.
HYPERNODES = [
    hypernode("rack-a", 1, [member("Node", regexMatch={"pattern": "^node-[01]$"})], "rack"),
    hypernode(
        "rack-b", 1, [member("Node", exactMatch={"name": n}) for n in ("node-2", "node-3", "node-9")], "rack"
    ),
    hypernode(
        "rack-c",
        1,
        [member("Node", labelMatch={"matchLabels": {"topology.kubernetes.io/zone": "zone-b"}})],
        "rack",
    ),
    hypernode(
        "spine-0",
        2,
        [
            member("HyperNode", exactMatch={"name": "rack-a"}),
            member("HyperNode", exactMatch={"name": "rack-b"}),
        ],
        "spine",
    ),
    hypernode("spine-1", 2, [member("HyperNode", exactMatch={"name": "rack-c"})], "spine"),
]

EXPECTED = {
    "rack-a": (1, "spine-0", [], ["node-0", "node-1"]),
    "rack-b": (1, "spine-0", [], ["node-2", "node-3"]),
    "rack-c": (1, "spine-1", [], ["node-4", "node-5"]),
    "spine-0": (2, "", ["rack-a", "rack-b"], ["node-0", "node-1", "node-2", "node-3"]),
    "spine-1": (2, "", ["rack-c"], ["node-4", "node-5"]),
}


def nodes(count: int = 6) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        n = _node(f"node-{i}", 8)
        n["metadata"]["labels"] = {
            "topology.kubernetes.io/zone": "zone-a" if i < 4 else "zone-b",
            "pool": "cpu",
        }
        out.append(n)
    return out


def running_job(
    name: str = "train", queue: str = "dev", on: tuple[str, ...] = ("node-0", "node-1")
) -> list[dict[str, Any]]:
    """A PodGroup and its pods (`e2e/NAME-w-K`), running on the nodes `on`."""
    from fumarole.daemon.manifests import expand_job

    job = _job(name, queue, len(on), 2, at=0, dur=600, pc="low")
    out = [_pc("low", 10)]
    for m in expand_job("hn", 0, job, priority_classes=[("hn", 0, _pc("low", 10))]):
        if m["kind"] == "Pod":
            k = len([o for o in out if o["kind"] == "Pod"])
            m["spec"]["nodeName"] = on[k]
            m.setdefault("status", {})["phase"] = "Running"
        out.append(m)
    return out


def cluster() -> list[dict[str, Any]]:
    return [_queue("dev", 1), *nodes(), *running_job(), *HYPERNODES]
