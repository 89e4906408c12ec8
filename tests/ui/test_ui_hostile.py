"""The dashboard in Chromium against a hostile or failing network: the live feed drops (the server
restarts; the feed is full and answers 503) and the page reconnects and shows the cycles it missed; a
DNS-rebinding page is refused; with a read token the dashboard logs in and still works."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fumarole_api_kit import start_serve, stop, write_history
from ui_kit import PageWatch, browser, live_request, read_hello, require_chromium

from fumarole.store.events import CycleClosed, CycleOpened
from fumarole.store.sqlite import SqliteEventLog

READ_TOKEN = "dashboard-read-token-0123456789"


def _history(tmp_path: Path) -> Path:
    db = tmp_path / "log.db"
    asyncio.run(write_history(str(db), cycles=3))
    return db


def _append_cycles(db: Path, cycles: Iterable[int], *, opened: bool = True, closed: bool = True) -> None:
    """Cycles appended to the log by another process's writer (as a daemon would)."""

    async def go() -> None:
        log = await SqliteEventLog.open(str(db))
        try:
            events: list[object] = []
            for c in cycles:
                if opened:
                    events.append(CycleOpened(cycle=c, watermark=1, now_ms=60_000 + c * 1000, conf_hash="h"))
                if closed:
                    events.append(CycleClosed(cycle=c, binds=1, action_seconds={"allocate": 0.002 * c}))
            await log.append(events)  # type: ignore[arg-type]
        finally:
            await log.close()

    # in a thread of its own: Playwright's synchronous API runs an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, go()).result()


def _page_errors(watch: PageWatch) -> list[str]:
    """Uncaught exceptions (a refused connection's console line is expected here, an exception is not)."""
    return [e for e in watch.errors if e.startswith("page error")]


def test_the_page_reconnects_after_a_restart_and_shows_the_missed_cycles(tmp_path: Path) -> None:
    require_chromium()
    db = _history(tmp_path)
    proc, base = start_serve(db)
    port = int(base.rsplit(":", 1)[1])
    try:
        with browser() as context:
            watch = PageWatch(context)
            page = watch.open(base + "/ui/cycles")
            page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
            assert page.inner_text("#latest-cycle") == "3"
            assert stop(proc) == 0  # the feed drops
            page.wait_for_selector("#live-status[data-state='down']", timeout=15_000)
            assert "reconnecting in" in page.inner_text("#live-status")
            _append_cycles(db, range(4, 9))  # five cycles while the page is not listening
            proc, _ = start_serve(db, listen=f"127.0.0.1:{port}")
            t0 = time.monotonic()
            page.wait_for_selector("#latest-cycle:text-is('8')", timeout=60_000)
            print(f"[ui reconnect] after a restart: back in {time.monotonic() - t0:.2f} s")
            page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
            for c in range(4, 9):  # in the charts too, not only the newest
                assert page.locator(f"figure.chart rect[data-cycle='{c}']").count() == 2, c
                assert page.locator(f"tbody tr[data-cycle='{c}']").count() == 1, c
            assert page.locator("tbody tr[data-cycle]").count() == 8
            _append_cycles(db, [9])  # and the feed is live again
            page.wait_for_selector("#latest-cycle:text-is('9')", timeout=15_000)
            assert _page_errors(watch) == []
    finally:
        stop(proc)


def test_the_page_retries_a_full_feed_and_catches_up(tmp_path: Path) -> None:
    require_chromium()
    db = _history(tmp_path)
    proc, base = start_serve(db)
    port = int(base.rsplit(":", 1)[1])
    held: list[socket.socket] = []
    try:
        for i in range(8):  # other clients take all 64 slots: the page's stream gets 503
            for _ in range(8):
                s, status, head = live_request(port, "GET", f"127.0.3.{i + 1}")
                held.append(s)
                assert status == 200, head
                read_hello(s, head)
        with browser() as context:
            watch = PageWatch(context)
            page = watch.open(base + "/ui/cycles")
            page.wait_for_selector("#live-status[data-state='down']", timeout=15_000)
            _append_cycles(db, [4, 5])  # cycles the page cannot hear of
            for s in held:
                s.close()
            held.clear()
            t0 = time.monotonic()
            page.wait_for_selector("#latest-cycle:text-is('5')", timeout=60_000)
            print(f"[ui reconnect] after a full feed: back in {time.monotonic() - t0:.2f} s")
            page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
            assert page.locator("figure.chart rect[data-cycle='4']").count() == 2
            assert _page_errors(watch) == []
    finally:
        for s in held:
            s.close()
        assert stop(proc) == 0


