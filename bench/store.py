"""Benchmark of the event store: append through SqliteEventLog vs a raw sqlite3 loop, and read+decode.

Builds a synthetic log in the daemon's shape (ingest batches of pod upserts with idempotency keys,
alternating with cycle batches: cycle opened, binds, PodGroup status changes, cycle closed), then
measures in one run, on the same kind of file (WAL, synchronous=FULL, the shipped schema):

- `append_eventlog`: `await log.append(batch, idem_keys=…)` one batch after another (the writer's
  pattern), encoding included;
- `append_raw`: the same already-encoded rows written with plain sqlite3 (BEGIN IMMEDIATE,
  executemany of the same INSERT, COMMIT) per batch — the ceiling; `append_raw_indexed` also
  writes the decision-index rows (store/index.py) the EventLog writes with each decision, and
  `append_ratio_indexed` compares against it (the cost of the abstraction alone);
- `append_concurrent`: several producers appending small batches at once (group commit);
- `read_decode`: `read_range` over the whole log, every row decoded into its event.

Prints one JSON object.  Usage:

    python bench/store.py                   # 200k events, batches of 500
    python bench/store.py --events 1000000 --batch 1000 --dir /var/tmp
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

from store.codec import event_row
from store.events import (
    BindDecided,
    CycleClosed,
    CycleOpened,
    Event,
    PodGroupStatusChanged,
    PodUpserted,
)
from store.index import INSERT_INDEX, index_fields
from store.migrate import migrate
from store.sqlite import _INSERT, SqliteEventLog

Batch = tuple[list[Event], list[str | None]]


def _pod(i: int) -> PodUpserted:
    ns = f"team-{i % 7}"
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{i // 8}-task-{i % 8}",
            "namespace": ns,
            "uid": f"uid-{i:08d}",
            "annotations": {"scheduling.k8s.io/group-name": f"job-{i // 8}"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
        },
        "status": {"phase": "Pending"},
    }
    return PodUpserted(namespace=ns, name=manifest["metadata"]["name"], manifest=manifest, at_ms=i)


def build_batches(n: int, batch: int) -> list[Batch]:
    """Alternating ingest and cycle batches totalling n events."""
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
    ap.add_argument("--producers", type=int, default=8, help="concurrent producers for append_concurrent")
    ap.add_argument("--small-batch", type=int, default=50, help="events per append for append_concurrent")
    ap.add_argument("--repeat", type=int, default=2, help="append runs of each kind (best is reported)")
    ap.add_argument("--dir", help="directory for the database files (default: the system temp directory)")
    a = ap.parse_args()
    batches = build_batches(a.events, a.batch)
    n = sum(len(evs) for evs, _ in batches)
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
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
