"""The jobs page with 10,000 jobs and the nodes page with 10,000 nodes, in headless Chromium over
`fumarole serve`: they load without errors and show every job and node; their render time (from the
navigation to the page drawn: HTML, modules, the API's JSON, the DOM and the heat map) is measured in
the browser and printed, never asserted (docs/dashboard.md reports it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import start_serve, stop
from ui_kit import PageWatch, browser, require_chromium, write_scale_log

N = 10_000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    db = tmp_path_factory.mktemp("ui-scale") / "scale.db"
    write_scale_log(db, nodes=N, jobs=N)
    proc, base = start_serve(Path(db))
    try:
        yield base
    finally:
        assert stop(proc) == 0


def test_jobs_page_with_10000_jobs(served: str, capsys: Any) -> None:
    with browser() as context:
        times = []
        for _ in range(3):
            w = PageWatch(context)
            page = w.open(served + "/ui/jobs", timeout=60_000)
            times.append(w.render_ms())
            assert page.inner_text("#jobs-count") == f"{N} of {N} jobs"
            assert page.locator("tbody tr[data-job]").count() == 100
            assert w.errors == []
            page.close()
    with capsys.disabled():
        print(f"\n[ui render] jobs page, {N} jobs: {times} ms (navigation to drawn, 3 loads)")


def test_nodes_page_with_10000_nodes(served: str, capsys: Any) -> None:
    with browser() as context:
        times = []
        for _ in range(3):
            w = PageWatch(context)
            page = w.open(served + "/ui/nodes", timeout=60_000)
            times.append(w.render_ms())
            assert page.inner_text("#nodes-summary").startswith(f"{N} nodes")
            assert page.locator("canvas.heat").count() == 1
            assert w.errors == []
            if len(times) < 3:
                page.close()
        w.screenshot("nodes-10k")
    with capsys.disabled():
        print(f"\n[ui render] nodes page, {N} nodes: {times} ms (navigation to drawn, 3 loads)")


def test_queues_page_draws_the_hierarchy(served: str) -> None:
    with browser() as context:
        w = PageWatch(context)
        page = w.open(served + "/ui/queues")
        rows = page.eval_on_selector_all(
            "tbody tr[data-queue]", "rows => rows.map(r => [r.dataset.queue, r.getAttribute('aria-level')])"
        )
        assert rows == [
            ["default", "1"],
            ["root", "1"],
            ["dev", "2"],
            *[[f"q{i}", "3"] for i in range(4, 8)],
            ["prod", "2"],
            *[[f"q{i}", "3"] for i in range(4)],
        ]
        assert "Hierarchical queues" in page.inner_text("main")
        page.click("button.sort[data-key='weight']")  # biggest weight first, among siblings
        order = page.eval_on_selector_all("tbody tr[data-queue]", "rows => rows.map(r => r.dataset.queue)")
        assert order[order.index("prod") + 1 : order.index("prod") + 5] == ["q3", "q2", "q1", "q0"]
        assert w.errors == []
