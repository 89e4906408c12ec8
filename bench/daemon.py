"""Benchmark of the daemon around the core: what a cycle costs at cluster scale.

Prints one JSON object per scenario (one line each):

* `steady` (per size NODESxRUNNING): the daemon's own cycle path in process — a SQLite event
  log, the single Writer folding into the Projection, `CycleRunner.run_cycle` (freeze, the
  session in a worker thread, the one-transaction append) — over a log seeded with a cluster
  listing of NODES nodes and RUNNING pods already Running on them (PodGroups of 10, queues
  q1–q4), as a Kubernetes adapter's listing would bring them.  It reports the first cycle
  (writes every PodGroup's status), the idle cycle (nothing pending: best and median of
  `--idle-cycles`), one cycle placing `--new-pods` new pods (gangs of 10; freeze to committed
  decisions) and a restart (open the log, load the projection from the saved snapshot, first
  freeze and cycle).  In process because reaching 100k running pods through the simulator's
  own binds takes the daemon minutes per run on this machine; the cycle path is the same.
* `workload`: the real daemon (`fumarole run` as a subprocess, simulator adapter, no API,
  `--log-level debug --log-format json`) on the issue's generated workload (bench/workload.py:
  NODES nodes of 32 cpu, 4 weighted queues, JOBS Volcano Jobs in gangs of 1–16 submitted over
  10 virtual minutes, running 1–30 minutes), stopped (SIGTERM: it finishes the running cycle)
  after `--wall-limit` seconds if it has not drained.  It reports simulated seconds per wall
  second and the per-cycle split freeze / gc (the heap settling) / session (open, actions,
  close, result) / events / append / dispatch / other (the simulator's clock advance and its
  append) from the daemon's `cycle timings` and `dispatched` debug log lines (with the CPU
  seconds of the thread that ran the freeze, the heap settling and the session with its events:
  `*_cpu_s`, steadier than wall seconds when other work shares the machine).  `cpu_s` is the
  daemon's CPU seconds (user + system) and `simulated_s_per_cpu_s` the rate per CPU second, the
  steadier figure on a shared machine.

Timings are wall seconds (`cpu_s`: the process's CPU seconds over the cycle, for the steady
cycles, where nothing else runs in the process meanwhile); the machine may be shared, so
`load1` (the 1-minute load average at start and end) is printed with every figure.  Usage:

    python bench/daemon.py                                   # quick: < 1 minute
    python bench/daemon.py --steady 1000x10000 5000x50000 10000x100000 \\
        --workload 2000x2700 --wall-limit 600                # the issue's sizes
    python bench/daemon.py --steady 10000x100000 --profile idle   # cProfile of idle cycles
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import json
import os
import pstats
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from bench.workload import QUEUES, write
from fumarole.daemon.cache import load_projection, save_projection
from fumarole.daemon.cache.projection import Projection
from fumarole.daemon.runtime import heap
from fumarole.daemon.runtime.conf_watch import ConfWatcher
from fumarole.daemon.runtime.session_loop import CycleRunner, CycleSummary
from fumarole.daemon.runtime.writer import Writer
from fumarole.store.events import (
    Event,
    NamespaceUpserted,
    NodeUpserted,
    PodGroupUpserted,
    PodUpserted,
    QueueUpserted,
    ResyncCompleted,
    ResyncStarted,
)
from fumarole.store.sqlite import SqliteEventLog

GANG = 10
EPOCH = "1970-01-01T00:00:00Z"


def load1() -> float:
    return round(os.getloadavg()[0], 2)


# ---------------------------------------------------------------------------------------------
# steady state, in process


def _pod(name: str, group: str, *, node: str = "", cpu: str = "2", created: str = EPOCH) -> dict[str, Any]:
    m: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "2Gi"}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        m["spec"]["nodeName"] = node
    return m


def _group(name: str, queue: str, *, running: bool, created: str = EPOCH) -> dict[str, Any]:
    m: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "bench", "creationTimestamp": created},
        "spec": {"minMember": GANG, "queue": queue},
    }
    if running:
        m["status"] = {"phase": "Running", "running": GANG}
    return m


def listing(nodes: int, running: int) -> list[Event]:
    """A cluster listing: namespace, queues q1–q4, `nodes` nodes, `running` Running pods in gangs of 10."""
    ev: list[Event] = [ResyncStarted(source="bench", kinds=())]
    ev.append(NamespaceUpserted(name="bench", manifest={"metadata": {"name": "bench"}}))
    for q, w in QUEUES:
        ev.append(
            QueueUpserted(
                name=q, manifest={"metadata": {"name": q}, "spec": {"weight": w, "reclaimable": True}}
            )
        )
    for i in range(nodes):
        name = f"node-{i:05d}"
        ev.append(
            NodeUpserted(
                name=name,
                manifest={
                    "metadata": {"name": name},
                    "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
                },
            )
        )
    for g in range(running // GANG):
        group = f"run-{g:06d}"
        ev.append(
            PodGroupUpserted(
                namespace="bench", name=group, manifest=_group(group, QUEUES[g % 4][0], running=True)
            )
        )
        for t in range(GANG):
            i = g * GANG + t
            ev.append(
                PodUpserted(
                    namespace="bench",
                    name=f"{group}-{t}",
                    manifest=_pod(f"{group}-{t}", group, node=f"node-{i % nodes:05d}"),
                )
            )
    ev.append(ResyncCompleted(source="bench"))
    return ev


def new_pods(count: int) -> list[Event]:
    """`count` new pending pods (1 cpu) in gangs of 10 across the four queues."""
    ev: list[Event] = []
    for g in range(count // GANG):
        group = f"new-{g:06d}"
        created = "1970-01-01T00:01:00Z"
        ev.append(
            PodGroupUpserted(
                namespace="bench",
                name=group,
                manifest=_group(group, QUEUES[g % 4][0], running=False, created=created),
            )
        )
        for t in range(GANG):
            ev.append(
                PodUpserted(
                    namespace="bench",
                    name=f"{group}-{t}",
                    manifest=_pod(f"{group}-{t}", group, cpu="1", created=created),
                )
            )
    return ev


def _split(s: CycleSummary, cpu: float | None = None) -> dict[str, float]:
    t = s.timings()
    t["total_s"] = round(s.freeze_s + getattr(s, "gc_s", 0.0) + s.decide_s + s.append_s, 6)
    if cpu is not None:
        t["cpu_s"] = round(cpu, 6)
    return t


async def _cycle(runner: CycleRunner, writer: Writer) -> tuple[CycleSummary, float]:
    """One cycle and the process CPU seconds it took (nothing else runs in the process meanwhile)."""
    c0 = time.process_time()
    s = await runner.run_cycle(writer)
    return s, time.process_time() - c0


@contextmanager
def _profiled(enabled: bool, label: str, top: int) -> Iterator[None]:
    if not enabled:
        yield
        return
    # The session runs in a worker thread (anyio.to_thread.run_sync), which cProfile does not
    # see: while profiling it runs inline on the event loop's thread.
    import anyio.to_thread

    threaded = anyio.to_thread.run_sync

    async def inline(fn: Any, *args: Any, **_kw: Any) -> Any:
        return fn(*args)

    anyio.to_thread.run_sync = inline  # type: ignore[assignment]
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        anyio.to_thread.run_sync = threaded  # type: ignore[assignment]
        print(f"== cProfile: {label} (cumulative, top {top})", file=sys.stderr)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(top)
        print(f"== cProfile: {label} (own time, top {top})", file=sys.stderr)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(top)


async def _steady(nodes: int, running: int, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scenario": "steady",
        "nodes": nodes,
        "running_pods": running,
        "load1_start": load1(),
    }
    db = tmp / f"steady-{nodes}.db"
    event_log = await SqliteEventLog.open(db)
    conf = ConfWatcher(a.conf)
    projection = Projection()
    writer = Writer(event_log, projection.fold, projection.seq)
    runner = CycleRunner(projection, conf)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        t0 = time.perf_counter()
        await writer.submit(listing(nodes, running))
        out["listing_s"] = round(time.perf_counter() - t0, 3)
        out["first_cycle"] = _split(*await _cycle(runner, writer))
        idles: list[tuple[CycleSummary, float]] = []
        with _profiled(a.profile == "idle", f"{a.idle_cycles} idle cycles at {nodes} nodes", a.profile_top):
            for _ in range(a.idle_cycles):
                idles.append(await _cycle(runner, writer))
        totals = [_split(*sc)["total_s"] for sc in idles]
        best = idles[totals.index(min(totals))]
        out["idle_cycle"] = {
            "best": _split(*best),
            "median_total_s": round(statistics.median(totals), 6),
            "median_cpu_s": round(statistics.median(c for _s, c in idles), 6),
            "cycles": len(idles),
            "events_written": 0 if not idles else None,
        }
        if a.new_pods:
            await writer.submit(new_pods(a.new_pods))
            with _profiled(
                a.profile == "place", f"placing {a.new_pods} pods at {nodes} nodes", a.profile_top
            ):
                placing, cpu = await _cycle(runner, writer)
            out["placing_cycle"] = {"new_pods": a.new_pods, "binds": placing.binds, **_split(placing, cpu)}
        t_save, c_save = time.perf_counter(), time.process_time()
        await save_projection(event_log, projection)
        out["snapshot_save"] = {
            "save_s": round(time.perf_counter() - t_save, 3),
            "cpu_s": round(time.process_time() - c_save, 3),
        }
        await writer.close()
    await event_log.close()
    out["idle_cycle"].pop("events_written")

    # Restart: open the log, load from the snapshot, first freeze and cycle (a "ready" daemon).
    t0 = time.perf_counter()
    c0 = time.process_time()
    event_log = await SqliteEventLog.open(db)
    with heap.loading():  # as the daemon's start-up does
        projection = await load_projection(event_log)
    loaded = time.perf_counter() - t0
    loaded_cpu = time.process_time() - c0
    writer = Writer(event_log, projection.fold, projection.seq)
    runner = CycleRunner(projection, ConfWatcher(a.conf))
    runner.cycle = projection.last_cycle
    runner.conf.mark_recorded(projection.conf_hash or None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        again, cpu = await _cycle(runner, writer)
        await writer.close()
    await event_log.close()
    out["restart"] = {
        "load_s": round(loaded, 3),
        "load_cpu_s": round(loaded_cpu, 3),
        "first_cycle_s": _split(again)["total_s"],
        "first_cycle_cpu_s": round(cpu, 3),
        "ready_s": round(time.perf_counter() - t0, 3),
        "ready_cpu_s": round(time.process_time() - c0, 3),
    }
    out["load1_end"] = load1()
    return out


# ---------------------------------------------------------------------------------------------
# the real daemon on a generated workload


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 4)


def _stats(xs: list[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.fmean(xs), 4) if xs else 0.0,
        "p50": _pct(xs, 0.5),
        "p95": _pct(xs, 0.95),
        "max": round(max(xs), 4) if xs else 0.0,
        "sum": round(sum(xs), 2),
    }


def _ts(line: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(line["ts"]).timestamp()


def workload(nodes: int, jobs: int, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    cluster, wl = write(tmp / f"workload-{nodes}x{jobs}", nodes=nodes, jobs=jobs, seed=a.seed)
    cmd = [
        sys.executable, "-m", "fumarole.daemon.cli", "run",
        "--data-dir", str(tmp / f"data-{nodes}x{jobs}"),
        "--cluster", str(cluster), "--workload", str(wl),
        "--no-api", "--log-level", "debug", "--log-format", "json",
    ]  # fmt: skip
    if a.conf:
        cmd += ["--conf", a.conf]
    out: dict[str, Any] = {"scenario": "workload", "nodes": nodes, "jobs": jobs, "load1_start": load1()}
    err_path = tmp / "daemon.stderr"
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with err_path.open("w") as err:
        # The daemon under test is the code beside this file, whatever the interpreter has installed.
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp, env=env)
        try:
            stdout, _ = proc.communicate(timeout=a.wall_limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            stdout, _ = proc.communicate()
    wall = time.monotonic() - t0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    cycles: list[dict[str, Any]] = []
    for raw in err_path.read_text().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if line.get("msg") == "cycle timings":
            line["dispatch_s"] = 0.0
            cycles.append(line)
        elif line.get("msg") == "dispatched" and cycles:
            cycles[-1]["dispatch_s"] += line["dispatch_s"]
    out["exit"] = proc.returncode
    out["drained"] = "workload drained" in stdout
    out["wall_s"] = round(wall, 1)
    out["cpu_s"] = round(cpu, 1)
    out["cycles"] = len(cycles)
    if cycles:
        virtual = cycles[-1]["now_ms"] / 1000
        out["virtual_s"] = virtual
        out["simulated_s_per_wall_s"] = round(virtual / wall, 3)
        out["simulated_s_per_cpu_s"] = round(virtual / cpu, 3) if cpu else None
        out["max_tasks"] = max(c["tasks"] for c in cycles)
        out["binds"] = sum(c["binds"] for c in cycles)
        gaps = [_ts(b) - _ts(c) for c, b in itertools.pairwise(cycles)]
        for c, gap in zip(cycles, gaps, strict=False):
            c["cycle_s"] = gap
            c["events_s"] = c["decide_s"] - c["session_s"]
            measured = c["freeze_s"] + c.get("gc_s", 0.0) + c["decide_s"] + c["append_s"] + c["dispatch_s"]
            c["other_s"] = max(0.0, gap - measured)
        keys = ("cycle_s", "freeze_s", "gc_s", "open_s", "actions_s", "close_s", "result_s", "events_s",
                "append_s", "dispatch_s", "other_s", "freeze_cpu_s", "gc_cpu_s", "decide_cpu_s")  # fmt: skip
        out["per_cycle"] = {k: _stats([c[k] for c in cycles if k in c]) for k in keys}
    out["load1_end"] = load1()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steady", nargs="*", default=["1000x10000"], metavar="NODESxRUNNING")
    ap.add_argument("--idle-cycles", type=int, default=5)
    ap.add_argument("--new-pods", type=int, default=1000)
    ap.add_argument("--workload", nargs="*", default=["200x270"], metavar="NODESxJOBS")
    ap.add_argument("--wall-limit", type=float, default=60.0, help="seconds before the daemon is stopped")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--conf", help="scheduler configuration (default: the daemon's bundled one)")
    ap.add_argument("--profile", choices=("idle", "place"), help="cProfile those cycles (to stderr)")
    ap.add_argument("--profile-top", type=int, default=40)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fumarole-bench-") as d:
        tmp = Path(d)
        for s in a.steady:
            n, p = (int(x) for x in s.lower().split("x"))
            print(json.dumps(asyncio.run(_steady(n, p, a, tmp))), flush=True)
        for s in a.workload:
            n, j = (int(x) for x in s.lower().split("x"))
            print(json.dumps(workload(n, j, a, tmp)), flush=True)


if __name__ == "__main__":
    main()
