"""reclaim through `fumarole schedule`: eviction reasons in the JSON, and stable output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = (
    ROOT
    / "tests"
    / "scenarios"
    / "fumarole"
    / "reclaim"
    / "queue-b-new-job-reclaims-from-overusing-queue-a.yaml"
)


def schedule(tmp: Path, cycles: int, seed: str = "0") -> dict[str, Any]:
    sc = yaml.safe_load(SCENARIO.read_text())
    conf = tmp / "conf.yaml"
    cluster = tmp / "cluster.yaml"
    conf.write_text(sc["conf"])
    with cluster.open("w") as f:
        yaml.safe_dump_all(sc["objects"], f, sort_keys=False)
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    argv = ["schedule", "--conf", str(conf), "--cluster", str(cluster), "--cycles", str(cycles)]
    argv += ["--now", "manifests"]  # raw outputs are compared: the default (wall clock) varies
    p = subprocess.run(
        [exe, *argv, "--format", "json"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONHASHSEED=seed),
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    out["_raw"] = p.stdout
    return out


def test_eviction_reasons_name_action_queue_preemptor_job_and_plugins(tmp_path: Path) -> None:
    out = schedule(tmp_path, 1)
    assert out["evictions"] == ["ns-a/a-job-3", "ns-a/a-job-4", "ns-a/a-job-5", "ns-a/a-job-6"]
    assert out["evictionReasons"] == {
        "ns-a/a-job-3": "reclaim: reclaimed for queue team-b by ns-b/b-job-1 of job ns-b/b-job; "
        "victims chosen by gang, conformance",
        "ns-a/a-job-4": "reclaim: reclaimed for queue team-b by ns-b/b-job-1 of job ns-b/b-job; "
        "victims chosen by gang, conformance",
        "ns-a/a-job-5": "reclaim: reclaimed for queue team-b by ns-b/b-job-0 of job ns-b/b-job; "
        "victims chosen by gang, conformance",
        "ns-a/a-job-6": "reclaim: reclaimed for queue team-b by ns-b/b-job-0 of job ns-b/b-job; "
        "victims chosen by gang, conformance",
    }
    assert out["pipelined"] == {"ns-b/b-job-0": "n1", "ns-b/b-job-1": "n1"}
    assert out["binds"] == {}


def test_second_cycle_binds_and_output_is_identical_across_hash_seeds(tmp_path: Path) -> None:
    outs = [schedule(tmp_path, 2, seed) for seed in ("0", "1", "4242")]
    assert len({o["_raw"] for o in outs}) == 1
    assert outs[0]["binds"] == {"ns-b/b-job-0": "n1", "ns-b/b-job-1": "n1"}
    assert len(outs[0]["evictions"]) == 4
