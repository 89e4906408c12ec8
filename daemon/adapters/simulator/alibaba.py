"""Import the Alibaba GPU cluster trace (v2023, "openb") as a simulator workload and cluster.

`convert_alibaba(trace_dir, out_path, limit=..., seed=...)` reads `openb_pod_list_*.csv`
(any file with the pod-list columns) and `openb_node_list_all_node.csv` and writes a
workload file (one single-pod Volcano Job per trace pod) and, when asked, a cluster file.
Command line: `python -m daemon.adapters.simulator.alibaba TRACE_DIR OUT.yaml [--limit N]
[--seed S] [--cluster-out CLUSTER.yaml] [--nodes N] [--max-duration 2h]`.

Mapping (see docs/simulator.md):
* a window of `limit` consecutive pods (by creation time) starting at a seeded random
  position; submit-at = creation_time - the window's first creation_time;
* duration = deletion_time - scheduled_time (deletion_time - creation_time for pods never
  scheduled), at least 1 s, capped at `max_duration`;
* requests cpu_milli -> cpu "<n>m", memory_mib -> "<n>Mi", num_gpu -> nvidia.com/gpu; a
  GPU-sharing pod (num_gpu 1, gpu_milli < 1000) asks for one whole GPU (Fumarole does not
  model GPU sharing) and keeps its share in the `fumarole.io/alibaba-gpu-milli` annotation;
* gpu_spec (acceptable GPU models) -> required node affinity on label `alibaba.com/gpu-model`;
* qos LS / Guaranteed -> queue `ls` (weight 4) and PriorityClass `alibaba-ls` (1000);
  Burstable -> `burstable` (weight 2, 500); BE -> `be` (weight 1, 100);
* nodes: `nodes` of them (default: the trace's 1523 scaled by limit / pods in the file),
  sampled with the same seed, each with its cpu, memory, GPUs and model label.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from daemon.adapters.simulator.workload import format_duration, parse_duration

__all__ = ["QOS_CLASSES", "convert_alibaba", "main"]

Obj = dict[str, Any]
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
GPU = "nvidia.com/gpu"
MODEL_LABEL = "alibaba.com/gpu-model"
# qos -> (queue, queue weight, priority class, priority value)
QOS_CLASSES: dict[str, tuple[str, int, str, int]] = {
    "LS": ("ls", 4, "alibaba-ls", 1000),
    "Guaranteed": ("ls", 4, "alibaba-ls", 1000),
    "Burstable": ("burstable", 2, "alibaba-burstable", 500),
    "BE": ("be", 1, "alibaba-be", 100),
}


class TraceError(ValueError):
    """Bad trace input; the message names the file, the line and the column."""


def _read_csv(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            return list(reader)
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e}") from e


def _int(path: Path, line: int, row: dict[str, str], col: str, default: int | None = None) -> int:
    text = (row.get(col) or "").strip()
    if not text and default is not None:
        return default
    try:
        return int(float(text))
    except ValueError:
        raise TraceError(f"{path}: line {line}: column {col}: expected a number, got {text!r}") from None


def _pod_files(trace_dir: Path) -> list[Path]:
    files = sorted(trace_dir.glob("openb_pod_list*.csv"))
    if not files:
        raise TraceError(f"{trace_dir}: no openb_pod_list*.csv file")
    default = trace_dir / "openb_pod_list_default.csv"
    return [default] if default in files else files[:1]


def _job(row: dict[str, str], path: Path, line: int, at_s: int, dur_ms: int) -> Obj:
    qos = row["qos"].strip()
    if qos not in QOS_CLASSES:
        raise TraceError(f"{path}: line {line}: column qos: unknown class {qos!r}")
    queue, _, pc, _ = QOS_CLASSES[qos]
    requests: dict[str, str] = {
        "cpu": f"{_int(path, line, row, 'cpu_milli')}m",
        "memory": f"{_int(path, line, row, 'memory_mib')}Mi",
    }
    gpus = _int(path, line, row, "num_gpu", 0)
    gpu_milli = _int(path, line, row, "gpu_milli", 0)
    if gpus:
        requests[GPU] = str(gpus)
    annotations = {"fumarole.io/duration": format_duration(dur_ms)}
    if gpus == 1 and 0 < gpu_milli < 1000:
        annotations["fumarole.io/alibaba-gpu-milli"] = str(gpu_milli)
    spec: Obj = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "trace", "resources": {"requests": requests}}],
    }
    models = sorted(m for m in row["gpu_spec"].split("|") if m.strip())
    if models:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": models}]}
                    ]
                }
            }
        }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": row["name"].strip(),
            "namespace": "alibaba",
            "annotations": {"fumarole.io/submit-at": f"{at_s}s", "fumarole.io/alibaba-qos": qos},
        },
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": 1,
            "priorityClassName": pc,
            "tasks": [
                {
                    "name": "pod",
                    "replicas": 1,
                    "template": {"metadata": {"annotations": annotations}, "spec": spec},
                }
            ],
        },
    }


def _cluster(trace_dir: Path, count: int, rng: random.Random) -> list[Obj]:
    path = trace_dir / "openb_node_list_all_node.csv"
    rows = _read_csv(path, NODE_COLUMNS)
    picked = sorted(rng.sample(range(len(rows)), min(count, len(rows))))
    out: list[Obj] = []
    for i in picked:
        row, line = rows[i], i + 2
        alloc = {
            "cpu": f"{_int(path, line, row, 'cpu_milli')}m",
            "memory": f"{_int(path, line, row, 'memory_mib')}Mi",
            "pods": "110",
        }
        gpus = _int(path, line, row, "gpu", 0)
        labels = {}
        if gpus:
            alloc[GPU] = str(gpus)
        if row["model"].strip():
            labels[MODEL_LABEL] = row["model"].strip()
        meta: Obj = {"name": row["sn"].strip()}
        if labels:
            meta["labels"] = labels
        out.append({"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": alloc}})
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


def convert_alibaba(
    trace_dir: str | Path,
    out_path: str | Path,
    *,
    limit: int = 200,
    seed: int = 0,
    cluster_out: str | Path | None = None,
    nodes: int | None = None,
    max_duration: str = "2h",
) -> dict[str, int]:
    """Write a simulator workload (and optionally a cluster) from the trace; return counts.

    Deterministic for the same trace, limit, seed, nodes and max_duration.
    """
    if limit <= 0:
        raise TraceError(f"limit must be positive, got {limit}")
    cap_ms = parse_duration(max_duration)
    trace = Path(trace_dir)
    (path,) = _pod_files(trace)
    rows = _read_csv(path, POD_COLUMNS)
    indexed = sorted(
        ((_int(path, i + 2, r, "creation_time"), i) for i, r in enumerate(rows)),
    )
    rng = random.Random(seed)
    start = rng.randrange(0, max(1, len(indexed) - limit + 1))
    window = indexed[start : start + limit]
    if not window:
        raise TraceError(f"{path}: no pods")
    t0 = window[0][0]
    jobs: list[Obj] = []
    for created, i in window:
        row, line = rows[i], i + 2
        deleted = _int(path, line, row, "deletion_time")
        scheduled = _int(path, line, row, "scheduled_time", -1)
        began = scheduled if scheduled >= 0 else created
        dur_ms = min(cap_ms, max(1000, (deleted - began) * 1000))
        jobs.append(_job(row, path, line, created - t0, dur_ms))
    header = (
        f"# Alibaba GPU trace v2023 ({path.name}): {len(jobs)} pods from position {start}, seed {seed},\n"
        f"# durations capped at {max_duration}; converted by daemon.adapters.simulator.alibaba.\n"
    )
    Path(out_path).write_text(header + yaml.safe_dump_all(jobs, sort_keys=False, width=110), encoding="utf-8")
    counts = {"pods": len(jobs), "start": start}
    if cluster_out is not None:
        count = nodes if nodes is not None else max(4, round(1523 * len(jobs) / max(1, len(rows))))
        cluster = _cluster(trace, count, random.Random(seed))
        Path(cluster_out).write_text(
            f"# Alibaba GPU trace v2023: {count} nodes sampled with seed {seed}; queues, priority classes.\n"
            + yaml.safe_dump_all(cluster, sort_keys=False, width=110),
            encoding="utf-8",
        )
        counts["nodes"] = count
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m daemon.adapters.simulator.alibaba",
        description="Convert the Alibaba GPU trace v2023 into a Fumarole simulator workload.",
    )
    p.add_argument("trace_dir")
    p.add_argument("out")
    p.add_argument("--limit", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cluster-out")
    p.add_argument("--nodes", type=int)
    p.add_argument("--max-duration", default="2h")
    args = p.parse_args(argv)
    try:
        counts = convert_alibaba(
            args.trace_dir,
            args.out,
            limit=args.limit,
            seed=args.seed,
            cluster_out=args.cluster_out,
            nodes=args.nodes,
            max_duration=args.max_duration,
        )
    except (TraceError, ValueError) as e:
        print(f"alibaba: error: {e}", file=sys.stderr)
        return 2
    print(", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
