"""Kubeconfig credentials: static ones read directly (no kubernetes_asyncio), the rest by its loader.

Every static kind (token, tokenFile, username/password, client certificate and key as files or
data, CA as file or data, insecure-skip-tls-verify, tls-server-name) is used against a real TLS
server (aiohttp, certificates made with openssl) or the fake API server, through both paths
(`FUMAROLE_KUBECONFIG_LOADER=kubernetes_asyncio` forces the loader) with the same outcome; an exec
plugin goes to the loader; a static kubeconfig does not import kubernetes_asyncio at all (a fresh
interpreter); a file that cannot be read is one line naming the kubeconfig and the file.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from fake_apiserver import FakeApiServer

from fumarole.daemon.adapters.kubernetes.client import KubeApi, KubeSetupError, KubeTransientError
from fumarole.daemon.adapters.kubernetes.credentials import LOADER_ENV

ROOT = Path(__file__).resolve().parents[2]
LOADERS = ("static", "kubernetes_asyncio")


def kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))
    return path


def connect(path: Path, loader: str, monkeypatch: pytest.MonkeyPatch) -> tuple[KubeApi, dict[str, Any]]:
    """Connect through `loader`, GET /version; (the api, the answer)."""
    if loader == "kubernetes_asyncio":
        monkeypatch.setenv(LOADER_ENV, "kubernetes_asyncio")
    else:
        monkeypatch.delenv(LOADER_ENV, raising=False)

    async def go() -> tuple[KubeApi, dict[str, Any]]:
        api = await KubeApi.connect(str(path))
        try:
            code, body = await api.request("GET", "/version")
            assert code == 200, body
            return api, body
        finally:
            await api.close()

    return anyio.run(go)


# ------------------------------------------------------------------ a real TLS server
def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("certs")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=test-ca", cwd=d)  # fmt: skip
    for name, ext in (("server", "subjectAltName=DNS:kube.test"), ("client", "extendedKeyUsage=clientAuth")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={name}-cn", cwd=d)  # fmt: skip
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)  # fmt: skip
    return d


@pytest.fixture(scope="module")
def tls_server(certs: Path) -> Iterator[str]:
    """An HTTPS server (certificate for kube.test only, on 127.0.0.1) that asks for a client
    certificate and answers /version with the client certificate's CN and the Authorization header."""

    async def version(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        cn = ""
        for rdn in (peer or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    cn = value
        return web.json_response({"client_cn": cn, "authorization": request.headers.get("Authorization", "")})

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(certs / "ca.crt"))
    ctx.load_cert_chain(str(certs / "server.crt"), str(certs / "server.key"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def serve() -> None:
        app = web.Application()
        app.router.add_get("/version", version)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        holder["runner"] = runner
        holder["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def run() -> None:
        loop.run_until_complete(serve())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"https://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def b64(path: Path) -> str:
    return base64.standard_b64encode(path.read_bytes()).decode()


TLS_CASES = ("ca file + client cert files", "ca data + client cert data", "insecure-skip-tls-verify + token")


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("case", TLS_CASES)
def test_static_tls_kinds_work_through_both_paths(
    case: str, loader: str, certs: Path, tls_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(certs / "ca.crt", tmp_path / "ca.crt")
    for f in ("client.crt", "client.key"):
        shutil.copy(certs / f, tmp_path / f)
    name: dict[str, Any] = {"tls-server-name": "kube.test"}  # the certificate does not name 127.0.0.1
    if case == "ca file + client cert files":  # relative to the kubeconfig's directory
        cluster = {"server": tls_server, "certificate-authority": "ca.crt", **name}
        user = {"client-certificate": "client.crt", "client-key": "client.key"}
        want = {"client_cn": "client-cn", "authorization": ""}
    elif case == "ca data + client cert data":
        cluster = {"server": tls_server, "certificate-authority-data": b64(certs / "ca.crt"), **name}
        user = {
            "client-certificate-data": b64(certs / "client.crt"),
            "client-key-data": b64(certs / "client.key"),
        }
        want = {"client_cn": "client-cn", "authorization": ""}
    else:
        cluster = {"server": tls_server, "insecure-skip-tls-verify": True}
        user = {"token": "t0k"}
        want = {"client_cn": "", "authorization": "Bearer t0k"}
    api, body = connect(kubeconfig(tmp_path / "kubeconfig", cluster, user), loader, monkeypatch)
    assert api.loader == loader
    assert body == want


@pytest.mark.parametrize("loader", LOADERS)
def test_a_wrong_tls_server_name_is_refused_through_both_paths(
    loader: str, certs: Path, tls_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = {
        "server": tls_server,
        "certificate-authority-data": b64(certs / "ca.crt"),
    }  # no tls-server-name
    path = kubeconfig(tmp_path / "kubeconfig", cluster, {"token": "t"})
    with pytest.raises(KubeTransientError, match=r"[Cc]ertificate"):  # verified against 127.0.0.1
        connect(path, loader, monkeypatch)


# ------------------------------------------------------------------ tokens against the fake
@pytest.fixture(scope="module")
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.mark.parametrize("loader", LOADERS)
def test_a_token_file_is_read_relative_to_the_kubeconfig(
    loader: str, fake: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("admin")
    path = kubeconfig(tmp_path / "kubeconfig", {"server": fake.url}, {"tokenFile": "token"})
    api, body = connect(path, loader, monkeypatch)
    assert api.loader == loader and body.get("gitVersion")


def test_basic_credentials_and_proxy_settings_match_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = {"server": "https://127.0.0.1:9/", "insecure-skip-tls-verify": True}
    cluster |= {"proxy-url": "http://127.0.0.1:3128", "tls-server-name": "kube.test"}
    path = kubeconfig(tmp_path / "kubeconfig", cluster, {"username": "ann", "password": "s3cret"})
    seen = {}
    for loader in LOADERS:
        if loader == "kubernetes_asyncio":
            monkeypatch.setenv(LOADER_ENV, loader)

        async def go() -> tuple[Any, ...]:
            api = await KubeApi.connect(str(path))
            try:
                headers = {k.lower(): v for k, v in (await api.credentials.headers()).items()}
                return api.loader, api.server, api._proxy, api._server_hostname, headers
            finally:
                await api.close()

        seen[loader] = anyio.run(go)
    assert seen["static"][0] == "static" and seen["kubernetes_asyncio"][0] == "kubernetes_asyncio"
    assert seen["static"][1:] == seen["kubernetes_asyncio"][1:]
    assert seen["static"][4] == {"authorization": "Basic " + base64.b64encode(b"ann:s3cret").decode()}


def test_an_exec_plugin_goes_to_the_loader(
    fake: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\nprint(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',"
        " 'kind': 'ExecCredential', 'status': {'token': 'admin'}}))\n"
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    api, body = connect(
        kubeconfig(tmp_path / "kubeconfig", {"server": fake.url}, user), "static", monkeypatch
    )
    assert api.loader == "kubernetes_asyncio" and body.get("gitVersion")


@pytest.mark.parametrize(
    ("kind", "user", "static"),
    [
        ("token", {"token": "admin"}, True),
        ("exec", {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "true"}}, False),
        ("auth-provider", {"auth-provider": {"name": "oidc", "config": {}}}, False),
        ("impersonation", {"token": "admin", "as": "someone"}, False),
    ],
)
def test_a_static_kubeconfig_does_not_import_kubernetes_asyncio(
    kind: str, user: dict[str, Any], static: bool, tmp_path: Path
) -> None:
    """In a fresh interpreter: which path `KubeApi.connect` takes, and whether the generated client
    was imported (the start-up cost the direct reading avoids)."""
    path = kubeconfig(tmp_path / "kubeconfig", {"server": "http://127.0.0.1:9"}, user)
    code = (
        "import sys, anyio\n"
        "from daemon.adapters.kubernetes.client import KubeApi, KubeSetupError, KubeTransientError\n"
        "async def go():\n"
        "    try:\n"
        f"        api = await KubeApi.connect({str(path)!r})\n"
        "    except KubeSetupError:\n"  # the loader's own verdict on a plugin that cannot run here
        "        print('refused-by-the-loader')\n"
        "    else:\n"
        "        print(api.loader)\n"
        "        await api.close()\n"
        "    print('kubernetes_asyncio.client' in sys.modules)\n"
        "anyio.run(go)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != LOADER_ENV} | {"PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    path_taken, imported = r.stdout.split()
    if static:
        assert (path_taken, imported) == ("static", "False")
    else:
        assert path_taken in ("kubernetes_asyncio", "refused-by-the-loader") and imported == "True"


@pytest.mark.parametrize(
    ("cluster", "user", "cause"),
    [
        ({"certificate-authority": "missing-ca.crt"}, {"token": "t"}, "certificate authority"),
        ({"insecure-skip-tls-verify": True}, {"tokenFile": "missing-token"}, "tokenFile"),
        (
            {"certificate-authority-data": "@@not base64@@"},
            {"token": "t"},
            "certificate-authority-data: not base64",
        ),
        ({"insecure-skip-tls-verify": True}, {"client-certificate": "c.crt"}, "without its client key"),
    ],
)
def test_a_static_file_that_cannot_be_read_is_one_line_naming_it(
    cluster: dict[str, Any], user: dict[str, Any], cause: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOADER_ENV, raising=False)
    path = kubeconfig(tmp_path / "kubeconfig", {"server": "https://127.0.0.1:9", **cluster}, user)
    with pytest.raises(KubeSetupError) as err:
        anyio.run(KubeApi.connect, str(path))
    message = str(err.value)
    assert message.startswith(f"kubeconfig {path}: ") and cause in message and "\n" not in message
