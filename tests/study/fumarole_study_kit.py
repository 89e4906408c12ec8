"""Hand-made Alibaba trace folders for the study tests."""

from __future__ import annotations

from pathlib import Path

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def write_trace(d: Path, pods: str, nodes: str) -> Path:
    """A trace folder with the default pod list and the all-node list holding these CSV rows."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "openb_pod_list_default.csv").write_text(POD_HEADER + pods)
    (d / "openb_node_list_all_node.csv").write_text(NODE_HEADER + nodes)
    return d
