"""The live feed against hostile clients: floods of HEAD requests and held-open streams from one address
do not lock another client out (a real `fumarole serve`, raw sockets from several loopback addresses),
and streams end when their connection goes, when their reader stops reading, or when they sit idle."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import fresh_copy, history_fixture, live_copy, start_serve, stop
from ui_kit import live_request, read_hello

from fumarole.api.app import build_app
from fumarole.api.ui import FEED_KEY

history = history_fixture("ui-live-bounds", cycles=2)


@pytest.fixture
def served(history: Path, tmp_path: Path) -> Iterator[int]:
    """A fresh server per test (each test starts with every slot free)."""
    db = fresh_copy(history, tmp_path)
    proc, base = start_serve(db)
    try:
        yield int(base.rsplit(":", 1)[1])
    finally:
        assert stop(proc) == 0


def _close(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


def test_head_requests_take_no_slot(served: int) -> None:
    port = served
    socks: list[socket.socket] = []
    try:
        statuses = []
        for _ in range(70):
            s, status, _ = live_request(port, "HEAD")
            socks.append(s)
            statuses.append(status)
        assert statuses == [200] * 70  # each says a stream would be accepted
    finally:
        _close(socks)  # all closed at once
    for source in ("127.0.0.2", "127.0.0.1"):
        s, status, head = live_request(port, "GET", source)
        try:
            assert status == 200, head
            assert b"event: hello" in read_hello(s, head)
        finally:
            s.close()


def test_one_address_cannot_take_every_slot(served: int) -> None:
    port = served
    held: list[socket.socket] = []
    try:
        statuses = []
        for _ in range(64):
            s, status, head = live_request(port, "GET")
            held.append(s)
            statuses.append(status)
            if status == 429:
                assert b"Retry-After: " in head
        assert statuses == [200] * 8 + [429] * 56  # live_per_client = 8
        _, status, _ = live_request(port, "HEAD")
        assert status == 429
        # another client is not locked out by the first one's 64 streams
        s, status, head = live_request(port, "GET", "127.0.0.2")
        held.append(s)
        assert status == 200 and b"event: hello" in read_hello(s, head)
        _, status, _ = live_request(port, "HEAD", "127.0.0.3")
        assert status == 200
    finally:
        _close(held)


def test_the_total_is_still_bounded(served: int) -> None:
    port = served
    held: list[socket.socket] = []
    try:
        for i in range(8):  # 8 addresses × 8 streams = the 64 slots
            for _ in range(8):
                s, status, head = live_request(port, "GET", f"127.0.1.{i + 1}")
                held.append(s)
                assert status == 200, head
                read_hello(s, head)
        s, status, head = live_request(port, "GET", "127.0.2.1")
        held.append(s)
        assert status == 503 and b"Retry-After: " in head
    finally:
        _close(held)
    # the slots come back once those connections are gone
    for _ in range(100):
        s, status, head = live_request(port, "GET", "127.0.2.1")
        s.close()
        if status == 200:
            break
        time.sleep(0.2)
    assert status == 200


# ----------------------------------------------------------------------------- how streams end (in process)


@pytest.fixture
async def client(history: Path, tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[Any]:
    fx = await live_copy(history, tmp_path)
    c = await aiohttp_client(build_app(fx.view))
    yield c
    await c.close()
    await fx.close()


async def _until_no_subscribers(feed: Any, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if not feed.subscribers:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(feed.subscribers)} subscriptions still open")


async def test_an_idle_stream_ends_with_an_idle_event(client: Any) -> None:
    feed = client.app[FEED_KEY]
    feed.idle_timeout, feed.poll = 1.0, 0.05
    resp = await client.get("/ui/live")
    assert resp.status == 200
    text = (await asyncio.wait_for(resp.content.read(), 20)).decode()  # the server ends the stream
    assert "event: hello" in text and 'event: idle\ndata: {"after_s":1.0}' in text
    await _until_no_subscribers(feed)


async def test_a_closed_connection_frees_its_slot_before_the_heartbeat(client: Any) -> None:
    feed = client.app[FEED_KEY]
    feed.heartbeat, feed.poll = 600.0, 0.05  # no write would notice for ten minutes
    s = socket.create_connection(("127.0.0.1", client.server.port))
    s.sendall(f"GET /ui/live HTTP/1.1\r\nHost: 127.0.0.1:{client.server.port}\r\n\r\n".encode())
    await asyncio.get_running_loop().run_in_executor(None, read_hello, s, b"")
    assert feed.clients == {"127.0.0.1": 1}
    s.close()
    await _until_no_subscribers(feed)
    assert feed.clients == {}


async def test_a_reader_that_stops_reading_loses_its_stream(client: Any) -> None:
    feed = client.app[FEED_KEY]
    feed.heartbeat, feed.poll, feed.idle_timeout = 1.0, 0.05, 0
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", client.server.port))
    try:
        s.sendall(f"GET /ui/live HTTP/1.1\r\nHost: 127.0.0.1:{client.server.port}\r\n\r\n".encode())
        await asyncio.get_running_loop().run_in_executor(None, read_hello, s, b"")
        big = b"event: cycle\ndata: " + b"x" * (1 << 20) + b"\n\n"
        for _ in range(32):  # 32 MiB the reader never takes: a write stalls, and ends the stream
            feed.publish(big)
        await _until_no_subscribers(feed)
    finally:
        s.close()
