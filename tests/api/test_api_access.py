"""Who may talk to the API (api/access.py): the Host/Origin allow-list against DNS rebinding, the read
token (Bearer, or the dashboard's login and its session cookie), and the settings and flags that
configure them."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import (
    FUMAROLE,
    TOKEN,
    LiveFixture,
    child_env,
    fresh_copy,
    history_fixture,
    live_copy,
    start_serve,
    stop,
)

from fumarole.api.access import SESSION_COOKIE, Access, split_host
from fumarole.api.app import build_app
from fumarole.api.ui.login import safe_next
from fumarole.daemon.runtime.settings import SettingsError, load_settings

READ_TOKEN = "read-token-0123456789abcdef"


history = history_fixture("api-access", cycles=2)


@pytest.fixture
async def fx(history: Path, tmp_path: Path) -> AsyncIterator[LiveFixture]:
    f = await live_copy(history, tmp_path)
    yield f
    await f.close()


async def _client(aiohttp_client: Any, fx: LiveFixture, access: Access | None = None) -> Any:
    return await aiohttp_client(build_app(fx.view, token=TOKEN, access=access))


# ----------------------------------------------------------------------------- Host and Origin


def test_split_host() -> None:
    assert split_host("Example.COM.:8321") == ("example.com", 8321)
    assert split_host("[::1]:80") == ("::1", 80)
    assert split_host("127.0.0.1") == ("127.0.0.1", None)
    for bad in ("", "a b", "x:y", "x:0", "x:70000", "[nope]:1", "a/b", "user@host", "[::1]x"):
        assert split_host(bad) is None, bad


async def test_a_foreign_host_is_refused_with_421(fx: LiveFixture, aiohttp_client: Any) -> None:
    c = await _client(aiohttp_client, fx)
    for host in ("attacker.example", "attacker.example:8321", "127.0.0.1.attacker.example", "10.0.0.5:8321"):
        for path in ("/v1/jobs", "/ui/", "/ui/live", "/healthz", "/no/such/path"):
            r = await c.get(path, headers={"Host": host})
            assert r.status == 421, (host, path)
            body = await r.json()
            assert body["error"] == "misdirected-request" and body["path"] == "header.Host"
            assert "allowed_hosts" in body["detail"] and "--allowed-host" in body["detail"]
        r = await c.post("/v1/events", data=b"{}", headers={"Host": host, "Authorization": f"Bearer {TOKEN}"})
        assert r.status == 421
    for host in (
        "localhost",
        "localhost:9999",
        "LOCALHOST.:1",
        "app.localhost:8321",
        "127.0.0.1",
        "127.9.9.9:1",
    ):
        assert (await c.get("/v1/jobs", headers={"Host": host})).status == 200, host
    assert (await c.get("/v1/jobs", headers={"Host": "[::1]:8321"})).status == 200


async def test_configured_names_and_the_listen_address(fx: LiveFixture, aiohttp_client: Any) -> None:
    access = Access(listen_host="fumarole.lan", allowed_hosts=("dash.example.com", "api.example.com:8443"))
    c = await _client(aiohttp_client, fx, access)
    ok = (
        "fumarole.lan:8321",
        "dash.example.com",
        "dash.example.com:1234",
        "api.example.com:8443",
        "localhost",
    )
    for host in ok:
        assert (await c.get("/v1/queues", headers={"Host": host})).status == 200, host
    for host in ("api.example.com", "api.example.com:8321", "other.example.com", "10.1.2.3:8321"):
        assert (await c.get("/v1/queues", headers={"Host": host})).status == 421, host
    anyhost = await _client(aiohttp_client, fx, Access(allowed_hosts=("*",)))
    assert (await anyhost.get("/v1/queues", headers={"Host": "attacker.example"})).status == 200


async def test_a_wildcard_listen_answers_ip_literals_for_probes(fx: LiveFixture, aiohttp_client: Any) -> None:
    """kubelet probes and Prometheus reach a pod as podIP:port; an IP literal cannot be rebound by DNS."""
    c = await _client(aiohttp_client, fx, Access(listen_host="0.0.0.0"))
    for host in ("10.244.1.17:8321", "[fd00::17]:8321", "192.168.0.3"):
        assert (await c.get("/healthz", headers={"Host": host})).status == 200, host
        assert (await c.get("/readyz", headers={"Host": host})).status == 200, host
        assert (await c.get("/metrics", headers={"Host": host})).status == 200, host
    assert (await c.get("/healthz", headers={"Host": "attacker.example:8321"})).status == 421


async def test_a_foreign_origin_is_refused(fx: LiveFixture, aiohttp_client: Any) -> None:
    c = await _client(aiohttp_client, fx, Access(allowed_hosts=("dash.example.com",)))
    host = f"127.0.0.1:{c.server.port}"
    for origin in (
        "http://attacker.example",
        "https://attacker.example:8321",
        "null",
        "http://10.0.0.5:8321",
    ):
        r = await c.get("/v1/jobs", headers={"Host": host, "Origin": origin})
        assert r.status == 403, origin
        body = await r.json()
        assert body["error"] == "forbidden-origin" and body["path"] == "header.Origin"
        r = await c.post(
            "/v1/events",
            data=b'{"events": []}',
            headers={"Host": host, "Origin": origin, "Authorization": f"Bearer {TOKEN}"},
        )
        assert r.status == 403, origin
    for origin in (f"http://{host}", "http://localhost:8321", "https://dash.example.com"):
        assert (await c.get("/v1/jobs", headers={"Host": host, "Origin": origin})).status == 200, origin


def test_a_dns_rebinding_request_to_a_real_server_is_refused(history: Path, tmp_path: Path) -> None:
    """The request a rebound page sends: to the daemon's address, with the attacker's name as Host."""
    db = fresh_copy(history, tmp_path)
    proc, base = start_serve(db)
    try:
        port = int(base.rsplit(":", 1)[1])
        for host, want in ((f"rebind.attacker.example:{port}", 421), (f"localhost:{port}", 200)):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/v1/jobs", headers={"Host": host})
            resp = conn.getresponse()
            body = json.loads(resp.read())
            conn.close()
            assert resp.status == want, (host, body)
            assert ("items" in body) == (want == 200)
    finally:
        assert stop(proc) == 0


# ----------------------------------------------------------------------------- the read token


async def test_reads_need_the_token_when_one_is_set(fx: LiveFixture, aiohttp_client: Any) -> None:
    c = await _client(aiohttp_client, fx, Access(read_token=READ_TOKEN))
    for path in ("/v1/jobs", "/v1/cycles", "/v1/events", "/metrics", "/openapi.json", "/ui/live"):
        r = await c.get(path)
        assert r.status == 401, path
        assert r.headers["WWW-Authenticate"] == 'Bearer realm="fumarole"'
        assert (await r.json())["error"] == "unauthorized"
        for bad in ("Bearer wrong-token", f"Basic {READ_TOKEN}", "Bearer", f"Bearer {TOKEN}"):
            assert (await c.get(path, headers={"Authorization": bad})).status == 401, (path, bad)
        good = await c.get(path, headers={"Authorization": f"Bearer {READ_TOKEN}"})
        assert good.status == 200, path
        good.close()
    # the probes, the login page and the static files need none; writes need the write token only
    for path in ("/healthz", "/readyz", "/ui/login", "/ui/assets/app.js"):
        assert (await c.get(path)).status == 200, path
    r = await c.post(
        "/v1/events",
        data=b'{"events": []}',
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert r.status == 400  # past the access checks: the (empty) body is what is refused
    # a dashboard page sends the browser to log in, and back afterwards
    r = await c.get("/ui/jobs?queue=a", allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/ui/login?next=/ui/jobs%3Fqueue%3Da"


async def test_the_dashboard_login_sets_a_session_cookie(fx: LiveFixture, aiohttp_client: Any) -> None:
    access = Access(read_token=READ_TOKEN)
    c = await _client(aiohttp_client, fx, access)
    form = await (await c.get("/ui/login?next=/ui/cycles")).text()
    assert 'name="next" value="/ui/cycles"' in form and 'type="password"' in form
    r = await c.post("/ui/login", data={"token": "nope", "next": "/ui/cycles"}, allow_redirects=False)
    assert r.status == 401 and SESSION_COOKIE not in r.cookies
    assert "not this server" in await r.text()
    r = await c.post("/ui/login", data={"token": READ_TOKEN, "next": "/ui/cycles"}, allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/ui/cycles"
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert READ_TOKEN not in cookie  # the cookie is a MAC, not the token
    value = r.cookies[SESSION_COOKIE].value
    assert access.session_ok(value)
    # the client keeps the cookie: reads and the live feed work, a page no longer redirects
    assert (await c.get("/v1/jobs")).status == 200
    assert (await c.head("/ui/live")).status == 200
    assert (await c.get("/ui/cycles", allow_redirects=False)).status == 200
    # ...but a write never accepts it
    r = await c.post("/v1/events", data=b'{"events": []}', headers={"Content-Type": "application/json"})
    assert r.status == 401
    # a tampered, expired or foreign-token session is refused
    c.session.cookie_jar.clear()
    expiry, mac = value.split(".")
    for bad in (f"{expiry}.{'0' * 64}", f"{int(expiry) + 1}.{mac}", "garbage", ""):
        r = await c.get("/v1/jobs", headers={"Cookie": f"{SESSION_COOKIE}={bad}"})
        assert r.status == 401, bad
    assert not access.session_ok(value, now=float(expiry) + 1)
    assert not Access(read_token="another-token-0123456789").session_ok(value)


async def test_a_cross_site_login_is_refused(fx: LiveFixture, aiohttp_client: Any) -> None:
    c = await _client(aiohttp_client, fx, Access(read_token=READ_TOKEN))
    r = await c.post(
        "/ui/login",
        data={"token": READ_TOKEN, "next": "/ui/"},
        headers={"Origin": "https://attacker.example"},
        allow_redirects=False,
    )
    assert r.status == 403 and SESSION_COOKIE not in r.cookies


def test_login_goes_back_to_the_dashboard_only() -> None:
    assert safe_next("/ui/jobs?queue=a") == "/ui/jobs?queue=a"
    for bad in ("//attacker.example/ui/", "https://attacker.example/ui/", "/v1/jobs", "/ui/login", "", None):
        assert safe_next(bad) == "/ui/", bad
    assert safe_next("/ui/\\attacker") == "/ui/"


# ----------------------------------------------------------------------------- settings and flags


def test_settings_read_the_token_from_a_file(tmp_path: Path) -> None:
    f = tmp_path / "read-token"
    f.write_text(READ_TOKEN + "\n")
    from fumarole.daemon.runtime.settings import read_token

    s = load_settings(env={}, flags={"read_token_file": str(f)})
    assert read_token(s) == READ_TOKEN
    assert read_token(load_settings(env={"FUMAROLE_READ_TOKEN": READ_TOKEN})) == READ_TOKEN
    s = load_settings(env={"FUMAROLE_ALLOWED_HOSTS": "a.example, b.example:8321"})
    assert s.allowed_hosts == ("a.example", "b.example:8321")
    short = tmp_path / "short"
    short.write_text("abc\n")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases = [
        ({"read_token_file": str(short)}, "at least 16 printable characters"),
        ({"read_token_file": str(empty)}, "holds no token"),
        ({"read_token_file": str(tmp_path / "absent")}, "cannot read the read token"),
        ({"require_read_token": True}, "require_read_token: no read token is configured"),
        ({"allowed_hosts": ("http://x.example",)}, "allowed_hosts: 'http://x.example' is not a host name"),
        ({"live_per_client": 0}, "live_per_client: must be at least 1"),
        ({"live_idle_timeout": 0.5}, "live_idle_timeout: must be 0"),
    ]
    for flags, needle in cases:
        with pytest.raises(SettingsError, match=needle.replace("(", r"\(")):
            load_settings(env={}, flags=flags)
    with pytest.raises(SettingsError, match="both set"):
        load_settings(env={"FUMAROLE_READ_TOKEN": READ_TOKEN}, flags={"read_token_file": str(f)})


def test_serve_requires_the_token_and_never_prints_it(history: Path, tmp_path: Path) -> None:
    db = fresh_copy(history, tmp_path)
    f = tmp_path / "read-token"
    f.write_text(READ_TOKEN + "\n")
    proc, base = start_serve(db, "--read-token", str(f), "--allowed-host", "fumarole.test")
    try:
        port = int(base.rsplit(":", 1)[1])
        for auth, want in (("", 401), (f"Bearer {READ_TOKEN}", 200)):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/v1/queues", headers={"Authorization": auth} if auth else {})
            assert conn.getresponse().status == want
            conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz", headers={"Host": f"fumarole.test:{port}"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        assert stop(proc) == 0
    out, err = proc.stdout.read() if proc.stdout else "", proc.stderr.read() if proc.stderr else ""
    assert READ_TOKEN not in out + err
    for args, needle in (
        (["--require-read-token"], "--require-read-token: no read token is configured"),
        (["--read-token", str(tmp_path / "absent")], "--read-token: "),
        (["--allowed-host", "a b"], "--allowed-host: 'a b' is not a host name"),
    ):
        r = subprocess.run(
            [FUMAROLE, "serve", "--db", str(db), "--listen", "127.0.0.1:0", *args],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=60,
        )
        assert r.returncode == 2, (args, r.stderr)
        assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_daemon_warns_when_remote_reads_are_open(caplog: pytest.LogCaptureFixture) -> None:
    from fumarole.daemon.runtime.service import Service

    s = load_settings(env={}, flags={"listen": "0.0.0.0:8321", "allow_remote": True})
    with caplog.at_level("WARNING", logger="fumarole"):
        options = Service(s)._api_options()
    assert options["access"].read_token == "" and options["access"].listen_host == "0.0.0.0"
    assert any("every read is open" in r.getMessage() for r in caplog.records)
    caplog.clear()
    s = load_settings(
        env={"FUMAROLE_READ_TOKEN": READ_TOKEN}, flags={"listen": "0.0.0.0:8321", "allow_remote": True}
    )
    with caplog.at_level("WARNING", logger="fumarole"):
        options = Service(s)._api_options()
    assert options["access"].read_token == READ_TOKEN
    assert not any("every read is open" in r.getMessage() for r in caplog.records)


def test_run_flags_reach_the_settings(tmp_path: Path) -> None:
    from fumarole.daemon.cli.main import build_parser

    f = tmp_path / "read-token"
    f.write_text(READ_TOKEN + "\n")
    argv = ["run", "--allowed-host", "a.example", "--allowed-host", "b.example:8443"]
    args = build_parser().parse_args([*argv, "--read-token", str(f), "--require-read-token"])
    flags = {k: getattr(args, k) for k in ("allowed_hosts", "read_token_file", "require_read_token")}
    s = load_settings(env={"FUMAROLE_ALLOWED_HOSTS": "replaced.example"}, flags=flags)
    assert s.allowed_hosts == ("a.example", "b.example:8443")  # the flags replace the environment's list
    assert s.read_token_file == str(f) and s.require_read_token
