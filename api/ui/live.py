"""The dashboard's live feed: each closed cycle from the log's tail, as server-sent events.

`LiveFeed` follows the log's tail (EventLog.tail: the writer wakes it in the daemon, a poll in
`fumarole serve`) only while at least one browser listens, and pairs each `cycle.closed` with its
`cycle.opened` into the same JSON as an item of GET /v1/cycles, published once the view's projection
has folded the cycle (`folded`), so a page that re-reads the API on it sees the cycle. Each
subscriber has a bounded queue: a subscriber that falls behind loses its backlog and gets one
`resync` event instead (the page then re-reads the API), so a slow or stalled browser never makes
the server hold more than `queue_size` messages for it. Nothing grows with time: a page left open
for a day holds one subscription, its bounded queue and the feed's bounded table of open cycles.

Slots are bounded twice: at most `max_subscribers` streams in all and `per_client` per remote
address (one address cannot take every slot: it gets 429 past its share, everyone 503 past the
total). HEAD answers whether a GET would be accepted (200, 429 or 503) without taking a slot. A
subscription ends when its connection is gone (checked every `poll` seconds), when a write does
not complete within `heartbeat` seconds (a reader that stopped reading), when no cycle was sent
for `idle_timeout` seconds (the browser reconnects and re-reads; 0 = never), or when the
application shuts down (`close`). A comment every `heartbeat` seconds keeps proxies from closing
a quiet stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from fumarole.api.types import CycleRow
from fumarole.store.events import CycleClosed, CycleOpened
from fumarole.store.log import EventLog, LogError

__all__ = ["LiveFeed", "Subscription", "sse_message", "stream_handler"]

log = logging.getLogger("fumarole.api.ui")

_ENCODER = msgspec.json.Encoder()
_OPEN_CYCLES = 64  # cycles opened and not yet closed the feed remembers (only the last is ever open)


def sse_message(event: str, data: Any) -> bytes:
    """One server-sent event: `event:` name and one `data:` line of JSON."""
    return b"event: " + event.encode() + b"\ndata: " + _ENCODER.encode(data) + b"\n\n"


class Subscription:
    """One browser's bounded queue of encoded messages (None: the feed closed)."""

    def __init__(self, size: int, client: str = "") -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=size)
        self.client = client
        self.dropped = 0

    def offer(self, message: bytes) -> None:
        """Queue `message`; when the queue is full, replace the backlog by one `resync` event."""
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += self.queue.qsize()
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(sse_message("resync", {"dropped": self.dropped}))

    def close(self) -> None:
        while self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(None)


