"""Benchmark of the REST API over a large log; prints one JSON object.

1. A synthetic but daemon-shaped log of at least `--events` events is appended through
   SqliteEventLog in big batches (so the decision index is written exactly as the daemon
   writes it): nodes and queues, then cycles in which one job (a PodGroup of 4 pods) arrives,
   an earlier one is bound (4 BindDecided, PodGroup status, the cluster's pod updates), an
   older one finishes (pods Succeeded then deleted), ~20 waiting jobs are explained
   (JobExplained with a predicates-failed reason over every node), queue figures every 10
   cycles, CycleClosed, ClockAdvanced.  `generate_s` / `generate_events_per_s`.
2. `fumarole serve --db [--workers N]` over it in its own process (`serve_ready_s`: start-up, i.e.
   open, fold the whole log, first answer; with N > 1 workers, until all of them are ready).
3. For `/v1/jobs/{ns}/{name}` and `/v1/decisions?job=`, `--clients` concurrent clients (aiohttp,
   keep-alive) each send `--requests` requests for jobs picked at random (seeded) among all
   jobs: p50 / p90 / p99 / max latency in ms, requests per second, and the server process's CPU
   time per request (`server_cpu_us_per_req`, from /proc: the figure least disturbed by other
   work on the machine's cores; with workers, the supervisor and all its workers, and
   `worker_cpu_share`, each worker's part of it: how evenly the kernel spread the connections),
   and the load generator's own (`client_cpu_us_per_req`: it shares the cores with the server).
   The first request of a kind after start-up also pays the one-time freeze of the projection;
   a warm-up round is run and reported apart (`warmup_s`).

With `--hot N`, `/v1/decisions?job=` is measured a second time over only N jobs asked round-robin
(`decisions_hot`: a dashboard polling the same jobs; not the goal's figure).

Usage: python bench/api.py [--events 1000000] [--clients 50] [--requests 200] [--db FILE] [--hot N]
                          [--workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from fumarole.store.events import (
    BindDecided,
    ClockAdvanced,
    CycleClosed,
    CycleOpened,
    JobExplained,
    NodeUpserted,
    PendingReason,
    PodDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    QueueFigures,
    QueueFiguresRecorded,
    QueueUpserted,
)
from fumarole.store.sqlite import SqliteEventLog

FUMAROLE = str(Path(sys.executable).parent / "fumarole")
NODES = 500
QUEUES = 8
PODS_PER_JOB = 4
CONF_HASH = "0" * 64


def _node(i: int) -> NodeUpserted:
    m = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:04d}", "labels": {"zone": f"z{i % 4}"}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }
    return NodeUpserted(name=f"node-{i:04d}", manifest=m)


def _queue(i: int) -> QueueUpserted:
    m = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": f"q{i}"},
        "spec": {"weight": 1 + i % 3, "reclaimable": True},
    }
    return QueueUpserted(name=f"q{i}", manifest=m)


def _ns(j: int) -> str:
    return f"team-{j % 16:02d}"


def _job_name(j: int) -> str:
    return f"job-{j:06d}"


def _pod_manifest(j: int, k: int, at: int, node: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{_job_name(j)}-{k}",
            "namespace": _ns(j),
            "uid": f"uid-{j}-{k}",
            "annotations": {"scheduling.k8s.io/group-name": _job_name(j)},
            "creationTimestamp": at,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def _arrive(j: int, at: int) -> list[Any]:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": _job_name(j), "namespace": _ns(j)},
        "spec": {"minMember": PODS_PER_JOB, "queue": f"q{j % QUEUES}"},
    }
    out: list[Any] = [PodGroupUpserted(namespace=_ns(j), name=_job_name(j), manifest=pg, at_ms=at)]
    for k in range(PODS_PER_JOB):
        out.append(
            PodUpserted(
                namespace=_ns(j), name=f"{_job_name(j)}-{k}", manifest=_pod_manifest(j, k, at), at_ms=at
            )
        )
    return out


def _explained(c: int, j: int) -> JobExplained:
    nodes = {
        "Insufficient cpu": NODES * 3 // 5,
        "node(s) didn't match Pod's node affinity/selector": NODES * 2 // 5,
    }
    fit = (
        f"0/{NODES} nodes are unavailable: {NODES * 3 // 5} Insufficient cpu, "
        f"{NODES * 2 // 5} node(s) didn't match Pod's node affinity/selector."
    )
    reason = PendingReason(
        code="predicates-failed", message=fit, resource="cpu", total_nodes=NODES, nodes=nodes, min_member=4
    )
    pods = {f"{_ns(j)}/{_job_name(j)}-{k}": fit for k in range(PODS_PER_JOB)}
    return JobExplained(
        cycle=c,
        namespace=_ns(j),
        name=_job_name(j),
        queue=f"q{j % QUEUES}",
        message=f"{PODS_PER_JOB}/{PODS_PER_JOB} pods pending; {fit}",
        reasons=(reason,),
        queue_position=1 + (j % 20),
        pods=pods,
    )


def _figures(c: int) -> QueueFiguresRecorded:
    queues = {
        f"q{i}": QueueFigures(
            weight=1 + i % 3,
            deserved={"cpu": f"{4000 + c % 97}", "memory": "16Ti"},
            allocated={"cpu": f"{3000 + (c * 7 + i) % 900}", "memory": "12Ti"},
            request={"cpu": "9000", "memory": "30Ti"},
            share=round(0.5 + ((c + i) % 50) / 100, 6),
        )
        for i in range(QUEUES)
    }
    return QueueFiguresRecorded(cycle=c, queues=queues)


def cycle_events(c: int, seq_hint: int) -> list[Any]:
    """The events of cycle `c` (job c arrives; job c-30 is bound; job c-60 finishes)."""
    at = c * 1000
    out: list[Any] = _arrive(c, at)
    out.append(CycleOpened(cycle=c, watermark=seq_hint + len(out), now_ms=at, conf_hash=CONF_HASH))
    bound = c - 30
    binds = 0
    if bound >= 0:
        for k in range(PODS_PER_JOB):
            node = f"node-{(bound * PODS_PER_JOB + k) % NODES:04d}"
            out.append(
                BindDecided(
                    cycle=c,
                    namespace=_ns(bound),
                    name=f"{_job_name(bound)}-{k}",
                    uid=f"uid-{bound}-{k}",
                    node=node,
                    job=f"{_ns(bound)}/{_job_name(bound)}",
                    queue=f"q{bound % QUEUES}",
                )
            )
            binds += 1
        out.append(
            PodGroupStatusChanged(
                cycle=c, namespace=_ns(bound), name=_job_name(bound), phase="Running", running=4
            )
        )
    waiting = [j for j in range(max(0, c - 29), c + 1)]
    for j in waiting[-20:]:
        out.append(_explained(c, j))
    if bound >= 0:  # the bound job no longer waits
        out.append(
            JobExplained(
                cycle=c, namespace=_ns(bound), name=_job_name(bound), queue=f"q{bound % QUEUES}", message=""
            )
        )
    if c % 10 == 0:
        out.append(_figures(c))
    out.append(
        CycleClosed(
            cycle=c, binds=binds, jobs=len(waiting) + 30, tasks=120, pending_tasks=80, duration_s=0.05
        )
    )
    if bound >= 0:
        for k in range(PODS_PER_JOB):
            node = f"node-{(bound * PODS_PER_JOB + k) % NODES:04d}"
            m = _pod_manifest(bound, k, at, node=node, phase="Running")
            out.append(
                PodUpserted(namespace=_ns(bound), name=f"{_job_name(bound)}-{k}", manifest=m, at_ms=at)
            )
    done = c - 60
    if done >= 0:
        for k in range(PODS_PER_JOB):
            out.append(PodDeleted(namespace=_ns(done), name=f"{_job_name(done)}-{k}", at_ms=at))
        out.append(
            PodGroupStatusChanged(cycle=c, namespace=_ns(done), name=_job_name(done), phase="Completed")
        )
    out.append(ClockAdvanced(at_ms=at + 500))
    return out


async def generate(path: str, target: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    log = await SqliteEventLog.open(path)
    try:
        await log.append([_node(i) for i in range(NODES)] + [_queue(i) for i in range(QUEUES)])
        c = 0
        seq = await log.last_seq()
        pending: list[Any] = []
        while seq + len(pending) < target:
            evs = cycle_events(c, seq + len(pending))
            pending.extend(evs)
            c += 1
            if len(pending) >= 50_000:
                await log.append(pending)
                seq += len(pending)
                pending = []
        if pending:
            await log.append(pending)
        last = await log.last_seq()
    finally:
        await log.close()
    secs = time.perf_counter() - t0
    return {
        "events": last,
        "cycles": c,
        "jobs": c,
        "generate_s": round(secs, 2),
        "generate_events_per_s": round(last / secs),
    }


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, round(p / 100 * len(xs)) - 1))
    return round(xs[i], 2)


async def _fetch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, url: str) -> int:
    """One keep-alive HTTP/1.1 GET; returns the status (the body is read and dropped)."""
    writer.write(f"GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def load(base: str, urls: list[str], clients: int) -> dict[str, Any]:
    """`clients` keep-alive connections share `urls` (each one request); latency of each, throughput.

    The client is a minimal HTTP/1.1 writer/reader on asyncio streams, so that the load generator
    (sharing the machine's cores with the server) costs as little as possible."""
    lat: list[float] = []
    errors = 0
    queue = list(reversed(urls))
    hostport = base.split("://", 1)[1].rstrip("/")
    host, port = hostport.rsplit(":", 1)

    async def worker() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while queue:
                url = queue.pop()
                t = time.perf_counter()
                if await _fetch(reader, writer, hostport, url) != 200:
                    errors += 1
                lat.append((time.perf_counter() - t) * 1000)
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - t0
    return {
        "requests": len(lat),
        "errors": errors,
        "p50_ms": _pct(lat, 50),
        "p90_ms": _pct(lat, 90),
        "p99_ms": _pct(lat, 99),
        "max_ms": round(max(lat), 2),
        "mean_ms": round(statistics.fmean(lat), 2),
        "requests_per_s": round(len(lat) / wall),
    }


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the workers of `fumarole serve --workers N`), by pid."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int(Path(d, "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    return sorted(out)


