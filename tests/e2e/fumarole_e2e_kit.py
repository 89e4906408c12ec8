"""Helpers for end-to-end tests: a small simulated cluster and workload, the daemon (and `fumarole
serve`) as a subprocess and the URL of its REST API, the offline `schedule` over a dump, a free
port, polling, a reader of the resulting log, and the uninterrupted run on a PostgreSQL log the
replica tests compare with."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from fumarole.store.log import StoredEvent
from fumarole.store.sqlite import SqliteEventLog

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


def start_serve(db: Path | str, *args: str) -> subprocess.Popen[str]:
    """`fumarole serve --db DB --listen 127.0.0.1:0 [args]` (read `rest_url` for its address)."""
    return subprocess.Popen(
        [FUMAROLE, "serve", "--db", str(db), "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )


def rest_url(proc: subprocess.Popen[str]) -> str:
    """The base URL of the process's "REST API on http://HOST:PORT" line (read from its stdout)."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        m = re.search(r"REST API on (http://\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"the process ended before printing its REST API:\n{''.join(seen)}")


def offline_binds(dump: Path) -> dict[str, str]:
    """`fumarole schedule --now manifests --cluster DUMP`: pod name → node of every bind it decides."""
    r = subprocess.run(
        [FUMAROLE, "schedule", "--now", "manifests", "--cluster", str(dump), "--format", "json"],
        capture_output=True,
        text=True,
        env=env(),
    )
    assert r.returncode == 0, r.stderr
    return {k.partition("/")[2]: v for k, v in json.loads(r.stdout)["binds"].items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Poll `check` (an OSError counts as not yet) until it is truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def uninterrupted_pg_run(dsn: str, lease: str) -> None:
    """The bundled simulation run to its end on the PostgreSQL log `dsn` by one replica (lease
    `lease` seconds): the reference the replica tests compare their logs with."""
    p = subprocess.run(
        [FUMAROLE, "run", "--db", dsn, "--no-api"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(FUMAROLE_LEASE_DURATION=lease),
    )
    assert p.returncode == 0 and "workload drained" in p.stdout, p.stdout + p.stderr


def read_log(db: Path) -> list[StoredEvent]:
    async def go() -> list[StoredEvent]:
        log = await SqliteEventLog.open(str(db), readonly=True)
        try:
            return [r async for r in log.read_range(1, await log.last_seq())]
        finally:
            await log.close()

    return asyncio.run(go())


def assert_replays_identically(db: Path | str) -> dict[str, Any]:
    """`fumarole replay --format json` on the log: exit 0 and every cycle identical (at least one);
    returns the summary."""
    replay = subprocess.run(
        [FUMAROLE, "replay", "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=240,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    summary: dict[str, Any] = json.loads(replay.stdout)["summary"]
    assert summary["cycles"] == summary["identical"] > 0, summary
    return summary
