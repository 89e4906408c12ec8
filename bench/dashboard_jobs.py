"""Benchmark of the dashboard's jobs, job, cycles and cycle pages in Chromium; prints one JSON object.

1. A log of `--nodes` nodes and `--jobs` one-pod jobs (tests/ui/ui_kit.py write_scale_log: 8 queues
   under two parents, most pods running, a fifth pending), then `--cycles` cycles appended after it:
   CycleOpened / CycleClosed with seeded durations split by action (one in 50 ten times slower, the
   outliers the cycles chart's clipped scale is for) and, in the first cycle, an explanation for each
   pending job (JobExplained, a predicates-failed or gang reason), so the jobs page has wait times
   and reasons to show.
2. `fumarole serve --db` over it; Debian's Chromium through Playwright.
3. For each page, `--loads` loads: the render time the page measures itself (main[data-render-ms]:
   from the navigation to the page drawn: HTML, modules, the API's JSON, the DOM), as min / median /
   max ms. The job page is a pending job's; the cycle page the newest cycle's.
4. Live cycles page: with the cycles page open, `--live-cycles` more cycles are appended at
   `--rate` per second by another process's writer (as a daemon would); the browser's long tasks
   (PerformanceObserver 'longtask', > 50 ms) are counted and summed over that time
   (`live.long_tasks`, `live.long_task_ms`), and `live.redraws` says how many full redraws the
   page did (1 = the first draw only: every new cycle was added incrementally).

Usage: python bench/dashboard_jobs.py [--nodes 2000] [--jobs 4000] [--cycles 300] [--loads 3]
                                      [--live-cycles 100] [--rate 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("FUMAROLE_ARTIFACTS", "off")  # no screenshots while measuring (tests/ui/ui_kit.py)
sys.path[:0] = [
    str(ROOT),
    str(ROOT / "tests" / "ui"),
    str(ROOT / "tests" / "api"),
    str(ROOT / "tests" / "e2e"),
]

from fumarole_api_kit import start_serve, stop  # noqa: E402
from ui_kit import PageWatch, browser, write_scale_log  # noqa: E402

from fumarole.store.events import CycleClosed, CycleOpened, JobExplained, PendingReason  # noqa: E402
from fumarole.store.sqlite import SqliteEventLog  # noqa: E402

ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim")


def _cycle(c: int, rng: random.Random) -> list[Any]:
    slow = 10.0 if c % 50 == 0 else 1.0
    split = {a: round(rng.uniform(0.001, 0.02) * slow, 6) for a in ACTIONS}
    return [
        CycleOpened(cycle=c, watermark=1, now_ms=1_000 + c * 1_000, conf_hash="bench"),
        CycleClosed(
            cycle=c,
            binds=rng.randrange(0, 20),
            pipelined=rng.randrange(0, 3),
            duration_s=sum(split.values()),
            action_seconds=split,
        ),
    ]


async def _write_cycles(db: Path, cycles: range, jobs: int, *, explain: bool, seed: int) -> None:
    rng = random.Random(seed)
    log = await SqliteEventLog.open(str(db))
    try:
        for c in cycles:
            events = _cycle(c, rng)
            if explain and c == cycles.start:
                for i in range(0, jobs, 5):  # the pending fifth of write_scale_log's jobs
                    code = "predicates-failed" if i % 2 else "gang-unsatisfied"
                    reason = PendingReason(code=code, message=f"{code} (bench)", rank=0)
                    events.insert(
                        1,
                        JobExplained(
                            cycle=c,
                            namespace="scale",
                            name=f"job-{i:05d}",
                            queue=f"q{i % 8}",
                            message=f"1/1 pods pending; {code}",
                            reasons=(reason,),
                            queue_position=1 + i // 40,
                            pods={f"e2e/job-{i:05d}-w-0": code},
                        ),
                    )
            await log.append(events)
    finally:
        await log.close()


def _render(w: PageWatch, url: str, loads: int, check: str) -> dict[str, Any]:
    times = []
    for _ in range(loads):
        page = w.open(url, timeout=120_000)
        assert page.locator(check).count() >= 1, (url, check)
        times.append(w.render_ms())
    return {"min_ms": min(times), "median_ms": statistics.median(times), "max_ms": max(times), "loads": times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--live-cycles", type=int, default=100)
    ap.add_argument("--rate", type=float, default=5.0)
    args = ap.parse_args()
    out: dict[str, Any] = {"nodes": args.nodes, "jobs": args.jobs, "cycles": args.cycles}
    with tempfile.TemporaryDirectory(prefix="fumarole-bench-ui-") as tmp:
        db = Path(tmp) / "scale.db"
        t0 = time.perf_counter()
        write_scale_log(db, nodes=args.nodes, jobs=args.jobs)
        asyncio.run(_write_cycles(db, range(1, args.cycles + 1), args.jobs, explain=True, seed=1))
        out["generate_s"] = round(time.perf_counter() - t0, 2)
        proc, base = start_serve(db)
        try:
            with browser() as context:
                w = PageWatch(context)
                out["jobs_page"] = _render(w, base + "/ui/jobs", args.loads, "#jobs-table")
                out["jobs_page_by_wait"] = _render(
                    w, base + "/ui/jobs?sort=waited&desc=1&pending=1", args.loads, "#by-reason"
                )
                out["job_page"] = _render(w, base + "/ui/jobs/e2e/job-00040", args.loads, "#why-message")
                out["cycles_page"] = _render(w, base + "/ui/cycles", args.loads, "#cycles-rows tr")
                out["cycle_page"] = _render(
                    w, f"{base}/ui/cycles/{args.cycles}", args.loads, "#decisions-count"
                )
                # live: the cycles page open while cycles arrive at --rate per second
                page = w.page
                page.add_init_script(
                    "window.__long = []; new PerformanceObserver("
                    "(l) => window.__long.push(...l.getEntries().map(e => e.duration)))"
                    ".observe({ type: 'longtask', buffered: false });"
                )
                w.open(base + "/ui/cycles", timeout=120_000)
                page.wait_for_selector("#live-status[data-state='live']", timeout=30_000)
                page.evaluate("() => { window.__long = []; }")
                first, last = args.cycles + 1, args.cycles + args.live_cycles

                def feed() -> None:
                    for c in range(first, last + 1):
                        asyncio.run(_write_cycles(db, range(c, c + 1), 0, explain=False, seed=c))
                        time.sleep(1 / args.rate)

                t1 = time.perf_counter()
                writer = threading.Thread(target=feed)
                writer.start()
                while writer.is_alive():
                    page.wait_for_timeout(200)
                writer.join()
                page.wait_for_function(
                    f"() => document.getElementById('latest-cycle').textContent === '{last}'", timeout=60_000
                )
                long = page.evaluate("() => window.__long")
                out["live"] = {
                    "cycles": args.live_cycles,
                    "rate_per_s": args.rate,
                    "seconds": round(time.perf_counter() - t1, 1),
                    "long_tasks": len(long),
                    "long_task_ms": round(sum(long)),
                    "redraws": int(page.get_attribute("main", "data-redraws") or 0),
                }
                assert w.errors == [], w.errors
        finally:
            stop(proc)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
