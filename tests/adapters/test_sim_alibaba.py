"""Alibaba GPU trace importer: a deterministic window of pods as a workload the simulator runs to the end."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from daemon.adapters.simulator import Simulator
from daemon.adapters.simulator.alibaba import TraceError, convert_alibaba, main
from daemon.adapters.simulator.driver import Driver
from daemon.scheduler.framework.conf import parse_conf

TRACE = Path("/work/shared/traces/alibaba-gpu-v2023")
pytestmark = pytest.mark.skipif(not TRACE.is_dir(), reason="Alibaba trace not present")


def test_convert_is_deterministic_and_maps_fields(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    ca, cb = tmp_path / "ca.yaml", tmp_path / "cb.yaml"
    counts = convert_alibaba(TRACE, a, limit=12, seed=3, cluster_out=ca, nodes=5)
    convert_alibaba(TRACE, b, limit=12, seed=3, cluster_out=cb, nodes=5)
    assert a.read_text() == b.read_text() and ca.read_text() == cb.read_text()
    assert counts["pods"] == 12 and counts["nodes"] == 5
    jobs = [d for d in yaml.safe_load_all(a.read_text()) if d]
    assert len(jobs) == 12
    assert jobs[0]["metadata"]["annotations"]["fumarole.io/submit-at"] == "0s"
    ats = [int(j["metadata"]["annotations"]["fumarole.io/submit-at"][:-1]) for j in jobs]
    assert ats == sorted(ats)
    for j in jobs:
        assert j["spec"]["queue"] in ("ls", "burstable", "be")
        tmpl = j["spec"]["tasks"][0]["template"]
        assert tmpl["metadata"]["annotations"]["fumarole.io/duration"].endswith("s")
        req = tmpl["spec"]["containers"][0]["resources"]["requests"]
        assert req["cpu"].endswith("m") and req["memory"].endswith("Mi")
    nodes = [d for d in yaml.safe_load_all(ca.read_text()) if d and d["kind"] == "Node"]
    assert len(nodes) == 5
    assert convert_alibaba(TRACE, tmp_path / "c.yaml", limit=12, seed=4)["start"] != counts["start"]


def test_converted_workload_runs_to_the_end(tmp_path: Path) -> None:
    w, c = tmp_path / "w.yaml", tmp_path / "c.yaml"
    convert_alibaba(TRACE, w, limit=15, seed=1, cluster_out=c, nodes=6, max_duration="10m")
    sim = Simulator.from_files(c, w)
    conf = parse_conf(Path("daemon/examples/default-conf.yaml").read_text())
    Driver(sim, conf).run(max_cycles=3000)
    s = sim.stats()
    assert s.submitted == 15 and s.running == 0
    assert s.succeeded + len(sim.stuck_pods()) == 15 and s.succeeded > 0


def test_bundled_example_files_load() -> None:
    sim = Simulator.from_files(
        "examples/simulator/alibaba-cluster.yaml", "examples/simulator/alibaba-workload.yaml"
    )
    assert len(sim.submissions) == 150


def test_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "trace"
    bad.mkdir()
    (bad / "openb_pod_list_default.csv").write_text("name,cpu_milli\nx,1\n")
    with pytest.raises(TraceError, match=r"openb_pod_list_default\.csv: missing column\(s\) memory_mib"):
        convert_alibaba(bad, tmp_path / "o.yaml", limit=5)
    assert main([str(bad), str(tmp_path / "o.yaml")]) == 2
