"""Smoke test of bench/kubernetes.py: tiny sizes against the fake API server, JSON keys and zero violations.

Runs the benchmark as a user would (a subprocess: the fake API server and `fumarole run --adapter
kubernetes` are real processes) and checks the shape of its JSON and its correctness figures,
never its timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "kubernetes.py"

RUN_KEYS = {
    "scenario",
    "scheduler",
    "run",
    "server",
    "nodes",
    "gangs",
    "pods",
    "gang_sizes",
    "bound",
    "unbound",
    "all_bound",
    "scheduler_exit",
    "first_bind_to_last_bind_s",
    "binds_per_s",
    "binds_per_s_from_start",
    "writes",
    "cpu_s",
    "cpu_ms_per_bound_pod",
    "rss_mb",
    "rss_peak_mb",
    "violations",
}
SCENARIO_KEYS = {
    "burst": {
        "create_s",
        "first_create_to_last_bind_s",
        "last_create_to_last_bind_s",
        "minimal",
        "ratio_to_minimal",
    },
    "backlog": {"start_to_last_bind_s", "start_to_first_bind_s", "minimal", "ratio_to_minimal"},
    "churn": {"create_s", "latency_s"},
}


def run_bench(*args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBE_APISERVER", "VC_SCHEDULER")}
    r = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, env=env, timeout=240
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(json.loads(r.stdout))


@pytest.mark.timeout(300)
def test_bench_scenarios_on_the_fake_report_every_key_and_no_violation() -> None:
    out = run_bench(
        "--scenarios=burst,backlog,churn",
        "--nodes=3",
        "--gangs=6",
        "--mix=1:1,4:1",
        "--churn-rate=6",
        "--churn-seconds=2",
        "--settle=0.2",
        "--drain=0.5",
    )
    assert out["violations"] == 0
    assert out["server"].startswith("fake")
    assert out["vc_scheduler"] is None
    assert set(out["scenarios"]) == {"burst", "backlog", "churn"}
    for name, scenario in out["scenarios"].items():
        (run,) = scenario["runs"]
        assert RUN_KEYS | SCENARIO_KEYS[name] <= set(run), (
            name,
            sorted(RUN_KEYS | SCENARIO_KEYS[name] - set(run)),
        )
        assert run["scheduler"] == "fumarole" and run["all_bound"] and run["unbound"] == 0
        assert run["violations"] == {
            "partial_gangs": 0,
            "over_capacity_nodes": 0,
            "bound_twice": 0,
            "examples": [],
            "total": 0,
        }
        writes = run["writes"]
        assert set(writes["by_kind"]) == {
            "bindings",
            "events",
            "podgroups",
            "queues_status",
            "pods_status",
            "other",
        }
        # The fake's apiserver_request_total saw exactly one binding per bound pod.
        assert writes["by_kind"]["bindings"] == run["bound"] == run["pods"]
        assert writes["total"] == sum(writes["by_kind"].values())
        assert set(scenario["summary"]) == {"fumarole"}
        if "minimal" in run:
            assert run["minimal"]["binds"] == run["bound"] and run["minimal"]["failed"] == 0
    assert set(out["scenarios"]["churn"]["runs"][0]["latency_s"]) == {"p50", "p99", "max", "count"}


@pytest.mark.timeout(300)
def test_bench_scale_on_the_fake_reports_cycle_times() -> None:
    out = run_bench(
        "--scale",
        "--scale-nodes=6",
        "--scale-pods=60",
        "--scale-pending=0.25",
        "--scale-steady=1",
        "--scale-trickle=3",
        "--mix=1:1,4:1",
    )
    assert out["violations"] == 0
    (run,) = out["scenarios"]["scale"]["runs"]
    assert run["all_bound"] and run["pods"] > run["pods_pending"] > 0
    for key in (
        "start_to_listed_s",
        "listed_to_first_cycle_s",
        "start_to_first_cycle_s",
        "first_cycle_duration_s",
    ):
        assert isinstance(run[key], float), key
    assert run["cycles"] >= 1 and set(run["steady_cycle_s"]) == {"p50", "p90", "max"}
    assert run["rss_peak_mb"] > 0
