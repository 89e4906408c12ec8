"""Helpers for the dashboard's browser tests: Debian's Chromium through Playwright, a real daemon on the
simulator with a workload that keeps it cycling for a while (and one job that can never fit), a log of
10,000 nodes and 10,000 jobs, an OTLP sink so cycles carry trace ids, and screenshot output: every page a
test opens (and every state it names) is saved as a PNG under the artefacts directory on every run
(`artifacts/ui/` under the repository root, or `$FUMAROLE_ARTIFACTS/ui/`), and the figures of
docs/dashboard.md under docs/img when FUMAROLE_UPDATE_SCREENSHOTS=1."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from fumarole_e2e_kit import _job, _node, _pc, _queue

ROOT = Path(__file__).resolve().parents[2]

CHROMIUM = os.environ.get("FUMAROLE_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "docs" / "img"


def artifacts_dir() -> Path:
    """Where every run's screenshots go: $FUMAROLE_ARTIFACTS/ui, else artifacts/ui under the repository
    root (git-ignored)."""
    base = os.environ.get("FUMAROLE_ARTIFACTS", "")
    return (Path(base) if base else ROOT / "artifacts") / "ui"


def _test_name() -> str:
    """The running test as a file name ("test_ui_jobs--test_filters[900]"), from PYTEST_CURRENT_TEST."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "bench").split(" ")[0]
    file, _, test = current.rpartition("::")
    stem = Path(file).stem if file else "run"
    return re.sub(r"[^A-Za-z0-9_.\[\]-]+", "_", f"{stem}--{test}")


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip with a reason when Chromium or Playwright is missing; in CI (CI=true) fail loudly instead."""
    problems = []
    if not Path(CHROMIUM).exists():
        problems.append(f"{CHROMIUM} is missing (Debian package chromium, requirements/debian.txt)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("the Python package playwright is missing (requirements/dev.txt)")
    if problems:
        message = "browser tests need Chromium and Playwright: " + "; ".join(problems)
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def browser(extra_args: tuple[str, ...] = ()) -> Iterator[Any]:
    """Headless Debian Chromium with a fresh profile (never a downloaded browser); `extra_args` are
    more command-line switches (e.g. --host-resolver-rules to play a DNS-rebinding attacker)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="fumarole-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=[*CHROMIUM_ARGS, *extra_args],
                viewport={"width": 1280, "height": 860},
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class PageWatch:
    """A page with its console errors and uncaught exceptions collected."""

    def __init__(self, context: Any) -> None:
        self.page = context.new_page()
        self.errors: list[str] = []
        self.shots: list[Path] = []  # the artefact screenshots this page saved
        self.page.on(
            "console",
            lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def open(self, url: str, timeout: float = 20_000) -> Any:
        self.page.goto(url)
        self.page.wait_for_selector("main[data-ready]", timeout=timeout)
        assert self.page.get_attribute("main", "data-ready") == "1", self.page.inner_text("main")
        path = url.split("://", 1)[-1].split("/", 1)[-1]
        self.artifact(path.removeprefix("ui/").split("?")[0].replace("/", "-") or "home")
        return self.page

    def render_ms(self) -> int:
        return int(self.page.get_attribute("main", "data-render-ms") or "-1")

    def artifact(self, state: str) -> Path | None:
        """Save the page as it is now under artifacts_dir(), named after the test, a counter and `state`
        (FUMAROLE_ARTIFACTS=off saves nothing)."""
        if os.environ.get("FUMAROLE_ARTIFACTS", "") == "off":
            return None
        out = artifacts_dir()
        out.mkdir(parents=True, exist_ok=True)
        state = re.sub(r"[^A-Za-z0-9_.-]+", "_", state)[:60]
        path = out / f"{_test_name()}--{len(self.shots) + 1:02d}-{state}.png"
        self.page.screenshot(path=str(path))
        self.shots.append(path)
        return path

    def screenshot(self, name: str) -> None:
        """A state worth a figure: saved as an artefact on every run, and as docs/img/ui-<name>.png when
        FUMAROLE_UPDATE_SCREENSHOTS=1."""
        self.artifact(name)
        if os.environ.get("FUMAROLE_UPDATE_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(SCREENSHOTS / f"ui-{name}.png"))


def until(page: Any, expression: str, timeout: float = 20) -> None:
    """Poll a JavaScript expression until it is true (Playwright's wait_for_function evaluates a string
    with eval, which the dashboard's Content-Security-Policy forbids)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"never true: {expression}"
        page.wait_for_timeout(50)


# ----------------------------------------------------------------------------- raw live-feed clients


def live_request(
    port: int, method: str = "GET", source: str = "127.0.0.1"
) -> tuple[socket.socket, int, bytes]:
    """A connection from loopback address `source` to the server on `port`, one `method /ui/live` on it:
    (the socket, the response's status, its header block). Any 127.x.y.z address works as `source`,
    so one machine plays many clients."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(source, 0))
    s.sendall(
        f"{method} /ui/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1]) if head else 0
    return s, status, head


def read_hello(s: socket.socket, head: bytes = b"") -> bytes:
    """Read a stream until its `hello` event (the GET was accepted and subscribed)."""
    data = head
    while b"event: hello" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    return data


# ----------------------------------------------------------------------------- the daemon's workload


def write_busy_sim(dir_: Path, *, jobs: int) -> tuple[Path, Path]:
    """4 nodes of 8 cpu and gpu-0 (1 cpu, two gpushare cards); queues a, b (weight 1, 3) and solo; `jobs`
    gangs submitted 2 virtual seconds apart (so the daemon cycles for a while), and solo/huge, which asks
    16 cpu per pod and never fits."""
    gpu = _node("gpu-0", 1)
    gpu["status"]["allocatable"] |= {"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "2"}
    cluster = [*(_node(f"n{i}", 8) for i in range(4)), gpu]
    cluster += [_queue("a", 1), _queue("b", 3), _queue("solo", 1), _pc("low", 10), _pc("high", 1000)]
    cluster.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "e2e"}})
    work = [_job("huge", "solo", 2, 16, at=0, dur=60, pc="low")]
    for i in range(jobs):
        queue = "a" if i % 3 != 2 else "b"
        pc = "high" if i % 4 == 3 else "low"
        work.append(_job(f"j{i}", queue, 1 + i % 4, 2 + i % 3, at=1 + i * 2, dur=20 + (i * 13) % 40, pc=pc))
    c, w = dir_ / "cluster.yaml", dir_ / "workload.yaml"
    c.write_text(yaml.safe_dump_all(cluster, sort_keys=False))
    w.write_text(yaml.safe_dump_all(work, sort_keys=False))
    return c, w


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP receiver that accepts and drops spans (the daemon then records trace ids)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def drain(proc: subprocess.Popen[str], lines: list[str]) -> threading.Thread:
    """Read the process's stdout into `lines` in a thread (a full pipe would block the daemon)."""

    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# ----------------------------------------------------------------------------- 10,000 nodes and jobs


def write_scale_log(path: Path, *, nodes: int, jobs: int) -> None:
    """A log of `nodes` nodes (8-64 cpu) and `jobs` one-pod jobs in 8 queues (under two parents), most of
    them running on a node (so utilisation varies), the rest pending: what `fumarole serve` then shows."""
    from fumarole.daemon.manifests import expand_job
    from fumarole.store.events import upserted
    from fumarole.store.sqlite import SqliteEventLog

    pcs = [("scale", 0, _pc("low", 10))]
    objs: list[dict[str, Any]] = [
        _pc("low", 10),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "e2e"}},
    ]
    for parent in ("prod", "dev"):
        objs.append(_queue(parent, 1))
        objs[-1]["spec"]["parent"] = "root"
    for i in range(8):  # a hierarchy: q0-q3 under prod, q4-q7 under dev
        objs.append(_queue(f"q{i}", 1 + i % 4))
        objs[-1]["spec"]["parent"] = "prod" if i < 4 else "dev"
    cpus = [8 + 8 * (i % 8) for i in range(nodes)]
    objs += [_node(f"node-{i:05d}", cpus[i]) for i in range(nodes)]
    for i in range(jobs):
        job = _job(f"job-{i:05d}", f"q{i % 8}", 1, 1 + i % 6, at=0, dur=600, pc="low")
        for m in expand_job("scale", i, job, priority_classes=pcs):
            if m["kind"] == "Pod" and i % 5:
                n = (i * 7919) % nodes
                m["spec"]["nodeName"] = f"node-{n:05d}"
                m.setdefault("status", {})["phase"] = "Running"
            objs.append(m)

    async def go() -> None:
        log = await SqliteEventLog.open(str(path))
        try:
            events = [upserted(o, 1000) for o in objs]
            for k in range(0, len(events), 5000):
                await log.append(events[k : k + 5000])
        finally:
            await log.close()

    asyncio.run(go())


# The dashboard tests' daemon: the line it prints once its workload drained (--serve).
DRAINED = "serving the API until SIGTERM"


class Daemon:
    """A daemon started by a test: its process, API base URL, log and the lines it printed."""

    def __init__(self, proc: subprocess.Popen[str], base: str, db: Path, lines: list[str]) -> None:
        self.proc, self.base, self.db, self.lines = proc, base, db, lines

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=20) as resp:
            return json.loads(resp.read())

    def drained(self) -> bool:
        return any(DRAINED in line for line in self.lines)

    def wait_drained(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.drained():
            assert self.proc.poll() is None, f"the daemon exited with {self.proc.returncode}"
            assert time.monotonic() < deadline, "the workload did not drain"
            time.sleep(0.1)
