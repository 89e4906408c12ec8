"""The dashboard's login page, for a server that requires a read token (api/access.py).

GET /ui/login?next=/ui/… — a plain HTML form (no script) asking for the read token;
POST /ui/login (form fields `token`, `next`) — the token compared in constant time; when it is
right, the session cookie (`fumarole_session`, HttpOnly, SameSite=Strict, Secure over https) and a
303 to `next` (a /ui/ path, anything else is replaced by /ui/); when wrong, 401 and the form again.
The token travels in the POST body only, never in a URL. A cross-site POST carries its site's
Origin and is refused by the access middleware before it gets here (login CSRF).
Without a read token configured, the page says so and the POST sends the browser on.
"""

from __future__ import annotations

import html
from urllib.parse import urlsplit

from aiohttp import web

from fumarole.api.access import ACCESS_KEY, SESSION_COOKIE, SESSION_SECONDS

__all__ = ["login_page", "login_submit", "safe_next"]

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in · Fumarole</title>
<link rel="icon" href="/ui/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/assets/style.css">
</head>
<body>
<header class="top"><a class="brand" href="/ui/">Fumarole</a></header>
<main id="main" class="login">
<h1>Log in</h1>
<p>This server requires its read token to show the dashboard.</p>
{message}
<form method="post" action="/ui/login">
<input type="hidden" name="next" value="{next}">
<p><label for="token">Read token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus></p>
<p><button type="submit">Log in</button></p>
</form>
</main>
</body>
</html>
"""
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    # not no-referrer: with it Chrome sends the form's POST with `Origin: null`, which is refused
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def safe_next(raw: str | None) -> str:
    """Where to go after logging in: a path of the dashboard on this server, else /ui/."""
    if not raw or len(raw) > 2000:
        return "/ui/"
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui/") or "\\" in raw:
        return "/ui/"
    if parts.path.startswith("/ui/login"):
        return "/ui/"
    return raw


def _render(next_: str, message: str = "", status: int = 200) -> web.Response:
    body = _PAGE.format(
        next=html.escape(next_, quote=True),
        message=f'<p class="error" role="alert">{html.escape(message)}</p>' if message else "",
    )
    return web.Response(text=body, status=status, content_type="text/html", headers=_HEADERS)


async def login_page(request: web.Request) -> web.Response:
    if not request.app[ACCESS_KEY].read_token:
        return _render("/ui/", "This server requires no read token: open the dashboard at /ui/.")
    return _render(safe_next(request.query.get("next")))


async def login_submit(request: web.Request) -> web.StreamResponse:
    access = request.app[ACCESS_KEY]
    if request.content_type != "application/x-www-form-urlencoded":
        raise web.HTTPUnsupportedMediaType(text="expected a form (application/x-www-form-urlencoded)")
    form = await request.post()
    next_ = safe_next(str(form.get("next", "")))
    if not access.read_token:
        return web.Response(status=303, headers={"Location": next_})
    token = str(form.get("token", "")).strip()
    if not token or not access.token_equals(token):
        return _render(next_, "That is not this server's read token.", status=401)
    resp = web.Response(status=303, headers={"Location": next_, "Cache-Control": "no-store"})
    secure = request.secure or request.headers.get("Origin", "").startswith("https://")
    resp.set_cookie(
        SESSION_COOKIE,
        access.session_value(),
        path="/",
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="Strict",
        secure=secure,
    )
    return resp
