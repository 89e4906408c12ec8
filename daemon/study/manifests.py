"""How a trace pod and a trace node become Kubernetes/Volcano objects (the importer's mapping).

* GPUs go to Volcano's deviceshare vGPU resources (`deviceshare.VGPUEnable`): a node registers
  its cards in `volcano.sh/node-vgpu-register` (type `NVIDIA-<model>`, memory 1000 units per card:
  the trace gives no GPU memory, so a card's memory is counted in milli-GPU) and has allocatable
  `volcano.sh/vgpu-number` (cards x SPLIT), `vgpu-memory` (cards x 1000) and `vgpu-cores`
  (cards x 100). A pod of `num_gpu` GPUs of `gpu_milli` each asks (limits) `vgpu-number: num_gpu`,
  `vgpu-memory: gpu_milli` and `vgpu-cores: gpu_milli / 10` per card: a whole GPU is cores 100,
  which deviceshare gives only an untouched card; a shared GPU is a share of one card.
* `gpu_spec` (acceptable models) is required node affinity on the node label
  `alibaba.com/gpu-model`.
* QoS: LS and Guaranteed -> queue `ls` (weight 4), PriorityClass `alibaba-ls` (1000); Burstable ->
  `burstable` (2, 500); BE -> `be` (1, 100). The QoS also stays in `fumarole.io/alibaba-qos`.
* creation time -> submit time; deletion - scheduled time -> how long the pod runs once bound.
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.study.trace import MILLI, TraceNode, TracePod

__all__ = [
    "GPU_MILLI_KEY",
    "MODEL_LABEL",
    "NAMESPACE",
    "QOS_CLASSES",
    "QOS_KEY",
    "card_uuid",
    "cluster_objects",
    "gpu_milli_of",
    "node_manifest",
    "pod_affinity",
    "pod_container",
]

Obj = dict[str, Any]
NAMESPACE = "alibaba"
MODEL_LABEL = "alibaba.com/gpu-model"
QOS_KEY = "fumarole.io/alibaba-qos"
GPU_MILLI_KEY = "fumarole.io/alibaba-gpu-milli"
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_CORES = "volcano.sh/vgpu-cores"
REGISTER = "volcano.sh/node-vgpu-register"
SPLIT = 100
"""Pods one card may hold (HAMi's deviceSplitCount); the trace's smallest share is 50 milli."""
# qos -> (queue, queue weight, priority class, priority value)
QOS_CLASSES: dict[str, tuple[str, int, str, int]] = {
    "LS": ("ls", 4, "alibaba-ls", 1000),
    "Guaranteed": ("ls", 4, "alibaba-ls", 1000),
    "Burstable": ("burstable", 2, "alibaba-burstable", 500),
    "BE": ("be", 1, "alibaba-be", 100),
}


def card_uuid(node: str, index: int) -> str:
    return f"{node}-gpu{index}"


def node_manifest(node: TraceNode) -> Obj:
    alloc: dict[str, str] = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "110"}
    meta: Obj = {"name": node.name}
    if node.gpus:
        alloc[VGPU_NUMBER] = str(node.gpus * SPLIT)
        alloc[VGPU_MEMORY] = str(node.gpus * MILLI)
        alloc[VGPU_CORES] = str(node.gpus * 100)
        kind = f"NVIDIA-{node.model or 'GPU'}"
        cards = "".join(
            f"{card_uuid(node.name, i)},{SPLIT},{MILLI},{kind},true,hami-core:" for i in range(node.gpus)
        )
        meta["annotations"] = {REGISTER: cards}
    if node.model:
        meta["labels"] = {MODEL_LABEL: node.model}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": alloc}}


def pod_container(pod: TracePod) -> Obj:
    """The pod's one container: cpu and memory requests, vGPU limits (requests equal)."""
    requests: dict[str, str] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    resources: Obj = {"requests": requests}
    if pod.num_gpu:
        gpu = {
            VGPU_NUMBER: str(pod.num_gpu),
            VGPU_MEMORY: str(pod.gpu_milli),
            VGPU_CORES: str(pod.gpu_milli // 10),
        }
        requests.update(gpu)
        resources["limits"] = dict(gpu)
    return {"name": "main", "image": "trace", "resources": resources}


def pod_affinity(pod: TracePod) -> Obj | None:
    if not pod.gpu_spec:
        return None
    term = {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(pod.gpu_spec)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def gpu_milli_of(manifest: Any) -> int:
    """GPU milli a pod manifest asks for in all: vGPU cards x cores x 10, or nvidia.com/gpu x 1000."""
    total = 0
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    for c in (spec or {}).get("containers") or []:
        res = (c.get("resources") or {}) if isinstance(c, dict) else {}
        lim = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        if VGPU_CORES in lim:
            total += int(lim.get(VGPU_NUMBER, 1)) * int(lim[VGPU_CORES]) * 10
        elif "nvidia.com/gpu" in lim:
            total += int(lim["nvidia.com/gpu"]) * MILLI
    return total


def cluster_objects() -> list[Obj]:
    """The queues and priority classes of the QoS mapping."""
    out: list[Obj] = []
    seen: set[str] = set()
    for queue, weight, pc, value in QOS_CLASSES.values():
        if queue in seen:
            continue
        seen.add(queue)
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {"weight": weight},
            }
        )
        out.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pc},
                "value": value,
            }
        )
    return out
