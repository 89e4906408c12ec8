"""The jobs, job, cycles and cycle pages and the dashboard's app-wide behaviour, in headless Chromium
against a real daemon on the simulator (`fumarole run --serve`), then against `fumarole serve`.

One daemon for the module (one browser too): the busy workload of ui_kit plus e2e/typo, whose queue
`nosuch` does not exist and team2/t2 (another namespace, a gang that never fits).  The tests run once
it drained; the live ones over `fumarole serve` on a copy of its log, to which they append cycles
(and a PodGroup in a new queue) while the page is open.  Screenshots for docs/dashboard.md are written
when FUMAROLE_UPDATE_SCREENSHOTS=1 (docs/img/ui-*.png)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from fumarole_api_kit import FUMAROLE, child_env, start_serve, stop, wait_for_url, write_history
from fumarole_e2e_kit import _job
from ui_kit import Daemon, PageWatch, browser, drain, require_chromium, write_busy_sim


def write_sim(dir_: Path) -> tuple[Path, Path]:
    c, w = write_busy_sim(dir_, jobs=60)
    cluster = list(yaml.safe_load_all(c.read_text()))
    cluster += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team2"}}]
    c.write_text(yaml.safe_dump_all(cluster, sort_keys=False))
    work = list(yaml.safe_load_all(w.read_text()))
    t2 = _job("t2", "a", 2, 16, at=0, dur=10, pc="low")
    t2["metadata"]["namespace"] = "team2"
    work += [
        _job("typo", "nosuch", 1, 1, at=0, dur=10, pc="low"),
        t2,
    ]
    w.write_text(yaml.safe_dump_all(work, sort_keys=False))
    return c, w


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("ui-jobs")
    c, w = write_sim(tmp)
    args = ["--data-dir", str(tmp / "data"), "--cluster", str(c), "--workload", str(w)]
    proc = subprocess.Popen(
        [FUMAROLE, "run", *args, "--listen", "127.0.0.1:0", "--serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=child_env(),
    )
    try:
        base = wait_for_url(proc)
        lines: list[str] = []
        drain(proc, lines)
        yield Daemon(proc, base, tmp / "data" / "fumarole.db", lines)
    finally:
        assert stop(proc) == 0


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as context:
        yield context


@pytest.fixture(scope="module")
def settled(daemon: Daemon) -> Daemon:
    daemon.wait_drained()
    return daemon


# daemon/runtime/cycle.py REASON_CODES, with the labels the dashboard shows (util.js REASONS)
REASONS = [
    ("queue-missing", "queue missing"),
    ("queue-closed", "queue closed"),
    ("enqueue-rejected", "not admitted (enqueue)"),
    ("not-enqueued", "not enqueued"),
    ("job-invalid", "invalid"),
    ("predicates-failed", "predicates"),
    ("queue-capability", "queue capability"),
    ("queue-overused", "queue overused"),
    ("gang-unsatisfied", "gang"),
    ("pipelined", "pipelined"),
    ("best-effort", "best effort"),
    ("gang-stopped", "gang stopped"),
    ("not-reached", "not reached"),
    ("other", "other"),
    ("unexplained", "unexplained"),
]


def reason_label(code: str) -> str:
    return dict(REASONS)[code]


def duration_text(ms: int) -> str:
    """A span of virtual time as the dashboard (and `fumarole explain`) prints it."""
    if ms < 60000:
        return f"{ms // 1000}s" if ms % 1000 == 0 else f"{float(f'{ms / 1000:.6g}'):g}s"
    s = ms // 1000
    d, h, m, r = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if d:
        return f"{d}d{h:02d}h{m:02d}m"
    return f"{h}h{m:02d}m{r:02d}s" if h else f"{m}m{r:02d}s"


def _in_thread(coro: Any) -> Any:
    """Run a coroutine to its end in a thread of its own (Playwright's sync API runs a loop in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _refreshes(page: Any) -> int:
    return int(page.get_attribute("main", "data-refreshed") or "0")


# ----------------------------------------------------------------------------- live (cycles appended)


class Live:
    """`fumarole serve` over a copy of the drained daemon's log, and a writer appending to it as a
    daemon would (so live updates come when the test says, not when the simulator's clock says)."""

    def __init__(self, db: Path, base: str, last_cycle: int) -> None:
        self.db, self.base, self.cycle = db, base, last_cycle

    def append(self, events: list[Any]) -> None:
        from fumarole.store.sqlite import SqliteEventLog

        async def go() -> None:
            log = await SqliteEventLog.open(str(self.db))
            try:
                await log.append(events)
            finally:
                await log.close()

        _in_thread(go())

    def cycles(self, n: int, *, extra: list[Any] | None = None, gap: float = 0.25) -> None:
        """Append `n` closed cycles, `gap` seconds apart (`extra` events before the first)."""
        from fumarole.store.events import CycleClosed, CycleOpened

        for i in range(n):
            self.cycle += 1
            c = self.cycle
            head = (extra or []) if i == 0 else []
            self.append(
                [
                    *head,
                    CycleOpened(cycle=c, watermark=1, now_ms=10_000_000 + c * 1000, conf_hash="h"),
                    CycleClosed(cycle=c, binds=1, duration_s=0.002, action_seconds={"allocate": 0.002}),
                ]
            )
            time.sleep(gap)


def _copy_db(src: Path, dst: Path) -> None:
    """A consistent copy of a live SQLite log (its WAL included), through SQLite's backup API."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    b.close()
    a.close()


@pytest.fixture()
def live(settled: Daemon, tmp_path: Path) -> Iterator[Live]:
    db = tmp_path / "live.db"
    _copy_db(settled.db, db)
    proc, base = start_serve(db)
    try:
        last = json.loads(urllib.request.urlopen(base + "/v1/cycles?latest=1", timeout=20).read())
        yield Live(db, base, last["items"][0]["cycle"])
    finally:
        stop(proc)


def _wait_refreshed(page: Any, after: int) -> None:
    page.wait_for_function(
        f"() => Number(document.querySelector('main').dataset.refreshed || 0) > {after}", timeout=30_000
    )


def test_cycles_page_adds_cycles_without_redrawing(live: Live, chromium: Any) -> None:
    w = PageWatch(chromium)
    page = w.page
    page.add_init_script(
        "window.__long = []; new PerformanceObserver("
        "(l) => window.__long.push(...l.getEntries().map(e => e.duration)))"
        ".observe({ type: 'longtask', buffered: true });"
    )
    w.open(live.base + "/ui/cycles")
    page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
    first = int(page.inner_text("#latest-cycle"))
    page.evaluate(
        "() => { window.__row = document.querySelector('#cycles-rows tr');"
        " window.__bar = document.querySelector('#chart-duration g.bar:last-child'); }"
    )
    live.cycles(5)
    page.wait_for_function(
        f"() => Number(document.getElementById('latest-cycle').textContent) >= {first + 5}", timeout=30_000
    )
    # the rows and bars drawn before are the same elements: new cycles were added, nothing redrawn
    assert page.get_attribute("main", "data-redraws") == "1"
    assert page.evaluate(
        "() => window.__row.isConnected && window.__row !== document.querySelector('#cycles-rows tr')"
    )
    assert page.evaluate("() => window.__bar === null || window.__bar.isConnected")
    assert page.locator("#cycles-rows tr").count() <= 40
    for c in range(first + 1, first + 6):
        shown = page.eval_on_selector_all("#cycles-rows tr", "rs => rs.map(r => r.dataset.cycle)")
        assert page.locator(f"#cycles-rows tr[data-cycle='{c}']").count() == 1, (c, shown[:8])
        assert page.locator(f"#chart-duration g.bar[data-cycle='{c}']").count() == 1
    assert "95th percentile" in page.inner_text("#chart-duration figcaption")
    long = page.evaluate("() => window.__long")
    print(f"[ui cycles] {len(long)} long tasks, {sum(long):.0f} ms, over 5 cycles")
    w.screenshot("cycles-live")
    # keyboard: the chart is one tab stop; End picks the newest bar, ← the one before, Enter opens it
    page.focus("#chart-duration svg")
    page.keyboard.press("End")
    assert page.get_attribute("#chart-duration svg", "data-picked") == str(first + 5)
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("#chart-duration svg", "data-picked") == str(first + 4)
    page.keyboard.press("Enter")
    page.wait_for_selector(f"main[data-ready='1'] h1:text-is('Cycle {first + 4}')")
    assert w.errors == []
    page.close()


def test_live_refresh_keeps_options_focus_and_what_is_open(live: Live, chromium: Any) -> None:
    from fumarole.store.events import upserted

    w = PageWatch(chromium)
    page = w.open(live.base + "/ui/jobs")
    page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
    options = page.eval_on_selector_all("#f-queue option", "os => os.map(o => o.value)")
    assert "fresh" not in options and "nosuch" in options
    # keyboard only: focus the name box, type; the refreshes must not take the focus or the text away
    page.focus("#f-q")
    page.keyboard.type("j1")
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "newcomer", "namespace": "e2e"},
        "spec": {"queue": "fresh", "minMember": 1},
    }
    n = _refreshes(page)
    live.cycles(3, extra=[upserted(pg, 10_000_000)])
    page.wait_for_function(
        "() => [...document.querySelectorAll('#f-queue option')].some(o => o.value === 'fresh')",
        timeout=30_000,
    )
    assert _refreshes(page) > n
    assert page.evaluate("() => document.activeElement.id") == "f-q"
    assert page.input_value("#f-q") == "j1" and "q=j1" in page.url
    # sorting from the keyboard keeps the focus on the header button, through refreshes too
    page.fill("#f-q", "")
    page.focus("button.sort[data-key='waited']")
    page.keyboard.press("Enter")
    assert "sort=waited" in page.url
    assert page.evaluate("() => document.activeElement.dataset.key") == "waited"
    n = _refreshes(page)
    live.cycles(3, gap=1.0)
    _wait_refreshed(page, n)
    assert page.evaluate("() => document.activeElement.dataset.key") == "waited"

    # the job page: the open "each waiting pod" section stays open through refreshes
    page = w.open(live.base + "/ui/jobs/e2e/huge")
    page.click("#pods-details summary")
    assert page.evaluate("() => document.getElementById('pods-details').open")
    n = _refreshes(page)
    live.cycles(3, gap=1.0)
    _wait_refreshed(page, n)
    assert page.evaluate("() => document.getElementById('pods-details').open")
    assert w.errors == []
    page.close()


# ----------------------------------------------------------------------------- once drained


def test_wait_times_and_reasons_by_queue(settled: Daemon, chromium: Any) -> None:
    jobs = settled.get("/v1/jobs")["items"]
    waiting = [
        j
        for j in jobs
        if not j["queue_exists"] or (j["phase"] != "Running" and (j["pending"] or j["wait_reason"]))
    ]
    assert any(j["waited_ms"] for j in jobs), jobs
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/jobs?sort=waited&desc=1")
    longest = max(
        (j for j in jobs if j["waited_ms"] is not None),
        key=lambda j: (j["waited_ms"], f"{j['namespace']}/{j['name']}"),
    )
    top = page.locator("#jobs-table tbody tr").first
    assert top.locator("td").nth(5).inner_text() == duration_text(longest["waited_ms"])
    assert int(longest["waited_ms"]) == max(j["waited_ms"] or 0 for j in jobs)
    # the summary: per queue, how many wait for each reason
    want: Counter[tuple[str, str]] = Counter()
    for j in waiting:
        code = "queue-missing" if not j["queue_exists"] else j["wait_reason"] or "unexplained"
        want[(j["queue"], code)] += 1
    for (queue, code), n in want.items():
        cell = page.locator(f"#by-reason tr[data-queue='{queue}'] td[data-reason='{code}']")
        assert cell.inner_text() == str(n), (queue, code)
    assert page.locator("#by-reason thead th").all_inner_texts()[1:-1] == [
        reason_label(c) for c in dict.fromkeys(code for _, code in sorted(want, key=lambda k: _rank(k[1])))
    ]
    # a count is a link to those jobs
    queue, code = next(iter(want))
    page.click(f"#by-reason tr[data-queue='{queue}'] td[data-reason='{code}'] a")
    page.wait_for_selector("main[data-ready='1']")
    assert f"reason={code}" in page.url and page.input_value("#f-reason") == code
    assert page.locator("#jobs-table tbody tr").count() == want[(queue, code)]
    w.screenshot("jobs-waiting")
    assert w.errors == []
    page.close()


def _rank(code: str) -> int:
    return [c for c, _ in REASONS].index(code)


def test_running_jobs_are_not_counted_as_pending(settled: Daemon, chromium: Any) -> None:
    jobs = settled.get("/v1/jobs")["items"]
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/queues")
    for q in settled.get("/v1/queues")["items"]:
        want = sum(1 for j in jobs if j["queue"] == q["name"] and j["pending"] and j["phase"] != "Running")
        cells = page.locator(f"tbody tr[data-queue='{q['name']}'] td")
        texts = cells.all_inner_texts()
        assert str(want) in texts, (q["name"], texts)
    page.close()


def test_who_is_ahead_and_the_missing_queue(settled: Daemon, chromium: Any) -> None:
    d = settled.get("/v1/jobs/team2/t2")
    assert d["explanation"] and d["explanation"]["queue_position"] > 1 and d["ahead_total"] >= 1, d
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/jobs/team2/t2")
    items = page.locator("#ahead-list li")
    assert items.count() == len(d["ahead"])
    for i, a in enumerate(d["ahead"]):
        assert items.nth(i).get_attribute("data-job") == f"{a['namespace']}/{a['name']}"
        assert items.nth(i).locator("a").get_attribute("href") == f"/ui/jobs/{a['namespace']}/{a['name']}"
    assert [a["position"] for a in d["ahead"]] == sorted(a["position"] for a in d["ahead"])
    assert all(a["position"] < d["explanation"]["queue_position"] for a in d["ahead"])
    assert page.inner_text("#why-waited").startswith("Waiting for ")
    w.screenshot("job-ahead")
    # e2e/typo: its queue does not exist, and the page says so (and `fumarole explain` too)
    t = settled.get("/v1/jobs/e2e/typo")
    assert t["queue_exists"] is False
    page = w.open(settled.base + "/ui/jobs/e2e/typo")
    assert "Queue nosuch does not exist" in page.inner_text("#why-queue-missing")
    assert "no explanation" not in page.inner_text("main")
    out = subprocess.run(
        [FUMAROLE, "explain", "--db", str(settled.db), "e2e/typo"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert "queue nosuch does not exist" in out.stdout and "no explanation recorded" not in out.stdout, (
        out.stdout
    )
    page = w.open(settled.base + "/ui/jobs?queue=nosuch")
    assert page.inner_text("#jobs-table tbody tr[data-job='e2e/typo']").count("no such queue") == 1
    assert w.errors == []
    page.close()


def test_namespace_filter_view_and_links(settled: Daemon, chromium: Any) -> None:
    jobs = settled.get("/v1/jobs")["items"]
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/jobs")
    page.click("#by-namespace a:text-is('team2')")
    page.wait_for_selector("main[data-ready='1']")
    assert "namespace=team2" in page.url and page.input_value("#f-namespace") == "team2"
    shown = page.eval_on_selector_all(
        "#jobs-table tbody tr[data-job]", "rows => rows.map(r => r.dataset.job)"
    )
    assert shown == sorted(f"team2/{j['name']}" for j in jobs if j["namespace"] == "team2")
    page.reload()  # the URL keeps the filter
    page.wait_for_selector("main[data-ready='1']")
    assert page.input_value("#f-namespace") == "team2"
    # node names link to the node: a bound job's task, then the nodes page with it open
    bound = next(
        j for j in jobs if j["tasks_by_status"].get("Running") or j["tasks_by_status"].get("Succeeded")
    )
    d = settled.get(f"/v1/jobs/{bound['namespace']}/{bound['name']}")
    task = next(t for t in d["tasks"] if t["node"])
    page = w.open(f"{settled.base}/ui/jobs/{bound['namespace']}/{bound['name']}")
    link = page.locator(f"#task-{task['name']} a.node-link")
    assert link.get_attribute("href") == f"/ui/nodes?node={task['node']}"
    link.click()
    page.wait_for_selector("#node-detail h2")
    assert page.inner_text("#node-detail h2") == f"Node {task['node']}"
    # in a cycle's decisions too
    rows = settled.get("/v1/decisions?type=decision.bind&limit=1")["items"]
    page = w.open(f"{settled.base}/ui/cycles/{rows[0]['event']['cycle']}")
    assert page.locator("tr[data-type='decision.bind'] a.node-link").count() >= 1
    assert w.errors == []
    page.close()


def test_timeline_groups_repeated_steps(tmp_path: Path, chromium: Any) -> None:
    """A task pipelined onto the same node in six consecutive cycles is one timeline row: × 6, 4–9."""
    from fumarole.store.events import CycleClosed, CycleOpened, PipelineDecided
    from fumarole.store.sqlite import SqliteEventLog

    db = tmp_path / "log.db"
    _in_thread(write_history(str(db), cycles=3))
    proc, base = start_serve(db)
    try:
        get = lambda path: json.loads(urllib.request.urlopen(base + path, timeout=20).read())  # noqa: E731
        job = get("/v1/jobs")["items"][0]
        ns, name = job["namespace"], job["name"]
        task = get(f"/v1/jobs/{ns}/{name}")["tasks"][0]["name"]
        node = get("/v1/nodes")["items"][0]["name"]

        async def append() -> None:
            log = await SqliteEventLog.open(str(db))
            try:
                events: list[Any] = []
                for c in range(4, 10):
                    events += [
                        CycleOpened(cycle=c, watermark=1, now_ms=60_000 + c * 1000, conf_hash="h"),
                        PipelineDecided(
                            cycle=c,
                            namespace=ns,
                            name=task,
                            uid=f"uid-{task}",
                            node=node,
                            job=f"{ns}/{name}",
                            queue=job["queue"],
                        ),
                        CycleClosed(cycle=c, pipelined=1),
                    ]
                await log.append(events)
            finally:
                await log.close()

        _in_thread(append())
        deadline = time.monotonic() + 30
        while get("/v1/cycles?latest=1")["items"][0]["cycle"] < 9:
            assert time.monotonic() < deadline, "fumarole serve did not follow the appended cycles"
            time.sleep(0.1)
        w = PageWatch(chromium)
        page = w.open(f"{base}/ui/jobs/{ns}/{name}")
        steps = page.locator("#timeline li.step-pipeline")
        assert steps.count() == 1, steps.all_inner_texts()
        assert steps.first.get_attribute("data-count") == "6"
        text = steps.first.inner_text()
        assert f"pipelined {ns}/{task} onto {node}" in text and "× 6 cycles (4–9)" in text, text
        assert steps.first.locator("a.node-link").get_attribute("href") == f"/ui/nodes?node={node}"
        assert w.errors == []
        page.close()
    finally:
        stop(proc)


def test_cycle_type_filter_asks_the_server(settled: Daemon, chromium: Any) -> None:
    rows = settled.get("/v1/decisions?type=decision.job_explained&limit=1")["items"]
    cycle = rows[0]["event"]["cycle"]
    want = settled.get(f"/v1/decisions?cycle={cycle}&type=decision.job_explained&limit=1000")["items"]
    w = PageWatch(chromium)
    page = w.open(f"{settled.base}/ui/cycles/{cycle}")
    with page.expect_request(
        lambda r: "/v1/decisions?cycle=" in r.url and "type=decision.job_explained" in r.url
    ):
        page.select_option("#f-type", "decision.job_explained")
    page.wait_for_function(f"() => document.querySelectorAll('tbody tr[data-type]').length === {len(want)}")
    assert page.locator("tbody tr[data-type='decision.job_explained']").count() == len(want)
    assert (
        page.inner_text("#decisions-count")
        == f"All {len(want)} decision.job_explained decisions of this cycle."
    )
    w.screenshot("cycle-filter")
    # the newest cycle has no "next →" (it would lead to a missing cycle)
    last = settled.get("/v1/cycles?latest=1")["items"][0]["cycle"]
    page = w.open(f"{settled.base}/ui/cycles/{last}")
    assert (
        page.locator("a#next-cycle").count() == 0 and page.inner_text("#next-cycle") == "(the newest cycle)"
    )
    assert w.errors == []
    page.close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_missing_pages_are_helpful(settled: Daemon, chromium: Any) -> None:
    w = PageWatch(chromium)
    assert _status(settled.base + "/ui/no-such-page") == 404
    page = w.open(settled.base + "/ui/no-such-page")
    assert page.inner_text("h1") == "No such page" and page.locator(".ways-back a").count() == 4
    page = w.open(settled.base + "/ui/jobs/e2e/%E0%A4%A")  # a truncated escape
    assert page.inner_text("h1") == "Malformed address"
    page = w.open(settled.base + "/ui/jobs/e2e/nope")
    assert page.inner_text("h1") == "No such job"
    assert page.locator("a[href='/ui/jobs?q=nope']").count() == 1
    last = settled.get("/v1/cycles?latest=1")["items"][0]["cycle"]
    page = w.open(f"{settled.base}/ui/cycles/{last + 5}")
    assert page.inner_text("h1") == "No such cycle"
    assert f"the newest cycle in the log is {last}" in page.inner_text("#missing-text")
    page.click(f"a[href='/ui/cycles/{last}']")
    page.wait_for_selector("main[data-ready='1']")
    assert page.inner_text("h1") == f"Cycle {last}"
    w.screenshot("missing")
    page.close()


def test_error_pages_recover_and_stale_data_is_marked(settled: Daemon, chromium: Any, tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    _copy_db(settled.db, db)
    proc, base = start_serve(db)
    port = int(base.rsplit(":", 1)[1])
    w = PageWatch(chromium)
    try:
        page = w.open(base + "/ui/jobs")
        page.wait_for_selector("#live-status[data-state='live']", timeout=15_000)
        assert page.is_hidden("#stale")
        assert stop(proc) == 0
        page.wait_for_selector("#stale:visible", timeout=15_000)
        assert "Possibly out of date" in page.inner_text("#stale")
        page.click("a[data-nav='queues']")  # the API is down: an error page
        page.wait_for_selector("main[data-ready='error']", timeout=15_000)
        proc, _ = start_serve(db, listen=f"127.0.0.1:{port}")
        page.wait_for_selector("main[data-ready='1']", timeout=60_000)  # by itself, once it answers
        assert page.inner_text("h1") == "Queues"
        page.wait_for_selector("#stale", state="hidden", timeout=15_000)
    finally:
        stop(proc)
    page.close()


def test_an_empty_log_says_so(tmp_path: Path, chromium: Any) -> None:
    from fumarole.store.sqlite import SqliteEventLog

    async def make() -> None:
        log = await SqliteEventLog.open(str(tmp_path / "empty.db"))
        await log.close()

    _in_thread(make())
    proc, base = start_serve(tmp_path / "empty.db")
    try:
        w = PageWatch(chromium)
        page = w.open(base + "/ui/cycles")
        text = page.inner_text("main")
        assert "1e-12" not in text and "no finished cycle yet" in text, text
        assert page.is_hidden("#cycles-table")
        page = w.open(base + "/ui/jobs")
        assert page.inner_text("#jobs-count") == "The log has no job yet."
        assert "1–0" not in page.inner_text("main")
        assert w.errors == []
        page.close()
    finally:
        stop(proc)
