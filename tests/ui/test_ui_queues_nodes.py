"""The queues and nodes pages in headless Chromium over `fumarole serve` on a small hand-made log:
figures that do not mislead (effective capability, no full bar without a measure, share plain up to
100 %), demand, the history charts from GET /v1/queue-history, the layout at 900 and 1920 px, node
search and grouping by zone and by HyperNode tier (GET /v1/hypernodes), node and pod links (a pod to
its row on its job's page, from the node panel, the job's timeline and a cycle's decisions), the heat
map by keyboard and its colour bands, and honest empty states on an empty log.  One browser for the
module; screenshots for docs/dashboard.md when FUMAROLE_UPDATE_SCREENSHOTS=1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import start_serve, stop
from fumarole_e2e_kit import _queue
from hypernode_kit import HYPERNODES, nodes, running_job
from ui_kit import PageWatch, browser, require_chromium, until

from fumarole.store.events import (
    BindDecided,
    CycleClosed,
    CycleOpened,
    JobExplained,
    PendingReason,
    QueueFigures,
    QueueFiguresRecorded,
    upserted,
)
from fumarole.store.sqlite import SqliteEventLog


def _objects() -> list[dict[str, Any]]:
    prod = _queue("prod", 1)
    prod["spec"]["capability"] = {"cpu": "64"}
    # six nodes in zones a (node-0..3) and b, HyperNodes over them (racks at tier 1, spines at tier 2),
    # and the job e2e/train running on node-0 and node-1
    return [prod, _queue("dev", 3), _queue("idle", 1), *nodes(), *running_job(), *HYPERNODES]


def _binds(c: int) -> list[Any]:
    if c != 1:
        return []
    return [
        BindDecided(
            cycle=1,
            namespace="e2e",
            name=f"train-w-{k}",
            uid=f"u{k}",
            node=f"node-{k}",
            job="e2e/train",
            queue="dev",
        )
        for k in (0, 1)
    ]


def _figures(c: int) -> dict[str, QueueFigures]:
    return {
        # prod: 64 cpu configured, 44 effective (realCapability), at 98 % of its deserved share
        "prod": QueueFigures(
            deserved={"cpu": "20"},
            allocated={"cpu": str(10 + c)},
            capability={"cpu": "44"},
            request={"cpu": "30"},
            inqueue={"cpu": "6"},
            share=(10 + c) / 20,
        ),
        # dev: no capability (its realCapability is the cluster's) and memory with no deserved
        "dev": QueueFigures(
            deserved={"cpu": "28"},
            allocated={"cpu": "8", "memory": "4Gi"},
            capability={"cpu": "48", "memory": "96Gi"},
            share=8 / 28,
        ),
    }


async def _write(path: Path, *, empty: bool) -> None:
    log = await SqliteEventLog.open(str(path))
    try:
        if empty:
            return
        events: list[Any] = [upserted(o, 1000) for o in _objects()]
        for c in range(1, 10):
            events.append(CycleOpened(cycle=c, watermark=0, now_ms=c * 1000, conf_hash="h"))
            events.append(QueueFiguresRecorded(cycle=c, queues=_figures(c)))
            events.extend(_binds(c))
            if c in (2, 3, 4):
                reason = (PendingReason(code="queue-overused", message="over"),)
                events.append(
                    JobExplained(
                        cycle=c, namespace="e2e", name=f"w{c}", queue="dev", message="waits", reasons=reason
                    )
                )
            events.append(CycleClosed(cycle=c))
        await log.append(events)
    finally:
        await log.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("ui-qn")
    procs, bases = [], {}
    try:
        for name in ("full", "empty"):
            db = tmp / f"{name}.db"
            asyncio.run(_write(db, empty=name == "empty"))
            proc, base = start_serve(db)
            procs.append(proc)
            bases[name] = base
        yield bases
    finally:
        for proc in procs:
            assert stop(proc) == 0


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as context:
        yield context


@pytest.fixture
def watch(chromium: Any) -> Iterator[PageWatch]:
    """A fresh page, closed after the test (each open page holds a live feed, which serve bounds)."""
    w = PageWatch(chromium)
    yield w
    w.page.close()


def _res(page: Any, queue: str, resource: str) -> Any:
    return page.locator(f'tr[data-queue="{queue}"] .res[data-resource="{resource}"]')


def test_queue_figures_show_effective_cap_demand_and_honest_bars(
    served: dict[str, str], chromium: Any
) -> None:
    w = PageWatch(chromium)
    page = w.open(served["full"] + "/ui/queues")
    prod = _res(page, "prod", "cpu").inner_text()
    assert "19 / 20 (cap 44)" in prod and "64" not in prod.split("req")[0]
    assert "req 30 · inq 6" in prod
    assert "configured 64" in (_res(page, "prod", "cpu").get_attribute("title") or "")
    # dev has no configured capability: no "cap" from the cluster total; memory has no deserved nor
    # capability: no bar at all, the text says why
    assert "cap" not in _res(page, "dev", "cpu").inner_text()
    mem = _res(page, "dev", "memory")
    assert mem.locator("svg").count() == 0 and "no deserved or capability" in mem.inner_text()
    # the share bar at 95 % is not drawn as "over" (red is only past 100 %)
    share = page.locator('tr[data-queue="prod"] .frac')
    assert share.inner_text().strip() == "95%"
    assert share.locator("rect.over").count() == 0
    assert w.errors == []


def test_history_charts_from_the_endpoint(served: dict[str, str], watch: PageWatch) -> None:
    w = watch
    page = w.open(served["full"] + "/ui/queues")
    assert page.locator("#chart-share path.line").count() == 2  # prod and dev
    assert "9 samples" in page.inner_text(".history")
    page.focus("#chart-waiting")
    page.keyboard.press("Tab")  # into its values table's summary
    page.keyboard.press("Enter")
    rows = page.locator("#chart-waiting tbody tr")
    assert rows.count() == 9
    # cycle 9: dev has 3 jobs waiting, prod none (columns by name: dev, prod)
    assert rows.nth(8).inner_text().split() == ["9", "3", "0"]
    w.screenshot("queues-history")
    assert w.errors == []


@pytest.mark.parametrize("width", [900, 1920])
def test_the_queues_page_fits_the_window(served: dict[str, str], watch: PageWatch, width: int) -> None:
    w = watch
    w.page.set_viewport_size({"width": width, "height": 900})
    page = w.open(served["full"] + "/ui/queues")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    text_width = page.eval_on_selector(
        'tr[data-queue="prod"] .res-text', "e => e.getBoundingClientRect().width"
    )
    assert text_width >= 60


def test_node_search_grouping_and_links(served: dict[str, str], watch: PageWatch) -> None:
    w = watch
    page = w.open(served["full"] + "/ui/nodes")
    page.select_option("#f-group", "topology.kubernetes.io/zone")
    groups = page.eval_on_selector_all(
        "#node-groups tbody tr", "rs => rs.map(r => [r.dataset.group, r.cells[1].textContent])"
    )
    assert groups == [["zone-a", "4"], ["zone-b", "2"]]
    page.click('#node-groups tr[data-group="zone-b"] button')
    assert page.input_value("#f-search") == "topology.kubernetes.io/zone=zone-b"
    assert page.inner_text("#nodes-summary").startswith("2 of 6 nodes")
    assert "group=topology.kubernetes.io" in page.url.replace("%2F", "/")
    page.fill("#f-search", "node-5")
    assert page.locator("tbody tr[data-node]").count() == 1
    link = page.locator('tr[data-node="node-5"] a')
    assert link.get_attribute("href") == "/ui/nodes?node=node-5"
    link.click()
    assert page.inner_text("#node-detail h2") == "Node node-5"
    page.fill("#f-search", "nothing-like-this")
    assert "No node matches" in page.inner_text("main")
    assert w.errors == []


def test_heat_map_by_keyboard_and_its_colour_bands(served: dict[str, str], watch: PageWatch) -> None:
    w = watch
    page = w.open(served["full"] + "/ui/nodes?order=name")
    page.focus("canvas.heat")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.inner_text(".heat-cursor").startswith("node-1: cpu")
    page.keyboard.press("Enter")
    assert page.inner_text("#node-detail h2") == "Node node-1"
    colours = page.evaluate(
        "async () => { const m = await import('/ui/assets/charts.js');"
        " return [m.heat(0.9), m.heat(0.95), m.heat(1)]; }"
    )
    assert len(set(colours)) == 3  # 90 %, 95 % and 100 % are three colours
    bands = page.inner_text(".heat-bands")
    assert "90–99%" in bands and "100% (full)" in bands
    w.screenshot("nodes-keyboard")
    assert w.errors == []


def test_an_empty_log_says_so(served: dict[str, str], watch: PageWatch) -> None:
    w = watch
    page = w.open(served["empty"] + "/ui/queues")
    assert "1e-12" not in page.inner_text("main")  # only Volcano's default queue, no figures yet
    assert "No cycles recorded yet" in page.inner_text(".history")
    page = w.open(served["empty"] + "/ui/nodes")
    assert page.inner_text("#nodes-summary") == "No nodes in the log yet."
    assert w.errors == []


def test_nodes_group_by_hypernode(served: dict[str, str], watch: PageWatch) -> None:
    w = watch
    page = w.open(served["full"] + "/ui/nodes")
    options = page.eval_on_selector_all("#f-group option", "os => os.map(o => [o.value, o.textContent])")
    assert options[1:3] == [
        ["hypernode:1", "HyperNode (tier 1, rack)"],
        ["hypernode:2", "HyperNode (tier 2, spine)"],
    ]
    page.select_option("#f-group", "hypernode:1")
    rows = "#node-groups tbody tr"
    groups = page.eval_on_selector_all(
        rows, "rs => rs.map(r => [r.dataset.group, r.cells[0].textContent, r.cells[1].textContent])"
    )
    # rack-a by regex, rack-b by exact names, rack-c by label; each inside its spine
    assert groups == [
        ["rack-a", "rack-a in spine-0 (tier 2 spine)", "2"],
        ["rack-b", "rack-b in spine-0 (tier 2 spine)", "2"],
        ["rack-c", "rack-c in spine-1 (tier 2 spine)", "2"],
    ]
    assert "groups by HyperNode of tier 1, rack" in page.inner_text("#node-groups caption")
    w.screenshot("nodes-hypernodes")
    page.click('#node-groups tr[data-group="rack-b"] td:first-child button:first-child')
    assert page.input_value("#f-search") == "hypernode=rack-b"
    assert page.inner_text("#nodes-summary").startswith("2 of 6 nodes")
    assert sorted(page.eval_on_selector_all("tbody tr[data-node]", "rs => rs.map(r => r.dataset.node)")) == [
        "node-2",
        "node-3",
    ]
    # tier 2, kept in the address across a reload
    page.fill("#f-search", "")
    page.select_option("#f-group", "hypernode:2")
    assert "group=hypernode%3A2" in page.url or "group=hypernode:2" in page.url
    page = w.open(page.url)
    assert page.eval_on_selector_all(
        rows, "rs => rs.map(r => [r.dataset.group, r.cells[1].textContent])"
    ) == [
        ["spine-0", "4"],
        ["spine-1", "2"],
    ]
    # a node's panel names its HyperNodes, lowest tier first, each one a search
    page.click('tr[data-node="node-0"] a')
    assert page.inner_text("#node-hypernodes") == "HyperNodes: rack-a (tier 1 rack) ⊂ spine-0 (tier 2 spine)"
    page.click('#node-hypernodes button[data-hypernode="spine-0"]')
    assert page.inner_text("#nodes-summary").startswith("4 of 6 nodes")
    assert w.errors == []


def test_pods_link_to_their_row_on_their_jobs_page(served: dict[str, str], watch: PageWatch) -> None:
    w = watch
    base = served["full"]
    page = w.open(base + "/ui/nodes?node=node-0")
    link = page.locator("#node-pods a.pod-link")
    assert link.inner_text() == "e2e/train-w-0"
    assert link.get_attribute("href") == "/ui/jobs/e2e/train#task-train-w-0"
    link.click()
    page.wait_for_selector("main[data-ready] #tasks")
    until(page, "document.activeElement && document.activeElement.id === 'task-train-w-0'")
    assert "targeted" in (page.get_attribute("#task-train-w-0", "class") or "")
    w.artifact("job-pod-target")
    # the timeline's bind names both pods and both nodes as links; a pod link stays on the page
    bind = page.locator("#timeline li.step-bind")
    assert bind.locator("a.pod-link").evaluate_all("as => as.map(a => a.getAttribute('href'))") == [
        "#task-train-w-0",
        "#task-train-w-1",
    ]
    assert bind.locator("a.node-link").evaluate_all("as => as.map(a => a.textContent)") == [
        "node-0",
        "node-1",
    ]
    page.evaluate("window.__stay = 1")  # gone if the page were reloaded
    bind.locator('a[href="#task-train-w-1"]').click()
    until(page, "document.activeElement && document.activeElement.id === 'task-train-w-1'")
    assert page.evaluate("window.__stay") == 1 and page.url.endswith("#task-train-w-1")
    # a cycle's decisions: the pod to its job's row, the node to the node, queues to their jobs
    page = w.open(base + "/ui/cycles/1")
    row = page.locator('tr[data-type="decision.bind"]').first
    assert row.locator("a.pod-link").get_attribute("href") == "/ui/jobs/e2e/train#task-train-w-0"
    assert row.locator("a.node-link").get_attribute("href") == "/ui/nodes?node=node-0"
    fig = page.locator('tr[data-type="decision.queue_figures"] a.queue-link')
    assert fig.evaluate_all("as => as.map(a => a.textContent)") == ["prod", "dev"]
    # the jobs list: the queue is a link to its jobs
    page = w.open(base + "/ui/jobs")
    assert page.locator('tr[data-job="e2e/train"] a.queue-link').get_attribute("href") == "/ui/jobs?queue=dev"
    # the queues page: a queue's running jobs are a link to them too (e2e/train's PodGroup has no
    # status in this log, so its phase is not Running: 0)
    page = w.open(base + "/ui/queues")
    running = page.locator('tr[data-queue="dev"] a[href="/ui/jobs?queue=dev&phase=Running"]')
    assert running.inner_text() == "0"
    assert w.errors == []
