"""The Alibaba importer's mapping on hand-made rows: fractional and multi-GPU, gpu_spec, CPU-only, QoS."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fumarole_study_kit import write_trace

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.adapters.simulator.alibaba import convert_alibaba, main
from fumarole.daemon.study.trace import TraceError

ROWS = (
    "p-share,4000,8192,1,460,,BE,Running,100,400,110\n"
    "p-multi,32000,65536,4,1000,,LS,Succeeded,0,1000,50\n"
    "p-spec,8000,16384,1,1000,V100M16|P100,Burstable,Running,200,300,200\n"
    "p-cpu,2000,4096,0,0,,Guaranteed,Pending,300,900,\n"
)
NODES = "n-cpu,32000,131072,0,\nn-t4,64000,262144,2,T4\nn-v100,96000,524288,8,V100M16\n"


def _objects(tmp_path: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    trace = write_trace(tmp_path / "trace", ROWS, NODES)
    w, c = tmp_path / "w.yaml", tmp_path / "c.yaml"
    counts = convert_alibaba(trace, w, cluster_out=c)
    assert counts == {"pods": 4, "start": 0, "nodes": 3}
    jobs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(w.read_text()) if d}
    cluster = {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(c.read_text()) if d}
    return jobs, cluster


def _container(job: dict) -> dict:
    return job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]


def test_gpu_requests_map_to_deviceshare_vgpu(tmp_path: Path) -> None:
    jobs, _ = _objects(tmp_path)
    share = _container(jobs["p-share"])["resources"]
    assert share["limits"] == {
        "volcano.sh/vgpu-number": "1",
        "volcano.sh/vgpu-memory": "460",
        "volcano.sh/vgpu-cores": "46",
    }
    assert share["requests"]["cpu"] == "4000m" and share["requests"]["memory"] == "8192Mi"
    multi = _container(jobs["p-multi"])["resources"]
    assert multi["limits"] == {
        "volcano.sh/vgpu-number": "4",
        "volcano.sh/vgpu-memory": "1000",
        "volcano.sh/vgpu-cores": "100",
    }
    cpu = _container(jobs["p-cpu"])["resources"]
    assert "limits" not in cpu and not any(k.startswith("volcano.sh") for k in cpu["requests"])


def test_gpu_spec_qos_and_times(tmp_path: Path) -> None:
    jobs, _ = _objects(tmp_path)
    aff = jobs["p-spec"]["spec"]["tasks"][0]["template"]["spec"]["affinity"]["nodeAffinity"]
    expr = aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][
        0
    ]
    assert expr == {"key": "alibaba.com/gpu-model", "operator": "In", "values": ["P100", "V100M16"]}
    assert "affinity" not in jobs["p-share"]["spec"]["tasks"][0]["template"]["spec"]
    assert [(j["spec"]["queue"], j["spec"]["priorityClassName"]) for j in jobs.values()] == [
        ("ls", "alibaba-ls"),  # p-multi (creation 0 comes first)
        ("be", "alibaba-be"),
        ("burstable", "alibaba-burstable"),
        ("ls", "alibaba-ls"),  # Guaranteed
    ]
    ann = {n: j["metadata"]["annotations"]["fumarole.io/submit-at"] for n, j in jobs.items()}
    assert ann == {"p-multi": "0s", "p-share": "100s", "p-spec": "200s", "p-cpu": "300s"}
    dur = {
        n: j["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["fumarole.io/duration"]
        for n, j in jobs.items()
    }
    # deletion - scheduled; never scheduled: deletion - creation; at least 1 s
    assert dur == {"p-multi": "950s", "p-share": "290s", "p-spec": "100s", "p-cpu": "600s"}


def test_nodes_register_their_cards(tmp_path: Path) -> None:
    _, cluster = _objects(tmp_path)
    t4 = cluster["Node/n-t4"]
    assert t4["metadata"]["labels"] == {"alibaba.com/gpu-model": "T4"}
    reg = t4["metadata"]["annotations"]["volcano.sh/node-vgpu-register"]
    assert reg == "n-t4-gpu0,100,1000,NVIDIA-T4,true,hami-core:n-t4-gpu1,100,1000,NVIDIA-T4,true,hami-core:"
    alloc = t4["status"]["allocatable"]
    assert (
        alloc["volcano.sh/vgpu-number"],
        alloc["volcano.sh/vgpu-memory"],
        alloc["volcano.sh/vgpu-cores"],
    ) == (
        "200",
        "2000",
        "200",
    )
    plain = cluster["Node/n-cpu"]
    assert (
        "annotations" not in plain["metadata"]
        and "volcano.sh/vgpu-number" not in plain["status"]["allocatable"]
    )
    assert {k for k in cluster if not k.startswith("Node/")} == {
        "Queue/ls",
        "Queue/burstable",
        "Queue/be",
        "PriorityClass/alibaba-ls",
        "PriorityClass/alibaba-burstable",
        "PriorityClass/alibaba-be",
    }


def test_converted_files_load_in_the_simulator(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace", ROWS, NODES)
    convert_alibaba(trace, tmp_path / "w.yaml", cluster_out=tmp_path / "c.yaml")
    sim = Simulator.from_files(tmp_path / "c.yaml", tmp_path / "w.yaml")
    assert len(sim.submissions) == 4


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,1,1,1,1500,,LS,Running,0,1,0\n", "line 2: column gpu_milli: at most 1000"),
        ("x,1,1,2,500,,LS,Running,0,1,0\n", "line 2: column gpu_milli: a pod of 2 GPUs must take whole GPUs"),
        ("x,1,1,0,0,,Gold,Running,0,1,0\n", "line 2: column qos: unknown class 'Gold'"),
        ("x,one,1,0,0,,LS,Running,0,1,0\n", "line 2: column cpu_milli: expected a number"),
    ],
)
def test_bad_rows_name_file_line_and_column(tmp_path: Path, row: str, message: str) -> None:
    trace = write_trace(tmp_path / "trace", row, NODES)
    with pytest.raises(TraceError, match=message):
        convert_alibaba(trace, tmp_path / "o.yaml")
    assert main([str(trace), str(tmp_path / "o.yaml")]) == 2
    assert not (tmp_path / "o.yaml").exists()
