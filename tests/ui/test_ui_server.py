"""The dashboard's server side without a browser: its routes, the Jaeger setting, GET /v1/cycles?latest=N,
and the live feed (one `cycle` event per closed cycle from the log's tail, bounded queues,
subscriptions closed when the browser leaves or the server stops)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fumarole_api_kit import FUMAROLE, LiveFixture, child_env, fresh_copy, history_fixture, live_copy

from fumarole.api.app import build_app
from fumarole.api.ui import FEED_KEY
from fumarole.api.ui.live import Subscription, sse_message
from fumarole.store.events import CycleClosed, CycleOpened

JAEGER = "https://jaeger.example/base"


history = history_fixture("ui-server", cycles=3)


@pytest.fixture
async def client(history: Path, tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[Any]:
    fx = await live_copy(history, tmp_path)
    c = await aiohttp_client(build_app(fx.view, jaeger_url=JAEGER + "/"))
    c.fx = fx
    yield c
    await c.close()
    await fx.close()


async def test_every_page_is_the_shell_with_the_jaeger_url(client: Any) -> None:
    pages = ("/ui/", "/ui/queues", "/ui/jobs/ns/name", "/ui/cycles/3", "/ui/nodes", "/ui/jobs/")
    unknown = ("/ui/no/such/page", "/ui/job", "/ui/cycles/x", "/ui/jobs/a/b/c", "/ui/queuesx")
    for path in pages + unknown:
        r = await client.get(path)
        # an unknown page answers 404, with the shell: it draws the "no such page" page
        assert r.status == (404 if path in unknown else 200), path
        assert r.content_type == "text/html"
        text = await r.text()
        assert f'<meta name="fumarole-jaeger-url" content="{JAEGER}">' in text
        assert '<script type="module" src="/ui/assets/app.js">' in text
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    for path in ("/ui", "/"):
        r = await client.get(path, allow_redirects=False)
        assert r.status == 302 and r.headers["Location"] == "/ui/"


async def test_assets_are_served_from_the_package(client: Any) -> None:
    for path, ctype in (
        ("/ui/assets/app.js", "javascript"),
        ("/ui/assets/pages/job.js", "javascript"),
        ("/ui/assets/style.css", "text/css"),
        ("/ui/assets/icon.svg", "image/svg"),
    ):
        r = await client.get(path)
        assert r.status == 200 and ctype in r.content_type, path
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/ui/assets/nothing.js")).status == 404
    for path in ("/ui/assets/../__init__.py", "/ui/assets/%2e%2e/__init__.py", "/ui/assets/../live.py"):
        r = await client.get(path)
        assert "mount_dashboard" not in await r.text() and "LiveFeed" not in await r.text(), path


async def test_no_dashboard_when_not_asked(history: Path, tmp_path: Path, aiohttp_client: Any) -> None:
    fx = await live_copy(history, tmp_path)
    try:
        c = await aiohttp_client(build_app(fx.view, dashboard=False))
        assert (await c.get("/ui/")).status == 404
        assert (await c.get("/v1/queues")).status == 200
    finally:
        await fx.close()


async def test_latest_cycles(client: Any) -> None:
    r = await client.get("/v1/cycles?latest=2")
    body = await r.json()
    assert [c["cycle"] for c in body["items"]] == [2, 3]
    assert all(c["closed"] is not None for c in body["items"])
    body = await (await client.get("/v1/cycles?latest=1000")).json()
    assert [c["cycle"] for c in body["items"]] == [1, 2, 3]
    r = await client.get("/v1/cycles?latest=2&since=5")
    assert r.status == 400 and (await r.json())["path"] == "query.latest"
    assert (await client.get("/v1/cycles?latest=0")).status == 400


async def _read_event(resp: Any, name: str, timeout: float = 10) -> Any:
    """The data of the next `name` event of a server-sent event stream."""
    event = ""
    while True:
        line = (await asyncio.wait_for(resp.content.readline(), timeout)).decode()
        if line.startswith("event: "):
            event = line[7:].strip()
        elif line.startswith("data: ") and event == name:
            return msgspec.json.decode(line[6:])


async def _append_cycle(fx: LiveFixture, cycle: int) -> None:
    await fx.writer.submit(
        [
            CycleOpened(cycle=cycle, watermark=1, now_ms=9_000, conf_hash="h", trace_id="ab" * 16),
            CycleClosed(cycle=cycle, binds=2, duration_s=0.25, action_seconds={"allocate": 0.2}),
        ]
    )


async def test_live_feed_sends_each_closed_cycle_then_lets_go(client: Any) -> None:
    feed = client.app[FEED_KEY]
    feed.heartbeat = 0.2
    resp = await client.get("/ui/live")
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    hello = await _read_event(resp, "hello")
    assert hello["last_cycle"] == 3
    assert len(feed.subscribers) == 1 and feed.running
    await asyncio.sleep(0.1)  # the tail starts from the log's end
    await _append_cycle(client.fx, 4)
    row = await _read_event(resp, "cycle")
    assert row["cycle"] == 4 and row["trace_id"] == "ab" * 16
    assert row["closed"]["binds"] == 2 and row["closed"]["action_seconds"] == {"allocate": 0.2}
    resp.close()  # the browser leaves: the next heartbeat fails, the subscription and the tail end
    for _ in range(100):
        if not feed.subscribers and not feed.running:
            break
        await asyncio.sleep(0.05)
    assert not feed.subscribers and not feed.running


async def test_live_feed_ends_streams_on_shutdown(client: Any) -> None:
    feed = client.app[FEED_KEY]
    resp = await client.get("/ui/live")
    await _read_event(resp, "hello")
    await feed.close()
    assert (await asyncio.wait_for(resp.content.read(), 5)).strip() == b""  # the stream ended
    assert not feed.subscribers and not feed.running
    assert (await client.get("/ui/live")).status == 503


def test_a_slow_subscriber_holds_a_bounded_queue() -> None:
    sub = Subscription(4)
    for i in range(1000):
        sub.offer(sse_message("cycle", {"cycle": i}))
        assert sub.queue.qsize() <= 4
    items = [sub.queue.get_nowait() for _ in range(sub.queue.qsize())]
    assert items[0].startswith(b"event: resync\n")  # the page re-reads the API instead
    assert sub.dropped > 900
    sub.close()
    assert [sub.queue.get_nowait() for _ in range(sub.queue.qsize())][-1] is None


def test_serve_refuses_a_bad_jaeger_url(tmp_path: Path, history: Path) -> None:
    out = subprocess.run(
        [FUMAROLE, "serve", "--db", str(history), "--jaeger-url", "ftp://x"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert out.returncode == 2
    assert "--jaeger-url: 'ftp://x' is not an http(s) base URL" in out.stderr


def _gpu_objects() -> list[dict[str, Any]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-node"},
        "status": {
            "allocatable": {
                "cpu": "16",
                "memory": "64Gi",
                "pods": "110",
                "volcano.sh/gpu-memory": "32768",
                "volcano.sh/gpu-number": "2",
            }
        },
    }
    pods = []
    for i, card in enumerate(("1", "1", "")):
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{i}",
                    "namespace": "ns1",
                    "uid": f"uid-{i}",
                    "annotations": {"volcano.sh/gpu-index": card} if card else {},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "nodeName": "gpu-node",
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": {"cpu": "1"},
                                "limits": {"volcano.sh/gpu-memory": "8192"} if card else {},
                            },
                        }
                    ],
                },
                "status": {"phase": "Running"},
            }
        )
    return [node, *pods]


def test_nodes_show_their_gpu_cards() -> None:
    from fumarole.daemon.cache import Projection
    from fumarole.daemon.runtime.api_view import StateReader
    from fumarole.store.events import upserted

    p = Projection()
    for seq, m in enumerate(_gpu_objects(), start=1):
        p.fold(seq, upserted(m, 1000))
    (row,) = StateReader(p, history=None).nodes()  # type: ignore[arg-type]
    assert [msgspec.to_builtins(g) for g in row.gpus] == [
        {"index": 0, "memory": 16384, "used_memory": 0, "pods": []},
        {"index": 1, "memory": 16384, "used_memory": 16384, "pods": ["ns1/p0", "ns1/p1"]},
    ]
    assert row.pods == ["ns1/p0", "ns1/p1", "ns1/p2"]


def test_the_wheel_ships_every_asset() -> None:
    """Each file under api/ui/assets/ matches a package-data pattern of pyproject.toml (so the wheel
    carries it: the dashboard has no build step and nothing to fetch)."""
    import tomllib
    from pathlib import PurePosixPath

    from fumarole.api.ui import ASSETS

    root = ASSETS.parents[1]  # the api package
    conf = tomllib.loads((root.parent / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["fumarole.api"]
    files = [PurePosixPath(p.relative_to(root).as_posix()) for p in ASSETS.rglob("*") if p.is_file()]
    assert len(files) >= 10
    missing = [
        str(f)
        for f in files
        if not any(f.match(pat) and len(f.parts) == len(PurePosixPath(pat).parts) for pat in patterns)
    ]
    assert missing == []


def test_serve_stops_promptly_with_a_dashboard_connected(history: Path, tmp_path: Path) -> None:
    """SIGTERM ends the live streams (on_shutdown) instead of waiting for the browsers to leave."""
    import urllib.request

    from fumarole_api_kit import start_serve, stop

    db = fresh_copy(history, tmp_path)
    proc, base = start_serve(db)
    try:
        stream = urllib.request.urlopen(base + "/ui/live", timeout=10)
        assert stream.readline() == b"retry: 2000\n"
        assert stream.readline() == b"event: hello\n"
        # stop() kills after 30 s (exit -9): without the streams ended on shutdown aiohttp would wait
        # 60 s for this one to finish
        assert stop(proc) == 0
        stream.close()
    finally:
        stop(proc)
