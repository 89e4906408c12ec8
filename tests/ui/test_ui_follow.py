"""`fumarole serve` follows a log another process appends to, and so does the dashboard: a new cycle
reaches the open cycles page, and the jobs and queues pages re-read the API on it (the new job shows)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import start_serve, stop, write_history
from ui_kit import PageWatch, browser, require_chromium

from fumarole.store.events import CycleClosed, CycleOpened, upserted
from fumarole.store.sqlite import SqliteEventLog


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    require_chromium()
    db = tmp_path_factory.mktemp("ui-follow") / "log.db"
    asyncio.run(write_history(str(db), cycles=3))
    proc, base = start_serve(db)
    try:
        yield base, db
    finally:
        assert stop(proc) == 0


def _write(db: Path, events: list[Any]) -> None:
    async def go() -> None:
        log = await SqliteEventLog.open(str(db))
        try:
            await log.append(events)
        finally:
            await log.close()

    # in a thread of its own: Playwright's synchronous API runs an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, go()).result()


def _append(db: Path, cycle: int, job: str) -> None:
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": job, "namespace": "late"},
        "spec": {"queue": "default", "minMember": 1},
    }

    async def go() -> None:
        log = await SqliteEventLog.open(str(db))
        try:
            last = await log.last_seq()
            await log.append(
                [
                    upserted(podgroup, 50_000),
                    CycleOpened(cycle=cycle, watermark=last + 1, now_ms=50_000, conf_hash="h"),
                    CycleClosed(cycle=cycle, action_seconds={"allocate": 0.01}),
                ]
            )
        finally:
            await log.close()

    # in a thread of its own: Playwright's synchronous API runs an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, go()).result()


def test_pages_follow_the_log(served: tuple[str, Path], tmp_path: Path) -> None:
    base, db = served
    with browser() as context:
        cycles = PageWatch(context).open(base + "/ui/cycles")
        assert cycles.inner_text("#latest-cycle") == "3"
        jw = PageWatch(context)
        jobs = jw.open(base + "/ui/jobs")
        before = jobs.inner_text("#jobs-count")
        _append(db, 4, "newcomer")
        # (selectors, not JavaScript predicates: the pages' Content-Security-Policy forbids eval)
        cycles.wait_for_selector("#latest-cycle:text-is('4')", timeout=15_000)
        jobs.wait_for_selector("main[data-refreshed]", timeout=15_000)
        assert jobs.inner_text("#jobs-count") != before
        assert jobs.locator("tr[data-job='late/newcomer']").count() == 1
        assert "live · cycle 4" in jobs.inner_text("#live-status")
        assert jw.errors == []
        # 400 more cycles at once: the chart keeps the last 300 (a page left open does not grow)
        burst = []
        for c in range(5, 405):
            burst.append(CycleOpened(cycle=c, watermark=1, now_ms=50_000 + c * 1000, conf_hash="h"))
            burst.append(CycleClosed(cycle=c, binds=c % 3, action_seconds={"allocate": 0.001 * (c % 7 + 1)}))
        _write(db, burst)
        cycles.wait_for_selector("#latest-cycle:text-is('404')", timeout=15_000)
        # (the browser fell behind the feed and re-reads its last 300 cycles: wait for that too)
        cycles.wait_for_selector(
            "figure.chart figcaption:has-text('by action, last 300 cycles')", timeout=15_000
        )
        assert cycles.inner_text("#latest-cycle") == "404"
        assert cycles.locator("tbody tr[data-cycle]").count() == 40
