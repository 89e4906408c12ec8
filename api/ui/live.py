"""The dashboard's live feed: each closed cycle from the log's tail, as server-sent events.

`LiveFeed` follows the log's tail (EventLog.tail: the writer wakes it in the daemon, a poll in
`fumarole serve`) only while at least one browser listens, and pairs each `cycle.closed` with its
`cycle.opened` into the same JSON as an item of GET /v1/cycles, published once the view's projection
has folded the cycle (`folded`), so a page that re-reads the API on it sees the cycle. Each
subscriber has a bounded queue: a subscriber that falls behind loses its backlog and gets one
`resync` event instead (the page then re-reads the API), so a slow or stalled browser never makes
the server hold more than `queue_size` messages for it. A subscription ends when its browser goes
away (the next write fails; a comment is written every `heartbeat` seconds so that happens within
that time) or when the application shuts down (`close`). Nothing grows with time: a page left open
for a day holds one subscription, its bounded queue and the feed's bounded table of open cycles.
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

from api.types import CycleRow
from store.events import CycleClosed, CycleOpened
from store.log import EventLog, LogError

__all__ = ["LiveFeed", "Subscription", "sse_message", "stream_handler"]

log = logging.getLogger("fumarole.api.ui")

_ENCODER = msgspec.json.Encoder()
_OPEN_CYCLES = 64  # cycles opened and not yet closed the feed remembers (only the last is ever open)


def sse_message(event: str, data: Any) -> bytes:
    """One server-sent event: `event:` name and one `data:` line of JSON."""
    return b"event: " + event.encode() + b"\ndata: " + _ENCODER.encode(data) + b"\n\n"


class Subscription:
    """One browser's bounded queue of encoded messages (None: the feed closed)."""

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=size)
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
        heartbeat: float = 15.0,
        batch: int = 2000,
    ) -> None:
        self.event_log = event_log
        self.folded = folded
        self.queue_size = queue_size
        self.max_subscribers = max_subscribers
        self.heartbeat = heartbeat
        self.batch = batch
        self.subscribers: set[Subscription] = set()
        self.last_cycle: dict[str, Any] | None = None
        self._opened: OrderedDict[int, tuple[int, CycleOpened]] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def subscribe(self) -> Subscription | None:
        """A new subscription (the tail starts with the first one); None when the feed is full or closed."""
        if self._closed or len(self.subscribers) >= self.max_subscribers:
            return None
        sub = Subscription(self.queue_size)
        self.subscribers.add(sub)
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._follow())
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget `sub`; the tail stops with the last subscription."""
        self.subscribers.discard(sub)
        if not self.subscribers and self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        """End every subscription and the tail (the application is shutting down)."""
        self._closed = True
        for sub in list(self.subscribers):
            sub.close()
        self.subscribers.clear()
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


async def stream_handler(request: web.Request, feed: LiveFeed, hello: dict[str, Any]) -> web.StreamResponse:
    """GET /ui/live: `hello` first, then a `cycle` event per closed cycle, until the browser leaves."""
    sub = feed.subscribe()
    if sub is None:
        raise web.HTTPServiceUnavailable(text="too many live dashboards are connected; try again later")
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    try:
        await resp.prepare(request)
        await resp.write(b"retry: 2000\n" + sse_message("hello", hello))
        while True:
            try:
                message = await asyncio.wait_for(sub.queue.get(), feed.heartbeat)
            except TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            if message is None:
                break
            await resp.write(message)
    except (ConnectionError, RuntimeError):  # the browser went away (closing transport)
        pass
    finally:
        feed.unsubscribe(sub)
    return resp
