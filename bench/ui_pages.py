"""Render times of the dashboard's queues and nodes pages in headless Chromium; prints one JSON object.

A log of `--nodes` nodes (default 2,000) and `--jobs` one-pod jobs (default 4,000) in a queue
hierarchy (tests/ui/ui_kit.py write_scale_log), `fumarole serve` over it, then `--loads` loads of
/ui/queues and /ui/nodes each in Debian's Chromium: the page's own render time (main's
data-render-ms: from the navigation to the page drawn, HTML, modules, the API's JSON, the DOM, the
charts and the heat map), min / median / max in ms.

Usage: python bench/ui_pages.py [--nodes 2000] [--jobs 4000] [--loads 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("FUMAROLE_ARTIFACTS", "off")  # no screenshots while measuring (tests/ui/ui_kit.py)
for sub in ("", "tests/ui", "tests/api", "tests/e2e"):
    sys.path.insert(0, str(ROOT / sub))

from fumarole_api_kit import start_serve, stop  # noqa: E402
from ui_kit import PageWatch, browser, write_scale_log  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--loads", type=int, default=5)
    a = ap.parse_args()
    out: dict[str, object] = {"nodes": a.nodes, "jobs": a.jobs, "loads": a.loads}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ui.db"
        write_scale_log(db, nodes=a.nodes, jobs=a.jobs)
        proc, base = start_serve(db)
        try:
            with browser() as context:
                for page_name in ("queues", "nodes"):
                    times = []
                    for _ in range(a.loads):
                        w = PageWatch(context)
                        w.open(f"{base}/ui/{page_name}", timeout=120_000)
                        times.append(w.render_ms())
                        if w.errors:
                            raise SystemExit(f"/ui/{page_name}: {w.errors}")
                        w.page.close()
                    out[f"{page_name}_render_ms"] = {
                        "min": min(times),
                        "median": statistics.median(times),
                        "max": max(times),
                    }
        finally:
            stop(proc)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
