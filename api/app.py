"""The aiohttp application factory: routes, middlewares and the objects they share."""

from __future__ import annotations

from aiohttp import web

from api.view import DaemonView

VIEW_KEY: web.AppKey[DaemonView] = web.AppKey("view", DaemonView)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    view = request.app[VIEW_KEY]
    ready = view.is_ready()
    body = {"ready": ready, "folded_seq": view.folded_seq()}
    return web.json_response(body, status=200 if ready else 503)


def build_app(view: DaemonView, *, token: str = "", max_body_bytes: int = 1_048_576) -> web.Application:
    app = web.Application(client_max_size=max_body_bytes)
    app[VIEW_KEY] = view
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
