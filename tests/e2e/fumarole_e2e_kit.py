"""Helpers for end-to-end tests: a small simulated cluster and workload, the daemon as a subprocess,
and a reader of the resulting log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from store.log import StoredEvent
from store.sqlite import SqliteEventLog

ROOT = Path(__file__).resolve().parents[2]
FUMAROLE = str(Path(sys.executable).parent / "fumarole")


def _node(name: str, cpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}},
    }


def _queue(name: str, weight: int, reclaimable: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": reclaimable},
    }


def _pc(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _job(name: str, queue: str, pods: int, cpu: int, at: int, dur: int, pc: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "e2e", "annotations": {"fumarole.io/submit-at": f"{at}s"}},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": pods,
            "priorityClassName": pc,
            "tasks": [
                {
                    "name": "w",
                    "replicas": pods,
                    "template": {
                        "metadata": {"annotations": {"fumarole.io/duration": f"{dur}s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def write_small_sim(dir_: Path, *, jobs: int = 10) -> tuple[Path, Path]:
    """4 nodes of 8 cpu; queues a (weight 1) and b (weight 3); low/high priority; gangs of 1-4 pods."""
    cluster = [_node(f"n{i}", 8) for i in range(4)]
    cluster += [_queue("a", 1), _queue("b", 3), _pc("low", 10), _pc("high", 1000)]
    cluster.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "e2e"}})
    work = []
    for i in range(jobs):
        queue = "a" if i % 3 != 2 else "b"
        pc = "high" if i % 4 == 3 else "low"
        work.append(_job(f"j{i}", queue, 1 + i % 4, 2 + i % 3, at=i * 7, dur=40 + (i * 13) % 50, pc=pc))
    c, w = dir_ / "cluster.yaml", dir_ / "workload.yaml"
    c.write_text(yaml.safe_dump_all(cluster, sort_keys=False))
    w.write_text(yaml.safe_dump_all(work, sort_keys=False))
    return c, w


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FUMAROLE_", "NOTIFY_SOCKET"))}
    e["PYTHONUNBUFFERED"] = "1"
    e.update(extra)
    return e


def run_daemon(*args: str, timeout: float = 240, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FUMAROLE, "run", *args], capture_output=True, text=True, timeout=timeout, env=env(**extra_env)
    )


def start_daemon(*args: str, **extra_env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [FUMAROLE, "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra_env),
    )


def read_log(db: Path) -> list[StoredEvent]:
    async def go() -> list[StoredEvent]:
        log = await SqliteEventLog.open(str(db), readonly=True)
        try:
            return [r async for r in log.read_range(1, await log.last_seq())]
        finally:
            await log.close()

    return asyncio.run(go())
