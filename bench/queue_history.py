"""Benchmark of GET /v1/queue-history over a large log; prints one JSON object.

The log is bench/api.py's daemon-shaped one (`--events`, default 1,000,000: cycles with binds,
PodGroup statuses, ~20 explained waiting jobs per cycle, queue figures every 10 cycles), generated
through SqliteEventLog, or an existing file (`--db`).  Then, on a QueueHistoryReader over it (what
the daemon's view runs for the endpoint):

* `first_answer_ms`: the first request, which builds the summary from the decision index
  (`index_rows_folded` rows read);
* `answer_ms`: p50 / max of `--repeat` further requests of `--points` samples over the whole log
  (the summary is caught up, nothing new to fold), and the same over the last 1,000 cycles;
* `http_answer_ms`: p50 of the same request through `fumarole serve` over HTTP, JSON included.

Usage: python bench/queue_history.py [--events 1000000] [--db FILE] [--points 200] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.daemon.runtime.queue_history import QueueHistoryReader


def _bench_api() -> Any:
    """bench/api.py as a module (its log generator and serve starter); `api` is the package's name."""
    spec = importlib.util.spec_from_file_location("bench_api", Path(__file__).resolve().parent / "api.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ms(f: Any) -> float:
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--db", default="")
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    bench_api = _bench_api()
    out: dict[str, Any] = {"points": a.points}
    tmp = tempfile.TemporaryDirectory()
    db = a.db or str(Path(tmp.name) / "history.db")
    if not Path(db).exists():
        t0 = time.perf_counter()
        out["generated"] = asyncio.run(bench_api.generate(db, a.events))
        out["generate_s"] = round(time.perf_counter() - t0, 1)

    with sqlite3.connect(db) as c:
        out["events"] = int(c.execute("SELECT max(seq) FROM events").fetchone()[0])
        last_cycle = int(c.execute("SELECT max(cycle) FROM decision_cycles").fetchone()[0])
    out["cycles"] = last_cycle
    reader = QueueHistoryReader(db)
    try:
        t0 = time.perf_counter()
        h = reader.history(from_cycle=None, to_cycle=None, points=a.points, last_cycle=last_cycle)
        out["first_answer_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["queues"] = len(h.queues)
        out["recorded"] = h.recorded
        out["index_rows_folded"] = len(reader._fig_seqs) + sum(
            len(w.cycles) for w in reader._waiting.values()
        )
        whole = [
            _ms(
                lambda: reader.history(from_cycle=None, to_cycle=None, points=a.points, last_cycle=last_cycle)
            )
            for _ in range(a.repeat)
        ]
        recent = [
            _ms(
                lambda: reader.history(
                    from_cycle=last_cycle - 999, to_cycle=None, points=a.points, last_cycle=last_cycle
                )
            )
            for _ in range(a.repeat)
        ]
        out["answer_ms"] = {
            "whole_log_p50": round(statistics.median(whole), 2),
            "whole_log_max": round(max(whole), 2),
            "last_1000_cycles_p50": round(statistics.median(recent), 2),
        }
    finally:
        reader.close()
    proc, base, ready_s = bench_api._start_serve(db)
    try:
        out["serve_ready_s"] = round(ready_s, 1)
        url = f"{base}/v1/queue-history?points={a.points}"
        times = []
        for _ in range(a.repeat + 1):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=120) as r:
                size = len(r.read())
            times.append((time.perf_counter() - t0) * 1000)
        out["http_first_ms"] = round(times[0], 1)
        out["http_answer_ms_p50"] = round(statistics.median(times[1:]), 2)
        out["http_body_bytes"] = size
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
