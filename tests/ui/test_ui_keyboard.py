"""A keyboard-only pass over every page of the dashboard in headless Chromium (issue 24): from the first
page on, only Tab, Shift+Tab, Enter, Space and the arrow keys.  On each page, Tab alone reaches every
control (every link, button, select, input, disclosure summary, sort header, chart and the heat map,
pagers included) with a visible focus ring; then the page is worked by keys: sorting keeps the focus on
its header, the pagers keep it on their button, the heat map's cursor opens a node, a pod link lands
on its row of its job's page (focused), the cycles chart opens a cycle, a live refresh (a cycle
appended to the log while the page is open) keeps the focus where it was.

The same file checks every page's width at 900 and 1920 px, the cycles chart's clipped scale, a GPU
card's pod link, and a HyperNode tier that appears while the nodes page is open.

The log: the hypernode cluster of tests/api/hypernode_kit.py with 100 more nodes, a node with two
gpushare cards and 105 waiting jobs (so both pagers exist), 30 recorded cycles (one ten times slower)
with a bind, queue figures and explanations."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import start_serve, stop
from fumarole_e2e_kit import _job, _node, _queue
from hypernode_kit import cluster, hypernode, member, running_job
from ui_kit import PageWatch, browser, require_chromium, until

from fumarole.daemon.manifests import expand_job
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

WAITING = 105
CYCLES = 30  # recorded before the browser opens; the test appends 31, 32 and 33 while pages are open
SLOW = 17
EXTRA_NODES = 100


def _objects() -> list[dict[str, Any]]:
    objs = [*cluster(), _queue("idle", 1)]
    objs += [_node(f"x-{i:03d}", 4) for i in range(EXTRA_NODES)]
    # gpu-0: two gpushare cards, the pod of e2e/vgpu on card 1
    gpu = _node("gpu-0", 16)
    gpu["status"]["allocatable"] |= {"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "2"}
    objs.append(gpu)
    for m in running_job("vgpu", on=("gpu-0",)):
        if m["kind"] == "Pod":
            m["metadata"].setdefault("annotations", {})["volcano.sh/gpu-index"] = "1"
            m["spec"]["containers"][0]["resources"]["limits"] = {"volcano.sh/gpu-memory": "8192"}
        objs.append(m)
    pcs = [("kb", 0, objs[next(i for i, o in enumerate(objs) if o["kind"] == "PriorityClass")])]
    for i in range(WAITING):
        objs += expand_job(
            "kb", i, _job(f"p-{i:03d}", "dev", 1, 64, at=0, dur=60, pc="low"), priority_classes=pcs
        )
    return objs


def _cycle(c: int) -> list[Any]:
    events: list[Any] = [CycleOpened(cycle=c, watermark=0, now_ms=c * 1000, conf_hash="h")]
    events.append(
        QueueFiguresRecorded(
            cycle=c,
            queues={"dev": QueueFigures(deserved={"cpu": "48"}, allocated={"cpu": "4"}, share=4 / 48)},
        )
    )
    if c == 1:
        events += [
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
        reason = (PendingReason(code="predicates-failed", message="no node has 64 cpu"),)
        events += [
            JobExplained(
                cycle=1,
                namespace="e2e",
                name=f"p-{i:03d}",
                queue="dev",
                message="0/107 nodes are available",
                reasons=reason,
                queue_position=i + 1,
                pods={f"e2e/p-{i:03d}-w-0": "Insufficient cpu"},
            )
            for i in range(WAITING)
        ]
    events.append(
        CycleClosed(
            cycle=c,
            binds=2 if c == 1 else 0,
            duration_s=0.01,
            # cycle SLOW ten times slower than the others: the cycles chart's scale must not flatten them
            action_seconds={"allocate": 0.04 if c == SLOW else 0.004 + 0.0001 * c},
        )
    )
    return events


async def _write(path: Path, events: list[Any]) -> None:
    log = await SqliteEventLog.open(str(path))
    try:
        await log.append(events)
    finally:
        await log.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    require_chromium()
    db = tmp_path_factory.mktemp("ui-kb") / "log.db"
    asyncio.run(
        _write(
            db,
            [*(upserted(o, 1000) for o in _objects()), *(e for c in range(1, CYCLES + 1) for e in _cycle(c))],
        )
    )
    proc, base = start_serve(db)
    try:
        yield base, db
    finally:
        assert stop(proc) == 0


@pytest.fixture(scope="module")
def watch() -> Iterator[PageWatch]:
    with browser() as context:
        w = PageWatch(context)
        yield w


# ----------------------------------------------------------------------------- keys only

_FOCUSED = """() => {
  const a = document.activeElement;
  if (!a || a === document.body) return null;
  const s = getComputedStyle(a);
  return { id: a.id, tag: a.tagName.toLowerCase(), text: (a.textContent || "").trim().slice(0, 60),
           key: a.dataset.key || "", href: a.getAttribute("href") || "",
           visible: a.matches(":focus-visible") && s.outlineStyle !== "none"
             && parseFloat(s.outlineWidth) > 0 };
}"""

# every control a keyboard user must reach: visible, enabled, not inside a closed <details>
_CONTROLS = """() => [...document.querySelectorAll(
    'a[href], button, select, input, summary, [tabindex]:not([tabindex="-1"])')]
  .filter((e) => !e.disabled && e.checkVisibility() && !e.closest("details:not([open]) > :not(summary)"))"""


def _focused(page: Any) -> dict[str, Any]:
    f = page.evaluate(_FOCUSED)
    assert f is not None, "the focus was lost (on the body)"
    assert f["visible"], f"no visible focus ring on {f}"
    return f


def tab_to(page: Any, selector: str, *, back: bool = False, limit: int = 500) -> dict[str, Any]:
    """Press Tab (Shift+Tab) until the focused element matches `selector`; its focus must be visible."""
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        if page.evaluate("s => !!document.activeElement?.matches(s)", selector):
            return _focused(page)
    raise AssertionError(f"Tab never reached {selector}")


_WATCH_FOCUS = """() => {
  document.querySelectorAll("[data-kb]").forEach((e) => delete e.dataset.kb);
  window.__kbBad = [];
  if (window.__kbOn) return;
  window.__kbOn = true;
  document.addEventListener("focusin", (ev) => {
    const a = ev.target, s = getComputedStyle(a);
    a.dataset.kb = "1";
    if (!(a.matches(":focus-visible") && s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0))
      window.__kbBad.push(a.outerHTML.slice(0, 120));
  });
}"""


def walk_all(page: Any) -> None:
    """Tab from the top of the page once round it: every control must get the focus, visibly (a focusin
    listener in the page marks each element focused and checks its focus ring)."""
    page.evaluate(_WATCH_FOCUS)
    page.evaluate("document.activeElement?.blur()")
    total = page.evaluate(f"({_CONTROLS})().length")
    for _ in range(total + 5):
        page.keyboard.press("Tab")
    assert page.evaluate("window.__kbBad") == [], "focus ring not visible"
    missed = page.evaluate(
        f"({_CONTROLS})().filter((e) => !e.dataset.kb).map((e) => e.outerHTML.slice(0, 120))"
    )
    assert missed == [], f"Tab does not reach: {missed}"


def wait_ready(page: Any) -> None:
    page.wait_for_selector("main[data-ready='1']", timeout=20_000)


def follow(page: Any, selector: str, w: PageWatch, state: str) -> None:
    """Tab to a link or nav entry and press Enter: the next page loads."""
    tab_to(page, selector)
    page.keyboard.press("Enter")
    wait_ready(page)
    w.artifact(state)


def appended_cycle_refreshes(page: Any, db: Path, cycle: int, before_it: tuple[Any, ...] = ()) -> None:
    """Append a cycle to the log (as the daemon would; `before_it`: observed events first) and wait for
    the page's live re-read."""
    before = int(page.get_attribute("main", "data-refreshed") or "0")
    # in a thread of its own: Playwright's loop runs in this one
    t = threading.Thread(target=lambda: asyncio.run(_write(db, [*before_it, *_cycle(cycle)])))
    t.start()
    t.join()
    deadline = time.monotonic() + 20
    while int(page.get_attribute("main", "data-refreshed") or "0") <= before:
        assert time.monotonic() < deadline, "no live refresh after a new cycle"
        page.wait_for_timeout(100)


