"""The read-only web dashboard at /ui/: its routes, its page shell and its static assets (no build step).

`mount_dashboard(app, view, jaeger_url=…)` adds to the API's application:

* GET /ui/ and GET /ui/<page> for each page of the dashboard (`PAGES`, the same list as the
  router in assets/app.js) — the one HTML shell (api/ui/assets/index.html, with the Jaeger
  base URL in a <meta> tag); the ES modules under /ui/assets/ draw the page from the API's JSON;
* GET /ui/assets/<file> — the modules, the style sheet and the icon, shipped as package data;
* GET /ui/live — server-sent events from the log's tail (api/ui/live.py);
* GET/POST /ui/login — the login form when the server requires a read token (api/ui/login.py);
* GET / and GET /ui — a redirect to /ui/.

Any other /ui/<path> answers 404 with the same shell, which then draws its "no such page" page
(with links back): the status is right for a script or a crawler, the page right for a person.

The dashboard is served by the same application as the API, so it has the same rules
(api/access.py): the Host/Origin allow-list, and the read token when one is configured (the
pages then redirect to /ui/login, which sets a session cookie); the server listens beyond
loopback only when asked to (--allow-remote).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from aiohttp import web

from fumarole.api.ui.live import LiveFeed, stream_handler
from fumarole.api.ui.login import login_page, login_submit
from fumarole.api.view import DaemonView

__all__ = ["ASSETS", "DEFAULT_JAEGER_URL", "FEED_KEY", "mount_dashboard"]

ASSETS = Path(__file__).resolve().parent / "assets"
DEFAULT_JAEGER_URL = "http://localhost:16686"
FEED_KEY: web.AppKey[LiveFeed] = web.AppKey("ui_feed", LiveFeed)
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
# The dashboard's pages (keep in step with PAGES in assets/app.js); a name is one path segment.
PAGES = re.compile(r"(?:queues|jobs|cycles|nodes|jobs/[^/]+/[^/]+|cycles/[0-9]+|nodes/[^/]+|queues/[^/]+)/?")
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def render_shell(jaeger_url: str) -> bytes:
    """The HTML shell every page shares, with the Jaeger base URL filled in."""
    text = (ASSETS / "index.html").read_text(encoding="utf-8")
    return text.replace("{{JAEGER_URL}}", html.escape(jaeger_url.rstrip("/"), quote=True)).encode()


def mount_dashboard(
    app: web.Application,
    view: DaemonView,
    *,
    jaeger_url: str = DEFAULT_JAEGER_URL,
    live_idle_timeout: float = 300.0,
    live_per_client: int = 8,
) -> None:
    """Add /ui/, /ui/assets/, /ui/live and /ui/login to `app` (see the module docstring); a live
    stream ends after `live_idle_timeout` seconds without a cycle, and one remote address may hold
    `live_per_client` streams."""
    shell = render_shell(jaeger_url)
    feed = LiveFeed(
        view.event_log, folded=view.folded_seq, idle_timeout=live_idle_timeout, per_client=live_per_client
    )
    app[FEED_KEY] = feed

    async def page(request: web.Request) -> web.Response:
        tail = request.match_info.get("page", "")
        status = 200 if tail == "" or PAGES.fullmatch(tail) else 404
        return web.Response(
            body=shell, status=status, content_type="text/html", charset="utf-8", headers=_HEADERS
        )

    async def to_root(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/ui/")

    async def live(request: web.Request) -> web.StreamResponse:
        hello = {"last_cycle": view.last_cycle(), "folded_seq": view.folded_seq()}
        return await stream_handler(request, feed, hello)

    async def close_feed(app: web.Application) -> None:
        await feed.close()

    async def asset_headers(request: web.Request, response: web.StreamResponse) -> None:
        if request.path.startswith("/ui/assets/"):
            response.headers.setdefault("Cache-Control", "no-cache")
            response.headers.setdefault("X-Content-Type-Options", "nosniff")

    app.on_shutdown.append(close_feed)
    app.on_response_prepare.append(asset_headers)
    r = app.router
    r.add_get("/", to_root)
    r.add_get("/ui", to_root)
    r.add_get("/ui/live", live)
    r.add_get("/ui/login", login_page)
    r.add_post("/ui/login", login_submit)
    r.add_static("/ui/assets", ASSETS, append_version=False)
    r.add_get("/ui/", page)
    r.add_get("/ui/{page:.*}", page)