class LiveFeed:
    """Closed cycles from the log's tail, fanned out to the subscribed browsers."""

    def __init__(
        self,
        event_log: EventLog,
        *,
        folded: Callable[[], int] | None = None,
        queue_size: int = 256,
        max_subscribers: int = 64,
        per_client: int = 8,
        heartbeat: float = 15.0,
        idle_timeout: float = 300.0,
        poll: float = 1.0,
        batch: int = 2000,
    ) -> None:
        self.event_log = event_log
        self.folded = folded
        self.queue_size = queue_size
        self.max_subscribers = max_subscribers
        self.per_client = per_client
        self.heartbeat = heartbeat
        self.idle_timeout = idle_timeout
        self.poll = poll
        self.batch = batch
        self.subscribers: set[Subscription] = set()
        self.clients: dict[str, int] = {}  # remote address -> its open streams
        self.last_cycle: dict[str, Any] | None = None
        self._opened: OrderedDict[int, tuple[int, CycleOpened]] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def refusal(self, client: str) -> int:
        """0 when `client` may open one more stream, else the status it gets (429: its own share is
        used up; 503: the feed is full or closed)."""
        if self._closed or len(self.subscribers) >= self.max_subscribers:
            return 503
        if self.clients.get(client, 0) >= self.per_client:
            return 429
        return 0

    def subscribe(self, client: str = "") -> Subscription | None:
        """A new subscription for remote address `client` (the tail starts with the first one);
        None when `refusal(client)` says no."""
        if self.refusal(client):
            return None
        sub = Subscription(self.queue_size, client)
        self.subscribers.add(sub)
        self.clients[client] = self.clients.get(client, 0) + 1
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._follow())
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget `sub`; the tail stops with the last subscription."""
        if sub in self.subscribers:
            self.subscribers.discard(sub)
            left = self.clients.get(sub.client, 1) - 1
            if left > 0:
                self.clients[sub.client] = left
            else:
                self.clients.pop(sub.client, None)
        if not self.subscribers and self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        """End every subscription and the tail (the application is shutting down)."""
        self._closed = True
        for sub in list(self.subscribers):
            sub.close()
        self.subscribers.clear()
        self.clients.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def publish(self, message: bytes) -> None:
        for sub in list(self.subscribers):
            sub.offer(message)

    def fold(self, seq: int, event: object) -> None:
        """Pair cycle.opened/cycle.closed; publish a `cycle` event for each closed cycle."""
        if isinstance(event, CycleOpened):
            self._opened[event.cycle] = (seq, event)
            while len(self._opened) > _OPEN_CYCLES:
                self._opened.popitem(last=False)
        elif isinstance(event, CycleClosed):
            found = self._opened.pop(event.cycle, None)
            if found is None:
                return
            oseq, o = found
            row = CycleRow(
                cycle=o.cycle,
                seq=oseq,
                watermark=o.watermark,
                conf_hash=o.conf_hash,
                now_ms=o.now_ms,
                trace_id=o.trace_id,
                closed=event,
            )
            self.last_cycle = msgspec.to_builtins(row)
            self.publish(sse_message("cycle", row))

    async def _follow(self) -> None:
        seq = await self.event_log.last_seq() + 1
        while True:
            try:
                rows = await self.event_log.tail(seq, limit=self.batch, timeout=self.heartbeat)
            except LogError as e:
                log.warning("live feed: reading the log's tail: %s", e)
                await asyncio.sleep(1.0)
                continue
            if rows:
                await self._until_folded(rows[-1].seq)
            for row in rows:
                seq = row.seq + 1
                self.fold(row.seq, row.event)

    async def _until_folded(self, seq: int, *, poll: float = 0.02, patience: float = 5.0) -> None:
        """Wait (at most `patience` seconds) until the view's projection has folded `seq`."""
        if self.folded is None:
            return
        waited = 0.0
        while self.folded() < seq and waited < patience:
            await asyncio.sleep(poll)
            waited += poll


_STREAM_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
_RETRY_AFTER_S = 5  # a refused stream is asked to wait this long before it tries again
_REFUSED = {
    429: "this address has too many live dashboards open; close some or try again later",
    503: "too many live dashboards are connected; try again later",
}


async def stream_handler(request: web.Request, feed: LiveFeed, hello: dict[str, Any]) -> web.StreamResponse:
    """GET /ui/live: `hello` first, then a `cycle` event per closed cycle, until the stream ends (see
    the module docstring); HEAD /ui/live: the status a GET would get, without a subscription."""
    client = request.remote or ""
    refused = feed.refusal(client)
    if refused:
        retry = {"Retry-After": str(_RETRY_AFTER_S)}
        if refused == 429:
            raise web.HTTPTooManyRequests(text=_REFUSED[429], headers=retry)
        raise web.HTTPServiceUnavailable(text=_REFUSED[503], headers=retry)
    if request.method == "HEAD":
        return web.Response(headers=_STREAM_HEADERS)
    sub = feed.subscribe(client)
    assert sub is not None  # refusal() said yes, and nothing ran in between
    resp = web.StreamResponse(headers=_STREAM_HEADERS)
    loop = asyncio.get_running_loop()
    try:
        await resp.prepare(request)
        await _write(resp, b"retry: 2000\n" + sse_message("hello", hello), feed.heartbeat)
        last_sent = last_cycle = loop.time()
        while request.transport is not None and not request.transport.is_closing():
            now = loop.time()
            if feed.idle_timeout and now - last_cycle >= feed.idle_timeout:
                await _write(resp, sse_message("idle", {"after_s": feed.idle_timeout}), feed.heartbeat)
                break
            try:
                message = await asyncio.wait_for(sub.queue.get(), feed.poll)
            except TimeoutError:
                if loop.time() - last_sent >= feed.heartbeat:
                    await _write(resp, b": keep-alive\n\n", feed.heartbeat)
                    last_sent = loop.time()
                continue
            if message is None:
                break
            await _write(resp, message, feed.heartbeat)
            last_sent = last_cycle = loop.time()
    except (ConnectionError, RuntimeError, TimeoutError):  # gone, closing, or not reading any more
        pass
    finally:
        feed.unsubscribe(sub)
    return resp


async def _write(resp: web.StreamResponse, data: bytes, timeout: float) -> None:
    await asyncio.wait_for(resp.write(data), timeout)