def test_every_page_by_keyboard_only(served: tuple[str, Path], watch: PageWatch) -> None:
    base, db = served
    w = watch
    page = w.open(base + "/ui/queues")  # the only address typed; from here on, keys only

    # queues: every control by Tab; a sort header by Enter and Space keeps the focus; a chart's values
    walk_all(page)
    f = tab_to(page, 'button.sort[data-key="share"]')
    page.keyboard.press("Enter")
    assert _focused(page)["key"] == "share"
    assert page.get_attribute('th:has(button[data-key="share"])', "aria-sort") == "descending"
    page.keyboard.press("Space")
    assert _focused(page)["key"] == "share"
    assert page.get_attribute('th:has(button[data-key="share"])', "aria-sort") == "ascending"
    tab_to(page, "#chart-waiting summary")
    page.keyboard.press("Enter")
    assert page.locator("#chart-waiting details[open]").count() == 1
    w.artifact("queues-keys")

    # jobs: filters, search, sort, pager; a live refresh keeps the focus in the search box and its text
    follow(page, 'a[data-nav="jobs"]', w, "jobs")
    walk_all(page)
    tab_to(page, "#f-queue")
    page.keyboard.press("ArrowDown")  # the first queue
    assert page.input_value("#f-queue") != ""
    tab_to(page, 'button.sort[data-key="waited"]')
    page.keyboard.press("Enter")
    assert _focused(page)["key"] == "waited"
    assert page.get_attribute('th:has(button[data-key="waited"])', "aria-sort") == "descending"
    tab_to(page, "#f-q", back=True)
    page.keyboard.type("p-00")
    appended_cycle_refreshes(page, db, CYCLES + 1)
    f = _focused(page)
    assert f["id"] == "f-q" and page.input_value("#f-q") == "p-00"
    assert page.inner_text("#jobs-count").startswith("10 of")
    w.artifact("jobs-keys")
    page.keyboard.press("Control+a")
    page.keyboard.press("Backspace")
    tab_to(page, "#jobs-next", back=True)  # round the page's start to its end
    assert "page 1 of 2" in page.inner_text("#jobs-page")
    page.keyboard.press("Enter")
    assert "page 2 of 2" in page.inner_text("#jobs-page")
    assert _focused(page)["id"] == "jobs-prev"  # next → is disabled on the last page: the focus moves over
    page.keyboard.press("Enter")
    assert "page 1 of 2" in page.inner_text("#jobs-page")
    tab_to(page, "#f-q")
    page.keyboard.type("p-001")

    # a waiting job: its waiting pods' disclosure by Space, a pod link to its row (focused)
    follow(page, 'a[href="/ui/jobs/e2e/p-001"]', w, "job")
    walk_all(page)
    tab_to(page, "#pods-details summary")
    page.keyboard.press("Space")
    assert page.locator("#pods-details[open]").count() == 1
    tab_to(page, "#pods-details a.pod-link")
    page.keyboard.press("Enter")
    until(page, "document.activeElement?.id === 'task-p-001-w-0'")
    assert _focused(page)["id"] == "task-p-001-w-0"
    appended_cycle_refreshes(page, db, CYCLES + 2)  # the row keeps the focus through a live refresh
    assert _focused(page)["id"] == "task-p-001-w-0"
    assert page.locator("#pods-details[open]").count() == 1

    # cycles: the chart is one tab stop; End, ← and Home pick a bar, Enter opens its cycle
    follow(page, 'a[data-nav="cycles"]', w, "cycles")
    walk_all(page)
    tab_to(page, "svg.stack")
    page.keyboard.press("End")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("document.activeElement.dataset.picked") == str(CYCLES + 1)
    page.keyboard.press("Home")
    assert page.evaluate("document.activeElement.dataset.picked") == "1"
    page.keyboard.press("Enter")
    wait_ready(page)
    assert page.inner_text("h1") == "Cycle 1"
    w.artifact("cycle")

    # a cycle: every control; its next and previous links; the type filter by arrows
    walk_all(page)
    follow(page, "#next-cycle", w, "cycle-next")
    assert page.inner_text("h1") == "Cycle 2"
    follow(page, 'nav.back a[href="/ui/cycles/1"]', w, "cycle-previous")
    assert page.inner_text("h1") == "Cycle 1"
    tab_to(page, "#f-type")
    for _ in range(10):  # down the type list (cycle.opened, cycle.callouts, …) to decision.bind
        page.keyboard.press("ArrowDown")
        if page.eval_on_selector("#f-type", "s => s.value") == "decision.bind":
            break
    until(page, "document.querySelectorAll('tr[data-type]').length === 2")
    assert _focused(page)["id"] == "f-type"
    follow(page, 'tr[data-type="decision.bind"] a.node-link', w, "nodes-node-0")

    # nodes: every control; the heat map by arrows and Enter; grouping by HyperNode; the pager; a group's
    # search; a live refresh keeps the heat map's focus and its cursor
    assert page.inner_text("#node-detail h2") == "Node node-0"
    walk_all(page)
    tab_to(page, "#f-group")
    page.keyboard.press("ArrowDown")  # HyperNode (tier 1, rack)
    assert page.input_value("#f-group") == "hypernode:1"
    assert page.locator("#node-groups tbody tr").count() == 4  # three racks and the nodes in none
    tab_to(page, 'button[data-key="group:rack-c"]')
    page.keyboard.press("Enter")
    assert page.input_value("#f-search") == "hypernode=rack-c"
    assert page.inner_text("#nodes-summary").startswith("2 of 107 nodes")
    tab_to(page, "#f-search", back=True)
    page.keyboard.press("Control+a")
    page.keyboard.press("Backspace")
    tab_to(page, "#nodes-next", back=True)  # round the page's start to its end
    page.keyboard.press("Enter")
    assert "page 2 of 2" in page.inner_text("#nodes-page") and _focused(page)["id"] == "nodes-prev"
    tab_to(page, "#heat-map")
    page.keyboard.press("ArrowRight")  # the first cell (busiest first: node-0, node-1 run a pod each)
    page.keyboard.press("ArrowRight")
    assert page.inner_text(".heat-cursor").startswith("node-1: cpu")
    appended_cycle_refreshes(page, db, CYCLES + 3)
    assert _focused(page)["id"] == "heat-map"
    assert page.inner_text(".heat-cursor").startswith("node-1: cpu")  # the cursor kept its node
    page.keyboard.press("Enter")
    assert page.inner_text("#node-detail h2") == "Node node-1"
    w.artifact("nodes-keys")
    # the node panel's pod link leads to the pod's row on its job's page
    follow(page, "#node-pods a.pod-link", w, "job-train")
    until(page, "document.activeElement?.id === 'task-train-w-1'")
    assert _focused(page)["id"] == "task-train-w-1"
    assert w.errors == []


