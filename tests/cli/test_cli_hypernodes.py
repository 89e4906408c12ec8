"""`fumarole schedule` with HyperNodes: one-line errors, and decisions identical across hash seeds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios" / "volcano" / "allocate-hypernodes"


def fumarole(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=env)


def test_a_bad_hypernode_exits_2_with_one_line_naming_file_object_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', pods: '10'}}\n---\n"
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: rack1}\n"
        "spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: '(['}}}]}\n"
    )
    p = fumarole("schedule", "--cluster", str(bad))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "cluster.yaml" in lines[0] and "HyperNode rack1" in lines[0]
    assert "spec.members[0].selector.regexMatch.pattern" in lines[0]
    assert p.stdout == ""


def test_hypernode_decisions_are_the_same_under_any_hash_seed(tmp_path: Path) -> None:
    import yaml

    case = yaml.safe_load(
        (
            SCENARIOS / "soft-network-topology-constrain-can-allocate-job-when-minavailable-replicas.yaml"
        ).read_text()
    )
    conf = tmp_path / "conf.yaml"
    conf.write_text(case["conf"])
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(case["objects"]))
    outs = []
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        p = fumarole(
            "schedule",
            "--conf",
            str(conf),
            "--cluster",
            str(cluster),
            "--format",
            "json",
            "--now",
            "2024-01-01T00:00:00Z",
            env=env,
        )
        assert p.returncode == 0, p.stderr
        outs.append(json.loads(p.stdout))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0]["binds"] == case["expect"]["binds"]


RACKS = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-a}
spec:
  tier: 1
  tierName: rack
  members: [{type: Node, selector: {regexMatch: {pattern: "^a-"}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-b}
spec:
  tier: 1
  tierName: rack
  members: [{type: Node, selector: {regexMatch: {pattern: "^b-"}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  members:
  - {type: HyperNode, selector: {exactMatch: {name: rack-a}}}
  - {type: HyperNode, selector: {exactMatch: {name: rack-b}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {queue: default, minMember: 3, networkTopology: {mode: hard, highestTierName: rack}}
status: {phase: Inqueue}
"""


def racks_cluster(tmp_path: Path) -> Path:
    """Two racks of two 2-cpu nodes; a gang of three 1200m pods fits the racks' cpu in sum but not
    pod by pod: each rack takes two and the third finds no node."""
    docs = [RACKS]
    for n in ("a-1", "a-2", "b-1", "b-2"):
        docs.append(
            f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n"
            "status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n"
        )
    for p in ("p0", "p1", "p2"):
        docs.append(
            "apiVersion: v1\nkind: Pod\n"
            f"metadata: {{name: {p}, namespace: ml, creationTimestamp: '2026-01-01T00:00:00Z',"
            " annotations: {scheduling.k8s.io/group-name: train}}\n"
            "spec: {schedulerName: volcano, containers: [{name: c, resources: {requests: {cpu: 1200m}}}]}\n"
            "status: {phase: Pending}\n"
        )
    path = tmp_path / "cluster.yaml"
    path.write_text("---\n".join(docs))
    return path


CONF_TOPOLOGY = """actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: network-topology-aware
"""


def test_why_pending_names_the_tier_that_could_not_hold_the_gang(tmp_path: Path) -> None:
    """`fumarole schedule` (JSON and table): every pending pod of the job says the gang fits in no
    HyperNode up to tier 1 (rack), naming the racks tried; the pod that failed in the last rack
    tried also carries Volcano's fit error for it, which the PodGroup condition carries too.
    (`highestTierName: rack` is read as the tier it names, as Volcano's session does.)"""
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF_TOPOLOGY)
    cluster = racks_cluster(tmp_path)
    args = ("schedule", "--conf", str(conf), "--cluster", str(cluster), "--now", "manifests")
    p = fumarole(*args)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["binds"] == {} and out["pipelined"] == {}
    head = (
        "gang: 2/3 tasks schedulable (minMember 3); network topology (hard, highestTierAllowed 1): "
        "the gang fits in no HyperNode up to tier 1 (rack); tried tier 1 (rack): rack-a, rack-b; "
        "the cluster top is tier 3"
    )
    volcano = "In hyperNode rack-b: 0/2 nodes are unavailable: 2 Insufficient cpu."
    assert out["pending"] == {"ml/p0": head, "ml/p1": head, "ml/p2": f"{head}; {volcano}"}
    (cond,) = out["podgroups"]["ml/train"]["conditions"]
    assert cond["type"] == "Unschedulable" and cond["message"].endswith(f"Origin reason is p2: {volcano}")
    t = fumarole(*args, "--format", "table")
    assert t.returncode == 0, t.stderr
    rows = [line for line in t.stdout.splitlines() if line.startswith("ml/p")]
    assert len(rows) == 3 and all("up to tier 1 (rack)" in r for r in rows), t.stdout
    assert "could be placed" not in t.stdout