def test_a_cycle_open_when_the_page_connected_is_not_lost(tmp_path: Path) -> None:
    """The feed starts at the log's end: a cycle opened before and closed after is not paired there
    (its opening is not in the feed's table); the page sees the skipped number and re-reads it."""
    require_chromium()
    db = _history(tmp_path)
    _append_cycles(db, [4], closed=False)  # cycle 4 is being decided as the page opens
    proc, base = start_serve(db)
    try:
        with browser() as context:
            watch = PageWatch(context)
            page = watch.open(base + "/ui/cycles")
            page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
            assert page.inner_text("#latest-cycle") == "3"
            _append_cycles(db, [4], opened=False)
            _append_cycles(db, [5])
            page.wait_for_selector("#latest-cycle:text-is('5')", timeout=15_000)
            page.wait_for_selector("tbody tr[data-cycle='4']", timeout=15_000)
            assert page.locator("figure.chart rect[data-cycle='4']").count() == 2
            assert page.locator("tbody tr[data-cycle]").count() == 5
            assert _page_errors(watch) == []
    finally:
        assert stop(proc) == 0


def test_a_dns_rebinding_page_is_refused(tmp_path: Path) -> None:
    require_chromium()
    db = _history(tmp_path)
    proc, base = start_serve(db)
    port = int(base.rsplit(":", 1)[1])
    try:
        # the attacker's name now resolves to the daemon's loopback address
        with browser(("--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1",)) as context:
            page = context.new_page()
            for path in ("/ui/cycles", "/v1/jobs", "/ui/live"):
                resp = page.goto(f"http://rebind.attacker.test:{port}{path}")
                assert resp is not None and resp.status == 421, path
                assert "misdirected-request" in page.content()
            ok = PageWatch(context).open(f"http://localhost:{port}/ui/cycles")  # a name of this server
            assert ok.inner_text("#latest-cycle") == "3"
    finally:
        assert stop(proc) == 0


def test_with_a_read_token_the_dashboard_logs_in(tmp_path: Path) -> None:
    require_chromium()
    db = _history(tmp_path)
    token_file = tmp_path / "read-token"
    token_file.write_text(READ_TOKEN + "\n")
    proc, base = start_serve(db, "--read-token", str(token_file))
    try:
        with browser() as context:
            watch = PageWatch(context)
            page = watch.page
            page.goto(base + "/ui/cycles")
            page.wait_for_selector("form input[name='token']", timeout=15_000)
            assert page.url == base + "/ui/login?next=/ui/cycles"
            page.fill("input[name='token']", "not-the-token-at-all-0000")
            page.click("button[type='submit']")
            page.wait_for_selector("p.error[role='alert']", timeout=15_000)
            page.fill("input[name='token']", READ_TOKEN)
            page.click("button[type='submit']")
            page.wait_for_selector("main[data-ready='1']", timeout=20_000)
            assert page.url == base + "/ui/cycles"
            assert page.inner_text("#latest-cycle") == "3"
            page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)  # the feed too
            _append_cycles(db, [4])
            page.wait_for_selector("#latest-cycle:text-is('4')", timeout=15_000)
            cookies = context.cookies(base)
            assert [c["name"] for c in cookies] == ["fumarole_session"]
            assert cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict"
            assert READ_TOKEN not in cookies[0]["value"]
            assert _page_errors(watch) == []
    finally:
        assert stop(proc) == 0