def test_one_slow_cycle_does_not_flatten_the_others(served: tuple[str, Path], watch: PageWatch) -> None:
    w = watch
    page = w.open(served[0] + "/ui/cycles")
    chart = page.locator("#chart-duration")
    # the slow cycle is drawn to the top with a dark cap, the caption counts it, the others keep their height
    assert chart.locator(".clip-cap").count() == 1
    assert chart.locator(f'g.bar[data-cycle="{SLOW}"] .clip-cap').count() == 1
    assert "1 clipped bar" in chart.locator("figcaption").inner_text()
    heights = chart.locator(f'g.bar[data-cycle="{SLOW - 1}"] rect.seg').evaluate_all(
        "rs => rs.map(r => Number(r.getAttribute('height')))"
    )
    assert sum(heights) > 0.5 * page.evaluate(
        "Number(document.querySelector('#chart-duration svg').getAttribute('height'))"
    )
    w.artifact("cycles-clipped")


@pytest.mark.parametrize("width", [900, 1920])
def test_every_page_fits_from_900_to_1920_px(served: tuple[str, Path], watch: PageWatch, width: int) -> None:
    w = watch
    w.page.set_viewport_size({"width": width, "height": 900})
    for path in (
        "/ui/queues",
        "/ui/jobs",
        "/ui/jobs/e2e/p-001",
        "/ui/cycles",
        "/ui/cycles/1",
        "/ui/nodes?node=node-0&group=hypernode%3A1",
        "/ui/no-such-page",
    ):
        w.page.goto(served[0] + path)
        w.page.wait_for_selector("main[data-ready]")
        w.artifact(f"{width}px-{path}")
        scroll = w.page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"{path} is {scroll} px wide in a {width} px window"
        if path == "/ui/no-such-page":  # its 404 is logged by the browser, rightly
            w.errors.clear()
        assert w.errors == [], path


