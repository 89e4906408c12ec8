"""The PostgreSQL column of bench/store.py: the same batches through PostgresEventLog and raw, on one server.

- `append_eventlog_per_s`: `await log.append(batch, idem_keys=…)` batch after batch (encoding included;
  the log-head lock, the idempotency-key lookup, the decision index and cycle spans, NOTIFY);
- `append_raw_executemany_per_s`: the same already-encoded rows with asyncpg's executemany of a
  plain INSERT, one transaction per batch; `append_raw_copy_per_s`: the same with COPY
  (copy_records_to_table); the ratios compare the EventLog with each;
  (`append_raw_copy_indexed_per_s`: COPY of the rows and of their decision-index rows: what the
  EventLog must write, without its checks);
- `read_decode_per_s`: `read_range` over the whole log, every row decoded;
- `follower_lag_ms`: a leader appends batches at a fixed rate (default 5,000 events/s in batches of
  50) while a follower (its own connections, read-only) tails the log through LISTEN/NOTIFY; the lag
  of an event is the time from the leader's append call to the follower holding it decoded.

`run_postgres(dsn_factory, batches, ...)` returns the figures as a dict; `dsn_factory()` gives an
empty database for each measurement (bench/store.py starts a throwaway server, or takes --postgres DSN).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
import asyncpg

from fumarole.store.codec import event_row
from fumarole.store.events import ClockAdvanced, Event
from fumarole.store.index import index_fields
from fumarole.store.postgres import PostgresEventLog

Batch = tuple[list[Event], list[str | None]]


async def append_eventlog(dsn: str, batches: list[Batch]) -> float:
    log = await PostgresEventLog.open(dsn)
    try:
        t0 = time.perf_counter()
        for evs, keys in batches:
            await log.append(evs, idem_keys=keys)
        return time.perf_counter() - t0
    finally:
        await log.close()


def _encoded(batches: list[Batch]) -> list[list[tuple[Any, ...]]]:
    out = []
    seq = 1
    for evs, keys in batches:
        chunk = []
        for ev, key in zip(evs, keys, strict=True):
            tag, v, data = event_row(ev)
            at_ms = getattr(ev, "at_ms", None)
            chunk.append((seq, tag, v, at_ms if isinstance(at_ms, int) else None, key, data))
            seq += 1
        out.append(chunk)
    return out


async def append_raw(dsn: str, batches: list[Batch], *, copy: bool, indexed: bool = False) -> float:
    """The ceiling: already-encoded rows, one transaction per batch, no lookups; with `indexed` (COPY
    only) also the decision-index rows the EventLog writes, so the difference is the abstraction."""
    setup = await PostgresEventLog.open(dsn)  # the same schema (and trigger) as the EventLog's
    await setup.close()
    rows = _encoded(batches)
    index_rows = _index_rows(batches) if indexed else [[] for _ in batches]
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        for chunk, ichunk in zip(rows, index_rows, strict=True):
            async with conn.transaction():
                if copy:
                    await conn.copy_records_to_table(
                        "events", records=chunk, columns=["seq", "type", "v", "at_ms", "idem_key", "body"]
                    )
                    if ichunk:
                        await conn.copy_records_to_table("decision_index", records=ichunk)
                else:
                    await conn.executemany(
                        "INSERT INTO events (seq, type, v, at_ms, idem_key, body) "
                        "VALUES ($1, $2, $3, $4, $5, $6)",
                        chunk,
                    )
        return time.perf_counter() - t0
    finally:
        await conn.close()


def _index_rows(batches: list[Batch]) -> list[list[tuple[Any, ...]]]:
    out = []
    seq = 1
    for evs, _ in batches:
        chunk = []
        for ev in evs:
            fields = index_fields(ev)
            if fields is not None:
                chunk.append((seq, *fields))
            seq += 1
        out.append(chunk)
    return out


async def read_decode(dsn: str) -> tuple[float, int]:
    log = await PostgresEventLog.open(dsn, readonly=True)
    try:
        last = await log.last_seq()
        t0 = time.perf_counter()
        n = 0
        async for _ in log.read_range(1, last, batch=10000):
            n += 1
        return time.perf_counter() - t0, n
    finally:
        await log.close()


async def follower_lag(dsn: str, *, rate: int, batch: int, seconds: float) -> dict[str, Any]:
    """Lag (ms) from the leader's append call to the follower holding the event, at `rate` events/s."""
    leader = await PostgresEventLog.open(dsn)
    follower = await PostgresEventLog.open(dsn, readonly=True, poll_interval=1.0)
    sent: dict[int, float] = {}  # seq -> when its append was called
    lags: list[float] = []
    total = int(rate * seconds) // batch * batch
    done = anyio.Event()

    async def follow() -> None:
        seq = 1
        while seq <= total:
            rows = await follower.tail(seq, limit=5000, timeout=5)
            now = time.perf_counter()
            for r in rows:
                lags.append(now - sent[r.seq])
            if rows:
                seq = rows[-1].seq + 1
        done.set()

    async def lead() -> None:
        period = batch / rate
        start = time.perf_counter()
        i = 0
        while i < total:
            due = start + (i // batch) * period
            delay = due - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)
            evs = [ClockAdvanced(at_ms=i + k) for k in range(batch)]
            t = time.perf_counter()
            for k in range(batch):  # seqs are known: the log is this leader's alone
                sent[i + k + 1] = t
            await leader.append(evs)
            i += batch

    try:
        await follower.tail(1, timeout=0.01)  # LISTEN before the first append
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            await lead()
            with anyio.fail_after(30):
                await done.wait()
    finally:
        await follower.close()
        await leader.close()
    q = statistics.quantiles(lags, n=100)
    return {
        "rate_per_s": rate,
        "batch": batch,
        "events": len(lags),
        "p50_ms": round(statistics.median(lags) * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
        "max_ms": round(max(lags) * 1000, 2),
    }


def run_postgres(
    new_dsn: Callable[[], str],
    batches: list[Batch],
    *,
    repeat: int,
    rate: int,
    lag_batch: int,
    seconds: float,
) -> dict[str, Any]:
    """Every PostgreSQL figure, append runs interleaved and the best of `repeat` of each kind reported."""
    n = sum(len(evs) for evs, _ in batches)
    log_runs: list[float] = []
    many_runs: list[float] = []
    copy_runs: list[float] = []
    copyi_runs: list[float] = []
    log_dsn = ""
    for _ in range(repeat):
        many_runs.append(anyio.run(lambda: append_raw(new_dsn(), batches, copy=False)))
        copy_runs.append(anyio.run(lambda: append_raw(new_dsn(), batches, copy=True)))
        copyi_runs.append(anyio.run(lambda: append_raw(new_dsn(), batches, copy=True, indexed=True)))
        log_dsn = new_dsn()
        log_runs.append(anyio.run(append_eventlog, log_dsn, batches))
    read_s, read_n = anyio.run(read_decode, log_dsn)
    assert read_n == n, (read_n, n)
    lag = anyio.run(lambda: follower_lag(new_dsn(), rate=rate, batch=lag_batch, seconds=seconds))
    log_s, many_s, copy_s, copyi_s = min(log_runs), min(many_runs), min(copy_runs), min(copyi_runs)
    return {
        "append_eventlog_per_s": round(n / log_s),
        "append_raw_executemany_per_s": round(n / many_s),
        "append_raw_copy_per_s": round(n / copy_s),
        "append_ratio_executemany": round(many_s / log_s, 3),
        "append_ratio_copy": round(copy_s / log_s, 3),
        "append_raw_copy_indexed_per_s": round(n / copyi_s),
        "append_ratio_copy_indexed": round(copyi_s / log_s, 3),
        "read_decode_per_s": round(n / read_s),
        "follower_lag_ms": lag,
    }
