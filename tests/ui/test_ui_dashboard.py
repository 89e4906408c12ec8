"""The dashboard in headless Chromium against a real daemon on the simulator (`fumarole run --serve`).

One daemon for the module: a workload that keeps it cycling for a while (the live test runs first,
while it does), then drains, leaving e2e/huge waiting for good (it asks 16 cpu per pod of 8-cpu
nodes).  Cycles carry trace ids (an OTLP sink stands in for Jaeger's collector)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import FUMAROLE, child_env, stop, wait_for_url
from ui_kit import Daemon, PageWatch, browser, drain, otlp_sink, require_chromium, write_busy_sim

JAEGER = "http://jaeger.example:16686"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("ui")
    c, w = write_busy_sim(tmp, jobs=120)
    with otlp_sink() as sink:
        env = child_env() | {"OTEL_EXPORTER_OTLP_ENDPOINT": sink, "FUMAROLE_JAEGER_URL": JAEGER}
        args = ["--data-dir", str(tmp / "data"), "--cluster", str(c), "--workload", str(w)]
        proc = subprocess.Popen(
            [FUMAROLE, "run", *args, "--listen", "127.0.0.1:0", "--serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
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


def test_a_new_cycle_appears_live_within_2s(daemon: Daemon, chromium: Any) -> None:
    w = PageWatch(chromium)
    page = w.open(daemon.base + "/ui/cycles")
    assert not daemon.drained(), "the daemon drained before the live test: give write_busy_sim more jobs"
    first = int(page.inner_text("#latest-cycle"))
    page.wait_for_function(
        "n => Number(document.querySelector('#latest-cycle').textContent) > n", arg=first, timeout=2000
    )
    assert int(page.inner_text("#latest-cycle")) > first
    assert page.locator("svg.stack rect.seg").count() > 0  # the chart draws the cycles' actions
    assert "live · cycle" in page.inner_text("#live-status")
    w.screenshot("cycles")
    # the state pages while the daemon decides (and the screenshots of a busy cluster)
    for path, name in (
        ("/ui/queues", "queues"),
        ("/ui/jobs?queue=a", "jobs"),
        ("/ui/nodes?node=n0", "nodes"),
    ):
        w.open(daemon.base + path)
        w.screenshot(name)
    assert w.errors == []
    page.close()


@pytest.fixture(scope="module")
def settled(daemon: Daemon) -> Daemon:
    daemon.wait_drained()
    return daemon


def test_every_page_loads_without_console_errors(settled: Daemon, chromium: Any) -> None:
    cycle = settled.get("/v1/cycles?latest=1")["items"][0]["cycle"]
    w = PageWatch(chromium)
    for path, name, expect in (
        ("/ui/", "", "Queues"),
        ("/ui/queues", "", "Queues"),
        ("/ui/jobs", "", "Jobs"),
        ("/ui/jobs/e2e/huge", "job", "Job e2e/huge"),
        ("/ui/cycles", "", "Cycles"),
        (f"/ui/cycles/{cycle // 2}", "cycle", f"Cycle {cycle // 2}"),
        ("/ui/nodes", "", "Nodes"),
    ):
        page = w.open(settled.base + path)
        assert page.inner_text("main h1") == expect, path
        assert page.title() == f"{expect} · Fumarole"
        if name:
            w.screenshot(name)
    assert w.errors == []
    # links navigate inside the page (no reload): from the jobs list to a job
    page = w.open(settled.base + "/ui/jobs?q=huge")
    page.click("a[href='/ui/jobs/e2e/huge']")
    page.wait_for_selector("#why-reasons")
    assert page.url.endswith("/ui/jobs/e2e/huge")
    assert w.errors == []
    w.page.close()


def test_job_filters_and_search(settled: Daemon, chromium: Any) -> None:
    jobs = settled.get("/v1/jobs")["items"]
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/jobs")

    def shown() -> list[str]:
        return page.eval_on_selector_all("tbody tr[data-job]", "rows => rows.map(r => r.dataset.job)")

    assert page.inner_text("#jobs-count") == f"{len(jobs)} of {len(jobs)} jobs"
    page.select_option("#f-queue", "b")
    in_b = sorted(f"{j['namespace']}/{j['name']}" for j in jobs if j["queue"] == "b")
    assert page.inner_text("#jobs-count") == f"{len(in_b)} of {len(jobs)} jobs"
    assert set(shown()) <= set(in_b) and len(shown()) == min(100, len(in_b))
    assert "queue=b" in page.url
    page.select_option("#f-queue", "")
    page.select_option("#f-phase", "Pending")
    pending = {f"{j['namespace']}/{j['name']}" for j in jobs if j["phase"] == "Pending"}
    assert page.inner_text("#jobs-count") == f"{len(pending)} of {len(jobs)} jobs"
    assert set(shown()) <= pending and len(shown()) == min(100, len(pending))
    page.select_option("#f-phase", "")
    page.select_option("#f-namespace", "e2e")
    assert page.inner_text("#jobs-count") == f"{len(jobs)} of {len(jobs)} jobs"
    page.fill("#f-q", "j12")
    want = sorted(f"e2e/{j['name']}" for j in jobs if "j12" in j["name"])
    assert sorted(shown()) == want and want
    page.fill("#f-q", "")
    page.check("#f-pending")
    waiting = sorted(f"{j['namespace']}/{j['name']}" for j in jobs if j["pending"])
    assert page.inner_text("#jobs-count") == f"{len(waiting)} of {len(jobs)} jobs"
    assert "e2e/huge" in shown() and set(shown()) <= set(waiting)
    # a filtered URL opens filtered
    page = w.open(settled.base + "/ui/jobs?queue=solo")
    assert shown() == ["e2e/huge"]
    assert w.errors == []
    page.close()


def _explain(db: Path, job: str) -> str:
    out = subprocess.run(
        [FUMAROLE, "explain", "--db", str(db), job],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_why_pending_equals_fumarole_explain(settled: Daemon, chromium: Any) -> None:
    text = _explain(settled.db, "e2e/huge")
    message = re.search(r"^pending: (.*)$", text, re.M)
    position = re.search(r"^position in queue (\S+): (\d+)  \(as of cycle (\d+)\)$", text, re.M)
    assert message and position, text
    reasons = re.findall(r"^  (\d+)\. (\[[^\]]+\] .*)\n(?:     (.*)\n)?", text, re.M)
    assert reasons, text
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/jobs/e2e/huge")
    assert page.inner_text("#why-message") == message.group(1)
    assert page.inner_text("#why-position") == (
        f"Position in queue {position.group(1)}: {position.group(2)} (as of cycle [{position.group(3)}])"
    )
    items = page.locator("#why-reasons > li")
    assert items.count() == len(reasons)
    for i, (rank, line, facts) in enumerate(reasons):
        assert int(rank) == i + 1
        assert items.nth(i).locator(".reason-text").inner_text() == line
        if facts:
            assert items.nth(i).locator(".reason-facts").inner_text() == facts
    waited = re.search(r"^  (waited .*)$", text, re.M)
    assert waited, text
    assert page.inner_text("#history-summary").startswith(waited.group(1).capitalize() + ";")
    assert page.locator("#timeline li.step-wait").count() >= 1
    assert w.errors == []
    page.close()


def test_cycle_page_links_to_its_trace_in_jaeger(settled: Daemon, chromium: Any) -> None:
    rows = settled.get("/v1/cycles?latest=20")["items"]
    row = (
        next(r for r in rows if r["closed"] and r["closed"]["binds"])
        if any(r["closed"] and r["closed"]["binds"] for r in rows)
        else rows[-1]
    )
    assert re.fullmatch(r"[0-9a-f]{32}", row["trace_id"]), row
    w = PageWatch(chromium)
    page = w.open(f"{settled.base}/ui/cycles/{row['cycle']}")
    assert page.get_attribute("#jaeger-link", "href") == f"{JAEGER}/trace/{row['trace_id']}"
    detail = settled.get(f"/v1/cycles/{row['cycle']}?limit=1000")
    assert page.locator("tbody tr[data-type]").count() == len(detail["decisions"])
    # the cycles list links each cycle to its trace as well
    page = w.open(settled.base + "/ui/cycles")
    newest = settled.get("/v1/cycles?latest=1")["items"][0]
    href = page.get_attribute(f"tr[data-cycle='{newest['cycle']}'] a.trace", "href")
    assert href == f"{JAEGER}/trace/{newest['trace_id']}"
    assert w.errors == []
    page.close()


def test_queues_sort_and_nodes_pick(settled: Daemon, chromium: Any) -> None:
    queues = settled.get("/v1/queues")["items"]
    w = PageWatch(chromium)
    page = w.open(settled.base + "/ui/queues")
    names = page.eval_on_selector_all("tbody tr[data-queue]", "rows => rows.map(r => r.dataset.queue)")
    assert names == sorted(q["name"] for q in queues)
    page.click("button.sort[data-key='weight']")  # numbers sort biggest first
    by_weight = page.eval_on_selector_all("tbody tr[data-queue]", "rows => rows.map(r => r.dataset.queue)")
    assert by_weight[0] == "b" and "desc=1" in page.url
    assert page.locator("svg.rbar").count() > 0
    page = w.open(settled.base + "/ui/nodes")
    assert page.inner_text("#nodes-summary").startswith("5 nodes")
    page.click("tr[data-node='n2'] a")
    assert page.inner_text("#node-detail h2") == "Node n2"
    box = page.locator("canvas.heat").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 3, box["y"] + 3)  # the first cell: the busiest node, the table's first row
    assert (
        page.inner_text("#node-detail h2") == f"Node {page.get_attribute('tbody tr[data-node]', 'data-node')}"
    )
    page.click("tr[data-node='gpu-0'] a")
    assert page.inner_text("#gpu-h") == "GPU cards (2)"
    assert page.locator("#node-detail li[data-gpu]").count() == 2
    page.select_option("#f-resource", "memory")
    assert "resource=memory" in page.url
    assert w.errors == []
    page.close()
