"""Benchmark of the event store: append through the EventLog vs a raw loop, read+decode (SQLite, PostgreSQL).

Builds a synthetic log in one of two mixes:

- `daemon` (default): rounds of what a running daemon appends — an ingest batch of observed events
  (new PodGroups and pods, pods turning Running, Succeeded, deleted; idempotency keys), a cycle
  batch (CycleOpened, a bind per new pod, PodGroup status changes, some changed explanations,
  queue figures, CycleClosed) and the dispatcher's outcomes (BindSucceeded, idempotency keys);
  about a quarter of the events are decisions;
- `binds`: the earlier, decision-heavy mix — ingest batches of pod upserts alternating with cycle
  batches of ~500 binds each naming another pod and node (half the events are decisions);

then measures in one run, on the same kind of file (WAL, synchronous=FULL, the shipped schema):

- `append_eventlog`: `await log.append(batch, idem_keys=…)` one batch after another (the writer's
  pattern), encoding included;
- `append_raw`: the same already-encoded rows written with plain sqlite3 (BEGIN IMMEDIATE,
  executemany of the same INSERT, COMMIT) per batch — the ceiling; `append_raw_indexed` also
  writes the decision-index rows (store/index.py) the EventLog writes with each decision, and
  `append_ratio_indexed` compares against it (the cost of the abstraction alone);
- `append_concurrent`: several producers appending small batches at once (group commit);
- `read_decode`: `read_range` over the whole log, every row decoded into its event.

With `--postgres auto` (a throwaway server: initdb + pg_ctl from Debian's postgresql package, as
the tests start it) or `--postgres postgresql://…` (an existing server; a database is created for
each measurement), the same batches are also measured on PostgreSQL (bench/store_postgres.py: the
EventLog against raw executemany and COPY, read+decode, and follower lag at --lag-rate events/s),
reported under "postgresql".

Prints one JSON object.  Usage:

    python bench/store.py                   # 200k events, batches of 500, the daemon mix
    python bench/store.py --mix binds       # the decision-heavy mix
    python bench/store.py --events 1000000 --batch 1000 --dir /var/tmp
    python bench/store.py --postgres auto   # and the PostgreSQL column
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.store.codec import event_row
from fumarole.store.events import (
    BindDecided,
    BindSucceeded,
    CycleClosed,
    CycleOpened,
    Event,
    JobExplained,
    PodDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    QueueFigures,
    QueueFiguresRecorded,
)
from fumarole.store.index import INSERT_INDEX, index_fields
from fumarole.store.migrate import migrate
from fumarole.store.sqlite import _INSERT, SqliteEventLog

Batch = tuple[list[Event], list[str | None]]


NODES = 500
QUEUES = 8
NAMESPACES = 16
PODS_PER_JOB = 4


def _pod(
    i: int, ns: str | None = None, job: str | None = None, node: str = "", phase: str = "Pending"
) -> PodUpserted:
    ns = ns if ns is not None else f"team-{i % 7}"
    name = f"{job}-{i % PODS_PER_JOB}" if job is not None else f"job-{i // 8}-task-{i % 8}"
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{i:08d}",
            "annotations": {"scheduling.k8s.io/group-name": job if job is not None else f"job-{i // 8}"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
        },
        "status": {"phase": phase},
    }
    if node:
        manifest["spec"]["nodeName"] = node
    return PodUpserted(namespace=ns, name=name, manifest=manifest, at_ms=i)


def build_batches(n: int, batch: int, mix: str = "daemon") -> list[Batch]:
    """Batches totalling n events in the given mix (`daemon` or `binds`, see the module docstring)."""
    return build_daemon_batches(n, batch) if mix == "daemon" else build_bind_batches(n, batch)


def build_bind_batches(n: int, batch: int) -> list[Batch]:
    """The `binds` mix: alternating ingest and cycle batches (half the events are decisions, nearly
    all binds, each naming another pod and node)."""
    out: list[Batch] = []
    i = cycle = 0
    while i < n:
        size = min(batch, n - i)
        if cycle % 2 == 0:
            evs: list[Event] = [_pod(i + k) for k in range(size)]
            keys: list[str | None] = [f"ingest/{i + k}" for k in range(size)]
        else:
            c = cycle // 2 + 1
            body = max(size - 2, 0)
            evs = [CycleOpened(cycle=c, watermark=i, now_ms=i, conf_hash="ab" * 32)]
            for k in range(body):
                if k % 8 == 7:
                    evs.append(
                        PodGroupStatusChanged(
                            cycle=c, namespace="team-1", name=f"job-{k}", phase="Running", running=8
                        )
                    )
                else:
                    evs.append(
                        BindDecided(
                            cycle=c,
                            namespace="team-1",
                            name=f"job-{k // 8}-task-{k % 8}",
                            uid=f"uid-{i + k:08d}",
                            node=f"node-{k % 500:04d}",
                            job=f"team-1/job-{k // 8}",
                            queue="research",
                        )
                    )
            evs.append(CycleClosed(cycle=c, binds=body, duration_s=0.01))
            evs = evs[:size]
            keys = [None] * len(evs)
        out.append((evs, keys))
        i += len(evs)
        cycle += 1
    return out


def _job(j: int) -> tuple[str, str, str]:
    """(namespace, podgroup name, queue) of job j."""
    return f"team-{j % NAMESPACES:02d}", f"job-{j:07d}", f"q{j % QUEUES}"


def build_daemon_batches(n: int, batch: int) -> list[Batch]:
    """The `daemon` mix: rounds of what a running daemon appends, in its three kinds of append.

    With J = batch // 16 jobs (of 4 pods) per round: an ingest batch of observed events (J new
    PodGroups and their pods; the pods bound last round now Running; the pods of the jobs bound
    three rounds ago Succeeded, then deleted; idempotency keys as the watch adapter gives them), a
    cycle batch (CycleOpened, a BindDecided per new pod, a PodGroup status change per new job and
    per finished job, a changed explanation for a quarter of them, queue figures every 4th round,
    CycleClosed), and the dispatcher's outcomes (a BindSucceeded per bind, idempotency keys).
    About a quarter of the events are decisions.
    """
    jobs = max(batch // 16, 1)
    out: list[Batch] = []
    total = 0
    r = 0
    seq = 0  # the seq the events would get (outcomes name their decision's seq)
    while total < n:
        new = range(r * jobs, (r + 1) * jobs)
        evs: list[Event] = []
        keys: list[str | None] = []
        for j in new:
            ns, pg, q = _job(j)
            evs.append(
                PodGroupUpserted(
                    namespace=ns,
                    name=pg,
                    manifest={
                        "metadata": {"name": pg, "namespace": ns},
                        "spec": {"minMember": 4, "queue": q},
                    },
                    at_ms=r,
                )
            )
            keys.append(f"pg/{ns}/{pg}/1")
            for k in range(PODS_PER_JOB):
                evs.append(_pod(j * PODS_PER_JOB + k, ns, pg))
                keys.append(f"pod/{ns}/{pg}-{k}/1")
        for phase, age in (("Running", 1), ("Succeeded", 3)):
            for j in range((r - age) * jobs, (r - age + 1) * jobs) if r >= age else ():
                ns, pg, _ = _job(j)
                for k in range(PODS_PER_JOB):
                    i = j * PODS_PER_JOB + k
                    evs.append(_pod(i, ns, pg, node=f"node-{i % NODES:04d}", phase=phase))
                    keys.append(f"pod/{ns}/{pg}-{k}/{phase}")
        if r >= 3:
            for j in range((r - 3) * jobs, (r - 2) * jobs):
                ns, pg, _ = _job(j)
                for k in range(PODS_PER_JOB):
                    evs.append(PodDeleted(namespace=ns, name=f"{pg}-{k}", at_ms=r))
                    keys.append(f"pod/{ns}/{pg}-{k}/deleted")
        out.append((evs, keys))
        seq += len(evs)
        c = r + 1
        cyc: list[Event] = [CycleOpened(cycle=c, watermark=seq, now_ms=r, conf_hash="ab" * 32)]
        binds: list[tuple[int, BindDecided]] = []
        for j in new:
            ns, pg, q = _job(j)
            for k in range(PODS_PER_JOB):
                i = j * PODS_PER_JOB + k
                b = BindDecided(
                    cycle=c,
                    namespace=ns,
                    name=f"{pg}-{k}",
                    uid=f"uid-{i:08d}",
                    node=f"node-{i % NODES:04d}",
                    job=f"{ns}/{pg}",
                    queue=q,
                )
                binds.append((seq + len(cyc) + 1, b))
                cyc.append(b)
            cyc.append(PodGroupStatusChanged(cycle=c, namespace=ns, name=pg, phase="Running", running=4))
            if j % 4 == 0:
                cyc.append(JobExplained(cycle=c, namespace=ns, name=pg, queue=q, message=""))
        for j in range((r - 3) * jobs, (r - 2) * jobs) if r >= 3 else ():
            ns, pg, _ = _job(j)
            cyc.append(PodGroupStatusChanged(cycle=c, namespace=ns, name=pg, phase="Completed", succeeded=4))
        if r % 4 == 0:
            cyc.append(
                QueueFiguresRecorded(cycle=c, queues={f"q{i}": QueueFigures(weight=1) for i in range(QUEUES)})
            )
        cyc.append(CycleClosed(cycle=c, binds=len(binds), duration_s=0.01))
        out.append((cyc, [None] * len(cyc)))
        seq += len(cyc)
        outs: list[Event] = [
            BindSucceeded(decision_seq=s, namespace=b.namespace, name=b.name, node=b.node) for s, b in binds
        ]
        out.append((outs, [f"outcome/{s}" for s, _ in binds]))
        seq += len(outs)
        total = seq
        r += 1
    return out


async def bench_eventlog(path: Path, batches: list[Batch]) -> float:
    log = await SqliteEventLog.open(path)
    try:
        t0 = time.perf_counter()
        for evs, keys in batches:
            await log.append(evs, idem_keys=keys)
        return time.perf_counter() - t0
    finally:
        await log.close()


def bench_raw(path: Path, batches: list[Batch], *, indexed: bool = False) -> float:
    """The raw loop; with `indexed`, it also writes the decision-index rows (store/index.py) that
    the EventLog writes in the same transaction, so the difference is the abstraction alone."""
    migrate(str(path))
    rows: list[list[tuple[Any, ...]]] = []
    index_rows: list[list[tuple[Any, ...]]] = []
    seq = 1
    for evs, keys in batches:  # encode outside the timed part: raw writes already-encoded rows
        chunk = []
        ichunk = []
        for ev, key in zip(evs, keys, strict=True):
            tag, v, data = event_row(ev)
            chunk.append((seq, tag, v, getattr(ev, "at_ms", None), key, data))
            fields = index_fields(ev) if indexed else None
            if fields is not None:
                ichunk.append((seq, *fields))
            seq += 1
        rows.append(chunk)
        index_rows.append(ichunk)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    try:
        t0 = time.perf_counter()
        for chunk, ichunk in zip(rows, index_rows, strict=True):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_INSERT, chunk)
            if ichunk:
                conn.executemany(INSERT_INDEX, ichunk)
            conn.execute("COMMIT")
        return time.perf_counter() - t0
    finally:
        conn.close()


async def bench_concurrent(path: Path, batches: list[Batch], producers: int, small: int) -> tuple[float, int]:
    evs_all = [e for evs, _ in batches for e in evs]
    pieces = [evs_all[i : i + small] for i in range(0, len(evs_all), small)]
    log = await SqliteEventLog.open(path)
    try:
        t0 = time.perf_counter()

        async def producer(k: int) -> None:
            for piece in pieces[k::producers]:
                await log.append(piece)

        async with anyio.create_task_group() as tg:
            for k in range(producers):
                tg.start_soon(producer, k)
        return time.perf_counter() - t0, log.commits
    finally:
        await log.close()


async def bench_read(path: Path) -> tuple[float, int]:
    log = await SqliteEventLog.open(path, readonly=True)
    try:
        last = await log.last_seq()
        t0 = time.perf_counter()
        n = 0
        async for _ in log.read_range(1, last, batch=10000):
            n += 1
        return time.perf_counter() - t0, n
    finally:
        await log.close()


def bench_raw_read(path: Path) -> float:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        t0 = time.perf_counter()
        seq = 1
        while True:
            page = conn.execute(
                "SELECT seq, type, v, idem_key, body FROM events WHERE seq >= ? ORDER BY seq LIMIT 10000",
                (seq,),
            ).fetchall()
            if not page:
                break
            seq = page[-1][0] + 1
        return time.perf_counter() - t0
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="events per run (default 200000)")
    ap.add_argument("--batch", type=int, default=500, help="events per append (default 500)")
    ap.add_argument(
        "--mix",
        choices=("daemon", "binds"),
        default="daemon",
        help="event mix (see the docstring; default daemon)",
    )
    ap.add_argument("--producers", type=int, default=8, help="concurrent producers for append_concurrent")
    ap.add_argument("--small-batch", type=int, default=50, help="events per append for append_concurrent")
    ap.add_argument("--repeat", type=int, default=2, help="append runs of each kind (best is reported)")
    ap.add_argument("--dir", help="directory for the database files (default: the system temp directory)")
    ap.add_argument(
        "--postgres",
        metavar="auto|postgresql://…",
        help="also measure PostgreSQL: a throwaway server (auto) or an existing one (a URL)",
    )
    ap.add_argument("--lag-rate", type=int, default=5000, help="events/s the leader appends (follower lag)")
    ap.add_argument("--lag-batch", type=int, default=50, help="events per append (follower lag)")
    ap.add_argument("--lag-seconds", type=float, default=6.0, help="seconds of appends (follower lag)")
    a = ap.parse_args()
    batches = build_batches(a.events, a.batch, a.mix)
    n = sum(len(evs) for evs, _ in batches)
    decisions = sum(1 for evs, _ in batches for e in evs if index_fields(e) is not None)
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="fumarole-bench-store-") as d:
        tmp = Path(d)
        raw_runs: list[float] = []
        rawi_runs: list[float] = []
        log_runs: list[float] = []
        for r in range(a.repeat):  # interleaved, best of each: the machine may be shared
            raw_runs.append(bench_raw(tmp / f"raw{r}.db", batches))
            rawi_runs.append(bench_raw(tmp / f"rawi{r}.db", batches, indexed=True))
            log_runs.append(anyio.run(bench_eventlog, tmp / f"log{r}.db", batches))
        raw_s, rawi_s, log_s = min(raw_runs), min(rawi_runs), min(log_runs)
        for r in range(1, a.repeat):
            for p in tmp.glob(f"log{r}.db*"):
                p.unlink()
        (tmp / "log0.db").rename(tmp / "log.db")
        for suffix in ("-wal", "-shm"):
            if (tmp / f"log0.db{suffix}").exists():
                (tmp / f"log0.db{suffix}").rename(tmp / f"log.db{suffix}")
        conc_s, commits = anyio.run(bench_concurrent, tmp / "conc.db", batches, a.producers, a.small_batch)
        read_s, read_n = anyio.run(bench_read, tmp / "log.db")
        raw_read_s = bench_raw_read(tmp / "log.db")
        size = (tmp / "log.db").stat().st_size + sum(p.stat().st_size for p in tmp.glob("log.db-*"))
    assert read_n == n, (read_n, n)
    result = {
        "bench": "store",
        "events": n,
        "batch": a.batch,
        "mix": a.mix,
        "decision_fraction": round(decisions / n, 3),
        "repeat": a.repeat,
        "sqlite": sqlite3.sqlite_version,
        "append_eventlog_per_s": round(n / log_s),
        "append_raw_per_s": round(n / raw_s),
        "append_ratio": round(raw_s / log_s, 3),
        "append_raw_indexed_per_s": round(n / rawi_s),
        "append_ratio_indexed": round(rawi_s / log_s, 3),
        "append_concurrent_per_s": round(n / conc_s),
        "append_concurrent": {
            "producers": a.producers,
            "batch": a.small_batch,
            "appends": -(-n // a.small_batch),
            "commits": commits,
        },
        "read_decode_per_s": round(n / read_s),
        "read_raw_per_s": round(n / raw_read_s),
        "bytes_per_event": round(size / n, 1),
    }
    if a.postgres:
        from bench.store_postgres import run_postgres

        result["postgresql"] = run_postgres(
            _pg_databases(a.postgres),
            batches,
            repeat=a.repeat,
            rate=a.lag_rate,
            lag_batch=a.lag_batch,
            seconds=a.lag_seconds,
        )
    print(json.dumps(result), flush=True)


def _pg_databases(where: str) -> Any:
    """A function giving a new, empty database's URL on the server `where` names (auto: a throwaway one)."""
    import itertools
    import os

    counter = itertools.count(1)
    if where == "auto":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "store"))
        import atexit

        from fumarole_pg_server import find_bindir, fresh_dsn, start_server

        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("--postgres auto: PostgreSQL binaries not found (apt-get install postgresql)")
        server = start_server(bindir, durable=True)
        atexit.register(server.stop)
        return lambda: fresh_dsn(server)
    import asyncpg

    def new() -> str:
        name = f"fumarole_bench_{os.getpid()}_{next(counter)}"

        async def create() -> None:
            conn = await asyncpg.connect(where)
            try:
                await conn.execute(f"CREATE DATABASE {name}")
            finally:
                await conn.close()

        anyio.run(create)
        base, _, _ = where.partition("?")
        return base.rsplit("/", 1)[0] + "/" + name

    return new


if __name__ == "__main__":
    main()
