"""A real scheduler extender for the tests: an aiohttp server on 127.0.0.1 in a thread of its own.

`ExtenderServer(answer)` serves POST /<verb>; `answer(verb, request_json)` returns what to send:
a dict or list (JSON, status 200), or a `Reply(status, body, delay_s)`.  Every request is kept in
`requests` as (verb, decoded body), in arrival order.  `stop()` closes the listener: a later call
is refused (what replay must never need).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: str = "{}"
    delay_s: float = 0.0


Answer = Callable[[str, Any], Any]


class ExtenderServer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[tuple[str, Any]] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def verbs(self) -> list[str]:
        with self._lock:
            return [v for v, _ in self.requests]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        verb = request.match_info["verb"]
        raw = await request.read()
        body = json.loads(raw) if raw else None
        with self._lock:
            self.requests.append((verb, body))
        out = self.answer(verb, body)
        if not isinstance(out, Reply):
            out = Reply(body=json.dumps(out))
        if out.delay_s:
            await asyncio.sleep(out.delay_s)
        return web.Response(status=out.status, body=out.body.encode(), content_type="application/json")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/{verb}", self._handle)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def start(self) -> ExtenderServer:
        self._thread.start()
        self._ready.wait(30)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    def __enter__(self) -> ExtenderServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