async def load_measured(base: str, urls: list[str], clients: int, pid: int) -> dict[str, Any]:
    """`load`, plus the server's CPU time per request (`server_cpu_us_per_req`; the process and its
    workers): unlike the latencies, it hardly depends on what else the machine's cores are doing."""
    pids = [pid, *_children(pid)]
    before = [_cpu_s(p) for p in pids]
    client_before = time.process_time()
    out = await load(base, urls, clients)
    client = time.process_time() - client_before
    after = [_cpu_s(p) for p in pids]
    out["client_cpu_us_per_req"] = round(client / len(urls) * 1e6)
    used = [a - b for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    if len(used) == len(pids):
        out["server_cpu_us_per_req"] = round(sum(used) / len(urls) * 1e6)
        if len(pids) > 1 and sum(used[1:]) > 0:
            out["worker_cpu_share"] = [round(u / sum(used[1:]), 2) for u in used[1:]]
    return out


def _start_serve(db: str, workers: int = 1) -> tuple[subprocess.Popen[str], str, float]:
    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FUMAROLE_"))}
    proc = subprocess.Popen(
        [FUMAROLE, "serve", "--db", db, "--listen", "127.0.0.1:0", "--workers", str(workers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("REST API on "):
        proc.kill()
        raise SystemExit(
            f"fumarole serve did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
    return proc, line.split()[3], time.perf_counter() - t0


async def bench(
    db: str, clients: int, requests: int, jobs: int, seed: int, hot: int = 0, workers: int = 1
) -> dict[str, Any]:
    proc, base, started = _start_serve(db, workers)
    try:
        rng = random.Random(seed)
        picks = [rng.randrange(jobs) for _ in range(clients * requests)]
        t0 = time.perf_counter()
        async with aiohttp.ClientSession(base) as s, s.get(f"/v1/jobs/{_ns(0)}/{_job_name(0)}") as r:
            assert r.status == 200, await r.text()
        warm = time.perf_counter() - t0
        job_urls = [f"/v1/jobs/{_ns(j)}/{_job_name(j)}" for j in picks]
        dec_urls = [f"/v1/decisions?job={_ns(j)}/{_job_name(j)}" for j in picks]
        await load(base, job_urls[: clients * 5], clients)  # warm connections and caches
        out: dict[str, Any] = {
            "serve_ready_s": round(started, 2),
            "warmup_s": round(warm, 2),
            "clients": clients,
            "workers": workers,
            "jobs": await load_measured(base, job_urls, clients, proc.pid),
            "decisions": await load_measured(base, dec_urls, clients, proc.pid),
        }
        if hot:  # not the goal's figure: the same few jobs asked over and over (a dashboard)
            hot_urls = [dec_urls[i % hot] for i in range(clients * requests)]
            out["decisions_hot"] = {"jobs": hot, **await load_measured(base, hot_urls, clients, proc.pid)}
        async with aiohttp.ClientSession(base) as s, s.get(dec_urls[0]) as r:
            body = await r.json()
            out["decisions_per_job_sample"] = len(body["items"])
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=200, help="requests per client and endpoint")
    ap.add_argument("--db", help="reuse (or create) this log file instead of a temporary one")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--hot",
        type=int,
        default=0,
        help="also measure /v1/decisions?job= over only this many jobs, asked round-robin (decisions_hot)",
    )
    ap.add_argument(
        "--workers", type=int, default=1, help="fumarole serve --workers (SO_REUSEPORT worker processes)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "bench.db")
        if Path(db).exists():
            gen: dict[str, Any] = {"reused": db}

            async def count() -> int:
                log = await SqliteEventLog.open(db, readonly=True)
                try:
                    return await log.last_seq()
                finally:
                    await log.close()

            gen["events"] = asyncio.run(count())
            conn = sqlite3.connect(db)
            gen["jobs"] = conn.execute(
                "SELECT count(*) FROM events WHERE type = 'podgroup.upserted'"
            ).fetchone()[0]
            conn.close()
        else:
            gen = asyncio.run(generate(db, args.events))
        jobs = int(gen["jobs"])
        res = asyncio.run(bench(db, args.clients, args.requests, jobs, args.seed, args.hot, args.workers))
    print(json.dumps({"log": gen, "api": res}), flush=True)


if __name__ == "__main__":
    main()
