"""Scripted node usage in a simulated run (the daemon as a subprocess): the samples are logged as
NodeUsageObserved events, the usage plugin keeps pods off the loaded node while its sample is
fresh, rescheduling evicts from it through shuffle, and `fumarole replay` re-decides every cycle
identically from the log."""

from __future__ import annotations

from pathlib import Path

import yaml
from fumarole_e2e_kit import assert_replays_identically, read_log, run_daemon, write_small_sim

from fumarole.store.events import BindDecided, EvictDecided, NodeUsageObserved

CONF = """\
actions: "enqueue, allocate, backfill, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: usage
    arguments:
      thresholds: {cpu: 80, mem: 80}
  - name: rescheduling
    arguments:
      interval: 20s
      metricsPeriod: 10m
      strategies:
      - name: lowNodeUtilization
        params:
          thresholds: {cpu: 20, memory: 20}
          targetThresholds: {cpu: 50, memory: 50}
"""
SCRIPTS = {
    "n0": "0s cpu=95 memory=40; 120s cpu=30 memory=30",  # loaded for two minutes
    "n1": "0s cpu=10 memory=10; 40s cpu=70 memory=60; 100s cpu=10 memory=10",
    "n2": "0s cpu=5 memory=5",
    "n3": "0s cpu=5 memory=5",
}


def test_scripted_usage_is_logged_steers_decisions_and_replays_identically(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=12)
    cluster = list(yaml.safe_load_all(c.read_text()))
    for obj in cluster:
        if obj["kind"] == "Node":
            obj["metadata"]["annotations"] = {"usage.fumarole.io/script": SCRIPTS[obj["metadata"]["name"]]}
    c.write_text(yaml.safe_dump_all(cluster, sort_keys=False))
    conf = tmp_path / "sched.yaml"
    conf.write_text(CONF)
    data = tmp_path / "data"
    p = run_daemon(
        "--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--conf", str(conf), "--no-api"
    )
    assert p.returncode == 0, p.stdout + p.stderr
    rows = read_log(data / "fumarole.db")
    usage = [r.event for r in rows if isinstance(r.event, NodeUsageObserved)]
    assert [(u.node, u.metrics_ms) for u in usage if u.node == "n0"] == [("n0", 0), ("n0", 120_000)]
    assert len(usage) == 7
    # While n0's 95% CPU sample is fresh (0-120 s; under 5 minutes old), nothing is bound there.
    clock = 0
    early_n0 = []
    for r in rows:
        clock = max(clock, getattr(r.event, "at_ms", 0))
        if isinstance(r.event, BindDecided) and r.event.node == "n0" and clock < 120_000:
            early_n0.append(r.event.name)
    assert early_n0 == []
    binds = [r.event for r in rows if isinstance(r.event, BindDecided)]
    assert binds
    # n1 at 70% CPU from 40 s (over the 50% target) with n2/n3 under 20%: rescheduling evicts.
    evicts = [r.event for r in rows if isinstance(r.event, EvictDecided)]
    assert any("rescheduling" in e.reason for e in evicts), [e.reason for e in evicts]
    assert_replays_identically(data / "fumarole.db")
