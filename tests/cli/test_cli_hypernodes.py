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