def test_gpu_card_pods_link_to_their_job(served: tuple[str, Path], watch: PageWatch) -> None:
    w = watch
    page = w.open(served[0] + "/ui/nodes?node=gpu-0")
    card = page.locator('#node-detail li[data-gpu="1"]')
    assert card.locator("a.pod-link").get_attribute("href") == "/ui/jobs/e2e/vgpu#task-vgpu-w-0"
    assert "8192 / 16384 MiB" in card.inner_text()
    assert page.locator('#node-detail li[data-gpu="0"]').inner_text().endswith("idle")
    w.artifact("nodes-gpu-0")


def test_a_new_hypernode_tier_joins_the_grouping_choices_live(
    served: tuple[str, Path], watch: PageWatch
) -> None:
    base, db = served
    w = watch
    page = w.open(base + "/ui/nodes?group=hypernode%3A2")
    tab_to(page, "#f-group")
    assert page.input_value("#f-group") == "hypernode:2"
    pod = hypernode("pod-0", 3, [member("HyperNode", exactMatch={"name": s}) for s in ("spine-0", "spine-1")])
    appended_cycle_refreshes(page, db, CYCLES + 4, (upserted(pod, 2000),))
    values = page.eval_on_selector_all("#f-group option", "os => os.map(o => o.value)")
    assert values[:4] == ["", "hypernode:1", "hypernode:2", "hypernode:3"]
    assert _focused(page)["id"] == "f-group" and page.input_value("#f-group") == "hypernode:2"
    page.keyboard.press("ArrowDown")
    assert page.eval_on_selector_all(
        "#node-groups tbody tr", "rs => rs.map(r => [r.dataset.group, r.cells[1].textContent])"
    ) == [["pod-0", "6"], ["", "101"]]
    w.artifact("nodes-new-tier")
